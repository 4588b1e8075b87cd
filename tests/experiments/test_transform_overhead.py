"""experiments/benchmarks/transform_overhead.py: the per-step traffic read from the compiled
HLO, and what Lookahead-minmax adds to a step without a sync (issue 11 item 4)."""

import collections
import re

import jax
import jax.numpy as jnp
import pytest

import minmaxlab as mml
from experiments.benchmarks import _hlo_traffic as hlo
from experiments.benchmarks import transform_overhead as bench
from tests import _xla


def _traffic(body, *args):
  run = jax.jit(lambda *a: jax.lax.scan(body, a, None, length=10)[0])
  return hlo.step_traffic(run.lower(*args).compile().as_text())


def _plain(c, _):
  x, b, i = c
  return (jnp.sin(x) * 2.0, b, i + 1), None


def test_step_traffic_counts_the_loop_body_and_not_the_sync_branch():
  x, big = jnp.ones(1000), jnp.ones((500, 500))

  def with_cond(c, _):  # a 1 MB matmul on every fifth step only
    (x, b, i), _ = _plain(c, None)
    return (x, jax.lax.cond(i % 5 == 0, lambda: jnp.cos(b) @ b, lambda: b), i), None

  for body in (_plain, with_cond):
    got = _traffic(body, x, big, 0)
    # one elementwise kernel over 1000 float32 (4000 bytes in, 4000 out) and scalars
    assert 4000 <= got["written"] < 4100 and 4000 <= got["read"] < 4100, got
    assert got["fusion"] >= 1


def test_step_traffic_counts_the_no_sync_branch():
  """A step without a sync runs the cond's False branch: its kernels count, on top of the
  loop body's own (here also a copy of the cond's result into the loop carry)."""
  x, big = jnp.ones(1000), jnp.ones((500, 500))

  def with_cond(c, _):  # the matmul on every fifth step, a 1 MB scaling on the others
    (x, b, i), _ = _plain(c, None)
    return (x, jax.lax.cond(i % 5 == 0, lambda: jnp.cos(b) @ b, lambda: b * 0.5), i), None

  run = jax.jit(lambda *a: jax.lax.scan(with_cond, a, None, length=10)[0])
  hlo_text = run.lower(x, big, 0).compile().as_text()
  got = hlo.step_traffic(hlo_text)
  body = re.search(r"body=%([\w.\-]+)", hlo_text).group(1)
  kinds = collections.Counter()
  written, read = hlo.traffic(hlo.instructions(hlo.computation(hlo_text, body)), kinds)
  mb = 500 * 500 * 4
  assert (got["written"] - written, got["read"] - read) == (mb, mb), (written, read, got)
  assert got["kernels"] == sum(kinds.values()) + 1 and "dot" not in got, (kinds, got)


def _lookahead_step_traffic(scheme, via):
  params, data, field = bench.bilinear_problem(1000)
  batches = data(jax.random.key(0), 2)
  make = bench.schemes()[scheme]
  got = {}
  for name, tx, v in (
    ("plain", make(), "game_step"),
    ("la", mml.lookahead_minmax(make(), 5, 0.5), via),
  ):
    run, state = bench.compiled_run(tx, params, field, 2, via=v)
    # the HLO of XLA's default code (tests/_xla.py: a test session compiles with other options)
    compiled = run.lower(params, state, batches).compile(_xla.DEFAULTS)
    got[name] = hlo.step_traffic(compiled.as_text())
  return (
    got["la"]["written"] - got["plain"]["written"],
    got["la"]["read"] - got["plain"]["read"],
    got,
  )


@pytest.mark.parametrize("via", ["game_step", "update"])
@pytest.mark.parametrize("scheme", ["gda", "extragradient"])
def test_lookahead_adds_one_write_and_read_of_the_update_per_step(scheme, via):
  """A step without a sync moves the inner update through Lookahead's cond: one write and
  one read of a parameter-sized array, through game_step (whose exact sync is a cond on the
  new params, reading the slow weights only at a sync) as through a hand-written loop. The
  former layout (update merged outside the cond) wrote two and read three."""
  n = 2 * 1000 * 4  # bytes of the params (two players, float32)
  extra_w, extra_r, got = _lookahead_step_traffic(scheme, via)
  assert n <= extra_w < n + 100 and n <= extra_r < n + 100, (extra_w, extra_r, got)


def test_sync_kernel_names_are_the_true_branch_and_their_time_is_profiled():
  """The sync branch's instructions (here its matmul) are found in the loop body's cond, and
  a profiled call of a Lookahead run gives them a share of its kernel time: above zero (the
  sync ran, 2 of 10 steps) and below the rest of the program's."""
  x, big = jnp.ones(1000), jnp.ones((500, 500))

  def with_cond(c, _):
    (x, b, i), _ = _plain(c, None)
    return (x, jax.lax.cond(i % 5 == 0, lambda: jnp.cos(b) @ b, lambda: b * 0.5), i), None

  run = jax.jit(lambda *a: jax.lax.scan(with_cond, a, None, length=10)[0])
  names = hlo.sync_kernel_names(run.lower(x, big, 0).compile().as_text())
  assert any(n.startswith(("dot", "ynn_fusion")) for n in names), names
  assert not any("multiply" in n for n in names if not n.startswith(("dot", "ynn"))), names

  params, data, field = bench.bilinear_problem(1000)
  batches = data(jax.random.key(0), 10)
  run, state = bench.compiled_run(
    mml.lookahead_minmax(bench.schemes()["gda"](), 5, 0.5),
    params,
    field,
    10,
  )
  jax.block_until_ready(run(params, state, batches))
  got = bench.kernel_profile(run, params, state, batches, calls=1)
  assert got["kernel_ms"] > got["sync_kernel_ms"] > 0, got
  assert 0 < got["sync_share"] < 0.5, got


def test_benchmark_reports_every_program_against_plain(tmp_path):
  """The script end to end (quick, one repeat): each Lookahead program (game_step, a
  hand-written loop, lookahead_scan, no sync) timed against the plain scheme."""
  import json
  import os
  import sys
  from pathlib import Path

  from tests import _procs

  root = Path(__file__).resolve().parents[2]
  cmd = [sys.executable, "experiments/benchmarks/transform_overhead.py", "--quick"]
  cmd += ["--repeats", "1", "--problems", "bilinear_1000", "--schemes", "gda,alternating"]
  out = _procs.run(cmd, cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  got = json.loads(out.stdout.strip().splitlines()[-1])["results"]["bilinear_1000"]
  assert sorted(got) == ["alternating", "gda"]
  for r in got.values():
    assert r["step_bytes_ratio"] > 0 and r["update_step_bytes_ratio"] > 0
    for key in ("overhead_paired", "overhead_update_paired", "overhead_scan_paired"):
      assert len(r[key]["rounds"]) == 1, (key, r[key])
    assert "layout" not in r


def test_paired_ratios_report_every_round():
  times = {"plain": [1.0, 2.0, 4.0, 1.0, 2.0], "lookahead": [1.1, 2.0, 3.6, 1.02, 2.1]}
  got = bench._paired(times)
  assert got["rounds"] == [0.1, 0.0, -0.1, 0.02, 0.05]
  assert got["median"] == 0.02 and got["q1"] == -0.05 and got["q3"] == 0.075
  one = bench._paired({"plain": [2.0], "lookahead": [2.5]})
  assert one == {"median": 0.25, "q1": 0.25, "q3": 0.25, "rounds": [0.25]}
