"""Frechet distance between Gaussians fitted to features (FID's core), and the
FID of a weighted generator mixture as a jit-able score."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def gaussian_statistics(features) -> tuple[np.ndarray, np.ndarray]:
  """Mean ``[F]`` and unbiased covariance ``[F, F]`` of ``features [N, F]`` (float64)."""
  x = np.asarray(features, np.float64)
  if x.ndim != 2 or x.shape[0] < 2:
    raise ValueError(f"features must be [N >= 2, F], got shape {x.shape}")
  return x.mean(axis=0), np.cov(x, rowvar=False)


def weighted_statistics(features: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Mean and covariance of ``features [M, S, F]`` where generator ``m``'s samples
  weigh ``weights[m] / S`` (the mixture's exact statistics, no resampling), jit-able."""
  m, s, f = features.shape
  x = features.reshape(m * s, f)
  p = jnp.repeat(weights / s, s)
  mean = p @ x
  centred = x - mean
  cov = (centred * p[:, None]).T @ centred
  return mean, cov


def _frechet(xp, mu1, cov1, mu2, cov2):
  """The distance with array namespace ``xp`` (``numpy`` or ``jax.numpy``)."""
  w, v = xp.linalg.eigh((cov1 + cov1.T) / 2)
  s1 = (v * xp.sqrt(xp.clip(w, 0.0, None))) @ v.T
  inner = s1 @ cov2 @ s1
  tr_sqrt = xp.sum(xp.sqrt(xp.clip(xp.linalg.eigvalsh((inner + inner.T) / 2), 0.0, None)))
  diff = mu1 - mu2
  return diff @ diff + xp.trace(cov1) + xp.trace(cov2) - 2.0 * tr_sqrt


def frechet_distance(mu1, cov1, mu2, cov2):
  r"""Frechet (2-Wasserstein) distance between :math:`N(\mu_1, C_1)` and :math:`N(\mu_2, C_2)`.

  .. math::
    d^2 = \|\mu_1 - \mu_2\|^2 + \operatorname{tr}(C_1 + C_2 - 2 (C_1 C_2)^{1/2}).

  :math:`C_1 C_2` is not symmetric, which is why reference code calls
  ``scipy.linalg.sqrtm`` (a Schur method, sometimes complex). We use
  :math:`\operatorname{tr}(C_1 C_2)^{1/2} = \operatorname{tr}(C_1^{1/2} C_2 C_1^{1/2})^{1/2}`
  (the two matrices are similar): one symmetric eigendecomposition for
  :math:`C_1^{1/2}`, then the eigenvalues of the symmetric PSD
  :math:`C_1^{1/2} C_2 C_1^{1/2}`; always real, and traceable.

  One implementation, two array types: when any argument is a JAX array (or a
  tracer, inside ``jit``: e.g. the mixture score of :func:`fid_score` in a
  coevolution step) it runs in ``jax.numpy`` at the arguments' precision and
  returns a JAX scalar; otherwise (numpy arrays, lists: the image evaluator's
  statistics) it runs in float64 numpy and returns a Python float.

  Args:
    mu1, cov1: mean ``[F]`` and covariance ``[F, F]`` of the first set.
    mu2, cov2: the same for the second set.

  Returns:
    The distance :math:`d^2` (as FID reports it: the squared distance).

  Raises:
    ValueError: the shapes do not match.

  References:
    Heusel et al., 2017, "GANs Trained by a Two Time-Scale Update Rule
    Converge to a Local Nash Equilibrium", https://arxiv.org/abs/1706.08500
  """
  if any(isinstance(a, jax.Array) for a in (mu1, cov1, mu2, cov2)):
    mu1, mu2, cov1, cov2 = (jnp.asarray(a) for a in (mu1, mu2, cov1, cov2))
    xp = jnp
  else:
    mu1, mu2 = np.asarray(mu1, np.float64), np.asarray(mu2, np.float64)
    cov1, cov2 = np.asarray(cov1, np.float64), np.asarray(cov2, np.float64)
    xp = np
  cov1, cov2 = xp.atleast_2d(cov1), xp.atleast_2d(cov2)
  if mu1.shape != mu2.shape or cov1.shape != cov2.shape or cov1.shape != (mu1.size, mu1.size):
    raise ValueError(f"shape mismatch: mu {mu1.shape}/{mu2.shape}, cov {cov1.shape}/{cov2.shape}")
  d = _frechet(xp, mu1, cov1, mu2, cov2)
  return d if xp is jnp else float(d)


def fid_score(features: Callable[[Any, jax.Array], jax.Array]):
  """A mixture score: classifier-FID of the weighted mixture against real statistics.

  Lower is better, as every mixture score of :class:`minmaxlab.coevolution.Coevolution`
  (see also :func:`mode_tvd_score`); jit-able.

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
    return _frechet(jnp, mean, cov, jnp.asarray(data.real_mean), jnp.asarray(data.real_cov))

  return score
