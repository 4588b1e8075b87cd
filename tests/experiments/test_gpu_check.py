"""experiments/benchmarks/gpu_check.sh in its dry mode (CPU, tiny sizes) and its FLOP accounting."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from experiments.benchmarks import gpu_check

ROOT = Path(__file__).resolve().parents[2]


def test_peak_table_lookup():
  assert gpu_check.peak_for("NVIDIA H200") == ("H200", 67e12, 494.7e12)
  assert gpu_check.peak_for("H100 80GB HBM3")[0] == "H100 80GB HBM3"
  assert gpu_check.peak_for("NVIDIA A100-SXM4-80GB")[0] == "A100-SXM4-80GB"
  assert gpu_check.peak_for("cpu") == (None, None, None)


def test_program_cost_is_exact_only_without_repeated_loops():
  x = jnp.ones((8, 8))
  once = jax.jit(lambda a: a @ a).lower(x).compile()
  cost = gpu_check.program_cost(once)
  assert cost["flops_exact"] and cost["xla_flops"] >= 2 * 8**3
  # A loop of integer work only (threefry rounds on CPU) does not make the count inexact.
  draws = jax.jit(lambda k: jax.random.normal(k, (8,))).lower(jax.random.key(0)).compile()
  assert gpu_check.program_cost(draws)["flops_exact"]

  def scanned(a):
    return jax.lax.scan(lambda c, _: (jnp.tanh(c @ a), None), a, None, length=5)[0]

  looped = gpu_check.program_cost(jax.jit(scanned).lower(x).compile())
  assert looped["while_loops"] >= 1 and looped["matmul_loops_run_more_than_once"] >= 1
  assert not looped["flops_exact"]


@pytest.mark.slow  # about a minute of CPU, mostly XLA compiling the coevolution generation
def test_dry_run_writes_one_json_line(tmp_path):
  out = tmp_path / "gpu_check.jsonl"
  env = dict(
    os.environ,
    PYTHON=sys.executable,
    JAX_PLATFORMS="cpu",
    GPU_CHECK_PEAK_FLOPS="1e11",
    MINMAXLAB_CACHE_DIR=str(tmp_path / "cache"),
  )
  env.pop("GPU_CHECK_DRY", None)
  # Its own process group, so that a hang kills the script's python child too.
  proc = subprocess.Popen(
    ["bash", str(ROOT / "experiments/benchmarks/gpu_check.sh"), "--dry", "--out", str(out)],
    env=env,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,
  )
  try:
    stdout, stderr = proc.communicate(timeout=900)  # a hang guard: ~40 s of CPU when idle
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    pytest.fail("gpu_check.sh --dry did not finish in 900 s")
  assert proc.returncode == 0, stderr[-3000:]
  lines = stdout.strip().splitlines()
  assert len(lines) == 1, stdout
  row = json.loads(lines[0])
  assert out.read_text().strip() == lines[0]
  assert row["dry"] is True and row["platform"] == "cpu" and row["device"]
  assert row["peak_flops"] == 1e11 and row["peak_source"] == "given"
  assert row["tests"] is None  # the dry mode runs no tests
  assert row["architecture"] == "mlp"  # the dry size; the real check uses the 32x32 DCGAN
  for name in ("coevolution_4x4", "pbt_vectorized_16"):
    w = row[name]
    assert w["steps"] == 1 and w["seconds"] > 0 and w["flops_exact"], w
    assert w["xla_flops"] > 0
    assert w["peak_fraction"] == pytest.approx(w["xla_flops"] / w["seconds"] / 1e11)
    assert row["peak_fraction"][name] == w["peak_fraction"]
  assert row["pbt_vectorized_16"]["members"] == 16
  assert row["coevolution_4x4_generation"]["steps"] == 1
