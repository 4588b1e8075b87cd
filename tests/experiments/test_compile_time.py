"""experiments/benchmarks/compile_time.py: each compile mode's cold compile in a fresh process
and the modes' generations interleaved in one (issue 11 item 5)."""

import json
import os
import sys
from pathlib import Path

import pytest

from tests import _procs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two cold compiles of the smoke generation (fresh process, then here)
def test_compile_time_reports_the_configs_own_mode_and_its_generations(tmp_path):
  cmd = [sys.executable, "-m", "experiments.benchmarks.compile_time", "--configs", "smoke"]
  cmd += ["--modes", "fastest", "--generations", "2", "--set", "smoke.steps_per_generation=3"]
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  out = _procs.run(cmd, cwd=ROOT, env=env, timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result["machine"]["cpu_model"] and isinstance(result["machine"]["avx512"], bool)
  smoke = result["configs"]["smoke"]
  assert smoke["config_compile"] == "fastest"  # the smoke config's own mode
  assert smoke["step_total_s"] == smoke["fastest_step_total_s"] and smoke["step_total_s"][0] > 0
  (run,) = smoke["runs"]
  mode = run["modes"]["fastest"]  # timed in a fresh process
  assert mode["compiler_options"] == {
    "xla_backend_optimization_level": 1,
    "xla_cpu_use_fusion_emitters": False,
  }
  step = mode["step"]
  assert step["total_s"] >= step["compile_s"] > 0 and step["hlo_kib"] > 100
  gens = run["generations"]["fastest"]
  assert len(gens["seconds"]) == 2 and gens["median_s"] > 0


def test_bad_compile_mode_is_one_line(tmp_path):
  cmd = [sys.executable, "-m", "experiments.coevolution.main"]
  cmd += ["--config", "experiments/coevolution/configs/smoke.py", "--workdir", str(tmp_path)]
  cmd += ["--config.compile=quick"]
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  out = _procs.run(cmd, cwd=ROOT, env=env, timeout=300)
  assert out.returncode != 0
  lines = [x for x in (out.stdout + out.stderr).strip().splitlines() if x.strip()]
  assert len(lines) == 1 and "config.compile must be one of" in lines[0] and "'quick'" in lines[0]
