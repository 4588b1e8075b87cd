"""Samples of a weighted generator mixture: independent draws or exact proportions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

import jax
import jax.numpy as jnp

SamplingMode = Literal["independent", "exact_proportion"]
SAMPLING_MODES = get_args(SamplingMode)


def _check_mode(mode: str) -> None:
  if mode not in SAMPLING_MODES:
    raise ValueError(f"mode must be one of {SAMPLING_MODES}, got {mode!r}")


def exact_proportion_counts(weights: jax.Array, n: int) -> jax.Array:
  r"""How many of ``n`` samples each generator contributes: ``round(w_i n)``, summing to ``n``.

  Hamilton's largest-remainder rounding: every generator gets :math:`\lfloor w_i n
  \rfloor` samples, and the :math:`n - \sum_i \lfloor w_i n \rfloor` left over go one
  each to the generators with the largest fractional parts :math:`w_i n - \lfloor
  w_i n \rfloor` (the lowest index first on ties). Deterministic, jit-able; a
  count is always :math:`\lfloor w_i n \rfloor` or :math:`\lceil w_i n \rceil`.

  Args:
    weights: ``[M]`` non-negative, not all zero (normalised here).
    n: the number of samples (static).

  Returns:
    ``int32 [M]`` counts summing to ``n``.
  """
  w = jnp.maximum(jnp.asarray(weights, jnp.float32), 0.0)
  w = w / jnp.sum(w)
  exact = w * n
  base = jnp.floor(exact)
  frac = exact - base
  base = base.astype(jnp.int32)
  left = jnp.clip(n - jnp.sum(base), 0, w.shape[0])
  rank = jnp.argsort(jnp.argsort(-frac, stable=True), stable=True)
  return base + (rank < left).astype(jnp.int32)


def mixture_assignment(
  key: jax.Array, weights: jax.Array, n: int, mode: SamplingMode = "independent"
):
  """The generator of each of ``n`` mixture samples, ``int32 [n]``.

  ``mode="independent"`` (Lipizzaner's ``independent_probability``): each sample's
  generator is drawn with probability ``weights``; ``"exact_proportion"``:
  generator ``i`` makes exactly :func:`exact_proportion_counts` ``[i]`` samples, in
  generator order (``key`` is not used).
  """
  _check_mode(mode)
  if mode == "independent":
    return jax.random.categorical(key, jnp.log(jnp.maximum(weights, 0.0)), shape=(n,))
  counts = exact_proportion_counts(weights, n)
  return jnp.repeat(jnp.arange(counts.shape[0]), counts, total_repeat_length=n)


def sample_mixture(
  key: jax.Array,
  apply: Callable[[Any, jax.Array], jax.Array],
  generators: Any,
  weights: jax.Array,
  n: int,
  latent_dim: int,
  mode: SamplingMode = "independent",
) -> jax.Array:
  """``n`` samples of the mixture of ``generators`` (a pytree with a leading ``[M]`` axis).

  ``k1, k2 = split(key)``: ``k1`` assigns generators (:func:`mixture_assignment`), ``k2``
  draws the ``n`` latent vectors; sample ``j`` is ``apply(generators[a_j], z_j)``.
  """
  k1, k2 = jax.random.split(key)
  which = mixture_assignment(k1, weights, n, mode)
  z = jax.random.normal(k2, (n, latent_dim))
  every = jax.vmap(apply, (0, None))(generators, z)  # [M, n, ...]
  return every[which, jnp.arange(n)]


def exact_proportion_score(score_fn: Callable) -> Callable:
  """A mixture score that scores the mixture's exact-proportion sample.

  The scores of :mod:`minmaxlab.coevolution` (``score_fn(data, samples [M, S, ...],
  weights [M])``) weigh every one of generator ``m``'s ``S`` samples by ``w_m / S``.
  The returned score instead scores the ``S`` samples that
  ``mode="exact_proportion"`` would draw: the first ``c_m`` samples of generator ``m``
  (``c = exact_proportion_counts(weights, S)``), each weighing ``1 / S``: what
  Lipizzaner scores with ``mixture_generator_samples_mode: exact_proportion``.
  """

  def score(data, samples, weights):
    m, s = samples.shape[:2]
    counts = exact_proportion_counts(weights, s)
    per_sample = (jnp.arange(s)[None, :] < counts[:, None]).astype(jnp.float32) / s
    flat = samples.reshape((m * s, 1) + samples.shape[2:])  # every sample its own member
    return score_fn(data, flat, per_sample.reshape(m * s))

  return score
