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
from tests import _procs

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


@pytest.mark.slow  # ~20 s of CPU, mostly XLA compiling the small coevolution generation
def test_dry_run_prints_a_line_per_phase_the_first_at_once(tmp_path):
  """Issue 49 item 5: the device's line within seconds, then the small case's workloads with
  their compile and run phases apart, then the summary (the one line of earlier versions);
  the compiled programs are left in the compilation cache for a second call."""
  out, cache = tmp_path / "gpu_check.jsonl", tmp_path / "cache"
  env = dict(
    os.environ,
    PYTHON=sys.executable,
    JAX_PLATFORMS="cpu",
    GPU_CHECK_PEAK_FLOPS="1e11",
    MINMAXLAB_CACHE_DIR=str(cache),
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
    first = json.loads(proc.stdout.readline())  # a hang guard below
    stdout, stderr = proc.communicate(timeout=_procs.scaled(900))
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    pytest.fail("gpu_check.sh --dry did not finish in 900 s")
  assert proc.returncode == 0, stderr[-3000:]
  assert first["phase"] == "device" and first["platform"] == "cpu" and first["dry"] is True
  assert first["elapsed_s"] < 60 and first["cache"] == str(cache)
  rows = [first, *map(json.loads, stdout.strip().splitlines())]
  assert [(r["phase"], r.get("workload")) for r in rows] == [
    ("device", None),
    ("small", "coevolution_4x4"),
    ("small", "pbt_vectorized_16"),
    ("summary", None),
  ]
  assert [json.loads(x) for x in out.read_text().splitlines()] == rows
  assert [r["elapsed_s"] for r in rows] == sorted(r["elapsed_s"] for r in rows)
  row = rows[-1]
  assert row["peak_flops"] == 1e11 and row["peak_source"] == "given" and row["device"]
  assert row["tests"] is None  # the dry mode runs no tests
  assert row["architecture"] == "mlp"  # the small size; the real check then uses the DCGAN
  for name, w in zip(("coevolution_4x4", "pbt_vectorized_16"), rows[1:3], strict=True):
    assert {k: v for k, v in w.items() if k not in ("phase", "elapsed_s", "workload")} == {
      **{k: v for k, v in row[name].items() if k not in ("phase", "elapsed_s", "workload")},
      "check": "gpu_check",
      "dry": True,
      "device": row["device"],
    }
    w = row[name]
    assert w["steps"] == 1 and w["seconds"] > 0 and w["flops_exact"], w
    assert 0 < w["lower_s"] <= w["compile_s"] and w["first_call_s"] > 0  # the phases apart
    assert w["xla_flops"] > 0
    assert w["peak_fraction"] == pytest.approx(w["xla_flops"] / w["seconds"] / 1e11)
    assert row["peak_fraction"][name] == w["peak_fraction"]
  assert row["pbt_vectorized_16"]["members"] == 16
  assert row["coevolution_4x4_generation"]["steps"] == 1
  assert any(cache.glob("jit_step-*")), sorted(p.name for p in cache.iterdir())  # kept
