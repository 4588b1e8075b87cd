"""Different optimizers for the two players."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import optax

from minmaxlab.games import Players, check_players
from minmaxlab.transforms._common import as_transform


class PerPlayerState(NamedTuple):
  """State of :func:`per_player`: each player's own optimizer state."""

  min: Any
  max: Any


def per_player(
  min: optax.GradientTransformation,
  max: optax.GradientTransformation,  # noqa: A002
) -> optax.GradientTransformationExtraArgs:
  r"""Apply ``min`` to the min player's field and ``max`` to the max player's.

  Simultaneous GDA with different optimizers (e.g. TTUR learning rates):

  .. math::
    u = (T_{\min}(v_{\min}),\ T_{\max}(v_{\max}))

  Each player has its own state. Any optax transform used directly on a
  :class:`Players` field is already simultaneous GDA; use this when the players
  need different transforms. ``alternating`` and ``unrolled`` recognise a
  ``per_player`` inner by its state (a :class:`PerPlayerState`) and step each
  player with its own transform.

  Example:
    >>> tx = per_player(min=optax.adam(1e-4), max=optax.adam(4e-4))

  Args:
    min: transform of the minimising player.
    max: transform of the maximising player.

  Returns:
    An ``optax.GradientTransformationExtraArgs`` over ``Players`` trees with a
    :class:`PerPlayerState`.
  """
  t_min, t_max = as_transform(min, "min"), as_transform(max, "max")

  def init_fn(params):
    params = check_players(params)
    return PerPlayerState(t_min.init(params.min), t_max.init(params.max))

  def update_fn(updates, state, params=None, **extra_args):
    updates = check_players(updates, "per_player: updates")
    p_min = p_max = None
    if params is not None:
      p_min, p_max = check_players(params)
    u_min, s_min = t_min.update(updates.min, state.min, p_min, **extra_args)
    u_max, s_max = t_max.update(updates.max, state.max, p_max, **extra_args)
    return Players(u_min, u_max), PerPlayerState(s_min, s_max)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def is_per_player(inner: optax.GradientTransformation, params: Players) -> bool:
  """Whether ``inner`` is a :func:`per_player`: its state over ``params`` is a
  :class:`PerPlayerState` (read off at trace time; nothing is computed)."""
  return isinstance(jax.eval_shape(inner.init, params), PerPlayerState)


def init_players(inner: optax.GradientTransformation, params: Players) -> Players:
  """Each player's own state: a :func:`per_player`'s two, else ``inner``'s state
  of each player's params."""
  if is_per_player(inner, params):
    state = inner.init(params)
    return Players(state.min, state.max)
  return Players(inner.init(params.min), inner.init(params.max))


def update_player(
  inner: optax.GradientTransformationExtraArgs,
  side: str,
  field: Players,
  states: Players,
  params: Players,
  **extra_args: Any,
) -> tuple[Any, Any]:
  """One player's (``side``: ``"min"`` or ``"max"``) update and new state from its half
  of ``field``. A :func:`per_player` is updated whole and the other player's half dropped
  (under ``jit`` XLA removes it), so each player runs its own transform."""
  if is_per_player(inner, params):
    u, state = inner.update(field, PerPlayerState(*states), params, **extra_args)
    return getattr(u, side), getattr(state, side)
  half = lambda tree: getattr(tree, side)  # noqa: E731
  return inner.update(half(field), half(states), half(params), **extra_args)


def update_players(
  inner: optax.GradientTransformationExtraArgs,
  field: Players,
  states: Players,
  params: Players,
  **extra_args: Any,
) -> tuple[Players, Players]:
  """Both players' updates and new states, each from its own half of ``field``."""
  if is_per_player(inner, params):
    u, state = inner.update(field, PerPlayerState(*states), params, **extra_args)
    return u, Players(state.min, state.max)
  u_min, s_min = inner.update(field.min, states.min, params.min, **extra_args)
  u_max, s_max = inner.update(field.max, states.max, params.max, **extra_args)
  return Players(u_min, u_max), Players(s_min, s_max)
