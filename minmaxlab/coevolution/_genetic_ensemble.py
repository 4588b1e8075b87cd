"""GECCO'20 genetic ensemble search over generators (:func:`ga_ensemble`)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.coevolution._ensembles import EnsembleSearch, Score, check_positive_int


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
  _check_ga(
    num_generators, min_size, max_size, population_size, generations, crossover_probability,
    mutation_probability, tournament_size, precision,
  )  # fmt: skip
  hi_size = min(max_size, num_generators)
  ga = _GA(
    score=score, n=num_generators, k=population_size, lo_size=min(min_size, hi_size),
    hi_size=hi_size, tournament_size=tournament_size, crossover_probability=crossover_probability,
    mutation_probability=mutation_probability, precision=precision,
  )  # fmt: skip
  return _run_ga(ga, key, generations)


class _GA(NamedTuple):
  """:func:`ga_ensemble`'s settings (sizes clipped to ``n``)."""

  score: Score
  n: int  # the candidates
  k: int  # the population size
  lo_size: int
  hi_size: int
  tournament_size: int
  crossover_probability: float
  mutation_probability: float
  precision: int

  @property
  def pairs(self) -> int:
    return self.k // 2


def _check_ga(n, min_size, max_size, k, generations, p_cross, p_mut, tournament_size, precision):
  check_positive_int("num_generators", n)
  for name, v in (
    ("min_size", min_size),
    ("max_size", max_size),
    ("population_size", k),
    ("tournament_size", tournament_size),
    ("precision", precision),
  ):
    check_positive_int(name, v)
  check_positive_int("generations", generations, 0)
  for name, p in (("crossover_probability", p_cross), ("mutation_probability", p_mut)):
    if not 0.0 <= p <= 1.0:
      raise ValueError(f"{name} must be in [0, 1], got {p!r}")


def _scored(ga: _GA, genomes):
  weights = jax.vmap(_dense)(*genomes)
  return genomes, jax.vmap(ga.score)(weights), weights


# One uniform draw per step feeds every random choice (one threefry in the program:
# each jax.random call adds its own, and they dominate the compile time).
def _initial(ga: _GA, key):
  n, k = ga.n, ga.k
  u = jax.random.uniform(key, (k, 2 * n + 1))
  perm = jnp.argsort(u[:, :n], axis=1).astype(jnp.int32)  # uniform random permutations
  units = _below(u[:, n : 2 * n], ga.precision + 1)
  size = ga.lo_size + _below(u[:, 2 * n], ga.hi_size - ga.lo_size + 1)
  return _scored(ga, _Genomes(perm=perm, units=units, size=size))


def _cross(ga: _GA, u, a, b):
  """Two-point crossover of genomes ``a`` and ``b`` (with ``crossover_probability``)."""
  m = jnp.maximum(a.size, b.size)
  c1, c2 = _below(u[0], m + 1), _below(u[1], m)
  c2 = jnp.where(c2 >= c1, c2 + 1, c2)
  lo, hi = jnp.minimum(c1, c2), jnp.maximum(c1, c2)
  do = u[2] < ga.crossover_probability
  pa, ua = _crossover_one(a.perm, a.units, b.perm, b.units, lo, hi)
  pb, ub = _crossover_one(b.perm, b.units, a.perm, a.units, lo, hi)
  new_a = _Genomes(perm=jnp.where(do, pa, a.perm), units=jnp.where(do, ua, a.units), size=a.size)
  new_b = _Genomes(perm=jnp.where(do, pb, b.perm), units=jnp.where(do, ub, b.units), size=b.size)
  return new_a, new_b


def _mutate(ga: _GA, u, g):
  perm, units, size = _mutate_one(
    u[1:], g.perm, g.units, g.size, ga.precision, ga.lo_size, ga.hi_size
  )
  out = _Genomes(perm=perm, units=units, size=size)
  return jax.tree.map(lambda new, old: jnp.where(u[0] < ga.mutation_probability, new, old), out, g)


def _ga_generation(ga: _GA, key, genomes, fitness):
  """One GA generation: tournament selection, crossover of consecutive pairs, mutation."""
  k, t, pairs = ga.k, ga.tournament_size, ga.pairs
  u = jax.random.uniform(key, (k * t + 3 * pairs + 6 * k,))
  u_sel = u[: k * t].reshape(k, t)
  u_cx = u[k * t : k * t + 3 * pairs].reshape(pairs, 3)
  u_mut = u[k * t + 3 * pairs :].reshape(k, 6)
  # Tournament selection of k parents (aspirants drawn with replacement).
  aspirants = _below(u_sel, k)
  fit = jnp.where(jnp.isfinite(fitness), fitness, jnp.inf)
  winners = aspirants[jnp.arange(k), jnp.argmin(fit[aspirants], axis=1)]
  g = jax.tree.map(lambda x: x[winners], genomes)
  # Crossover of consecutive pairs.
  if pairs:
    first = jax.tree.map(lambda x: x[0 : 2 * pairs : 2], g)
    second = jax.tree.map(lambda x: x[1 : 2 * pairs : 2], g)
    new_first, new_second = jax.vmap(lambda *a: _cross(ga, *a))(u_cx, first, second)
    g = jax.tree.map(
      lambda x, a, b: x.at[0 : 2 * pairs : 2].set(a).at[1 : 2 * pairs : 2].set(b),
      g,
      new_first,
      new_second,
    )
  return _scored(ga, jax.vmap(lambda *a: _mutate(ga, *a))(u_mut, g))


def _best(fitness, weights):
  fitness_np = np.asarray(fitness, np.float64)
  i = int(np.argmin(np.where(np.isfinite(fitness_np), fitness_np, np.inf)))
  return float(fitness_np[i]), np.asarray(weights[i])


def _run_ga(ga: _GA, key, generations: int) -> EnsembleSearch:
  """The GA's loop on the host: the best ensemble ever scored and its history."""
  initial = jax.jit(functools.partial(_initial, ga))
  generation = jax.jit(functools.partial(_ga_generation, ga))
  k_init, k_gens = jax.random.split(key)
  genomes, fitness, weights = initial(k_init)
  best, best_w = _best(fitness, weights)
  history = [best]
  evaluations = ga.k
  for key_g in jax.random.split(k_gens, generations):
    genomes, fitness, weights = generation(key_g, genomes, fitness)
    evaluations += ga.k
    f, w = _best(fitness, weights)
    if f < best:
      best, best_w = f, w
    history.append(best)
  w = np.asarray(best_w, np.float64)
  members = tuple(int(i) for i in np.flatnonzero(w))
  return EnsembleSearch(
    weights=w, score=best, members=members, evaluations=evaluations, history=tuple(history)
  )
