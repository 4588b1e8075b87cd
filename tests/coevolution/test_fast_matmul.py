"""The coevolution step's ``matmuls`` option (``minmaxlab.coevolution._fast_matmul``): the
bfloat16 matmuls are the float32 ones to bfloat16's rounding, forward and backward, with
float32 parameters, gradients and results; ``"float32"`` is the model itself."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab.coevolution._fast_matmul import bf16_matmul, pair_with_matmuls, with_matmuls
from minmaxlab.distributed import compiler_options
from minmaxlab.gan import models

BF16_REL = 2.0**-7  # two operands rounded to 8 significant bits each


def _bf16(x):
  return x.astype(jnp.bfloat16).astype(jnp.float32)


def test_bf16_matmul_and_its_gradient_are_the_rounded_operands_products():
  x = jax.random.normal(jax.random.key(0), (5, 7))
  w = jax.random.normal(jax.random.key(1), (7, 3))
  g = jax.random.normal(jax.random.key(2), (5, 3))
  y, vjp = jax.vjp(bf16_matmul, x, w)
  dx, dw = vjp(g)
  assert y.dtype == dx.dtype == dw.dtype == jnp.float32
  hi = jax.lax.Precision.HIGHEST
  np.testing.assert_allclose(y, jnp.dot(_bf16(x), _bf16(w), precision=hi), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dx, jnp.dot(_bf16(g), _bf16(w).T, precision=hi), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dw, jnp.dot(_bf16(x).T, _bf16(g), precision=hi), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def mlp_pair():
  return models.make_pair("mlp", (4, 4, 1), 8, hidden=(16, 16))


def test_float32_is_the_model_itself(mlp_pair):
  assert pair_with_matmuls(mlp_pair, "float32") is mlp_pair
  assert with_matmuls(mlp_pair.generator, "float32") is mlp_pair.generator
  with pytest.raises(ValueError, match="matmuls must be one of"):
    with_matmuls(mlp_pair.generator, "float16")


def test_bfloat16_networks_match_float32_to_rounding(mlp_pair):
  fast = pair_with_matmuls(mlp_pair, "bfloat16")
  d, d16 = mlp_pair.discriminator, fast.discriminator
  g, g16 = mlp_pair.generator, fast.generator
  assert d16.init is d.init
  pd, pg = d.init(jax.random.key(0)), g.init(jax.random.key(1))
  z = jax.random.normal(jax.random.key(2), (6, 8))
  x = g.apply(pg, z)
  np.testing.assert_allclose(g16.apply(pg, z), x, rtol=0, atol=4 * BF16_REL)
  assert not np.array_equal(g16.apply(pg, z), x)  # the layers were rounded: the option acts
  logits = jax.jit(d.apply)(pd, x)
  np.testing.assert_allclose(jax.jit(d16.apply)(pd, x), logits, rtol=0, atol=8 * BF16_REL)

  def loss(apply):
    return lambda p: jnp.mean(jax.nn.softplus(apply(p, x)))

  grad, grad16 = jax.grad(loss(d.apply))(pd), jax.jit(jax.grad(loss(d16.apply)))(pd)
  for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(grad16), strict=True):
    assert b.dtype == jnp.float32
    scale = float(jnp.max(jnp.abs(a)))
    np.testing.assert_allclose(b, a, rtol=0, atol=8 * BF16_REL * scale)
  # batched over a population (vmap), as the coevolution step applies it
  pds = jax.vmap(d.init)(jax.random.split(jax.random.key(3), 2))
  many = jax.vmap(d16.apply, (0, None))(pds, x)
  np.testing.assert_allclose(many, jax.vmap(d.apply, (0, None))(pds, x), atol=8 * BF16_REL)


def _step(mlp_pair, **options):
  from minmaxlab import coevolution as co

  cfg = co.CoevolutionConfig(
    rows=1, cols=1, batch_size=8, steps_per_generation=4, d_every=2, schedule="lipizzaner",
    fitness_samples=8, mixture_samples=4, **options,
  )  # fmt: skip
  images = jax.random.uniform(jax.random.key(5), (32, 4, 4, 1), minval=-1.0, maxval=1.0)
  coev = co.Coevolution(
    cfg,
    mlp_pair,
    sample_real=lambda d, k, n: d[jax.random.randint(k, (n,), 0, d.shape[0])],
    score_fn=lambda d, samples, w: jnp.sum(w * jnp.mean(samples**2, axis=(1, 2, 3, 4))),
  )
  state = coev.init(jax.random.key(0))
  step = jax.jit(coev.step, compiler_options=compiler_options("fastest"))  # a short compile
  return step(jax.random.key(1), state, images)[0]


@pytest.mark.slow  # three compiles of a 1x1 generation step
def test_joined_discriminator_forward_is_the_default_step_to_float_rounding(mlp_pair):
  ref, joined = _step(mlp_pair), _step(mlp_pair, d_forward="joined")
  chex.assert_trees_all_close(joined, ref, rtol=1e-5, atol=1e-6)
  fast = _step(mlp_pair, matmuls="bfloat16")  # runs through the whole step; float32 state
  chex.assert_trees_all_equal_shapes_and_dtypes(ref, fast)


def test_config_rejects_unknown_options():
  from minmaxlab import coevolution as co

  with pytest.raises(ValueError, match="matmuls"):
    co.CoevolutionConfig(matmuls="float16")
  with pytest.raises(ValueError, match="d_forward"):
    co.CoevolutionConfig(d_forward="fused")
