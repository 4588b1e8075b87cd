"""Generator ensembles after training: Lipizzaner's end-of-run mixture ES and the
GECCO'20 greedy and genetic ensemble searches.

Every search takes ``score(weights [N]) -> scalar`` (lower is better; traceable), the
score of the mixture of ``N`` candidate generators with those weights, e.g. a
:func:`~minmaxlab.gan.metrics.fid_score` or a TVD over samples drawn once (the same
latents for every candidate: common random numbers, as the reference).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.coevolution._operators import simplex_weights

Score = Callable[[jax.Array], jax.Array]
EnsembleOrder = Literal["iterative", "random"]


def check_positive_int(name: str, value, minimum: int = 1) -> None:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


# ------------------------------------------------------ end-of-run mixture ES
class MixtureOptimization(NamedTuple):
  """Result of :func:`optimize_mixture`.

  Attributes:
    weights: ``[M]`` the final weights.
    score: their score.
    initial_score: the score of the starting weights.
    scores: ``[generations]`` the kept score after each generation.
    accepted: ``[generations]`` whether that generation's proposal was kept.
  """

  weights: jax.Array
  score: jax.Array
  initial_score: jax.Array
  scores: jax.Array
  accepted: jax.Array


def optimize_mixture(
  key: jax.Array,
  score: Score,
  weights: jax.Array,
  *,
  generations: int = 50,
  sigma: float = 0.01,
  random_init: bool = False,
  usable: jax.Array | None = None,
) -> MixtureOptimization:
  r"""Lipizzaner's end-of-run (1+1)-ES over a finished cell's mixture weights.

  Starting from ``weights`` (or, with ``random_init``, ``U(0, 1)`` weights
  normalised), each of ``generations`` steps proposes

  .. math:: w' = \mathrm{normalise}(\max(w + \sigma\,\mathcal N(0, I), 0))

  over the ``usable`` members and keeps it only if ``score(w') < score(w)``: one
  score per generation plus one for the start (the reference's
  ``optimize_mixture`` block: ``es_generations`` 50, ``mixture_sigma`` 0.01,
  ``es_random_init`` False). Pure and traceable (a ``lax.scan``).

  Args:
    key: PRNG key.
    score: ``score(weights [M]) -> scalar``, lower is better.
    weights: ``[M]`` starting weights.
    generations: ES steps (>= 0).
    sigma: mutation step (>= 0).
    random_init: start from random weights instead of ``weights``.
    usable: ``[M]`` bool, members that may get weight (default all).

  Returns:
    A :class:`MixtureOptimization`.
  """
  check_positive_int("generations", generations, 0)
  if not sigma >= 0.0:
    raise ValueError(f"sigma must be >= 0, got {sigma!r}")
  weights = jnp.asarray(weights, jnp.float32)
  usable = jnp.ones(weights.shape, bool) if usable is None else jnp.asarray(usable, bool)
  uniform = usable / jnp.maximum(jnp.sum(usable), 1)
  k_init, k_steps = jax.random.split(key)
  if random_init:
    weights = jax.random.uniform(k_init, weights.shape)
  w0 = simplex_weights(weights, usable, uniform)
  s0 = score(w0)

  def step(carry, k):
    w, s = carry
    proposal = simplex_weights(w + sigma * jax.random.normal(k, w.shape), usable, w)
    s_new = score(proposal)
    keep = s_new < s
    carry = (jnp.where(keep, proposal, w), jnp.where(keep, s_new, s))
    return carry, (carry[1], keep)

  (w, s), (scores, accepted) = jax.lax.scan(step, (w0, s0), jax.random.split(k_steps, generations))
  return MixtureOptimization(weights=w, score=s, initial_score=s0, scores=scores, accepted=accepted)


# ------------------------------------------------------------ ensemble search
class EnsembleSearch(NamedTuple):
  """Result of :func:`greedy_ensemble` and :func:`ga_ensemble`.

  Attributes:
    weights: ``[N]`` numpy weights over every candidate generator (zero outside the
      ensemble), summing to 1.
    score: the ensemble's score.
    members: the candidates in the ensemble (indices, ascending).
    evaluations: scores computed.
    history: the best score so far after each step (greedy: each candidate
      examined; GA: the initial population, then each generation).
  """

  weights: np.ndarray
  score: float
  members: tuple[int, ...]
  evaluations: int
  history: tuple[float, ...]


def weight_grid(size: int, precision: int) -> np.ndarray:
  """Every weight vector of ``size`` entries in multiples of ``1 / precision`` summing
  to 1 (zeros included), ``[C, size]`` with ``C = binom(precision + size - 1, size - 1)``,
  in lexicographic order (the greedy search's candidates)."""
  check_positive_int("size", size)
  check_positive_int("precision", precision)
  rows = []
  # Stars and bars: the cut points of ``precision`` units into ``size`` parts.
  for cuts in itertools.combinations_with_replacement(range(precision + 1), size - 1):
    edges = (0, *cuts, precision)
    rows.append([edges[i + 1] - edges[i] for i in range(size)])
  return np.asarray(rows, np.float64)[::-1] / precision


def _batched(score: Score, batch_size: int):
  return jax.jit(lambda w: jax.lax.map(score, w, batch_size=batch_size))


def greedy_ensemble(
  key: jax.Array,
  score: Score,
  num_generators: int,
  *,
  max_size: int | None = 5,
  patience: int | None = 4,
  precision: int = 10,
  order: EnsembleOrder = "iterative",
  batch_size: int = 64,
) -> EnsembleSearch:
  """GECCO'20 greedy ensemble search (Toutouh et al. 2020, ``greedy_for_ensemble_generator``).

  Candidates are examined one by one, in index order (``order="iterative"``) or in a
  random order drawn from ``key`` (``"random"``). Each candidate joins the current
  ensemble tentatively and every weight vector of :func:`weight_grid` ``(size,
  precision)`` is scored; the candidate stays, with the best of those weights, only
  if that score is strictly below the current ensemble's (the first candidate: below
  +inf). The search stops when the ensemble has ``max_size`` members, after
  ``patience`` rejected candidates in a row, or when the candidates run out.
  (The reference's ``max_time_without_improvements: 3`` stops at the 4th rejection:
  ``patience=4``.)

  Args:
    key: PRNG key (used by ``order="random"``).
    score: ``score(weights [num_generators]) -> scalar``, lower is better.
    num_generators: ``N``, the candidates.
    max_size: most members (``None``: no limit).
    patience: rejections in a row that end the search (``None``: never).
    precision: weights are multiples of ``1 / precision``.
    order: ``"iterative"`` or ``"random"``.
    batch_size: weight vectors scored at once.

  Returns:
    An :class:`EnsembleSearch`.
  """
  check_positive_int("num_generators", num_generators)
  check_positive_int("precision", precision)
  if max_size is not None:
    check_positive_int("max_size", max_size)
  if patience is not None:
    check_positive_int("patience", patience)
  if order not in get_args(EnsembleOrder):
    raise ValueError(f"order must be one of {get_args(EnsembleOrder)}, got {order!r}")
  n = num_generators
  candidates = np.arange(n)
  if order == "random":
    candidates = np.asarray(jax.random.permutation(key, n))
  scores = _batched(score, batch_size)
  members: list[int] = []
  best, best_w = np.inf, None
  misses = evaluations = 0
  history = []
  for g in candidates:
    trial = [*members, int(g)]
    grid = weight_grid(len(trial), precision)
    dense = np.zeros((grid.shape[0], n), np.float32)
    dense[:, trial] = grid
    s = np.asarray(scores(jnp.asarray(dense)), np.float64)
    evaluations += len(s)
    i = int(np.argmin(np.where(np.isfinite(s), s, np.inf)))
    if s[i] < best:
      members, best, best_w, misses = trial, float(s[i]), dense[i], 0
    else:
      misses += 1
    history.append(best)
    if (max_size is not None and len(members) >= max_size) or (
      patience is not None and misses >= patience
    ):
      break
  if best_w is None:  # every score non-finite: the first candidate alone
    best_w = np.eye(n, dtype=np.float32)[candidates[0]]
  w = best_w.astype(np.float64)
  return EnsembleSearch(
    weights=w,
    score=best,
    members=tuple(int(i) for i in np.flatnonzero(w)),
    evaluations=evaluations,
    history=tuple(history),
  )
