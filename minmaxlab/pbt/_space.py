"""Hyperparameter search spaces: declared bounds, prior sampling and explore moves.

Shared by the vectorized population (arrays with a leading member axis, inside
``jit``) and the black-box controller (one trial's hyperparameters as plain
Python floats, via :func:`explore_values`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Continuous(NamedTuple):
  """A real hyperparameter in ``[low, high]`` (log-uniform prior if ``log``)."""

  low: float
  high: float
  log: bool = True


class Categorical(NamedTuple):
  """An index in ``0 .. num_choices - 1``; explore shifts it by one or resamples."""

  num_choices: int


Space = Mapping[str, Continuous | Categorical]


def validate_space(space: Space) -> None:
  """Raise ``ValueError`` for an empty space or a bad bound."""
  if not space:
    raise ValueError("the hyperparameter space is empty")
  for name, dim in space.items():
    if isinstance(dim, Continuous):
      if not dim.low < dim.high:
        raise ValueError(f"{name}: low must be < high, got {dim.low!r}, {dim.high!r}")
      if dim.log and dim.low <= 0:
        raise ValueError(f"{name}: a log-scale dimension needs low > 0, got {dim.low!r}")
    elif isinstance(dim, Categorical):
      if int(dim.num_choices) < 1:
        raise ValueError(f"{name}: num_choices must be >= 1, got {dim.num_choices!r}")
    else:
      raise ValueError(f"{name}: expected Continuous or Categorical, got {dim!r}")


def _check_explore_args(resample_probability, perturb_factors):
  if not 0.0 <= resample_probability <= 1.0:
    raise ValueError(f"resample_probability must be in [0, 1], got {resample_probability!r}")
  if len(perturb_factors) < 1 or any(f <= 0 for f in perturb_factors):
    raise ValueError(f"perturb_factors must be positive, got {perturb_factors!r}")


def sample_prior(key: jax.Array, space: Space, shape: tuple[int, ...] = ()) -> dict[str, jax.Array]:
  """Draw hyperparameters from the prior: log-uniform / uniform / uniform index.

  Returns a dict of arrays of ``shape`` (float32 for continuous, int32 for
  categorical dimensions).
  """
  validate_space(space)
  keys = jax.random.split(key, len(space))
  out = {}
  for k, (name, dim) in zip(keys, space.items()):
    if isinstance(dim, Categorical):
      out[name] = jax.random.randint(k, shape, 0, int(dim.num_choices), jnp.int32)
    elif dim.log:
      u = jax.random.uniform(k, shape, jnp.float32, math.log(dim.low), math.log(dim.high))
      out[name] = jnp.clip(jnp.exp(u), dim.low, dim.high)
    else:
      out[name] = jax.random.uniform(k, shape, jnp.float32, dim.low, dim.high)
  return out


def explore(
  key: jax.Array,
  hparams: Mapping[str, jax.Array],
  mask: jax.Array,
  space: Space,
  resample_probability: float = 0.25,
  perturb_factors: tuple[float, ...] = (0.8, 1.2),
) -> dict[str, jax.Array]:
  r"""Mutate the hyperparameters of the members where ``mask`` is true.

  Per member and per dimension: with probability ``resample_probability`` draw
  a fresh value from the prior, otherwise perturb. A continuous value is
  multiplied by a factor drawn uniformly from ``perturb_factors``; a
  categorical index moves by :math:`\pm 1`. Every result is clipped to the
  declared bounds (Ray Tune lets perturbations leave the range; we do not).

  Args:
    key: PRNG key.
    hparams: dict of arrays with a leading member axis.
    mask: boolean ``(P,)``: which members explore (those that just exploited).
    space: the declared :class:`Continuous` / :class:`Categorical` dimensions.
    resample_probability: chance of resampling instead of perturbing.
    perturb_factors: multiplicative factors for continuous dimensions.

  Returns:
    The new hyperparameter dict (unchanged where ``mask`` is false).
  """
  _check_explore_args(resample_probability, perturb_factors)
  factors = jnp.asarray(perturb_factors, jnp.float32)
  out = dict(hparams)
  keys = jax.random.split(key, len(space))
  for k, (name, dim) in zip(keys, space.items()):
    x = hparams[name]
    k_coin, k_prior, k_move = jax.random.split(k, 3)
    resample = jax.random.bernoulli(k_coin, resample_probability, x.shape)
    fresh = sample_prior(k_prior, {name: dim}, x.shape)[name]
    if isinstance(dim, Categorical):
      step = jnp.where(jax.random.bernoulli(k_move, 0.5, x.shape), 1, -1)
      moved = jnp.clip(x + step, 0, int(dim.num_choices) - 1).astype(x.dtype)
    else:
      f = factors[jax.random.randint(k_move, x.shape, 0, factors.shape[0])]
      moved = jnp.clip(x * f, dim.low, dim.high).astype(x.dtype)
    new = jnp.where(resample, fresh.astype(x.dtype), moved)
    m = jnp.reshape(mask, mask.shape + (1,) * (x.ndim - mask.ndim))
    out[name] = jnp.where(m, new, x)
  return out


def sample_values(rng: np.random.Generator, space: Space) -> dict[str, float | int]:
  """One draw from the prior as Python numbers (for the black-box controller)."""
  validate_space(space)
  out = {}
  for name, dim in space.items():
    if isinstance(dim, Categorical):
      out[name] = int(rng.integers(0, int(dim.num_choices)))
    elif dim.log:
      out[name] = float(
        np.clip(math.exp(rng.uniform(math.log(dim.low), math.log(dim.high))), dim.low, dim.high)
      )
    else:
      out[name] = float(rng.uniform(dim.low, dim.high))
  return out


def explore_values(
  rng: np.random.Generator,
  values: Mapping[str, float | int],
  space: Space,
  resample_probability: float = 0.25,
  perturb_factors: tuple[float, ...] = (0.8, 1.2),
) -> dict[str, float | int]:
  """:func:`explore` for one member's hyperparameters as Python numbers.

  Dimensions not in ``space`` are copied unchanged.
  """
  _check_explore_args(resample_probability, perturb_factors)
  out = dict(values)
  for name, dim in space.items():
    if rng.uniform() < resample_probability:
      out[name] = sample_values(rng, {name: dim})[name]
    elif isinstance(dim, Categorical):
      step = 1 if rng.uniform() < 0.5 else -1
      out[name] = int(np.clip(int(values[name]) + step, 0, int(dim.num_choices) - 1))
    else:
      f = float(perturb_factors[int(rng.integers(0, len(perturb_factors)))])
      out[name] = float(np.clip(float(values[name]) * f, dim.low, dim.high))
  return out
