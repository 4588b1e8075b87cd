"""experiments/pbt end to end on the ``smoke`` config (trials inline, one process)."""

import json

from experiments.pbt import train
from experiments.pbt.configs import smoke


def test_smoke_end_to_end_and_resume_of_a_finished_run(tmp_path):
  config = smoke.get_config()
  logs = []
  s = train.train(config, tmp_path, workers=0, timeout=100, log=logs.append)
  assert s["done"] == config.num_trials and s["pending"] == s["running"] == 0
  assert logs[-1].startswith(f"trials done {config.num_trials}/{config.num_trials}")
  rows = [json.loads(x) for x in (tmp_path / "lineage.jsonl").read_text().splitlines()]
  assert [r["trial"] for r in rows] == list(range(1, config.num_trials + 1))
  space = train.search_space(config)
  for r in rows:
    for name, dim in space.items():
      assert dim.low <= r[name] <= dim.high
  chain = s["best_lineage"]
  assert chain[0]["start_step"] == 0 and chain[-1]["trial"] == s["best_trial"]
  assert [c["start_step"] for c in chain] == [i * config.steps_per_trial for i in range(len(chain))]
  assert chain[-1]["fitness"] == s["best_fitness"] == max(r["fitness"] for r in rows)
  assert s["checkpoints"] <= config.population_size + config.top_k
  assert (tmp_path / "lineages.png").stat().st_size > 0
  # the store is the state: running again resumes a finished run and changes nothing
  again = train.train(config, tmp_path, workers=0, timeout=30, log=logs.append)
  assert again["best_lineage"] == s["best_lineage"] and again["done"] == config.num_trials
