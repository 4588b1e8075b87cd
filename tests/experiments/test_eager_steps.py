"""experiments/benchmarks/eager_steps.py: eager game steps of each scheme beside the jitted
step, each checkout in fresh processes, and the programs the eager steps lower."""

from pathlib import Path

from experiments.benchmarks import eager_steps

ROOT = Path(__file__).resolve().parents[2]


def test_a_round_runs_the_checkout_in_a_fresh_process_and_its_eager_steps_lower_nothing():
  """(``measure`` refuses a round whose process imported another checkout's minmaxlab.)"""
  (entry,) = eager_steps.measure([ROOT], steps=2, repeats=1, dim=2).values()
  assert entry["commit"] and sorted(entry["schemes"]) == sorted(eager_steps.SCHEMES)
  for name, x in entry["schemes"].items():
    # the Lookahead schemes' syncs included: no eager cond (2-3 programs a step before)
    assert x["programs_lowered_per_step"] == [0.0], name
    assert len(x["eager_cpu_s_per_step"]) == len(x["jit_cpu_s_per_step"]) == 1
    assert x["eager_cpu_s_per_step_median"] > 0


def test_bad_input_is_one_line_and_status_2(capsys, tmp_path):
  out = tmp_path / "o.jsonl"
  assert eager_steps.main(["--steps", "0", "--out", str(out)]) == 2
  assert eager_steps.main(["--checkouts", str(tmp_path), "--out", str(out)]) == 2
  assert capsys.readouterr().err.strip().splitlines() == [
    "eager_steps: --steps must be >= 1, got 0",
    f"eager_steps: --checkouts {tmp_path}: not a minmaxlab checkout",
  ]
  assert not out.exists()


def test_the_committed_run_shows_the_lookahead_programs_before_the_change():
  block = eager_steps.results_table()
  assert "| lookahead_adam | b67ba7a |" in block and "| 2 |" in block and "family 26" in block
