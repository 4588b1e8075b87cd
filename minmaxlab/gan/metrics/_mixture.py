"""Mode-collapse metrics for samples of a 2-D Gaussian mixture."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def _modes_std(mixture: Any) -> tuple[jax.Array, jax.Array]:
  return jnp.asarray(mixture.modes), jnp.asarray(mixture.std)


def mode_assignments(
  samples: jax.Array, mixture: Any, threshold: float = 3.0
) -> tuple[jax.Array, jax.Array]:
  """Nearest mode of every sample and whether it is a high-quality sample.

  A sample is *high quality* when it lies within ``threshold`` standard
  deviations of its nearest mode, :math:`\\|x - m_{k(x)}\\| \\le t\\sigma`.

  Args:
    samples: ``[N, D]`` generated points.
    mixture: anything with ``modes [K, D]`` and a scalar ``std`` (e.g.
      ``minmaxlab.gan.data.Mixture``).
    threshold: ``t``, in standard deviations.

  Returns:
    ``(nearest [N] int32, high_quality [N] bool)``.
  """
  modes, std = _modes_std(mixture)
  d2 = jnp.sum((samples[:, None, :] - modes[None, :, :]) ** 2, axis=-1)
  nearest = jnp.argmin(d2, axis=1).astype(jnp.int32)
  dist = jnp.sqrt(jnp.min(d2, axis=1))
  return nearest, dist <= threshold * std


def mode_histogram(samples: jax.Array, mixture: Any, threshold: float = 3.0) -> jax.Array:
  """Counts ``[K]`` of high-quality samples per mode (see :func:`mode_assignments`)."""
  nearest, hq = mode_assignments(samples, mixture, threshold)
  k = jnp.asarray(mixture.modes).shape[0]
  return jnp.zeros(k, jnp.int32).at[nearest].add(hq.astype(jnp.int32))


def mixture_metrics(
  samples: jax.Array, mixture: Any, threshold: float = 3.0, min_count: int = 1
) -> dict[str, jax.Array]:
  r"""Modes covered, high-quality-sample rate and the KL of the mode histogram.

  With :math:`n_k` the number of high-quality samples (within ``threshold``
  standard deviations) whose nearest mode is :math:`k` and
  :math:`p_k = n_k / \sum_j n_j`:

  - ``modes_covered`` :math:`= \#\{k : n_k \ge \text{min\_count}\}`
    (VEEGAN counts a mode with at least one high-quality sample);
  - ``high_quality_rate`` :math:`= \sum_k n_k / N`;
  - ``mode_kl`` :math:`= \mathrm{KL}(p \,\|\, U_K) = \sum_k p_k \log(K p_k)`,
    0 for a perfectly balanced generator, :math:`\log K` when every
    high-quality sample sits on one mode (also reported when there are none).

  A pure function of arrays: jit it with the mixture closed over, or pass a
  mixture that is a pytree.

  Args:
    samples: ``[N, D]`` generated points.
    mixture: anything with ``modes [K, D]`` and a scalar ``std``.
    threshold: high-quality radius in standard deviations.
    min_count: high-quality samples a mode needs to count as covered.

  Returns:
    dict with ``modes_covered`` (int32), ``high_quality_rate`` and ``mode_kl``.

  References:
    Srivastava et al., 2017, "VEEGAN", https://arxiv.org/abs/1705.07761 ;
    Lin et al., 2018, "PacGAN", https://arxiv.org/abs/1712.04086
  """
  counts = mode_histogram(samples, mixture, threshold)
  k = counts.shape[0]
  total = jnp.sum(counts)
  p = counts / jnp.maximum(total, 1)
  kl = jnp.sum(jnp.where(counts > 0, p * jnp.log(jnp.maximum(p, 1e-30) * k), 0.0))
  kl = jnp.where(total > 0, kl, jnp.log(float(k)))
  return {
    "modes_covered": jnp.sum(counts >= min_count).astype(jnp.int32),
    "high_quality_rate": total / samples.shape[0],
    "mode_kl": kl,
  }


def mode_tvd_score(
  mixture: Any, samples: jax.Array, weights: jax.Array, threshold: float = 3.0
) -> jax.Array:
  r"""Total variation between a weighted generator mixture's mode histogram and
  the ideal one, for a 2-D Gaussian mixture data set (a mixture score: lower is
  better, jit-able; see :class:`minmaxlab.coevolution.Coevolution`).

  Each sample of generator :math:`m` carries weight :math:`w_m / S`. With
  :math:`h_k` the weighted mass of high-quality samples (within ``threshold``
  standard deviations, :func:`mode_assignments`) nearest to mode :math:`k` and
  :math:`h_0 = 1 - \sum_k h_k` the mass of low-quality samples,

  .. math:: \mathrm{score} = \tfrac12 \big(\textstyle\sum_k |h_k - 1/K| + h_0\big) \in [0, 1],

  0 for a mixture that puts all its mass near the modes, evenly (the
  Lipizzaner-style TVD over mode histograms, with misses counted).

  Args:
    mixture: has ``modes [K, 2]`` and scalar ``std``.
    samples: ``[M, S, 2]``, ``S`` samples of each of ``M`` generators.
    weights: ``[M]`` on the simplex.
    threshold: high-quality radius in standard deviations.
  """
  m, s = samples.shape[:2]
  nearest, hq = mode_assignments(samples.reshape(m * s, -1), mixture, threshold)
  mass = jnp.repeat(weights / s, s) * hq
  k = jnp.asarray(mixture.modes).shape[0]
  h = jnp.zeros(k, mass.dtype).at[nearest].add(mass)
  return 0.5 * (jnp.sum(jnp.abs(h - 1.0 / k)) + (jnp.sum(weights) - jnp.sum(h)))
