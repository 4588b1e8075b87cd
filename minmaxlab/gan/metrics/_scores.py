"""Scores from a classifier's predictions: Inception score and class TVD (also of a
weighted generator mixture, jit-able: :func:`class_tvd_score`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _probs(logits=None, probs=None) -> np.ndarray:
  if (logits is None) == (probs is None):
    raise ValueError("give exactly one of logits= or probs=")
  if probs is not None:
    return np.asarray(probs, np.float64)
  x = np.asarray(logits, np.float64)
  x = x - x.max(axis=1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=1, keepdims=True)


def inception_score(logits=None, *, probs=None, splits: int = 10) -> tuple[float, float]:
  r"""Inception score (analogue) from class predictions, mean and std over splits.

  .. math::
    \mathrm{IS} = \exp\big(\mathbb E_x\, \mathrm{KL}(p(y \mid x)\,\|\,p(y))\big),
    \qquad p(y) = \mathbb E_x\, p(y \mid x),

  computed on each of ``splits`` equal parts of the samples (as the original
  code does). It lies in :math:`[1, C]`: 1 when every sample gets the same
  prediction, :math:`C` for confident predictions spread evenly over the
  :math:`C` classes.

  Args:
    logits: ``[N, C]`` logits (softmaxed here), or
    probs: ``[N, C]`` probabilities.
    splits: number of parts.

  Returns:
    ``(mean, std)`` over the splits.

  References:
    Salimans et al., 2016, "Improved Techniques for Training GANs",
    https://arxiv.org/abs/1606.03498
  """
  p = _probs(logits, probs)
  splits = int(min(splits, p.shape[0]))
  scores = []
  for part in np.array_split(p, splits):
    py = part.mean(axis=0, keepdims=True)
    kl = np.sum(
      np.where(
        part > 0, part * (np.log(np.maximum(part, 1e-30)) - np.log(np.maximum(py, 1e-30))), 0.0
      ),
      axis=1,
    )
    scores.append(np.exp(kl.mean()))
  return float(np.mean(scores)), float(np.std(scores))


def class_tvd(logits=None, *, probs=None, num_classes: int | None = None) -> float:
  r"""Total variation distance of the predicted-class histogram from uniform.

  .. math:: \mathrm{TVD} = \tfrac12 \sum_{c=1}^{C} \big|\hat q_c - \tfrac1C\big|,

  with :math:`\hat q_c` the fraction of samples whose arg-max prediction is
  :math:`c`. 0 for a generator whose samples are classified evenly; up to
  :math:`1 - 1/C` when all fall in one class (Lipizzaner's MNIST metric).

  Args:
    logits: ``[N, C]`` (or ``probs=``); only the arg-max is used.
    num_classes: ``C`` (default: the width of the predictions).
  """
  p = _probs(logits, probs)
  c = num_classes or p.shape[1]
  q = np.bincount(p.argmax(axis=1), minlength=c) / p.shape[0]
  return float(0.5 * np.abs(q - 1.0 / c).sum())


def class_tvd_score(logits: Callable[[Any, jax.Array], jax.Array]):
  r"""A mixture score: TVD of the weighted predicted-class histogram from uniform.

  .. math:: \tfrac12 \textstyle\sum_c |h_c - 1/C|,\quad h_c = \sum_{m,j} \tfrac{w_m}{S}
     [\arg\max \mathrm{logits}(x_{mj}) = c]

  Lipizzaner's MNIST TVD (:func:`class_tvd` for one generator), jit-able; lower is better,
  like every mixture score (:func:`fid_score`, :func:`mode_tvd_score`).

  Args:
    logits: ``logits(data, images [N, ...]) -> [N, C]`` (the evaluation classifier).

  Returns:
    ``score(data, samples [M, S, ...], weights [M])``.
  """

  def score(data, samples, weights):
    m, s = samples.shape[:2]
    out = logits(data, samples.reshape((m * s,) + samples.shape[2:]))
    c = out.shape[-1]
    h = jnp.zeros(c, jnp.float32).at[jnp.argmax(out, -1)].add(jnp.repeat(weights / s, s))
    return 0.5 * jnp.sum(jnp.abs(h - 1.0 / c))

  return score
