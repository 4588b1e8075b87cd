"""Extragradient (EG) and Extra-Adam."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, get_args

import jax
import optax

from minmaxlab.games import Players
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
    last_iterate: the params this scheme produced at its last step (``params +
      update``), which the next extrapolation starts from with
      ``extrapolate_from="last_iterate"``; ``None`` otherwise.
  """

  count: jax.Array
  extrapolation_state: Any
  update_state: Any
  last_iterate: Any = None


UpdatePoint = Literal["extrapolated", "opponent_extrapolated"]
ExtrapolateFrom = Literal["params", "last_iterate"]
UPDATE_POINTS = get_args(UpdatePoint)
EXTRAPOLATE_FROM = get_args(ExtrapolateFrom)


def extragradient(
  inner: optax.GradientTransformation,
  shared_state: bool = False,
  update_point: UpdatePoint = "extrapolated",
  extrapolate_from: ExtrapolateFrom = "params",
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

  ``update_point="opponent_extrapolated"`` is the reference GAN code's rule
  (``lagan/trainer.py`` and the MNIST notebook of LAGAN-Lookahead_Minimax): each
  player's update field is taken at its OWN current point and the opponent's
  extrapolated point, :math:`x_{t+1} = x_t + T_u(v_{\min}(x_t, y_{t+1/2}))`,
  :math:`y_{t+1} = y_t + T_u(v_{\max}(x_{t+1/2}, y_t))` (two evaluations of
  ``vector_field(., 1)``, one per player's half; under ``jit`` XLA drops the
  unused halves). It equals the textbook rule whenever a player's field does not
  depend on its own parameters (bilinear games), not in general (GANs);
  ``tests/parity/test_lagan_golden.py`` checks it against the reference's output.

  Args:
    inner: the optax transform of both steps (a ``per_player`` for different
      transforms per player).
    shared_state: share one inner state between extrapolation and update.
    update_point: ``"extrapolated"`` (textbook EG: the update's field at
      :math:`z_{t+1/2}`) or ``"opponent_extrapolated"`` (the reference GAN code's).
    extrapolate_from: ``"params"`` (the extrapolation starts from :math:`z_t`) or
      ``"last_iterate"``: from the iterate this scheme itself produced at its last
      step, which differs from the params only where an outer transform moved them
      (a Lookahead sync). This reproduces the reference MNIST notebook's
      LA-ExtraGrad, which copies its weights into the extrapolation networks
      BEFORE the Lookahead sync: on the step after a sync each player extrapolates
      from its pre-sync fast weights :math:`a`, with the field at its own
      :math:`a` and the opponent's current params (two more field evaluations per
      step, ``vector_field(., 0)``), while the update starts from the synced params.

  Returns:
    An ``optax.GradientTransformationExtraArgs``; ``update`` requires
    ``params`` and ``vector_field``.

  References:
    Korpelevich, 1976; Gidel et al., 2019, "A Variational Inequality
    Perspective on Generative Adversarial Networks",
    https://arxiv.org/abs/1802.10551
  """
  inner = as_transform(inner)
  config = _config(shared_state, update_point, extrapolate_from)

  def init_fn(params):
    return _init(inner, config, params)

  def update_fn(updates, state, params=None, *, vector_field=None, **extra_args):
    return _update(inner, config, updates, state, params, vector_field, extra_args)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


class _Config(NamedTuple):
  shared_state: bool
  update_point: UpdatePoint
  from_last: bool


def _config(shared_state, update_point, extrapolate_from) -> _Config:
  if update_point not in UPDATE_POINTS:
    raise ValueError(f"update_point must be one of {UPDATE_POINTS}, got {update_point!r}")
  if extrapolate_from not in EXTRAPOLATE_FROM:
    raise ValueError(
      f"extrapolate_from must be one of {EXTRAPOLATE_FROM}, got {extrapolate_from!r}"
    )
  return _Config(
    shared_state=bool(shared_state),
    update_point=update_point,
    from_last=extrapolate_from == "last_iterate",
  )


def _init(inner, config: _Config, params) -> ExtragradientState:
  params = require_params(params, "extragradient")
  update_state = inner.init(params)
  extrapolation_state = optax.EmptyState() if config.shared_state else inner.init(params)
  return ExtragradientState(
    count=zeros_count(),
    extrapolation_state=extrapolation_state,
    update_state=update_state,
    last_iterate=params if config.from_last else None,
  )


def _update(inner, config, updates, state, params, vector_field, extra_args):
  """One EG step: the extrapolation, then the update from ``params``."""
  updates = check_updates(updates, "extragradient")
  params = require_params(params, "extragradient")
  vector_field = require_vector_field(vector_field, "extragradient")
  check_first_field(updates, vector_field, "extragradient")
  extra = dict(extra_args, vector_field=FieldFn(vector_field.fn))
  shared = config.shared_state
  ex_state = state.update_state if shared else state.extrapolation_state
  start, first = params, updates
  if config.from_last:
    start = state.last_iterate
    first = _mixed_field(vector_field, start, params, 0)
  u_half, ex_state = inner.update(first, ex_state, start, **extra)
  half = optax.apply_updates(start, u_half)
  up_state = ex_state if shared else state.update_state
  field = _update_field(vector_field, params, half, config.update_point)
  u, up_state = inner.update(field, up_state, params, **extra)
  return u, ExtragradientState(
    count=optax.safe_int32_increment(state.count),
    extrapolation_state=optax.EmptyState() if shared else ex_state,
    update_state=up_state,
    last_iterate=optax.apply_updates(params, u) if config.from_last else None,
  )


def _update_field(vector_field, params, half, update_point):
  """The field of the update step: at the extrapolated point, or (the reference GAN code)
  each player's half at its own current point and the opponent's extrapolated one."""
  if update_point == "extrapolated":
    return vector_field(half, 1)
  return _mixed_field(vector_field, params, half, 1)


def _mixed_field(vector_field, own, opponent, i):
  """Each player's half of the field at its ``own`` point and the ``opponent``'s point."""
  v_min = vector_field(Players(own.min, opponent.max), i).min
  v_max = vector_field(Players(opponent.min, own.max), i).max
  return Players(v_min, v_max)
