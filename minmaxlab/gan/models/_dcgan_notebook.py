"""The Lookahead-minmax MNIST notebook's DCGAN pair, layer for layer.

``make_pair("dcgan_notebook", (28, 28, 1))``: the ``GeneratorCNN28`` /
``DiscriminatorCNN28`` of Chavdarova et al.'s ``mnist/LA-AltGAN+LA-ExtraGrad.ipynb``
(commit bb7c80e) with ``out_tanh=True`` and ``spectral_norm=False`` as its runs use them.
It differs from :func:`dcgan_generator`/:func:`dcgan_discriminator` at 28x28 in four ways:

- generator spatial sizes 1 -> 3 -> 6 -> 14 -> 28 (``ConvTranspose2d`` paddings 0, 1, 0,
  1), where ``"dcgan"`` has 1 -> 3 -> 7 -> 14 -> 28;
- no bias in any convolution (``"dcgan"`` has one in the generator's last layer and the
  discriminator's first and last);
- PyTorch's default initialisation: every kernel ``U(-1/sqrt(fan), 1/sqrt(fan))``
  (``kaiming_uniform_(a=sqrt(5))``), with PyTorch's fan: ``in * kh * kw`` for a
  convolution and ``out * kh * kw`` for a transposed one (``weight.size(1)`` of its
  ``(in, out, kh, kw)`` weight); batch-norm scales ones and offsets zeros;
- batch norm (:class:`BatchStatNorm`, eps 1e-5, biased batch variance) after the first
  three generator layers and the discriminator's 2nd and 3rd convolutions. The notebook
  never calls ``.eval()``, so it too normalises with batch statistics when sampling.

Kernels are flax layouts (``HWIO``). A PyTorch ``Conv2d`` weight ``w[o, i, y, x]`` is
``kernel[y, x, i, o]``; a ``ConvTranspose2d`` weight ``w[i, o, y, x]`` is
``kernel[kh-1-y, kw-1-x, i, o]`` (flax's transposed convolution does not flip its kernel).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

from minmaxlab.gan.models._conv import ConvImpl, check_conv_impl
from minmaxlab.gan.models._layers import BatchStatNorm, Conv, ConvTranspose
from minmaxlab.gan.models._model import Model, from_linen

# (features as a multiple of width, kernel, stride, PyTorch padding) per generator layer.
GENERATOR_LAYERS = ((8, 3, 1, 0), (4, 4, 2, 1), (2, 4, 2, 0))
OUTPUT_LAYER = (4, 2, 1)


def torch_uniform(fan_axes: Sequence[int]):
  """PyTorch's default kernel init: ``U(-b, b)``, ``b = 1/sqrt(prod(shape[fan_axes]))``."""

  def init(key, shape, dtype=jnp.float32):
    bound = 1.0 / math.sqrt(math.prod(shape[a] for a in fan_axes))
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


_CONV_FAN = (0, 1, 2)  # kh * kw * in
_TRANSPOSED_FAN = (0, 1, 3)  # kh * kw * out: PyTorch reads weight.size(1) = out


def torch_padding(kernel: int, padding: int) -> tuple[int, int]:
  """flax's ``(lo, hi)`` padding of PyTorch's ``ConvTranspose2d(kernel, padding=padding)``."""
  return (kernel - 1 - padding, kernel - 1 - padding)


# flax paddings of the notebook's four transposed convolutions (PyTorch's 0, 1, 0, 1).
NOTEBOOK_PADS = tuple(torch_padding(k, p) for _, k, _, p in (*GENERATOR_LAYERS, (1, 4, 2, 1)))


class NotebookGenerator(nn.Module):
  """``GeneratorCNN28(out_tanh=True)``; ``pads``: flax ``(lo, hi)`` per layer;
  ``conv_impl``: the formulation of the convolutions (the same maths)."""

  channels: int = 1
  width: int = 64
  pads: tuple[tuple[int, int], ...] = NOTEBOOK_PADS
  conv_impl: ConvImpl = "auto"

  @nn.compact
  def __call__(self, z):
    h = z.reshape(z.shape[0], 1, 1, z.shape[-1])
    init = torch_uniform(_TRANSPOSED_FAN)
    for (mult, k, s, _), pad in zip(GENERATOR_LAYERS, self.pads[:3]):
      conv = ConvTranspose(
        mult * self.width, (k, k), (s, s), (pad, pad), False, init, self.conv_impl
      )
      h = nn.relu(BatchStatNorm()(conv(h)))
    k, s = OUTPUT_LAYER[:2]
    pad = self.pads[3]
    conv = ConvTranspose(self.channels, (k, k), (s, s), (pad, pad), False, init, self.conv_impl)
    return jnp.tanh(conv(h))


class NotebookDiscriminator(nn.Module):
  """``DiscriminatorCNN28(spectral_norm=False)``: one logit per image."""

  channels: int = 1
  width: int = 64
  conv_impl: ConvImpl = "auto"

  @nn.compact
  def __call__(self, x):
    conv = dict(use_bias=False, kernel_init=torch_uniform(_CONV_FAN), impl=self.conv_impl)
    h = x.reshape(x.shape[0], 28, 28, self.channels)
    h = nn.leaky_relu(Conv(self.width, (4, 4), (2, 2), 1, **conv)(h), 0.2)
    for mult in (2, 4):
      h = Conv(mult * self.width, (4, 4), (2, 2), 1, **conv)(h)
      h = nn.leaky_relu(BatchStatNorm()(h), 0.2)
    h = Conv(1, (3, 3), (1, 1), "VALID", **conv)(h)
    return h.reshape(x.shape[0])


def notebook_pair_models(
  image_shape: Sequence[int], latent_dim: int, conv_impl: ConvImpl = "auto"
) -> tuple[Model, Model]:
  """The notebook's generator and discriminator as :class:`Model` s (PyTorch's init);
  ``conv_impl``: ``"native"``, ``"matmul"`` or ``"auto"`` (:func:`dcgan_generator`)."""
  image_shape = tuple(int(d) for d in image_shape)
  if len(image_shape) != 3 or image_shape[:2] != (28, 28) or image_shape[2] <= 0:
    raise ValueError(f"the notebook's DCGAN needs image_shape (28, 28, C), got {image_shape}")
  if latent_dim <= 0:
    raise ValueError(f"latent_dim must be positive, got {latent_dim}")
  check_conv_impl(conv_impl)
  # The notebook's BatchNorm2d sizes are fixed at 64 * (8, 4, 2): width 64 only.
  gen = NotebookGenerator(image_shape[2], conv_impl=conv_impl)
  disc = NotebookDiscriminator(image_shape[2], conv_impl=conv_impl)
  gen = from_linen(gen, (latent_dim,), initializer="module")
  disc = from_linen(disc, image_shape, initializer="module")
  return gen, disc
