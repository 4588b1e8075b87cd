"""Extragradient (EG) and Extra-Adam."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import optax

from minmaxlab.transforms._common import (
  FieldFn,
  as_transform,
  check_first_field,
  check_updates,
  require_params,
  require_vector_field,
  zeros_count,
)


class ExtragradientState(NamedTuple):
  """State of :func:`extragradient`.

  Attributes:
    count: full game steps taken (int32).
    extrapolation_state: inner state of the extrapolation step
      (``optax.EmptyState()`` when ``shared_state=True``).
    update_state: inner state of the update step (the only inner state, used by
      both steps in turn, when ``shared_state=True``).
  """

  count: jax.Array
  extrapolation_state: Any
  update_state: Any


def extragradient(
  inner: optax.GradientTransformation, shared_state: bool = False
) -> optax.GradientTransformationExtraArgs:
  r"""Extragradient: extrapolate both players, then update from the start point.

  .. math::
    z_{t+1/2} = z_t + T_e(v(z_t)), \qquad z_{t+1} = z_t + T_u(v(z_{t+1/2})),

  where both players extrapolate from the same point :math:`z_t` and both
  update from :math:`z_t` with the field at the extrapolated point (textbook
  EG; with ``optax.sgd(eta)`` this is Korpelevich's method, with Adam it is
  Extra-Adam of Gidel et al.). ``v(z_t)`` is the ``updates`` argument;
  ``v(z_{t+1/2})`` comes from the keyword-only ``vector_field(params, 1)``.
  One call costs two field evaluations.

  Gradient processing (clipping, ...) belongs INSIDE: in
  ``extragradient(optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3)))``
  both fields pass through the clip. Chained in front,
  ``optax.chain(clip, extragradient(adam))`` would clip only the first field;
  :func:`minmaxlab.game_step` detects that composition and raises (see the
  composition rule in docs/game-optimizers.md, and :func:`minmaxlab.with_field_processing`).

  By default :math:`T_e` and :math:`T_u` are two copies of ``inner`` with
  separate states (as in the reference GAN code, whose extrapolation Adam
  moments persist separately); ``shared_state=True`` uses one state advanced
  by both steps in turn (as in the reference bilinear notebooks).

  Note: the reference GAN trainer takes each player's update gradient at its
  own current point and the opponent's extrapolated point; this equals the
  rule above whenever a player's gradient does not depend on its own
  parameters (bilinear games), not in general.

  Args:
    inner: the optax transform of both steps (a ``per_player`` for different
      transforms per player).
    shared_state: share one inner state between extrapolation and update.

  Returns:
    An ``optax.GradientTransformationExtraArgs``; ``update`` requires
    ``params`` and ``vector_field``.

  References:
    Korpelevich, 1976; Gidel et al., 2019, "A Variational Inequality
    Perspective on Generative Adversarial Networks",
    https://arxiv.org/abs/1802.10551
  """
  inner = as_transform(inner)
  shared_state = bool(shared_state)

  def init_fn(params):
    params = require_params(params, "extragradient")
    update_state = inner.init(params)
    extrapolation_state = optax.EmptyState() if shared_state else inner.init(params)
    return ExtragradientState(zeros_count(), extrapolation_state, update_state)

  def update_fn(updates, state, params=None, *, vector_field=None, **extra_args):
    updates = check_updates(updates, "extragradient")
    params = require_params(params, "extragradient")
    vector_field = require_vector_field(vector_field, "extragradient")
    check_first_field(updates, vector_field, "extragradient")
    extra = dict(extra_args, vector_field=FieldFn(vector_field.fn))
    ex_state = state.update_state if shared_state else state.extrapolation_state
    u_half, ex_state = inner.update(updates, ex_state, params, **extra)
    half = optax.apply_updates(params, u_half)
    up_state = ex_state if shared_state else state.update_state
    u, up_state = inner.update(vector_field(half, 1), up_state, params, **extra)
    return u, ExtragradientState(
      optax.safe_int32_increment(state.count),
      optax.EmptyState() if shared_state else ex_state,
      up_state,
    )

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)
