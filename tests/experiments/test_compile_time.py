"""experiments/benchmarks/compile_time.py: each compile mode's cold compile in a fresh process
and the modes' generations interleaved in one (issue 11 item 5)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import _procs, _xla

ROOT = Path(__file__).resolve().parents[2]
CODE_ROOT = "MINMAXLAB_BENCHMARK_CODE_ROOT"  # compile_time.CODE_ROOT (not imported: JAX)
# The smoke config on a 1x1 grid: what these tests check of the benchmark (its report, the
# layouts' census, the --against protocol) does not depend on the grid's size, and each cold
# compile of the step takes about a fifth fewer CPU seconds than on smoke's 2x2 grid.
ONE_CELL = ["smoke.rows=1", "smoke.cols=1"]


@pytest.mark.slow  # six cold compiles of the smoke generation (fresh processes, then here)
def test_compile_time_reports_the_configs_own_mode_and_its_generations(tmp_path):
  cmd = [sys.executable, "-m", "experiments.benchmarks.compile_time", "--configs", "smoke"]
  cmd += ["--modes", "fastest", "--generations", "2"]
  cmd += ["--set", "smoke.steps_per_generation=3", *ONE_CELL]
  cmd += ["--layouts"]
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
  # the mode's options (distributed.compiler_options): -O1 and the classic emitters, or the
  # emitters alone where the process runs at JAX's -O0 (a test session: tests/_xla.py)
  low_effort = os.environ.get(_xla.LOW_EFFORT) == "1"
  level = {} if low_effort else {"xla_backend_optimization_level": 1}
  assert mode["compiler_options"] == {**level, "xla_cpu_use_fusion_emitters": False}
  step = mode["step"]
  assert step["total_s"] >= step["compile_s"] > 0 and step["hlo_kib"] > 100
  assert 0 < step["trace_s"] <= step["lower_s"] <= step["total_s"]
  census = step["census"]  # what the compiled step is made of
  assert census["instructions"] > census["fusions"] > 100 and census["while_loops"] >= 1
  assert sum(census["fusions_by_origin"].values()) <= census["fusions"]
  gens = run["generations"]["fastest"]
  assert len(gens["seconds"]) == 2 and gens["median_s"] > 0
  # --layouts: the networks as trees of layers and as vectors (smoke's own: flat_params=True)
  layouts = smoke["layouts"]
  tree, flat = layouts["tree"]["step"]["census"], layouts["flat"]["step"]["census"]
  assert flat == census  # the config's own layout, compiled again in a fresh process
  assert flat["state_leaves"] < tree["state_leaves"] / 2 and flat["fusions"] < tree["fusions"]
  gens = layouts["generations"]
  assert len(gens["tree"]["seconds"]) == len(gens["flat"]["seconds"]) == 2
  assert gens["flat"]["ratio_to_tree_median"] > 0 and "ratio_to_tree_median" not in gens["tree"]


@pytest.mark.slow  # two cold compiles of the smoke step, in fresh processes, and a git worktree
def test_against_compiles_this_checkout_and_a_revision_each_from_its_own_code():
  """``--against REV``: the same measurement run on this checkout's code and on REV's (a
  temporary git worktree, removed afterwards), in alternating fresh processes."""
  if not (ROOT / ".git").exists():
    pytest.skip("not a git checkout")
  sha = _procs.run(["git", "rev-parse", "HEAD"], cwd=ROOT, timeout=60).stdout.strip()
  cmd = [sys.executable, "-m", "experiments.benchmarks.compile_time", "--against", "HEAD"]
  cmd += ["--configs", "smoke", "--repeats", "1", "--generations", "1"]
  cmd += ["--set", "smoke.steps_per_generation=3", *ONE_CELL]
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  out = _procs.run(cmd, cwd=ROOT, env=env, timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  smoke = result["configs"]["smoke"]
  assert smoke["mode"] == "fastest" and smoke["sha"] == sha
  (this,), (rev,) = smoke["runs"]["this"], smoke["runs"]["HEAD"]
  assert Path(this["code_root"]) == ROOT  # each side imported its own library and configs
  assert Path(rev["code_root"]) != ROOT and not Path(rev["code_root"]).exists()  # removed
  for side in (this, rev):
    assert side["step"]["total_s"] > 0 and side["step"]["census"]["state_leaves"] > 0
    assert len(side["generations"]["seconds"]) == 1
  assert smoke["step_total_s"]["ratio_median"] > 0
  assert smoke["generation_median_s"]["ratio_median"] > 0


@pytest.mark.slow  # one cold compile of the smoke step, then a second that is cut off
def test_against_killed_mid_run_removes_its_worktree_and_its_child(tmp_path):
  """A SIGTERM while REV's side compiles: the child goes, the temporary worktree goes (the
  ``finally`` runs), and the exit status says the run was terminated."""
  if not (ROOT / ".git").exists():
    pytest.skip("not a git checkout")
  cmd = [sys.executable, "-m", "experiments.benchmarks.compile_time", "--against", "HEAD"]
  cmd += ["--configs", "smoke", "--repeats", "1", "--set", *ONE_CELL]
  env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path))
  proc = _procs.start(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  rev = None
  try:
    deadline = time.monotonic() + _procs.scaled(300)
    while time.monotonic() < deadline and proc.poll() is None:
      found = sorted(tmp_path.glob("*/rev"))
      if found and _procs.pids_with_env(CODE_ROOT, str(found[0])):
        rev = found[0]  # REV's side is compiling in its own process
        break
      time.sleep(0.2)
    assert rev is not None, proc.stderr.read()[-2000:] if proc.poll() is not None else "timeout"
    proc.send_signal(signal.SIGTERM)  # the parent only, as a timeout would
    assert proc.wait(timeout=_procs.scaled(60)) == 128 + signal.SIGTERM
    assert not rev.exists()
    listed = _procs.run(["git", "worktree", "list"], cwd=ROOT, timeout=60).stdout
    assert str(rev) not in listed
    deadline = time.monotonic() + _procs.scaled(30)
    while _procs.pids_with_env(CODE_ROOT, str(rev)) and time.monotonic() < deadline:
      time.sleep(0.2)
    assert not _procs.pids_with_env(CODE_ROOT, str(rev))
  finally:
    _procs.kill_group(proc)
    if rev is not None and rev.exists():
      _procs.run(["git", "worktree", "remove", "--force", str(rev)], cwd=ROOT, timeout=60)


def test_bad_compile_mode_is_one_line(tmp_path):
  cmd = [sys.executable, "-m", "experiments.coevolution.main"]
  cmd += ["--config", "experiments/coevolution/configs/smoke.py", "--workdir", str(tmp_path)]
  cmd += ["--config.compile=quick"]
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  out = _procs.run(cmd, cwd=ROOT, env=env, timeout=300)
  assert out.returncode != 0
  lines = [x for x in (out.stdout + out.stderr).strip().splitlines() if x.strip()]
  assert len(lines) == 1 and "config.compile must be one of" in lines[0] and "'quick'" in lines[0]


_BITS = """
import sys, jax, numpy as np
from experiments.benchmarks import compile_time as ct
if sys.argv[1] == "stub":
  ct.stub_threefry()
f = jax.jit(lambda k: jax.random.bits(k, (8,)))
text = f.lower(jax.random.key(3)).as_text()
print(text.count("stablehlo.while"), *np.asarray(f(jax.random.key(3))).tolist())
"""


def test_stub_threefry_lowers_the_hash_as_two_ops():
  """The ``--stub_threefry`` diagnostic: in its process, ``jax.random`` compiles to no
  threefry loop (the rolled hash is a ``while`` on the CPU) and gives other numbers."""
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  got = {}
  for which in ("real", "stub"):
    out = _procs.run([sys.executable, "-c", _BITS, which], cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    loops, *bits = map(int, out.stdout.split())
    got[which] = loops, bits
  assert got["real"][0] >= 1 and got["stub"][0] == 0
  assert got["real"][1] != got["stub"][1] and len(set(got["real"][1])) == 8


def _double(x):
  import jax.numpy as jnp

  return jnp.sin(x) * 2


def test_hlo_census_counts_fusions_by_the_function_they_were_traced_in():
  """``compile_time.hlo_census`` of a compiled program: one loop fusion per leaf of a
  3-leaf tree, named by the innermost jitted function of the fused root (else its op)."""
  import jax
  import jax.numpy as jnp

  from experiments.benchmarks import compile_time as ct

  tree = {"w": jnp.ones((4, 8)), "b": jnp.ones((8,)), "v": jnp.ones((3,))}

  def f(c, a, b, g):
    return jax.tree.map(lambda x, y: g(jnp.where(c, x, y)), a, b)

  for g, origin in ((_double, "mul"), (jax.jit(_double), "jit(_double)")):
    text = jax.jit(f, static_argnums=3).lower(True, tree, tree, g).compile().as_text()
    census = ct.hlo_census(text)
    assert census["fusions"] == 3 and census["fusions_by_origin"] == {origin: 3}, census
    assert census["copies"] == 0 and census["while_loops"] == 0
    assert census["instructions"] > census["fusions"]


def test_set_overrides_parse_as_the_fields_type():
  """``--set`` values take the config field's type: tuples (``hidden``) from commas."""
  from experiments.benchmarks import compile_time as ct

  c = ct.load_config("smoke", {"hidden": "16,16,16", "steps_per_generation": "3"})
  assert c.hidden == (16, 16, 16) and c.steps_per_generation == 3
  assert ct._parse((1.0, 2.0), "0.5") == (0.5,) and ct._parse((3,), "") == ()
  assert ct._parse(False, "True") is True and ct._parse(True, "0") is False
