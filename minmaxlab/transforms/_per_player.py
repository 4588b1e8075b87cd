"""Different optimizers for the two players."""

from __future__ import annotations

from typing import Any, NamedTuple

import optax

from minmaxlab.games import Players, check_players
from minmaxlab.transforms._common import (
  PerPlayerTransformation,
  PlayerTransforms,
  as_transform,
)


class PerPlayerState(NamedTuple):
  """State of :func:`per_player`: each player's own optimizer state."""

  min: Any
  max: Any


def per_player(
  min: optax.GradientTransformation,
  max: optax.GradientTransformation,  # noqa: A002
) -> PerPlayerTransformation:
  r"""Apply ``min`` to the min player's field and ``max`` to the max player's.

  Simultaneous GDA with different optimizers (e.g. TTUR learning rates):

  .. math::
    u = (T_{\min}(v_{\min}),\ T_{\max}(v_{\max}))

  Each player has its own state. Any optax transform used directly on a
  :class:`Players` field is already simultaneous GDA; use this when the players
  need different transforms. ``alternating`` and the other schemes recognise a
  ``per_player`` inner and step each player with its own transform.

  Example:
    >>> tx = per_player(min=optax.adam(1e-4), max=optax.adam(4e-4))

  Args:
    min: transform of the minimising player.
    max: transform of the maximising player.

  Returns:
    A :class:`PerPlayerTransformation` (an ``optax.GradientTransformationExtraArgs``
    over ``Players`` trees whose ``players`` field holds the two transforms).
  """
  parts = PlayerTransforms(as_transform(min, "min"), as_transform(max, "max"))

  def init_fn(params):
    params = check_players(params)
    return PerPlayerState(parts.min.init(params.min), parts.max.init(params.max))

  def update_fn(updates, state, params=None, **extra_args):
    updates = check_players(updates, "per_player: updates")
    p_min = p_max = None
    if params is not None:
      p_min, p_max = check_players(params)
    u_min, s_min = parts.min.update(updates.min, state.min, p_min, **extra_args)
    u_max, s_max = parts.max.update(updates.max, state.max, p_max, **extra_args)
    return Players(u_min, u_max), PerPlayerState(s_min, s_max)

  return PerPlayerTransformation(init_fn, update_fn, parts)
