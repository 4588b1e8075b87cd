"""The coevolution step's matmul precision (``CoevolutionConfig.matmuls``).

``"float32"`` (default): every dense layer computes ``x @ W`` in float32.
``"bfloat16"``: every dense layer of the pair's networks (``minmaxlab.gan.models``' ``Dense``)
computes its three matmuls (the forward ``x @ W`` and, in the backward pass,
``dy @ W^T`` and ``x^T @ dy``) on bfloat16 copies of its float32 operands with
float32 accumulation and a float32 result (:func:`bf16_matmul`). The parameters, the
optimizer's state, the bias, the activations between layers and every other operation
stay float32. Each operand is rounded to bfloat16 (8 significant bits), so a product
differs from the float32 one by a relative error of about ``2**-8`` per operand; the
accumulation over the contracted axis is float32. Convolutions are left in float32.

Where the CPU has bfloat16 dot-product instructions (AVX512-BF16, AMX-BF16), XLA's CPU
backend runs such a matmul faster than the float32 one (docs/benchmarks.md); elsewhere it
may be slower. The option changes the numerics, so a run's quality with it is a
measurement, not a given (``experiments/benchmarks/protocols``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import linen as nn

from minmaxlab.gan.models import Dense, GANPair, Model, spectral_normalize

MATMULS = ("float32", "bfloat16")


def _dot(a: jax.Array, b: jax.Array, contract: tuple[int, int]) -> jax.Array:
  dims = (((contract[0],), (contract[1],)), ((), ()))
  bf16 = jnp.bfloat16
  return jax.lax.dot_general(
    a.astype(bf16), b.astype(bf16), dims, preferred_element_type=jnp.float32
  )


@jax.custom_vjp
def bf16_matmul(x: jax.Array, w: jax.Array) -> jax.Array:
  """``x [M, K] @ w [K, N] -> [M, N]`` float32, on bfloat16 copies of ``x`` and ``w``
  with float32 accumulation; its gradient is the same product's transposes, each again
  on bfloat16 copies (``dx = dy @ w^T``, ``dw = x^T @ dy``) with float32 results."""
  return _dot(x, w, (1, 0))


def _matmul_fwd(x, w):
  # The residuals are the bfloat16 copies the backward products use (the same values it
  # would convert again), and zero-size arrays of the primals' dtypes.
  xb, wb = x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)
  return _dot(xb, wb, (1, 0)), (xb, wb, jnp.zeros(0, x.dtype), jnp.zeros(0, w.dtype))


def _matmul_bwd(res, g):
  xb, wb, x_dtype, w_dtype = res
  return _dot(g, wb, (1, 1)).astype(x_dtype.dtype), _dot(xb, g, (0, 0)).astype(w_dtype.dtype)


bf16_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def _dense_bf16(module, x: jax.Array) -> jax.Array:
  kernel = module.get_variable("params", "kernel")
  if module.spectral_norm:
    kernel = spectral_normalize(kernel, module.n_power_iterations)
  lead = x.shape[:-1]
  y = bf16_matmul(x.reshape(-1, x.shape[-1]), kernel).reshape(*lead, kernel.shape[-1])
  if module.use_bias:
    y = y + module.get_variable("params", "bias")
  return y.astype(x.dtype)


def _interceptor(next_fun, args, kwargs, context):
  if isinstance(context.module, Dense) and context.method_name == "__call__" and not kwargs:
    return _dense_bf16(context.module, *args)
  return next_fun(*args, **kwargs)


def with_matmuls(model: Model, matmuls: str) -> Model:
  """``model`` whose ``apply`` runs its dense layers' matmuls in ``matmuls``
  (one of :data:`MATMULS`; ``"float32"`` returns ``model`` itself). ``init`` is
  unchanged, and so are the parameters' dtypes and tree."""
  if matmuls not in MATMULS:
    raise ValueError(f"matmuls must be one of {MATMULS}, got {matmuls!r}")
  if matmuls == "float32":
    return model

  def apply(params, x):
    with nn.intercept_methods(_interceptor):
      return model.apply(params, x)

  return Model(model.init, apply)


def pair_with_matmuls(pair: GANPair, matmuls: str) -> GANPair:
  """Both networks of ``pair`` through :func:`with_matmuls`."""
  if matmuls == "float32":
    return pair
  g, d = (with_matmuls(m, matmuls) for m in (pair.generator, pair.discriminator))
  return GANPair(generator=g, discriminator=d, latent_dim=pair.latent_dim)


def d_logits(config, D: Model, params, real: jax.Array, fake: jax.Array):
  """``(D(real), D(fake))``: two forward passes, or with ``config.d_forward == "joined"``
  one pass on ``concatenate([real, fake])`` split after it (the same values when the
  discriminator's rows are independent, to float rounding: the larger matmuls may sum in
  another order)."""
  if config.d_forward != "joined":
    return D.apply(params, real), D.apply(params, fake)
  logits = D.apply(params, jnp.concatenate([real, fake]))
  return logits[: real.shape[0]], logits[real.shape[0] :]
