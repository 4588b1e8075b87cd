"""experiments/benchmarks/transform_overhead.py: the per-step traffic read from the compiled
HLO, and what Lookahead-minmax adds to a step without a sync (issue 11 item 4)."""

import jax
import jax.numpy as jnp
import pytest

import minmaxlab as mml
from experiments.benchmarks import transform_overhead as bench


def _traffic(body, *args):
  run = jax.jit(lambda *a: jax.lax.scan(body, a, None, length=10)[0])
  return bench.step_traffic(run.lower(*args).compile().as_text())


def test_step_traffic_counts_the_loop_body_and_not_the_cond_branches():
  x, big = jnp.ones(1000), jnp.ones((500, 500))

  def plain(c, _):
    x, b, i = c
    return (jnp.sin(x) * 2.0, b, i + 1), None

  def with_cond(c, _):  # a 1 MB matmul on every fifth step only
    (x, b, i), _ = plain(c, None)
    return (x, jax.lax.cond(i % 5 == 0, lambda: jnp.cos(b) @ b, lambda: b), i), None

  for body in (plain, with_cond):
    got = _traffic(body, x, big, 0)
    # one elementwise kernel over 1000 float32 (4000 bytes in, 4000 out) and scalars
    assert 4000 <= got["written"] < 4100 and 4000 <= got["read"] < 4100, got
    assert got["fusion"] >= 1


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
