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
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.coevolution._operators import normalise_weights
from minmaxlab.gan.metrics import class_tvd_score  # noqa: F401  (re-exported by coevolution)

Score = Callable[[jax.Array], jax.Array]


def _positive_int(name: str, value, minimum: int = 1) -> None:
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
  _positive_int("generations", generations, 0)
  if not sigma >= 0.0:
    raise ValueError(f"sigma must be >= 0, got {sigma!r}")
  weights = jnp.asarray(weights, jnp.float32)
  usable = jnp.ones(weights.shape, bool) if usable is None else jnp.asarray(usable, bool)
  uniform = usable / jnp.maximum(jnp.sum(usable), 1)
  k_init, k_steps = jax.random.split(key)
  if random_init:
    weights = jax.random.uniform(k_init, weights.shape)
  w0 = normalise_weights(weights, usable, uniform)
  s0 = score(w0)

  def step(carry, k):
    w, s = carry
    proposal = normalise_weights(w + sigma * jax.random.normal(k, w.shape), usable, w)
    s_new = score(proposal)
    keep = s_new < s
    carry = (jnp.where(keep, proposal, w), jnp.where(keep, s_new, s))
    return carry, (carry[1], keep)

  (w, s), (scores, accepted) = jax.lax.scan(step, (w0, s0), jax.random.split(k_steps, generations))
  return MixtureOptimization(w, s, s0, scores, accepted)


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
  _positive_int("size", size)
  _positive_int("precision", precision)
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
  order: str = "iterative",
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
  _positive_int("num_generators", num_generators)
  _positive_int("precision", precision)
  if max_size is not None:
    _positive_int("max_size", max_size)
  if patience is not None:
    _positive_int("patience", patience)
  if order not in ("iterative", "random"):
    raise ValueError(f"order must be 'iterative' or 'random', got {order!r}")
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
    w, best, tuple(int(i) for i in np.flatnonzero(w)), evaluations, tuple(history)
  )


# The GA's individuals: ``perm`` orders all N candidates, the first ``size`` of them
# are the ensemble; ``units`` are integer weights in [0, precision] per position.
class _Genomes(NamedTuple):
  perm: jax.Array  # [K, N] int32, each row a permutation of range(N)
  units: jax.Array  # [K, N] int32
  size: jax.Array  # [K] int32


def _dense(perm, units, size):
  n = perm.shape[0]
  inside = jnp.arange(n) < size
  u = jnp.where(inside, units, 0).astype(jnp.float32)
  total = jnp.sum(u)
  w = jnp.where(total > 0, u / jnp.where(total > 0, total, 1.0), inside / size)
  return jnp.zeros(n, jnp.float32).at[perm].set(w)


def _crossover_one(perm, units, other_perm, other_units, lo, hi):
  """Positions ``[lo, hi)`` take ``other``'s candidates (swapped within ``perm`` so it
  stays a permutation) and weights."""

  def place(p, perm):
    q = jnp.argmax(perm == other_perm[p])
    inside = (p >= lo) & (p < hi)
    a, b = perm[p], perm[q]
    swapped = perm.at[p].set(b).at[q].set(a)
    return jnp.where(inside, swapped, perm)

  perm = jax.lax.fori_loop(0, perm.shape[0], place, perm)
  pos = jnp.arange(units.shape[0])
  units = jnp.where((pos >= lo) & (pos < hi), other_units, units)
  return perm, units


def _below(u, n):
  """``floor(u * n)`` as int32 in ``[0, n - 1]``: an integer draw with traced bounds from
  one uniform (``jax.random.randint`` with traced bounds compiles much slower)."""
  return jnp.minimum(jnp.floor(u * n).astype(jnp.int32), n - 1)


def _mutate_one(u, perm, units, size, precision, min_size, max_size):
  """One mutation of an individual from five uniforms ``u``."""
  n = perm.shape[0]
  kinds = 4 if max_size > min_size else 3
  kind = _below(u[0], kinds)  # 0 weight, 1 candidate, 2 both, 3 size
  j = _below(u[1], size)
  reweighted = units.at[j].set(_below(u[2], precision + 1))
  units = jnp.where((kind == 0) | (kind == 2), reweighted, units)
  # Swap member j with a non-member (nothing to swap when every candidate is in).
  first = jnp.minimum(size, n - 1)
  l = first + _below(u[3], n - first)
  a, b = perm[j], perm[l]
  swapped = perm.at[j].set(b).at[l].set(a)
  perm = jnp.where(((kind == 1) | (kind == 2)) & (size < n), swapped, perm)
  size = jnp.where(kind == 3, min_size + _below(u[4], max_size - min_size + 1), size)
  return perm, units, size


def ga_ensemble(
  key: jax.Array,
  score: Score,
  num_generators: int,
  *,
  min_size: int = 3,
  max_size: int = 8,
  population_size: int = 5,
  generations: int = 20,
  crossover_probability: float = 0.8,
  mutation_probability: float = 0.2,
  tournament_size: int = 3,
  precision: int = 100,
) -> EnsembleSearch:
  """GECCO'20 genetic ensemble search (Toutouh et al. 2020, REO-GEN / NREO-GEN).

  An individual is an ensemble of ``min_size..max_size`` distinct candidates
  (``min_size == max_size``: REO-GEN's fixed size; otherwise NREO-GEN) with integer
  weights in ``[0, precision]``, normalised over the members (all zero: uniform).
  Each generation (DEAP's simple GA, as the reference): tournament selection
  (``tournament_size``, with replacement) of a whole new population; consecutive
  pairs cross with ``crossover_probability`` (two-point over the member positions:
  the segment's candidates and weights come from the other parent, the rest of the
  ensemble is kept distinct by swapping); each child mutates with
  ``mutation_probability``, by one of, equally likely: a new weight for one member,
  one member replaced by a non-member, both, or (NREO-GEN) a new size. The children
  replace the population. Every random choice is drawn from ``key``; one generation
  is one jit-compiled step.

  Returns the best ensemble ever scored (the reference reports its final
  population).

  Args:
    key: PRNG key.
    score: ``score(weights [num_generators]) -> scalar``, lower is better.
    num_generators: ``N``, the candidates.
    min_size, max_size: ensemble sizes (clipped to ``N``).
    population_size, generations: of the GA (the reference's ``pop 5``).
    crossover_probability, mutation_probability: the reference's 0.8 and 0.2.
    tournament_size: DEAP ``selTournament(tournsize=3)``.
    precision: weight resolution (the reference's 100).

  Returns:
    An :class:`EnsembleSearch`.
  """
  _positive_int("num_generators", num_generators)
  for name, v in (
    ("min_size", min_size),
    ("max_size", max_size),
    ("population_size", population_size),
    ("tournament_size", tournament_size),
    ("precision", precision),
  ):
    _positive_int(name, v)
  _positive_int("generations", generations, 0)
  for name, p in (
    ("crossover_probability", crossover_probability),
    ("mutation_probability", mutation_probability),
  ):
    if not 0.0 <= p <= 1.0:
      raise ValueError(f"{name} must be in [0, 1], got {p!r}")
  n, k = num_generators, population_size
  hi_size = min(max_size, n)
  lo_size = min(min_size, hi_size)
  pairs = k // 2

  def scored(genomes):
    weights = jax.vmap(_dense)(*genomes)
    return genomes, jax.vmap(score)(weights), weights

  # One uniform draw per step feeds every random choice (one threefry in the program:
  # each jax.random call adds its own, and they dominate the compile time).
  @jax.jit
  def initial(key):
    u = jax.random.uniform(key, (k, 2 * n + 1))
    perm = jnp.argsort(u[:, :n], axis=1).astype(jnp.int32)  # uniform random permutations
    units = _below(u[:, n : 2 * n], precision + 1)
    size = lo_size + _below(u[:, 2 * n], hi_size - lo_size + 1)
    return scored(_Genomes(perm, units, size))

  def cross(u, a, b):
    m = jnp.maximum(a.size, b.size)
    c1, c2 = _below(u[0], m + 1), _below(u[1], m)
    c2 = jnp.where(c2 >= c1, c2 + 1, c2)
    lo, hi = jnp.minimum(c1, c2), jnp.maximum(c1, c2)
    do = u[2] < crossover_probability
    pa, ua = _crossover_one(a.perm, a.units, b.perm, b.units, lo, hi)
    pb, ub = _crossover_one(b.perm, b.units, a.perm, a.units, lo, hi)
    new_a = _Genomes(jnp.where(do, pa, a.perm), jnp.where(do, ua, a.units), a.size)
    new_b = _Genomes(jnp.where(do, pb, b.perm), jnp.where(do, ub, b.units), b.size)
    return new_a, new_b

  def mutate(u, g):
    out = _mutate_one(u[1:], g.perm, g.units, g.size, precision, lo_size, hi_size)
    return _Genomes(
      *jax.tree.map(
        lambda new, old: jnp.where(u[0] < mutation_probability, new, old), out, tuple(g)
      )
    )

  @jax.jit
  def generation(key, genomes, fitness):
    u = jax.random.uniform(key, (k * tournament_size + 3 * pairs + 6 * k,))
    u_sel = u[: k * tournament_size].reshape(k, tournament_size)
    u_cx = u[k * tournament_size : k * tournament_size + 3 * pairs].reshape(pairs, 3)
    u_mut = u[k * tournament_size + 3 * pairs :].reshape(k, 6)
    # Tournament selection of k parents (aspirants drawn with replacement).
    aspirants = _below(u_sel, k)
    fit = jnp.where(jnp.isfinite(fitness), fitness, jnp.inf)
    winners = aspirants[jnp.arange(k), jnp.argmin(fit[aspirants], axis=1)]
    g = jax.tree.map(lambda x: x[winners], genomes)
    # Crossover of consecutive pairs.
    if pairs:
      first = jax.tree.map(lambda x: x[0 : 2 * pairs : 2], g)
      second = jax.tree.map(lambda x: x[1 : 2 * pairs : 2], g)
      new_first, new_second = jax.vmap(cross)(u_cx, first, second)
      g = jax.tree.map(
        lambda x, a, b: x.at[0 : 2 * pairs : 2].set(a).at[1 : 2 * pairs : 2].set(b),
        g,
        new_first,
        new_second,
      )
    return scored(jax.vmap(mutate)(u_mut, g))

  k_init, k_gens = jax.random.split(key)
  genomes, fitness, weights = initial(k_init)
  fitness_np = np.asarray(fitness, np.float64)
  best_i = int(np.argmin(np.where(np.isfinite(fitness_np), fitness_np, np.inf)))
  best, best_w = float(fitness_np[best_i]), np.asarray(weights[best_i])
  history = [best]
  evaluations = k
  for key_g in jax.random.split(k_gens, generations):
    genomes, fitness, weights = generation(key_g, genomes, fitness)
    evaluations += k
    fitness_np = np.asarray(fitness, np.float64)
    i = int(np.argmin(np.where(np.isfinite(fitness_np), fitness_np, np.inf)))
    if fitness_np[i] < best:
      best, best_w = float(fitness_np[i]), np.asarray(weights[i])
    history.append(best)
  w = np.asarray(best_w, np.float64)
  members = tuple(int(i) for i in np.flatnonzero(w))
  return EnsembleSearch(w, best, members, evaluations, tuple(history))
