"""experiments/benchmarks: the shared harness (fake cases, no JAX program) and
grid_scaling.py's smallest case in a fresh process (issue 36, issue 38 item 1)."""

import json
import os
import sys
from pathlib import Path

import pytest

from experiments.benchmarks import _harness as h
from tests import _procs

ROOT = Path(__file__).resolve().parents[2]


def test_interleave_rotates_the_cases_and_lists_every_timed_repeat():
  calls = []
  cases = {name: (lambda r, name=name: calls.append((r, name))) for name in "abc"}
  reps = h.interleave(cases, repeats=2, warmup=1)
  assert calls == [
    (0, "a"), (0, "b"), (0, "c"),  # warm-up round, untimed
    (1, "b"), (1, "c"), (1, "a"),  # each round rotated by one
    (2, "c"), (2, "a"), (2, "b"),
  ]  # fmt: skip
  assert {k: len(v) for k, v in reps.items()} == {"a": 2, "b": 2, "c": 2}
  rep = reps["a"][0]
  assert rep.wall_s >= 0 and rep.cpu_s >= 0 and rep.load_1min >= 0
  s = h.summary(reps["a"])
  assert s["repeats"] == 2 and len(s["wall_s"]) == len(s["cpu_s"]) == len(s["load_1min"]) == 2
  assert min(s["wall_s"]) <= s["wall_s_median"] <= max(s["wall_s"])
  ratios = h.paired_ratios([h.Repeat(2.0, 1, 0)] * 3, [h.Repeat(1.0, 1, 0)] * 3)
  assert ratios == {"ratios": [2.0, 2.0, 2.0], "median": 2.0}


def test_host_emit_and_child_results(tmp_path, capsys):
  info = h.host()
  assert info["cpu_model"] and info["cpus"] >= 1 and len(info["load_average"]) == 3
  assert set(info["cpu_vector_flags"]) <= set(h.VECTOR_FLAGS) and info["jax"]
  out = tmp_path / "r.jsonl"
  h.emit({"case": "a", "x": 1}, out)
  h.emit({"case": "b", "x": 2}, out)
  assert [r["case"] for r in h.read_lines(out)] == ["a", "b"]
  assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"case": "b", "x": 2}
  child = "print('x'); print('RESULT {\"a\": 1}')"
  code, stdout, _ = h.run_child([sys.executable, "-c", child], 60)
  assert code == 0 and h.result_line(stdout) == {"a": 1}
  code, _, err = h.run_child([sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
  assert code == -9 and "timeout" in err


@pytest.mark.slow  # one cold compile of the 1x1 step in a fresh process
def test_grid_scaling_smallest_case_prints_one_json_line(tmp_path):
  out = tmp_path / "g.jsonl"
  cmd = [sys.executable, "experiments/benchmarks/grid_scaling.py", "--out", str(out)]
  cmd += ["--cases", "single:1x1", "--batches", "2", "--repeats", "1"]
  r = _procs.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)
  assert r.returncode == 0, r.stderr[-2000:]
  (line,) = r.stdout.strip().splitlines()
  rec = json.loads(line)
  assert "error" not in rec, rec.get("error")
  assert h.read_lines(out) == [rec]
  assert rec["case"] == "single:1x1" and rec["cells"] == 1 and rec["batches_per_generation"] == 2
  assert len(rec["generation"]["wall_s"]) == len(rec["generation"]["cpu_s"]) == 1
  assert rec["s_per_cell_batch_median"] > 0 and rec["compile_s"] > 0
  assert rec["peak_rss_bytes"] > rec["state_bytes"] > 0 and rec["xla_temp_bytes"] > 0
  assert rec["host"]["jax"] and len(rec["load_average_before"]) == 3
  # a finished case is not run again
  again = _procs.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
  assert again.returncode == 0 and again.stdout.strip() == "" and h.read_lines(out) == [rec]


def test_cluster_model_tables_regenerate_from_the_committed_json():
  """docs/benchmarks.md's grid-scaling and cluster-model blocks equal their regeneration."""
  from experiments import _report
  from experiments.benchmarks import cluster_model as cm

  for name, make in (("grid_scaling", cm.results_table), ("cluster_model", cm.model_table)):
    assert _report.read_block(ROOT / cm.README, name) == make().rstrip()
  assert cm.halo_cells(2, 2, 2, 2, "moore") == 12 and cm.halo_cells(2, 2, 2, 2, "von_neumann") == 8
  assert cm.halo_cells(4, 8, 2, 1) == 16 and cm.halo_cells(4, 4, 1, 1) == 0
  parts = {"c": 1.0, "b": 1e6, "m": 8}
  one = cm.predict(parts, 4, 4, 1, 1, 1, "moore")
  assert one == {"compute": 16.0, "exchange": 0.0, "total": 16.0}
  four = cm.predict(parts, 4, 4, 2, 2, 10, "moore")  # 20 halo cells of 1 MB over 10 Gb/s
  assert abs(four["exchange"] - (8 * cm.LATENCY_S + 8 * 20e6 / 1e10)) < 1e-12
