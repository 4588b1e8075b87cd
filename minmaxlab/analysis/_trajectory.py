"""Run a transform on a game under ``lax.scan`` and record distances to the equilibrium."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from minmaxlab.games import Players
from minmaxlab.games import vector_field as make_vector_field


class Trajectory(NamedTuple):
  """Result of :func:`run_game`.

  Attributes:
    distances: dict of arrays of shape ``(T + 1,)`` (leading seed axis under
      :func:`run_games`): the game's ``distance`` entries (``"joint"``,
      ``"sum"``, ``"min"``, ``"max"``) at the start and after every step.
    passes: ``(T + 1,)`` int array, field evaluations used so far
      (``steps * evaluations_per_step``).
    params: the final params.
    opt_state: the final optimizer state.
    iterates: ``Players`` with a leading time axis ``(T + 1, ...)`` when
      ``keep_iterates``, else ``None``.
  """

  distances: dict
  passes: jax.Array
  params: Players
  opt_state: Any
  iterates: Players | None


def field_evaluations_per_step(
  tx: optax.GradientTransformation, field: Callable, params: Players, *args: Any
) -> int:
  r"""How many times one ``update`` of ``tx`` evaluates the game's field ("passes").

  Counted, not assumed: one evaluation for the ``updates`` argument plus every
  call of ``vector_field`` made while tracing one ``update`` (``jax.eval_shape``,
  nothing is computed). Each evaluation computes both players' gradients
  (under ``jit`` XLA drops a half that is not used, but we count full
  evaluations, as an autodiff framework computing one backward pass does).
  So: GDA and OGDA = 1, extragradient = 2, ``alternating(max_steps=n)`` =
  ``n + 1`` (``n`` max-player steps, then the min player at the new point),
  and lookahead adds nothing to its inner scheme. The count of
  :func:`minmaxlab.num_field_evaluations` at ``params`` with ``field``.
  """
  from minmaxlab.transforms import num_field_evaluations  # noqa: PLC0415

  return num_field_evaluations(tx, params, lambda p, i: field(p, *args))


def _run(tx, game, params, num_steps, key, batch_size, point, keep_iterates):
  """The traced body of :func:`run_game` (passes are counted by the callers)."""
  if point not in ("params", "slow"):
    raise ValueError(f"point must be 'params' or 'slow', got {point!r}")
  if batch_size is not None and key is None:
    raise ValueError("a stochastic run (batch_size set) needs a key")
  from minmaxlab.transforms import game_step, lookahead_slow_params  # noqa: PLC0415

  tx = optax.with_extra_args_support(tx)
  vf = make_vector_field(game.loss)
  if batch_size is None:
    field_at = lambda p, i: vf(p)
  else:  # evaluation i of a step gets its minibatch from key_i = fold_in(step_key, i)
    field_at = lambda p, key_i: vf(p, game.sample(key_i, batch_size))

  def measured(p, state):
    q = lookahead_slow_params(state) if point == "slow" else p
    return game.distance(q), (q if keep_iterates else None)

  def body(carry, step_key):
    p, state = carry
    batch_key = None if batch_size is None else step_key
    p, state, _ = game_step(tx, field_at, p, state, key=batch_key)
    return (p, state), measured(p, state)

  state = tx.init(params)
  keys = jax.random.split(jax.random.key(0) if key is None else key, num_steps)
  (p_final, s_final), (dists, its) = jax.lax.scan(body, (params, state), keys)
  d0, it0 = measured(params, state)
  dists = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), d0, dists)
  if keep_iterates:
    its = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), it0, its)
  return Trajectory(distances=dists, passes=None, params=p_final, opt_state=s_final, iterates=its)


def run_game(
  tx: optax.GradientTransformation,
  game: Any,
  params: Players,
  num_steps: int,
  *,
  key: jax.Array | None = None,
  batch_size: int | None = None,
  point: str = "params",
  keep_iterates: bool = False,
) -> Trajectory:
  r"""Run ``tx`` on ``game`` for ``num_steps`` full steps under ``lax.scan``.

  Each step is :func:`minmaxlab.game_step`: the field at the current point is
  the ``updates`` argument, further evaluations come from ``vector_field(p, i)``,
  and after a Lookahead sync the params are the slow weights exactly. For a
  stochastic game (one with ``sample(key, B)`` and ``loss(params, indices)``,
  e.g. ``games.stochastic_bilinear``) every field evaluation draws its own
  minibatch of ``batch_size`` components with
  ``fold_in(step_key, i)`` (``i`` the evaluation's number inside the step);
  ``batch_size=None`` uses the full batch.

  Passes: :func:`field_evaluations_per_step` times the step number, e.g.
  extragradient counts **2** field evaluations per step and
  ``alternating(max_steps=n)`` counts ``n + 1``; plot distances against
  ``passes`` to compare methods at equal cost.

  Args:
    tx: the game optimizer (any optax transform over ``Players``).
    game: a game with ``loss`` and ``distance`` (``minmaxlab.games``).
    params: the start point.
    num_steps: ``T``.
    key: PRNG key for the minibatches (required when ``batch_size`` is set).
    batch_size: minibatch size for a stochastic game (``None`` = full batch).
    point: ``"params"`` measures the iterate; ``"slow"`` the lookahead slow
      weights (``minmaxlab.lookahead_slow_params``).
    keep_iterates: also return every iterate (for phase portraits).

  Returns:
    A :class:`Trajectory`. Jit- and vmap-compatible (see :func:`run_games`).
  """
  if batch_size is not None and key is None:
    raise ValueError("a stochastic run (batch_size set) needs a key")
  key = jax.random.key(0) if key is None else key
  out = _compiled_run(tx, num_steps, batch_size, point, keep_iterates, None)(game, params, key)
  per_step = field_evaluations_per_step(tx, make_vector_field(game.loss), params)
  return out._replace(passes=jnp.arange(num_steps + 1, dtype=jnp.int32) * per_step)


def run_games(
  tx: optax.GradientTransformation,
  games: Any,
  params: Players,
  num_steps: int,
  *,
  keys: jax.Array | None = None,
  batch_size: int | None = None,
  point: str = "params",
  keep_iterates: bool = False,
  game_axis: int | None = 0,
) -> Trajectory:
  """:func:`run_game` for several seeds at once, under ``jax.vmap`` and ``jit``.

  Args:
    tx: the game optimizer.
    games: a batch of games with a leading seed axis (games are NamedTuples of
      arrays), or one game for every seed with ``game_axis=None``.
    params: start points with a leading seed axis.
    num_steps: ``T``.
    keys: one key per seed (required with ``batch_size``).
    batch_size, point, keep_iterates: as in :func:`run_game`.
    game_axis: ``0`` (one game per seed) or ``None`` (shared game).

  Returns:
    A :class:`Trajectory` whose arrays have a leading seed axis (``passes``
    is shared: shape ``(T + 1,)``).
  """
  num_seeds = jax.tree.leaves(params)[0].shape[0]
  if keys is None:
    keys = jax.random.split(jax.random.key(0), num_seeds)

  run = _compiled_run(tx, num_steps, batch_size, point, keep_iterates, (game_axis,))
  out = run(games, params, keys)
  per_step = field_evaluations_per_step(
    tx, make_vector_field(_first(games, game_axis).loss), _first(params, 0)
  )
  return out._replace(passes=jnp.arange(num_steps + 1, dtype=jnp.int32) * per_step)


@functools.lru_cache(maxsize=64)
def _compiled_run(tx, num_steps, batch_size, point, keep_iterates, vmap_axes):
  """Jitted (and with ``vmap_axes`` vmapped) run, cached so that repeated runs
  of the same transform (seeds, games of the same shapes) compile once."""

  def one(game, p, k):
    return _run(tx, game, p, num_steps, k, batch_size, point, keep_iterates)

  if vmap_axes is not None:
    one = jax.vmap(one, in_axes=(vmap_axes[0], 0, 0))
  return jax.jit(one)


def _first(tree, axis):
  if axis is None:
    return tree
  return jax.tree.map(lambda a: a[0], tree)
