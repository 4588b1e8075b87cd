"""Alternating gradient descent-ascent (AltGDA / AltGAN)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import optax

from minmaxlab.games import NotPlayersError, Players
from minmaxlab.transforms._common import (
  as_transform,
  check_first_field,
  check_int_at_least,
  check_updates,
  require_params,
  require_vector_field,
  tree_add,
  zeros_count,
)
from minmaxlab.transforms._per_player import init_players, is_per_player, update_player


class AlternatingState(NamedTuple):
  """State of :func:`alternating`.

  Attributes:
    count: full game steps taken (int32).
    inner_state: ``Players`` of each player's own inner state (the max player's
      advanced ``max_steps`` times per full step).
  """

  count: jax.Array
  inner_state: Players


def alternating(
  inner: optax.GradientTransformation, max_steps: int = 1
) -> optax.GradientTransformationExtraArgs:
  r"""Alternating GDA: the max player steps first, then the min player.

  One call of ``update`` is one full game step (AltGAN order: the
  discriminator/max player takes ``max_steps`` steps, then the
  generator/min player takes one step at the max player's NEW parameters):

  .. math::
    y_{j+1} = y_j + T_{\max}(v_{\max}(x_t, y_j)), \quad j = 0..n-1, \qquad
    x_{t+1} = x_t + T_{\min}(v_{\min}(x_t, y_n)),

  with :math:`y_0 = y_t`, :math:`y_{t+1} = y_n`, ``n = max_steps``. The field
  at ``(x_t, y_0)`` is the ``updates`` argument; the field at every later point
  comes from the keyword-only ``vector_field(params, i)`` argument of
  ``update``, with ``i = j`` for the max player's step ``j >= 1`` and
  ``i = max_steps`` for the min player's step, so a caller can draw a fresh
  minibatch for every evaluation (as the reference AltGAN code does). Under
  ``jit`` the unused half of every field evaluation is removed by XLA.

  Each player keeps its own inner state; with a :func:`per_player` inner each
  player uses its own transform.

  Processing inside ``inner`` is PER PLAYER: each player's step passes only its
  own half of the field through ``inner``, so in
  ``alternating(optax.chain(optax.clip_by_global_norm(c), sgd))`` each player's
  field is clipped to norm ``c`` separately (the joint norm can reach
  ``sqrt(2) c``). To clip JOINTLY (the norm of both players' fields at each
  evaluation point, as GDA's ``chain(clip_by_global_norm(c), sgd)`` does), wrap
  the scheme: ``minmaxlab.with_field_processing(alternating(sgd),
  optax.clip_by_global_norm(c))`` (then both halves of every field are needed,
  so XLA no longer drops the unused one). Processing chained in front,
  ``optax.chain(clip, alternating(sgd))``, would reach only the first field and
  is refused by :func:`minmaxlab.game_step`. A :func:`per_player` must be the
  whole ``inner`` (put each player's processing into its part:
  ``per_player(min=chain(clip, a), max=chain(clip, b))``), since ``alternating``
  hands each part a single player's tree.

  Example:
    >>> tx = alternating(optax.sgd(0.1), max_steps=5)
    >>> state = tx.init(params)
    >>> u, state = tx.update(field(params, batches[0]), state, params,
    ...                      vector_field=lambda p, i: field(p, batches[i]))
    >>> # or, field, update and apply in one call:
    >>> params, state, _ = minmaxlab.game_step(
    ...     tx, lambda p, i: field(p, batches[i]), params, state)

  Args:
    inner: the optax transform of each player (or a ``per_player``).
    max_steps: max-player steps per full game step (``>= 1``).

  Returns:
    An ``optax.GradientTransformationExtraArgs``; ``update`` requires
    ``params`` and ``vector_field``.

  References:
    Goodfellow et al., 2014, https://arxiv.org/abs/1406.2661 ; Gidel et al.,
    2019, https://arxiv.org/abs/1807.04740
  """
  check_int_at_least("max_steps", max_steps, 1)
  max_steps = int(max_steps)
  inner = as_transform(inner)

  def init_fn(params):
    return _init(inner, params)

  def update_fn(updates, state, params=None, *, vector_field=None, **extra_args):
    return _update(inner, max_steps, updates, state, params, vector_field, extra_args)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _init(inner, params) -> AlternatingState:
  params = require_params(params, "alternating")
  try:
    inner_state = init_players(inner, params)
  except NotPlayersError as err:
    if is_per_player(inner, params):
      raise
    raise ValueError(
      "alternating steps one player at a time, so it calls inner with a single"
      f" player's params ({type(params.min).__name__}), but inner needs a Players"
      " tree: it contains a per_player (or another two-player transform) inside an"
      " optax.chain. Make the per_player the whole inner, with each player's"
      " processing in its part: alternating(per_player(min=optax.chain(clip,"
      " tx_min), max=optax.chain(clip, tx_max))); to clip jointly use"
      " minmaxlab.with_field_processing(alternating(...), clip)"
    ) from err
  return AlternatingState(zeros_count(), inner_state)


def _update(inner, max_steps, updates, state, params, vector_field, extra_args):
  """One game step: ``max_steps`` max-player steps, then the min player's at the new ``y``."""
  updates = check_updates(updates, "alternating")
  params = require_params(params, "alternating")
  vector_field = require_vector_field(vector_field, "alternating")
  check_first_field(updates, vector_field, "alternating")
  s_min, s_max = state.inner_state
  y, total_max, field = params.max, None, updates
  for j in range(max_steps):
    if j > 0:
      field = vector_field(Players(params.min, y), j)
    at = Players(params.min, y)
    u, s_max = update_player(inner, "max", field, Players(s_min, s_max), at, **extra_args)
    y = optax.apply_updates(y, u)
    total_max = u if total_max is None else tree_add(total_max, u)
  field = vector_field(Players(params.min, y), max_steps)
  at = Players(params.min, y)
  u_min, s_min = update_player(inner, "min", field, Players(s_min, s_max), at, **extra_args)
  new_state = AlternatingState(optax.safe_int32_increment(state.count), Players(s_min, s_max))
  return Players(u_min, total_max), new_state
