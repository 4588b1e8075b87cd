"""DCGAN generator and discriminator for 28x28xC and 32x32xC images."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import jax.numpy as jnp
from flax import linen as nn

from minmaxlab.gan.models._conv import ConvImpl, check_conv_impl
from minmaxlab.gan.models._layers import (
  DEFAULT_POWER_ITERATIONS,
  Conv,
  ConvTranspose,
  Norm,
  check_norm,
  make_norm,
)
from minmaxlab.gan.models._model import Model, from_linen

# Per image size: (first generator kernel, padding of the 2nd generator layer,
# last discriminator kernel). Transposed-conv padding (lo, hi) = the PyTorch
# ConvTranspose2d(k, s=2, p, output_padding=op) with lo = k-1-p, hi = lo+op.
_GEOMETRY = {
  28: (3, ((2, 3), (2, 3)), 3),  # 1 -> 3 -> 7 -> 14 -> 28 ; D: 28 -> 14 -> 7 -> 3 -> 1
  32: (4, ((2, 2), (2, 2)), 4),  # 1 -> 4 -> 8 -> 16 -> 32 ; D: 32 -> 16 -> 8 -> 4 -> 1
}
_SAME_UP = ((2, 2), (2, 2))  # k=4, s=2, p=1: doubles the size


def _check_image_shape(image_shape: Sequence[int]) -> tuple[int, int, int]:
  image_shape = tuple(int(d) for d in image_shape)
  if len(image_shape) != 3 or image_shape[0] != image_shape[1] or image_shape[0] not in _GEOMETRY:
    raise ValueError(
      f"DCGAN models support image_shape (28, 28, C) or (32, 32, C), got {image_shape}"
    )
  if image_shape[2] <= 0:
    raise ValueError(f"image_shape needs a positive channel count, got {image_shape}")
  return image_shape


class DCGANGenerator(nn.Module):
  """The flax.linen module of :func:`dcgan_generator` (to use ``from_linen`` directly)."""

  image_shape: tuple[int, int, int]
  width: int = 64
  norm: Norm | None = "batch"
  conv_impl: ConvImpl = "auto"

  @nn.compact
  def __call__(self, z):
    first_kernel, second_padding, _ = _GEOMETRY[self.image_shape[0]]
    use_bias = self.norm in (None, "none")
    h = z.reshape(z.shape[0], 1, 1, z.shape[-1])
    layers = [
      (8 * self.width, first_kernel, 1, "VALID"),
      (4 * self.width, 4, 2, second_padding),
      (2 * self.width, 4, 2, _SAME_UP),
    ]
    for features, kernel, stride, padding in layers:
      h = ConvTranspose(
        features, (kernel, kernel), (stride, stride), padding, use_bias, impl=self.conv_impl
      )(h)
      norm = make_norm(self.norm)
      if norm is not None:
        h = norm(h)
      h = nn.relu(h)
    h = ConvTranspose(self.image_shape[2], (4, 4), (2, 2), _SAME_UP, impl=self.conv_impl)(h)
    return jnp.tanh(h)


class DCGANDiscriminator(nn.Module):
  """The flax.linen module of :func:`dcgan_discriminator`."""

  image_shape: tuple[int, int, int]
  width: int = 64
  norm: Norm | None = "batch"
  spectral_norm: bool = False
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS
  negative_slope: float = 0.2
  conv_impl: ConvImpl = "auto"

  @nn.compact
  def __call__(self, x):
    _, _, last_kernel = _GEOMETRY[self.image_shape[0]]
    sn = dict(
      spectral_norm=self.spectral_norm,
      n_power_iterations=self.n_power_iterations,
      impl=self.conv_impl,
    )
    use_bias = self.norm in (None, "none")
    h = x.reshape(x.shape[0], *self.image_shape)
    # DCGAN convention: no normalisation after the first convolution.
    h = nn.leaky_relu(Conv(self.width, (4, 4), (2, 2), 1, **sn)(h), self.negative_slope)
    for features in (2 * self.width, 4 * self.width):
      h = Conv(features, (4, 4), (2, 2), 1, use_bias=use_bias, **sn)(h)
      norm = make_norm(self.norm)
      if norm is not None:
        h = norm(h)
      h = nn.leaky_relu(h, self.negative_slope)
    h = Conv(1, (last_kernel, last_kernel), (1, 1), "VALID", **sn)(h)
    return h.reshape(x.shape[0])


def dcgan_generator(
  image_shape: Sequence[int] = (28, 28, 1),
  latent_dim: int = 128,
  width: int = 64,
  norm: Norm | None = "batch",
  conv_impl: ConvImpl = "auto",
) -> Model:
  r"""DCGAN generator: transposed convolutions, norm + ReLU, tanh output.

  Channels ``8w -> 4w -> 2w -> C`` with ``w = width``. For ``(28, 28, 1)`` and
  the defaults this is the Lookahead-minmax MNIST generator (latent 128,
  ConvT 128 -> 512 (3x3) -> 256 -> 128 -> 1 (4x4, stride 2), BN + ReLU, tanh;
  3.22M parameters): spatial sizes 1 -> 3 -> 7 -> 14 -> 28. For
  ``(32, 32, C)`` the first kernel is 4x4: 1 -> 4 -> 8 -> 16 -> 32 (Radford et
  al.'s DCGAN at 32x32).

  Normalisation: ``"batch"`` uses the statistics of the current batch only
  (no running averages, see :class:`BatchStatNorm`), which keeps ``apply``
  pure; sample in batches of tens of examples. ``"layer"`` or ``None`` give
  batch-independent outputs.

  Args:
    image_shape: ``(28, 28, C)`` or ``(32, 32, C)``.
    latent_dim: size of :math:`z`.
    width: base channel count ``w``.
    norm: ``"batch"``, ``"layer"`` or ``None``.
    conv_impl: how the transposed convolutions are computed: ``"native"`` (one
      ``lax.conv_general_dilated``), ``"matmul"`` (a matrix product and col2im; fast on
      XLA CPU) or ``"auto"`` (``"matmul"`` on a CPU backend). The same maths.

  Returns:
    A :class:`Model`: ``apply(params, z[B, latent_dim]) -> x[B, H, W, C]`` in [-1, 1].

  References:
    Radford et al., 2016, https://arxiv.org/abs/1511.06434 ; Chavdarova et al.,
    2021, "Taming GANs with Lookahead-Minmax", https://arxiv.org/abs/2006.14567
  """
  image_shape = _check_image_shape(image_shape)
  check_norm(norm)
  check_conv_impl(conv_impl)
  if latent_dim <= 0 or width <= 0:
    raise ValueError(f"latent_dim and width must be positive, got {latent_dim}, {width}")
  return from_linen(DCGANGenerator(image_shape, int(width), norm, conv_impl), (latent_dim,))


def dcgan_discriminator(
  image_shape: Sequence[int] = (28, 28, 1),
  spectral_norm: bool = False,
  width: int = 64,
  norm: Norm | Literal["auto"] | None = "auto",
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS,
  conv_impl: ConvImpl = "auto",
) -> Model:
  r"""DCGAN discriminator: strided convolutions, norm + LeakyReLU(0.2), one logit.

  Channels ``C -> w -> 2w -> 4w -> 1`` (4x4, stride 2, padding 1; the last
  convolution is 3x3 for 28x28, 4x4 for 32x32, both valid). For
  ``(28, 28, 1)`` and the defaults this is the Lookahead-minmax MNIST
  discriminator (Conv 1 -> 64 -> 128 -> 256 (4x4 s2) -> 1 (3x3), BN,
  LeakyReLU 0.2; 0.66M parameters). No normalisation follows the first
  convolution (DCGAN convention).

  Args:
    image_shape: ``(28, 28, C)`` or ``(32, 32, C)``.
    spectral_norm: spectral normalisation of every kernel
      (:func:`spectral_normalize`).
    width: base channel count ``w``.
    norm: ``"batch"`` (batch statistics only), ``"layer"``, ``None`` or
      ``"auto"``: ``"batch"`` without spectral normalisation (the reference
      architecture) and ``None`` with it (Miyato et al., 2018). Use
      ``"layer"`` or ``None`` with the WGAN-GP loss: its per-example gradient
      penalty is not defined when one example's logit depends on the batch.
    n_power_iterations: power iterations per call with ``spectral_norm``.
    conv_impl: how the convolutions are computed (:func:`dcgan_generator`'s option).

  Returns:
    A :class:`Model`: ``apply(params, x[B, H, W, C]) -> logits[B]``.
  """
  image_shape = _check_image_shape(image_shape)
  if norm == "auto":
    norm = None if spectral_norm else "batch"
  check_norm(norm)
  check_conv_impl(conv_impl)
  if width <= 0:
    raise ValueError(f"width must be positive, got {width}")
  module = DCGANDiscriminator(
    image_shape, int(width), norm, spectral_norm, n_power_iterations, conv_impl=conv_impl
  )
  return from_linen(module, image_shape)
