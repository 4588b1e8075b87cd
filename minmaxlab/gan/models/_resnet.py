"""SN-ResNet 32x32 generator and discriminator (the SVRE / Lookahead-minmax CIFAR-10 pair)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

from minmaxlab.gan.models._layers import (
  DEFAULT_POWER_ITERATIONS,
  Conv,
  Dense,
  Norm,
  check_norm,
  make_norm,
)
from minmaxlab.gan.models._model import Model, from_linen

RESNET_IMAGE_SIZE = 32


def _upsample2(x: jax.Array) -> jax.Array:
  """Nearest-neighbour upsampling by 2 (NHWC)."""
  return jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)


def _avg_pool2(x: jax.Array) -> jax.Array:
  """2x2 average pooling with stride 2 (NHWC, even sizes)."""
  b, h, w, c = x.shape
  return x.reshape(b, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))


def _apply_norm(norm: Norm | None, h: jax.Array) -> jax.Array:
  layer = make_norm(norm)
  return h if layer is None else layer(h)


class GeneratorBlock(nn.Module):
  """Pre-activation up-block: ``norm-ReLU-up-conv3-norm-ReLU-conv3`` + ``up-conv1`` shortcut."""

  features: int
  norm: Norm | None = "batch"

  @nn.compact
  def __call__(self, x):
    h = nn.relu(_apply_norm(self.norm, x))
    h = Conv(self.features, (3, 3), padding=1)(_upsample2(h))
    h = nn.relu(_apply_norm(self.norm, h))
    h = Conv(self.features, (3, 3), padding=1)(h)
    # A 1x1 convolution commutes with nearest upsampling: convolve the small map.
    shortcut = _upsample2(Conv(self.features, (1, 1))(x))
    return h + shortcut


class DiscriminatorBlock(nn.Module):
  """Pre-activation block ``ReLU-conv3-ReLU-conv3 [-avgpool]``; the shortcut has a 1x1
  convolution when the block changes the channel count or the size (identity otherwise).
  ``first=True`` is the input block (no ReLU on the image; shortcut ``avgpool-conv1``)."""

  features: int
  downsample: bool
  first: bool = False
  spectral_norm: bool = True
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS

  @nn.compact
  def __call__(self, x):
    sn = dict(spectral_norm=self.spectral_norm, n_power_iterations=self.n_power_iterations)
    h = x if self.first else nn.relu(x)
    h = Conv(self.features, (3, 3), padding=1, **sn)(h)
    h = Conv(self.features, (3, 3), padding=1, **sn)(nn.relu(h))
    if self.downsample:
      h = _avg_pool2(h)
    shortcut = x
    if self.first:
      shortcut = Conv(self.features, (1, 1), **sn)(_avg_pool2(x))
    elif self.downsample or x.shape[-1] != self.features:
      shortcut = Conv(self.features, (1, 1), **sn)(x)
      if self.downsample:
        shortcut = _avg_pool2(shortcut)
    return h + shortcut


class ResNetGenerator(nn.Module):
  channels: int = 3
  width: int = 256
  num_blocks: int = 3
  norm: Norm | None = "batch"

  @nn.compact
  def __call__(self, z):
    start = RESNET_IMAGE_SIZE // 2**self.num_blocks
    h = Dense(start * start * self.width)(z).reshape(z.shape[0], start, start, self.width)
    for _ in range(self.num_blocks):
      h = GeneratorBlock(self.width, self.norm)(h)
    h = nn.relu(_apply_norm(self.norm, h))
    return jnp.tanh(Conv(self.channels, (3, 3), padding=1)(h))


class ResNetDiscriminator(nn.Module):
  image_shape: tuple[int, int, int]
  width: int = 128
  spectral_norm: bool = True
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS

  @nn.compact
  def __call__(self, x):
    sn = dict(spectral_norm=self.spectral_norm, n_power_iterations=self.n_power_iterations)
    h = x.reshape(x.shape[0], *self.image_shape)
    # 32 -> 16 -> 8 -> 8 -> 8, as the SVRE / SN-GAN CIFAR-10 discriminator.
    h = DiscriminatorBlock(self.width, downsample=True, first=True, **sn)(h)
    h = DiscriminatorBlock(self.width, downsample=True, **sn)(h)
    h = DiscriminatorBlock(self.width, downsample=False, **sn)(h)
    h = DiscriminatorBlock(self.width, downsample=False, **sn)(h)
    h = jnp.mean(nn.relu(h), axis=(1, 2))  # AvgPool2d(8) on the 8x8 map
    return Dense(1, **sn)(h)[:, 0]


def _check_image_shape(image_shape: Sequence[int]) -> tuple[int, int, int]:
  image_shape = tuple(int(d) for d in image_shape)
  if (
    len(image_shape) != 3
    or image_shape[:2] != (RESNET_IMAGE_SIZE, RESNET_IMAGE_SIZE)
    or image_shape[2] <= 0
  ):
    raise ValueError(f"SN-ResNet models support image_shape (32, 32, C), got {image_shape}")
  return image_shape


def _check_positive(**values):
  for name, value in values.items():
    if int(value) != value or value <= 0:
      raise ValueError(f"{name} must be a positive integer, got {value!r}")


def resnet_generator(
  image_shape: Sequence[int] = (32, 32, 3),
  latent_dim: int = 128,
  width: int = 256,
  norm: Norm | None = "batch",
) -> Model:
  r"""The SVRE / Lookahead-minmax CIFAR-10 ResNet generator (32x32).

  ``z[128] -> dense -> 4x4xw -> 3 up-blocks (w channels; 4 -> 8 -> 16 -> 32)
  -> norm -> ReLU -> conv3x3 -> tanh``. Each up-block is pre-activation:
  ``norm-ReLU-upsample(nearest)-conv3x3-norm-ReLU-conv3x3`` plus an
  ``upsample-conv1x1`` shortcut. With ``w = 256`` and batch norm this has
  4,276,739 parameters (the SN-GAN CIFAR-10 generator of Miyato et al. as used
  by Chavdarova et al.). Batch norm uses the current batch's statistics only
  (:class:`BatchStatNorm`, the training-mode behaviour): sample in batches of
  tens. Kernels start from the package's fan-in uniform initialiser (the
  reference code uses Xavier uniform).

  Args:
    image_shape: ``(32, 32, C)``.
    latent_dim: size of :math:`z`.
    width: channels ``w`` of every block.
    norm: ``"batch"``, ``"layer"`` or ``None``.

  Returns:
    A :class:`Model`: ``apply(params, z[B, latent_dim]) -> x[B, 32, 32, C]`` in [-1, 1].

  References:
    Chavdarova et al., 2019, "Reducing Noise in GAN Training with Variance
    Reduced Extragradient", https://arxiv.org/abs/1904.08598 ; Chavdarova et
    al., 2021, https://arxiv.org/abs/2006.14567 ; Miyato et al., 2018,
    https://arxiv.org/abs/1802.05957
  """
  image_shape = _check_image_shape(image_shape)
  _check_positive(latent_dim=latent_dim, width=width)
  check_norm(norm)
  module = ResNetGenerator(image_shape[2], int(width), 3, norm)
  return from_linen(module, (int(latent_dim),))


def resnet_discriminator(
  image_shape: Sequence[int] = (32, 32, 3),
  width: int = 128,
  spectral_norm: bool = True,
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS,
) -> Model:
  r"""The SVRE / Lookahead-minmax CIFAR-10 SN-ResNet discriminator (32x32).

  Four pre-activation residual blocks of ``w`` channels (32 -> 16 -> 8 -> 8
  -> 8; the first two average-pool by 2 and have ``conv1x1`` shortcuts, the
  last two identity shortcuts), ReLU, a mean over the 8x8 map and a linear
  layer to one logit. Every kernel (convolutions and the linear layer) is
  spectrally normalised (:func:`spectral_normalize`, a fixed-start power
  iteration, so ``apply`` stays pure), no other normalisation. With
  ``w = 128`` it has 1,053,825 parameters.

  Args:
    image_shape: ``(32, 32, C)``.
    width: channels ``w`` of every block.
    spectral_norm: spectral normalisation of every kernel (the reference: on).
    n_power_iterations: power iterations per kernel and call.

  Returns:
    A :class:`Model`: ``apply(params, x[B, 32, 32, C]) -> logits[B]``.
  """
  image_shape = _check_image_shape(image_shape)
  _check_positive(width=width)
  if int(n_power_iterations) != n_power_iterations or n_power_iterations < 0:
    raise ValueError(f"n_power_iterations must be >= 0, got {n_power_iterations!r}")
  module = ResNetDiscriminator(
    image_shape, int(width), bool(spectral_norm), int(n_power_iterations)
  )
  return from_linen(module, image_shape)
