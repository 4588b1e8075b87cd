"""Mixture scores for the (1+1)-ES on mixture weights (lower is better), jit-able."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


def mode_tvd_score(
  mixture: Any, samples: jax.Array, weights: jax.Array, threshold: float = 3.0
) -> jax.Array:
  r"""Total variation between a weighted generator mixture's mode histogram and
  the ideal one, for a 2-D Gaussian mixture data set.

  Each sample of generator :math:`m` carries weight :math:`w_m / S`. With
  :math:`h_k` the weighted mass of high-quality samples (within ``threshold``
  standard deviations) nearest to mode :math:`k` and :math:`h_0 = 1 - \sum_k
  h_k` the mass of low-quality samples,

  .. math:: \mathrm{score} = \tfrac12 \big(\textstyle\sum_k |h_k - 1/K| + h_0\big) \in [0, 1],

  0 for a mixture that puts all its mass near the modes, evenly (the
  Lipizzaner-style TVD over mode histograms, with misses counted).

  Args:
    mixture: has ``modes [K, 2]`` and scalar ``std``.
    samples: ``[M, S, 2]``, ``S`` samples of each of ``M`` generators.
    weights: ``[M]`` on the simplex.
    threshold: high-quality radius in standard deviations.
  """
  modes, std = jnp.asarray(mixture.modes), jnp.asarray(mixture.std)
  m, s = samples.shape[:2]
  x = samples.reshape(m * s, -1)
  d2 = jnp.sum((x[:, None, :] - modes[None]) ** 2, -1)
  nearest = jnp.argmin(d2, 1)
  hq = jnp.sqrt(jnp.min(d2, 1)) <= threshold * std
  mass = jnp.repeat(weights / s, s) * hq
  k = modes.shape[0]
  h = jnp.zeros(k, mass.dtype).at[nearest].add(mass)
  return 0.5 * (jnp.sum(jnp.abs(h - 1.0 / k)) + (jnp.sum(weights) - jnp.sum(h)))


def weighted_statistics(features: jax.Array, weights: jax.Array):
  """Mean and covariance of ``features [M, S, F]`` where generator ``m``'s samples
  weigh ``weights[m] / S`` (the mixture's exact statistics, no resampling)."""
  m, s, f = features.shape
  x = features.reshape(m * s, f)
  p = jnp.repeat(weights / s, s)
  mean = p @ x
  centred = x - mean
  cov = (centred * p[:, None]).T @ centred
  return mean, cov


def frechet_distance_jax(mu1, cov1, mu2, cov2) -> jax.Array:
  r""":math:`\|\mu_1-\mu_2\|^2 + \mathrm{tr}(C_1 + C_2 - 2(C_1^{1/2} C_2 C_1^{1/2})^{1/2})`,
  traceable (symmetric eigendecompositions), for scores computed inside a jitted step.
  ``minmaxlab.gan.metrics.frechet_distance`` is the float64 numpy reference."""
  w, v = jnp.linalg.eigh((cov1 + cov1.T) / 2)
  s1 = (v * jnp.sqrt(jnp.clip(w, 0.0))) @ v.T
  inner = s1 @ cov2 @ s1
  tr_sqrt = jnp.sum(jnp.sqrt(jnp.clip(jnp.linalg.eigvalsh((inner + inner.T) / 2), 0.0)))
  diff = mu1 - mu2
  return diff @ diff + jnp.trace(cov1) + jnp.trace(cov2) - 2.0 * tr_sqrt


def fid_score(features: Callable[[Any, jax.Array], jax.Array]):
  """A mixture score: classifier-FID of the weighted mixture against real statistics.

  Args:
    features: ``features(data, images [N, ...]) -> [N, F]`` (e.g. the evaluation
      classifier's penultimate layer, its params carried in ``data``).

  Returns:
    ``score(data, samples [M, S, ...], weights [M])`` using ``data.real_mean``
    and ``data.real_cov``.
  """

  def score(data, samples, weights):
    m, s = samples.shape[:2]
    feats = features(data, samples.reshape((m * s,) + samples.shape[2:]))
    mean, cov = weighted_statistics(feats.reshape(m, s, -1), weights)
    return frechet_distance_jax(mean, cov, data.real_mean, data.real_cov)

  return score
