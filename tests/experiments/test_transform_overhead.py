"""experiments/benchmarks/transform_overhead.py: the per-step traffic read from the compiled
HLO, and what Lookahead-minmax adds to a step without a sync (issue 11 item 4)."""

import collections
import re

import jax
import jax.numpy as jnp
import pytest

import minmaxlab as mml
from experiments.benchmarks import transform_overhead as bench


def _traffic(body, *args):
  run = jax.jit(lambda *a: jax.lax.scan(body, a, None, length=10)[0])
  return bench.step_traffic(run.lower(*args).compile().as_text())


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
  hlo = run.lower(x, big, 0).compile().as_text()
  got = bench.step_traffic(hlo)
  body = re.search(r"body=%([\w.\-]+)", hlo).group(1)
  kinds = collections.Counter()
  written, read = bench._traffic(bench._instructions(bench._computation(hlo, body)), kinds)
  mb = 500 * 500 * 4
  assert (got["written"] - written, got["read"] - read) == (mb, mb), (written, read, got)
  assert got["kernels"] == sum(kinds.values()) + 1 and "dot" not in got, (kinds, got)


@pytest.mark.parametrize("scheme", ["gda", "extragradient"])
def test_lookahead_adds_one_write_and_read_of_the_update_per_step(scheme):
  """Without a sync a lookahead step moves the inner update through its cond: one write
  and one read of a parameter-sized array. The former layout (update merged outside the
  cond) wrote two and read three (16000 and 24000 bytes more here)."""
  params, data, field = bench.bilinear_problem(1000)
  n = 2 * 1000 * 4  # bytes of the params (two players, float32)
  batches = data(jax.random.key(0), 2)
  make = bench.schemes()[scheme]
  got = {}
  for name, tx in (("plain", make()), ("la", mml.lookahead_minmax(make(), 5, 0.5))):
    run, state = bench.compiled_run(tx, params, field, 2)
    got[name] = bench.step_traffic(run.lower(params, state, batches).compile().as_text())
  extra_w = got["la"]["written"] - got["plain"]["written"]
  extra_r = got["la"]["read"] - got["plain"]["read"]
  assert n <= extra_w < n + 100 and n <= extra_r < n + 100, (extra_w, extra_r, got)
