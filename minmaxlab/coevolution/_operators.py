"""The evolutionary operators of one cell, as small pure functions (tested alone)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

INF = float("inf")


def aggregate_fitness(losses: jax.Array, valid: jax.Array, mode: str = "average") -> jax.Array:
  """Fitness of each individual (row) over its valid opponents (columns).

  ``mode``: ``"average"`` loss, ``"worst"`` (largest) or ``"best"`` (smallest).
  Lower is better; a non-finite result (a diverged individual) becomes +inf.
  """
  if mode == "average":
    f = jnp.sum(jnp.where(valid, losses, 0.0), -1) / jnp.maximum(jnp.sum(valid), 1)
  elif mode == "worst":
    f = jnp.max(jnp.where(valid, losses, -INF), -1)
  elif mode == "best":
    f = jnp.min(jnp.where(valid, losses, INF), -1)
  else:
    raise ValueError(f"mode must be 'average', 'worst' or 'best', got {mode!r}")
  return jnp.where(jnp.isfinite(f), f, INF)


def tournament(
  key: jax.Array,
  fitness: jax.Array,
  usable: jax.Array,
  num_winners: int,
  tournament_size: int,
  replace: bool = True,
) -> jax.Array:
  """Indices of ``num_winners`` tournament winners.

  Each tournament draws ``tournament_size`` candidates uniformly among the ``usable``
  individuals and keeps the one with the lowest fitness. ``replace=True``: the candidates
  are drawn with replacement (one individual may fill several places);
  ``replace=False``: distinct candidates (Lipizzaner's ``random.sample``; with fewer usable
  individuals than ``tournament_size``, all of them), by the Gumbel top-k trick.
  """
  logits = jnp.where(usable, 0.0, -INF)
  if replace:
    cand = jax.random.categorical(key, logits, shape=(num_winners, tournament_size))
    return cand[jnp.arange(num_winners), jnp.argmin(fitness[cand], axis=1)]
  k = min(tournament_size, fitness.shape[0])
  gumbel = jax.random.gumbel(key, (num_winners, fitness.shape[0]))
  _, cand = jax.lax.top_k(logits + gumbel, k)  # k distinct indices per tournament
  f = jnp.where(usable[cand], fitness[cand], INF)
  return cand[jnp.arange(num_winners), jnp.argmin(f, axis=1)]


def mutate_learning_rates(
  key: jax.Array, lr: jax.Array, probability: float, scale: float, min_learning_rate: float
) -> jax.Array:
  """With ``probability``, ``lr + scale * N(0, 1)``, clipped to ``>= min_learning_rate``."""
  k1, k2 = jax.random.split(key)
  hit = jax.random.bernoulli(k1, probability, lr.shape)
  new = jnp.maximum(lr + scale * jax.random.normal(k2, lr.shape, lr.dtype), min_learning_rate)
  return jnp.where(hit, new, lr)


def replacement_sources(
  local_fitness: jax.Array, trained_fitness: jax.Array, n_replacements: int
) -> jax.Array:
  """For every local slot, the trained individual that replaces it, or -1.

  The ``n_replacements`` worst local individuals are paired with the best
  trained ones (worst with best); a pair is replaced only if the trained one
  is strictly better.
  """
  n = n_replacements
  worst = jnp.argsort(-local_fitness)[:n]
  best = jnp.argsort(trained_fitness)[:n]
  better = trained_fitness[best] < local_fitness[worst]
  return (
    jnp.full(local_fitness.shape, -1, jnp.int32)
    .at[worst]
    .set(jnp.where(better, best, -1).astype(jnp.int32))
  )


def simplex_weights(weights: jax.Array, usable: jax.Array, fallback: jax.Array) -> jax.Array:
  """Mixture weights on the simplex: clip at 0, zero the unusable entries and divide by the
  sum (``fallback`` if all are 0). Formerly ``normalise_weights`` (still importable)."""
  w = jnp.where(usable, jnp.maximum(weights, 0.0), 0.0)
  total = jnp.sum(w)
  return jnp.where(total > 0, w / jnp.where(total > 0, total, 1.0), fallback)


def mixture_es_step(
  key: jax.Array,
  weights: jax.Array,
  usable: jax.Array,
  sigma: float,
  score: Callable[[jax.Array], jax.Array],
):
  """One (1+1)-ES step on mixture weights (lower score is better).

  ``w' = normalise(max(w + sigma * N(0, I), 0))`` over the usable members; ``w'``
  is kept only if ``score(w') < score(w)``.

  Returns:
    ``(weights, score, accepted)``.
  """
  uniform = usable / jnp.maximum(jnp.sum(usable), 1)
  w_now = simplex_weights(weights, usable, uniform)
  w_new = simplex_weights(w_now + sigma * jax.random.normal(key, w_now.shape), usable, w_now)
  s_now, s_new = score(w_now), score(w_new)
  accept = s_new < s_now
  return jnp.where(accept, w_new, w_now), jnp.where(accept, s_new, s_now), accept
