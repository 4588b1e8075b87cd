"""experiments/benchmarks/_kernel_profile.py: a compiled program's kernel time by kind and
per matmul shape, from one profiled call (``coevolution_throughput.py --floor --profile``)."""

import jax
import jax.numpy as jnp

from experiments.benchmarks import _kernel_profile as kp


def test_profile_call_sums_the_kernels_by_kind_and_matmul_shape():
  def body(x, w):
    return jnp.tanh(x @ w) * 0.5, None

  run = jax.jit(lambda x, w: jax.lax.scan(lambda c, _: body(c, w), x, None, length=20)[0])
  x, w = jnp.ones((64, 128)), jnp.full((128, 128), 0.01)
  compiled = run.lower(x, w).compile()
  got = kp.profile_call(lambda: jax.block_until_ready(compiled(x, w)), compiled)
  assert got["wall_s_with_profiler"] > 0
  assert got["kernel_ms_by_kind"]["matmul"] > 0 and got["kernel_events_by_kind"]["matmul"] >= 20
  (shape,) = [s for s in got["matmul_by_shape"] if s.startswith("f32[64,128]")]
  entry = got["matmul_by_shape"][shape]
  assert entry["calls"] >= 20 and entry["us_per_call"] > 0
  assert "lhs_contracting_dims={1}" in shape and "rhs_contracting_dims={0}" in shape


def test_kernel_kinds():
  assert kp.kind("ynn_fusion.3") == kp.kind("dot.12") == "matmul"
  assert kp.kind("copy.5") == kp.kind("wrapped_copy") == "copy"
  assert kp.kind("SlinkyThreadPool::Await") == "thread pool wait"
  assert kp.kind("multiply_add_fusion.7") == "elementwise/other"
