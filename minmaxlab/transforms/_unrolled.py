"""Unrolled GAN (Metz et al., 2017): the min player differentiates through k max-player steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import optax

from minmaxlab.games import Players, split_losses, vector_field
from minmaxlab.transforms._common import (
  as_transform,
  check_int_at_least,
  check_updates,
  require_params,
  zeros_count,
)
from minmaxlab.transforms._per_player import init_players, update_player, update_players

# ``loss_fn(params, i) -> f`` (zero-sum) or ``(loss_min, loss_max)``: the game's losses at
# ``params`` on the ``i``-th minibatch of the step (the ``vector_field(params, i)`` convention).
LossFn = Callable[[Players, int], Any]


class UnrolledState(NamedTuple):
  """State of :func:`unrolled`.

  Attributes:
    count: full game steps taken (int32).
    inner_state: ``Players`` of each player's own inner state.
  """

  count: jax.Array
  inner_state: Players


def _require_loss_fn(loss_fn: Any) -> LossFn:
  if loss_fn is None:
    raise ValueError(
      "unrolled differentiates the min player's loss through the max player's steps: call"
      " update(updates, state, params, loss_fn=fn) with fn(params, i) -> f or"
      " (loss_min, loss_max); got loss_fn=None"
    )
  if not callable(loss_fn):
    raise ValueError(f"loss_fn must be callable, got {loss_fn!r}")
  return loss_fn


def _loss_min(out: Any) -> jax.Array:
  pair = split_losses(out, has_aux=False)
  return out if pair is None else pair[0]


def unrolled(
  inner: optax.GradientTransformation,
  unroll_steps: int = 5,
  differentiate_through_unroll: bool = True,
  unroll_optimizer: optax.GradientTransformation | None = None,
) -> optax.GradientTransformationExtraArgs:
  r"""Unrolled GAN: the min player descends its loss after k simulated max-player steps.

  With :math:`z_t = (x_t, y_t)`, the max player's simulated steps (from its
  current optimizer state :math:`s_t`, which they do not change)

  .. math::
    y^0 = y_t, \qquad (u^j, s^{j+1}) = T_{\max}(\nabla_y \ell_{\max}(x, y^j), s^j),
    \qquad y^{j+1} = y^j + u^j, \quad j = 0..k-1,

  define :math:`y^k(x)`, a differentiable function of the min player's
  parameters. One call of ``update`` is one simultaneous step

  .. math::
    x_{t+1} = x_t + T_{\min}\Big(\tfrac{d}{dx}\,\ell_{\min}(x, y^k(x))\Big|_{x_t}\Big),
    \qquad y_{t+1} = y_t + T_{\max}(\nabla_y \ell_{\max}(x_t, y_t)),

  so only the min player looks ahead; the max player takes its ordinary step
  (the ``updates`` argument's max part) and its real optimizer state
  advances once. With ``unroll_steps=0`` this is simultaneous GDA. The total
  derivative includes the term through :math:`y^k(x)` (backpropagation
  through the k steps, including the inner optimizer's arithmetic);
  ``differentiate_through_unroll=False`` drops it (the min player then simply
  steps against the look-ahead opponent :math:`y^k`).

  The losses come from the keyword-only ``loss_fn(params, i)`` of ``update``
  (not from a field: the min player's loss must be differentiated through the
  max player's steps): ``i = j`` for simulated step ``j`` (``i = 0`` is the
  minibatch of ``updates``) and ``i = unroll_steps`` for the min player's
  loss at the unrolled point, ``unroll_steps + 1`` minibatches per step. Pass
  the same minibatch for every ``i`` to unroll on one batch as Metz et al.'s
  code does. ``loss_fn`` returns a zero-sum scalar ``f`` or ``(loss_min,
  loss_max)`` (as :func:`minmaxlab.value_and_vector_field`).

  Differentiating through Adam: ``optax.adam`` takes :math:`\sqrt{\hat v}`,
  whose derivative is infinite where a coordinate's gradient is exactly 0;
  use ``optax.adam(..., eps_root=1e-8)`` for the unrolled optimizer (the
  optax option meant for this).

  Example:
    >>> tx = unrolled(optax.adam(2e-4, b1=0.5, eps_root=1e-8), unroll_steps=5)
    >>> state = tx.init(params)
    >>> u, state = tx.update(field(params, batches[0]), state, params,
    ...                      loss_fn=lambda p, i: game_loss(p, batches[i]))

  Args:
    inner: the optax transform of each player (or a ``per_player``); the
      max player's part also makes the simulated steps.
    unroll_steps: k, simulated max-player steps (``>= 0``).
    differentiate_through_unroll: include the derivative through
      :math:`y^k(x)` (Metz et al.'s unrolled GAN) or treat :math:`y^k` as a
      constant.
    unroll_optimizer: a different transform for the simulated steps (its
      state starts fresh from ``init`` at every call); ``None``: the max
      player's own transform, continuing from its current state.

  Returns:
    An ``optax.GradientTransformationExtraArgs``; ``update`` requires
    ``params`` and ``loss_fn``.

  References:
    Metz et al., 2017, "Unrolled Generative Adversarial Networks",
    https://arxiv.org/abs/1611.02163
  """
  settings = _settings(inner, unroll_steps, differentiate_through_unroll, unroll_optimizer)

  def init_fn(params):
    return _init(settings.inner, params)

  def update_fn(updates, state, params=None, *, loss_fn=None, **extra_args):
    return _update(settings, updates, state, params, loss_fn, extra_args)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


class _Settings(NamedTuple):
  inner: Any  # each player's transform (or a per_player)
  simulate: Any  # the unroll optimizer, or None: the max player's own
  unroll_steps: int
  differentiate_through_unroll: bool


def _settings(inner, unroll_steps, differentiate_through_unroll, unroll_optimizer) -> _Settings:
  check_int_at_least("unroll_steps", unroll_steps, 0)
  inner = as_transform(inner)
  simulate = (
    None if unroll_optimizer is None else as_transform(unroll_optimizer, "unroll_optimizer")
  )
  return _Settings(
    inner=inner,
    simulate=simulate,
    unroll_steps=int(unroll_steps),
    differentiate_through_unroll=bool(differentiate_through_unroll),
  )


def _init(inner, params) -> UnrolledState:
  params = require_params(params, "unrolled")
  return UnrolledState(zeros_count(), init_players(inner, params))


def _update(settings: _Settings, updates, state, params, loss_fn, extra_args):
  """One step: the min player's total derivative through the simulated max-player steps,
  the max player's ordinary step."""
  inner, simulate, unroll_steps, differentiate_through_unroll = settings
  updates = check_updates(updates, "unrolled")
  params = require_params(params, "unrolled")
  loss_fn = _require_loss_fn(loss_fn)
  s_min, s_max = state.inner_state
  sim_state0 = s_max if simulate is None else simulate.init(params.max)

  def simulated(field, sim_state, x, y):
    if simulate is None:  # the max player's own transform
      return update_player(inner, "max", field, Players(s_min, sim_state), Players(x, y))
    return simulate.update(field.max, sim_state, y)

  def unrolled_loss(x):
    y, sim_state = params.max, sim_state0
    for j in range(unroll_steps):
      field = vector_field(lambda p, j=j: loss_fn(p, j))(Players(x, y))
      u, sim_state = simulated(field, sim_state, x, y)
      y = optax.apply_updates(y, u)
    if not differentiate_through_unroll:
      y = jax.lax.stop_gradient(y)
    return _loss_min(loss_fn(Players(x, y), unroll_steps))

  grad_min = jax.grad(unrolled_loss)(params.min)
  field = Players(grad_min, updates.max)
  u, states = update_players(inner, field, state.inner_state, params, **extra_args)
  return u, UnrolledState(optax.safe_int32_increment(state.count), states)
