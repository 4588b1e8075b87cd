"""Pure building blocks: spectral normalisation, batch-statistics norm, layers.

Everything here is stateless: a layer's output is a function of its
parameters and its input only, so ``apply`` stays pure and vmappable over a
population of parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import jax
import jax.numpy as jnp
from flax import linen as nn

from minmaxlab.gan.models._conv import ConvImpl, conv2d, conv_transpose2d

DEFAULT_POWER_ITERATIONS = 5


def _normalize(x: jax.Array, eps: float = 1e-12) -> jax.Array:
  return x / jnp.sqrt(jnp.sum(x * x) + eps)


def _start_vector(n: int, dtype) -> jax.Array:
  """A fixed, generic start vector (a constant, not a parameter, not a PRNG
  draw: a threefry draw inside ``apply`` would add seconds of CPU compile)."""
  i = jnp.arange(1, n + 1, dtype=dtype)
  return jnp.sin(i * 12.9898) + jnp.cos(i * 78.233) + 0.5


def spectral_norm_estimate(
  matrix: jax.Array, n_power_iterations: int = DEFAULT_POWER_ITERATIONS
) -> jax.Array:
  r"""Largest singular value of ``matrix`` by power iteration from a fixed start.

  With :math:`v_0` a fixed unit vector (the same at every call, so the
  estimate is a deterministic function of the matrix) and :math:`W` held
  constant (``stop_gradient``),

  .. math::
    u_k = \frac{W v_{k-1}}{\|W v_{k-1}\|},\quad
    v_k = \frac{W^\top u_k}{\|W^\top u_k\|},\qquad
    \hat\sigma = u^\top W v

  with :math:`u = W v_n / \|W v_n\|`. Gradients flow only through the final
  bilinear form :math:`u^\top W v` (the gradient of Miyato et al., 2018). The
  estimate never exceeds :math:`\sigma_{\max}(W)`; it converges at the rate
  :math:`(\sigma_2/\sigma_1)^{2n}`, so at a random initialisation (close top
  singular values) a few iterations under-estimate by a few percent, while a
  trained weight with a dominant direction converges in a few steps.

  Why a fixed start rather than a persistent :math:`u` (Miyato et al. carry
  :math:`u` from step to step and do one iteration): a persistent vector is
  state that someone must update outside ``apply``; a fixed start keeps
  ``apply`` a pure function of the weights, at a cost: every iteration is two
  matrix-vector products per step, and from a fixed start the estimate is a lower
  bound of :math:`\sigma_{\max}` (speeds and accuracies: docs/benchmarks.md).

  Args:
    matrix: a 2-D array ``[m, n]``.
    n_power_iterations: number of :math:`(u, v)` updates (``>= 0``).

  Returns:
    The scalar estimate :math:`\hat\sigma`.

  References:
    Miyato et al., 2018, "Spectral Normalization for Generative Adversarial
    Networks", https://arxiv.org/abs/1802.05957
  """
  if matrix.ndim != 2:
    raise ValueError(f"matrix must be 2-D, got shape {matrix.shape}")
  w = jax.lax.stop_gradient(matrix)
  v = _normalize(_start_vector(w.shape[1], w.dtype))

  def body(_, v):
    return _normalize(w.T @ _normalize(w @ v))

  # Unrolled when short: a few fused matvecs beat a while loop's per-iteration overhead.
  v = jax.lax.fori_loop(0, n_power_iterations, body, v, unroll=n_power_iterations <= 10)
  u = _normalize(w @ v)
  return u @ matrix @ v


def spectral_normalize(
  kernel: jax.Array, n_power_iterations: int = DEFAULT_POWER_ITERATIONS
) -> jax.Array:
  r"""``kernel / sigma`` with ``sigma`` the spectral norm of the kernel matrix.

  A dense kernel ``[in, out]`` is used as is; a convolution kernel
  ``[kh, kw, in, out]`` is reshaped to ``[kh * kw * in, out]`` (the
  convention of Miyato et al., 2018). See :func:`spectral_norm_estimate`.
  """
  sigma = spectral_norm_estimate(kernel.reshape(-1, kernel.shape[-1]), n_power_iterations)
  return kernel / sigma


class Dense(nn.Module):
  """A dense layer ``x @ W + b`` with optional spectral normalisation of ``W``."""

  features: int
  use_bias: bool = True
  spectral_norm: bool = False
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS
  kernel_init: Any = nn.initializers.lecun_normal()

  @nn.compact
  def __call__(self, x):
    kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features))
    if self.spectral_norm:
      kernel = spectral_normalize(kernel, self.n_power_iterations)
    y = x @ kernel.astype(x.dtype)
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros, (self.features,)).astype(x.dtype)
    return y


class Conv(nn.Module):
  """A 2-D convolution (NHWC, HWIO) with optional spectral normalisation; ``impl``: the
  formulation (:func:`conv2d`; the same maths either way)."""

  features: int
  kernel_size: Sequence[int]
  strides: Sequence[int] = (1, 1)
  padding: Any = "VALID"
  use_bias: bool = True
  spectral_norm: bool = False
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS
  kernel_init: Any = nn.initializers.lecun_normal()
  impl: ConvImpl = "native"

  @nn.compact
  def __call__(self, x):
    shape = (*self.kernel_size, x.shape[-1], self.features)
    kernel = self.param("kernel", self.kernel_init, shape)
    if self.spectral_norm:
      kernel = spectral_normalize(kernel, self.n_power_iterations)
    y = conv2d(x, kernel.astype(x.dtype), tuple(self.strides), self.padding, self.impl)
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros, (self.features,)).astype(x.dtype)
    return y


class ConvTranspose(nn.Module):
  """flax's ``nn.ConvTranspose`` for NHWC inputs (the same parameters: ``kernel``
  ``[kh, kw, in, out]``, not flipped, and ``bias``; the same default initialisers), with
  ``impl`` choosing the formulation (:func:`conv_transpose2d`; the same maths either way)."""

  features: int
  kernel_size: Sequence[int]
  strides: Sequence[int] = (1, 1)
  padding: Any = "SAME"
  use_bias: bool = True
  kernel_init: Any = nn.initializers.lecun_normal()
  impl: ConvImpl = "native"

  @nn.compact
  def __call__(self, x):
    shape = (*self.kernel_size, x.shape[-1], self.features)
    kernel = self.param("kernel", self.kernel_init, shape)
    y = conv_transpose2d(x, kernel.astype(x.dtype), tuple(self.strides), self.padding, self.impl)
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros, (self.features,)).astype(x.dtype)
    return y


class BatchStatNorm(nn.Module):
  r"""Batch normalisation with the statistics of the current batch only.

  .. math:: y = \gamma \frac{x - \mu_B}{\sqrt{\sigma_B^2 + \epsilon}} + \beta

  with :math:`\mu_B, \sigma_B^2` over every axis but the last (features).
  There are no running averages, so the layer is a pure function of
  ``(params, x)``: the training-mode behaviour of ``torch.nn.BatchNorm2d``,
  used at training and at sampling time alike. One example's output depends
  on the rest of its batch (sample with batches of tens of examples).
  """

  epsilon: float = 1e-5

  @nn.compact
  def __call__(self, x):
    axes = tuple(range(x.ndim - 1))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    scale = self.param("scale", nn.initializers.ones, (x.shape[-1],)).astype(x.dtype)
    bias = self.param("bias", nn.initializers.zeros, (x.shape[-1],)).astype(x.dtype)
    return (x - mean) * jax.lax.rsqrt(var + self.epsilon) * scale + bias


Norm = Literal["batch", "layer", "none"]  # "none" (or None): no normalisation
NORMS = get_args(Norm)


def check_norm(norm: Any) -> None:
  """``ValueError`` (one line naming the value) unless ``norm`` is one of :data:`NORMS` or None."""
  if norm is not None and norm not in NORMS:
    raise ValueError(f"norm must be one of {NORMS} or None, got {norm!r}")


def make_norm(norm: Norm | None, name: str | None = None) -> nn.Module | None:
  """A normalisation layer by name: ``"batch"``, ``"layer"`` or ``None``."""
  check_norm(norm)
  if norm is None or norm == "none":
    return None
  if norm == "batch":
    return BatchStatNorm(name=name)
  return nn.LayerNorm(name=name)
