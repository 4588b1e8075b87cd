"""experiments/benchmarks/speed_claims.py: the speed targets of docs/benchmarks.md measured in
one run on one host (issue 11): the protocol runs each benchmark in a fresh process, and the summary
reads each target from the benchmarks' own JSON."""

import json
import os
import sys
from pathlib import Path

import pytest

from experiments.benchmarks import speed_claims
from tests import _procs

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "benchmarks" / "results"


def _load(name: str) -> dict:
  return json.loads((RESULTS / name).read_text().strip().splitlines()[-1])


def test_cpu_slug_and_identity():
  assert speed_claims.cpu_slug("AMD EPYC") == "amd_epyc"
  assert speed_claims.cpu_slug("Intel(R) Xeon(R) Processor") == "intel_xeon_processor"
  assert (
    speed_claims.cpu_slug("AMD EPYC 7B13 64-Core Processor") == "amd_epyc_7b13_64_core_processor"
  )
  assert speed_claims.cpu_slug("()") == "cpu"
  info = "processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nstepping\t: 1\n"
  info += "cpu MHz\t\t: 2596.1\n\nprocessor\t: 1\ncpu family\t: 99\n"
  assert speed_claims.cpu_identity(info) == {
    "cpu_family": "25",
    "model": "17",
    "stepping": "1",
    "cpu_MHz": "2596.1",
  }


def test_targets_read_from_recorded_benchmark_json():
  """Real JSON lines of earlier runs (committed results): the rows carry their values and
  each target's verdict, both ways."""
  compile_ = _load("2026-12-02_compile_time_smoke_3reps.json")  # smoke 6.79 7.02 7.11 s
  floor_met = _load("2026-12-04_coevolution_throughput_floor_amd_epyc.json")  # median 0.991
  floor_not = _load("2026-12-02_coevolution_throughput_floor_amd_epyc_after_lipizzaner.json")
  overhead = _load("2026-12-02_transform_overhead_intel_xeon_sync_layout.json")
  files = {"compile": "c.json", "floor": "f.json", "overhead": "o.json"}
  rows = speed_claims.targets(
    {"compile": compile_, "floor": floor_met, "overhead": overhead}, files
  )
  by_claim = {r["claim"].split(",")[0].split(" (")[0]: r for r in rows}

  smoke = by_claim["smoke compiles"]
  assert (smoke["value"], smoke["met"], smoke["per_repeat"]) == (7.02, False, [6.79, 7.02, 7.11])
  assert smoke["source"] == "c.json" and smoke["target"] == "< 5 s"

  flops = by_claim["library / equal-work floor matmul FLOPs per generation"]
  assert flops["met"] and flops["value"] == 1.0
  ratio = by_claim["library / equal-work floor time"]
  assert (ratio["value"], ratio["met"]) == (0.991, True) and len(ratio["per_repeat"]) == 9
  share = by_claim["training's share of XLA's per-shape matmul throughput"]
  assert (share["value"], share["met"]) == (0.945, True)

  schemes = [r for r in rows if r["claim"].startswith("Lookahead-minmax overhead")]
  assert len(schemes) == 4 and all(r["met"] for r in schemes)
  gda = next(r for r in schemes if " gda " in r["claim"])
  assert gda["value"] == 0.0134 and gda["quartiles"] == [-0.0134, 0.0368]
  assert (gda["ratio_of_medians"], gda["cpu_paired_median"]) == (-0.0035, 0.0146)
  assert "layout select" in gda["claim"] and "41 rounds" in gda["claim"]

  (ratio_not,) = [
    r for r in speed_claims.targets({"floor": floor_not}, files) if "time" in r["claim"]
  ]
  assert (ratio_not["value"], ratio_not["met"]) == (1.079, False)
  # unequal work fails the time target too, whatever the ratio
  unequal = json.loads(json.dumps(floor_met))
  next(p for p in unequal["programs"].values() if "ratio_to_floor_median" in p)[
    "matmul_flops_over_floor"
  ] = 0.84
  assert not any(r["met"] for r in speed_claims.targets({"floor": unequal}, files)[:2])


def test_every_benchmark_has_a_script_a_file_name_and_both_sizes():
  for name in speed_claims.BENCHMARKS:
    assert (speed_claims.HERE / speed_claims.SCRIPTS[name]).is_file(), name
    assert speed_claims.STEMS[name] and set(speed_claims.PROTOCOL[name]) == {"full", "quick"}
  assert "lipizzaner" not in speed_claims.DEFAULT  # only with --lipizzaner


def test_lipizzaner_figures_from_recorded_json():
  run = _load("2026-12-02_lipizzaner_side_by_side_amd_epyc.json")
  got = speed_claims.figures({"lipizzaner": run})["lipizzaner"]
  assert got == {
    "lipizzaner_s_per_iteration": 86.04,
    "lipizzaner_client_cpu_s": 154.64,
    "minmaxlab_s_per_generation": 14.753,
    "minmaxlab_cpu_s": 28.56,
    "wall_ratio": 5.83,
    "cpu_ratio": 5.41,
    "wall_ratio_without_fid": 5.44,
  }


def test_compile_mode_figures_from_recorded_json():
  run = _load("2026-12-02_compile_time_smoke_3reps.json")
  smoke = speed_claims.figures({"compile": run})["compile_modes"]["smoke"]
  assert smoke["own"] == run["configs"]["smoke"]["config_compile"] == "fastest"
  fastest, default = smoke["modes"]["fastest"], smoke["modes"]["default"]
  assert fastest["compile_s_median"] == 7.02  # median of 6.79 7.02 7.11
  assert fastest["compile_ratio_to_default"] == round(7.02 / default["compile_s_median"], 3)


@pytest.mark.parametrize(
  "argv, line",
  [
    (
      ["--only", "compile,speed"],
      "speed_claims: unknown benchmark 'speed' (one of compile, floor, overhead,"
      " first_generation, lipizzaner)",
    ),
    (
      ["--only", "lipizzaner"],
      "speed_claims: the lipizzaner benchmark needs --lipizzaner CHECKOUT",
    ),
  ],
)
def test_bad_input_is_one_line_and_status_2(argv, line, capsys, tmp_path):
  assert speed_claims.main([*argv, "--out", str(tmp_path)]) == 2
  assert capsys.readouterr().err.strip().splitlines() == [line]
  assert not any(tmp_path.iterdir())  # nothing ran, nothing written


@pytest.mark.slow  # three benchmarks at tiny sizes, each in a fresh process
def test_quick_run_measures_every_target_in_one_run(tmp_path):
  """The protocol end to end: each benchmark in a fresh process, every row's value read from
  that benchmark's own file. ``compile`` is left out here: tests/experiments/test_compile_time.py
  runs the same script with the same sizes, and its targets are read from recorded JSON above."""
  cmd = [sys.executable, str(ROOT / "experiments" / "benchmarks" / "speed_claims.py")]
  cmd += ["--quick", "--only", "floor,overhead,first_generation", "--out", str(tmp_path)]
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  out = _procs.run(cmd, cwd=ROOT, env=env, timeout=900)
  assert out.returncode == 0, out.stderr[-3000:]
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  assert summary["size"] == "quick" and summary["machine"]["cpu_model"]
  assert set(summary["runs"]) == {"floor", "overhead", "first_generation"}
  written = {p.name for p in tmp_path.iterdir()}
  slug = speed_claims.cpu_slug(summary["machine"]["cpu_model"]) + "_quick"
  assert any(n.endswith(f"speed_claims_{slug}.json") for n in written), written
  for run in summary["runs"].values():
    assert run["file"] in written and run["seconds"] > 0
  # each row's value is the one in the benchmark's own file
  claims = {r["claim"].split(" (")[0].split(",")[0]: r for r in summary["targets"]}
  assert not any(c.startswith("smoke compiles") for c in claims)  # not run, no row
  floor = json.loads((tmp_path / summary["runs"]["floor"]["file"]).read_text())
  lib = floor["programs"]["map_s6_d2"]
  assert claims["library / equal-work floor time"]["value"] == lib["ratio_to_floor_median"]
  assert lib["matmul_flops_over_floor"] == pytest.approx(1.0, abs=1e-3)  # equal work
  (gda,) = [r for r in summary["targets"] if r["claim"].startswith("Lookahead-minmax")]
  assert " gda " in gda["claim"] and isinstance(gda["met"], bool)
  assert summary["all_met"] == all(r["met"] for r in summary["targets"])
  # the figures without a target come from the same run's files
  first = summary["figures"]["first_generation"]
  assert first["config"].endswith("smoke.py")
  assert 0 < first["warm_resume"]["to_first_generation_s"]
  assert first["cold"]["to_first_generation_s"] > 0
