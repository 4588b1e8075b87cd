"""MLP generator and discriminator (the Lipizzaner ``four_layer_perceptron``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

from minmaxlab.gan.models._layers import DEFAULT_POWER_ITERATIONS, Dense
from minmaxlab.gan.models._model import Initializer, Model, from_linen


def _identity(x):
  return x


_ACTIVATIONS = {"tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid, "linear": _identity, None: _identity}


class MLPGenerator(nn.Module):
  output_shape: Sequence[int]
  hidden: Sequence[int] = (256, 256)
  output_activation: str | None = "tanh"
  negative_slope: float = 0.2

  @nn.compact
  def __call__(self, z):
    h = z
    for width in self.hidden:
      h = nn.leaky_relu(Dense(width)(h), self.negative_slope)
    x = Dense(math.prod(self.output_shape))(h)
    x = _ACTIVATIONS[self.output_activation](x)
    return x.reshape(z.shape[0], *self.output_shape)


class MLPDiscriminator(nn.Module):
  hidden: Sequence[int] = (256, 256)
  spectral_norm: bool = False
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS
  negative_slope: float = 0.2

  @nn.compact
  def __call__(self, x):
    h = x.reshape(x.shape[0], -1)
    sn = dict(spectral_norm=self.spectral_norm, n_power_iterations=self.n_power_iterations)
    for width in self.hidden:
      h = nn.leaky_relu(Dense(width, **sn)(h), self.negative_slope)
    return Dense(1, **sn)(h)[:, 0]


def _check_activation(output_activation):
  if output_activation not in _ACTIVATIONS:
    raise ValueError(
      f"output_activation must be one of 'tanh', 'sigmoid', 'linear', None;"
      f" got {output_activation!r}"
    )


def _check_hidden(hidden):
  given = hidden
  try:
    if isinstance(hidden, str):
      raise ValueError
    hidden = tuple(int(h) for h in hidden)
  except (TypeError, ValueError):
    raise ValueError(
      f"hidden must be a sequence of layer widths, e.g. (64, 64); got {given!r}"
    ) from None
  if any(h <= 0 for h in hidden):
    raise ValueError(f"hidden widths must be positive, got {hidden}")
  return hidden


def mlp_generator(
  output_shape: Sequence[int],
  latent_dim: int = 64,
  hidden: Sequence[int] = (256, 256),
  output_activation: str | None = "tanh",
  initializer: Initializer = "fan_in_uniform",
) -> Model:
  r"""MLP generator :math:`z \mapsto x`: Dense-LeakyReLU(0.2) blocks, then a
  dense output layer reshaped to ``output_shape``.

  With the defaults and ``output_shape=(28, 28, 1)`` this is Lipizzaner's
  MNIST generator ``four_layer_perceptron``: 64 -> 256 -> 256 -> 784, tanh
  output, 283,920 parameters.

  Args:
    output_shape: one example's shape, e.g. ``(28, 28, 1)`` or ``(2,)``.
    latent_dim: size of :math:`z`.
    hidden: widths of the hidden layers.
    output_activation: ``"tanh"`` (images in [-1, 1]), ``"sigmoid"`` or
      ``None``/``"linear"`` (unbounded outputs, e.g. 2-D mixtures whose modes
      lie outside [-1, 1]).
    initializer: :func:`from_linen`'s: ``"fan_in_uniform"`` (the default),
      ``"torch"`` (PyTorch's ``nn.Linear`` default, as Lipizzaner's networks start)
      or ``"module"``.

  Returns:
    A :class:`Model` with ``apply(params, z[B, latent_dim]) -> x[B, *output_shape]``.

  References:
    Schmiedlechner et al., 2018, "Lipizzaner: A System That Scales Robust
    Generative Adversarial Network Training", https://arxiv.org/abs/1811.12843
  """
  _check_activation(output_activation)
  output_shape = tuple(int(d) for d in output_shape)
  if latent_dim <= 0 or not output_shape or min(output_shape) <= 0:
    raise ValueError(
      f"need latent_dim > 0 and a non-empty output_shape, got {latent_dim}, {output_shape}"
    )
  module = MLPGenerator(output_shape, _check_hidden(hidden), output_activation)
  return from_linen(module, (latent_dim,), initializer)


def mlp_discriminator(
  input_shape: Sequence[int],
  hidden: Sequence[int] = (256, 256),
  spectral_norm: bool = False,
  n_power_iterations: int = DEFAULT_POWER_ITERATIONS,
  initializer: Initializer = "fan_in_uniform",
) -> Model:
  r"""MLP discriminator :math:`x \mapsto` logit: flatten, Dense-LeakyReLU(0.2)
  blocks, a dense layer to one logit (no sigmoid: the losses take logits).

  With the defaults and ``input_shape=(28, 28, 1)`` this is Lipizzaner's MNIST
  discriminator: 784 -> 256 -> 256 -> 1, 267,009 parameters.

  Args:
    input_shape: one example's shape.
    hidden: widths of the hidden layers.
    spectral_norm: divide every kernel by its spectral norm
      (:func:`spectral_normalize`, power iteration from a fixed start).
    n_power_iterations: power iterations per call with ``spectral_norm``.
    initializer: as :func:`mlp_generator`.

  Returns:
    A :class:`Model` with ``apply(params, x[B, *input_shape]) -> logits[B]``.
  """
  input_shape = tuple(int(d) for d in input_shape)
  module = MLPDiscriminator(_check_hidden(hidden), spectral_norm, n_power_iterations)
  return from_linen(module, input_shape, initializer)
