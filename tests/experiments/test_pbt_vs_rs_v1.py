"""The pre-registered PBT vs random-search study (``experiments.pbt.results``, version 1) on
a tiny protocol: arms and seeds come from the protocol, each winner is re-scored on fresh
latents (not the ones that selected it), both replays run the full lineage length, the table
gives every seed's pair and the registered test's verdict, and mixed scorers are refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

FASHION = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
pytestmark = [
  pytest.mark.skipif(not FASHION.exists(), reason="Debian package dataset-fashion-mnist missing"),
  # the study's trials train and score FID: compiled at -O1, not the session's -O0
  # (tests/_xla.py)
  pytest.mark.optimized_code,
]


def tiny_protocol(tmp_path, seeds=(0, 1)) -> Path:
  from experiments.pbt import pbt_vs_rs_v1

  p = json.loads(pbt_vs_rs_v1.PROTOCOL_V1.read_text())
  p["seeds"] = list(seeds)
  p["settings"]["overrides"] = {
    "population_size": 2,
    "num_trials": 4,
    "steps_per_trial": 5,
    "batch_size": 16,
    "eval_samples": 100,
    "train_examples": 1000,
    "hidden": [16, 16],
    "latent_dim": 8,
    "top_k": 1,
    "classifier.steps": 20,
    "classifier.cache_dir": str(tmp_path / "cache"),
  }
  p["settings"]["rescore_samples"] = 250  # not a multiple of eval_samples: the last batch cut
  path = tmp_path / "protocol.json"
  path.write_text(json.dumps(p))
  return path


@pytest.fixture(scope="module")
def study(tmp_path_factory):

  tmp = tmp_path_factory.mktemp("v1")
  protocol = tiny_protocol(tmp)
  logs = []
  data = run_tiny(protocol, tmp, logs.append)
  return tmp, protocol, data, logs


def run_tiny(protocol: Path, tmp: Path, log) -> dict:
  """The study runner on the tiny protocol (a trial run); the JSON it wrote."""
  from experiments import study
  from experiments.pbt import pbt_vs_rs_v1

  out = tmp / "out" / "pbt_vs_rs_v1.json"
  argv = ["run", "--trial", "--protocol", str(protocol), "--runs", str(tmp / "runs")]
  study.run(pbt_vs_rs_v1.STUDY, study.parse(pbt_vs_rs_v1.STUDY, [*argv, "--out", str(out)]), log)
  return json.loads(out.read_text())


def test_registered_protocol_is_complete():
  from experiments import _report
  from experiments.pbt import pbt_vs_rs_v1

  p = _report.load_protocol(pbt_vs_rs_v1.PROTOCOL_V1)
  assert p["study"] == "pbt_vs_rs" and p["version"] == 1
  assert set(p["arms"]) == {"pbt", "random_search"}
  assert {a: p["arms"][a]["exploit"] for a in p["arms"]} == {
    "pbt": "tournament",
    "random_search": "none",
  }
  assert p["seeds"] == list(range(10))
  assert p["primary"]["comparisons"] == [["pbt", "random_search"]]
  assert p["primary"]["test"] == "sign_flip" and p["primary"]["alpha"] == 0.05
  assert p["settings"]["rescore_samples"] == 10000
  c = pbt_vs_rs_v1.v1_config(p, 3, "random_search")
  assert c.seed == 3 and c.exploit == "none"
  assert pbt_vs_rs_v1.lineage_trials(c) * c.steps_per_trial > 0


@pytest.mark.slow  # its fixture runs every arm and seed at a tiny size
def test_study_runs_every_arm_and_seed_of_the_protocol(study):
  from experiments.pbt import pbt_vs_rs_v1

  tmp, protocol, data, _ = study
  out = tmp / "out"
  assert json.loads((out / "pbt_vs_rs_v1.json").read_text()) == data
  fig = out / "pbt_vs_rs_v1.png"
  assert fig.is_file() and 0 < fig.stat().st_size < 200_000
  assert [(r["arm"], r["seed"]) for r in data["runs"]] == [
    ("pbt", 0),
    ("random_search", 0),
    ("pbt", 1),
    ("random_search", 1),
  ]
  assert data["trial_fields"] == list(pbt_vs_rs_v1.TRIAL_FIELDS + pbt_vs_rs_v1.HPARAMS)
  for r in data["runs"]:
    assert len(r["trials"]) == 4
    fids = [t[4] for t in r["trials"]]
    w = r["winner"]
    # the winner is the best trial by its selection (eval_samples) FID
    assert w["selection_fid"] == min(fids) and fids[[t[0] for t in r["trials"]].index(w["trial"])]
    assert w["rescore_samples"] == 250 and np.isfinite(w["rescored_fid"])
    assert w["rescored_fid"] != w["selection_fid"]
    # replays: the full lineage length (num_trials / population) for both arms
    assert r["replay"]["trials"] == 2 and len(r["replay"]["fids"]) == 2
    assert r["replay"]["steps"] == 2 * 5 and np.isfinite(r["replay"]["final_fid"])
    assert len(r["classifier"]["params_digest"]) == 16
  rs = [r for r in data["runs"] if r["arm"] == "random_search"]
  for r in rs:  # random search: one member's hyperparameters never change
    for member in (0, 1):
      assert len({tuple(t[5:]) for t in r["trials"] if t[1] == member}) == 1


def test_rescoring_uses_fresh_latents_and_reproduces(study):
  """The re-score draws latents that share no row with the winner's selection latents and
  is a deterministic function of the winner's checkpoint and the study seed."""
  import jax

  from experiments import _report
  from experiments.pbt import pbt_vs_rs_v1, results, search

  tmp, protocol, data, _ = study
  p = _report.load_protocol(protocol)
  r = data["runs"][0]
  config = pbt_vs_rs_v1.v1_config(p, r["seed"], r["arm"])
  workdir = tmp / "runs" / pbt_vs_rs_v1.V1 / f"{r['arm']}_s{r['seed']}"
  run = json.loads((workdir / "result.json").read_text())
  assert run["best_trial"] == r["winner"]["trial"]
  from minmaxlab.pbt import Store

  store = Store(workdir / "pbt.sqlite")
  try:
    trials = store.trials()
  finally:
    store.close()
  assert run["best_trial"] in {t.id for t in trials}
  L, n = config.latent_dim, config.eval_samples
  keys = pbt_vs_rs_v1.score_keys(pbt_vs_rs_v1.RESCORE_SALT, config.seed, 250, n)
  assert len(keys) == 3
  rescore = np.concatenate([np.asarray(jax.random.normal(k, (n, L))) for k in keys])[:250]
  rows = {tuple(z) for z in rescore}
  assert len(rows) == 250
  # no latent of the re-score is one that scored a trial (the winner's included)
  for t in trials:
    _, k_select = results.trial_keys(t.seed)
    assert not {tuple(z) for z in np.asarray(jax.random.normal(k_select, (n, L)))} & rows
  # the replay's final score uses other keys again
  replay_keys = pbt_vs_rs_v1.score_keys(pbt_vs_rs_v1.REPLAY_SCORE_SALT, config.seed, 250, n)
  z = np.asarray(jax.random.normal(replay_keys[0], (n, L)))
  assert not {tuple(v) for v in z} & rows
  # re-scoring again gives the recorded value
  task = search.slow_eval_task(config)
  again = pbt_vs_rs_v1.rescore_winner(task, config, run, 250)
  assert again["rescored_fid"] == pytest.approx(r["winner"]["rescored_fid"], rel=1e-5)
  assert again["rescored_fid"] != pytest.approx(run["best_fid"], rel=1e-6)


def test_replay_schedules_have_the_full_length():
  from experiments.pbt import pbt_vs_rs_v1

  h = [{"lr_G": float(i)} for i in range(3)]
  run = {"best_lineage": [{"trial": i, "hparams": x} for i, x in enumerate(h)]}
  assert pbt_vs_rs_v1.replay_schedule(run, "pbt", 5) == h + [h[-1]] * 2
  assert pbt_vs_rs_v1.replay_schedule(run, "random_search", 5) == [h[-1]] * 5
  assert pbt_vs_rs_v1.replay_schedule(run, "pbt", 2) == h[:2]


def test_resume_skips_and_table_gives_pairs_and_verdict(study):
  from experiments import _report
  from experiments.pbt import pbt_vs_rs_v1

  tmp, protocol, data, _ = study
  logs = []
  again = run_tiny(protocol, tmp, logs.append)
  assert all(line.endswith("done before, kept") for line in logs) and len(logs) == 4
  assert again["runs"] == data["runs"]
  p = _report.load_protocol(protocol)
  text = pbt_vs_rs_v1.table_v1(data, p)
  for r in data["runs"]:
    assert f"{r['winner']['rescored_fid']:.1f}" in text
  for s in (0, 1):
    assert any(line.startswith(f"| {s} | ") for line in text.splitlines())
  assert (
    "**Verdict (primary, at the registered endpoint):** No difference detected at n = 2/2" in text
  )
  assert "sign-flip p = 0.50" in text or "sign-flip p = 1.0" in text
  assert "Wilcoxon" in text and data["runs"][0]["classifier"]["params_digest"] in text
  # an interim table (a pair missing) says so and gives no endpoint verdict
  partial = {**data, "runs": data["runs"][:3]}
  text = pbt_vs_rs_v1.table_v1(partial, p)
  assert "Incomplete: 1 of 2 registered pairs" in text and "Verdict" not in text
  # a run scored by another classifier is refused
  mixed = json.loads(json.dumps(data))
  mixed["runs"][1]["classifier"]["params_digest"] = "0" * 16
  with pytest.raises(ValueError, match="classifiers"):
    pbt_vs_rs_v1.table_v1(mixed, p)


def test_committed_blocks_are_registered():
  from experiments import _report
  from experiments.pbt import results  # noqa: F401 (registers its blocks)

  assert _report.BLOCKS["pbt_vs_rs_v1"] == (
    "experiments/pbt/README.md",
    "experiments.pbt.results:readme_table_v1",
  )
  assert _report.BLOCKS["pbt_vs_rs_v0"][1] == "experiments.pbt.results:readme_table_v0"
  text = results.readme_table_v0()
  assert "| pbt | 0,1,2 |" in text and "| random_search | 0,1,2 |" in text
