"""Optimistic GDA and optimistic Adam."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from minmaxlab.transforms._common import as_transform, check_updates, zeros_count


class OptimisticState(NamedTuple):
  """State of :func:`optimistic`.

  Attributes:
    count: full game steps taken (int32).
    previous: the inner transform's previous output :math:`u_{t-1}`.
    inner_state: the inner transform's state.
  """

  count: jax.Array
  previous: Any
  inner_state: Any


def optimistic(inner: optax.GradientTransformation) -> optax.GradientTransformationExtraArgs:
  r"""Optimistic gradient descent-ascent over any inner transform.

  With :math:`u_t = T(v(z_t))` the inner transform's output,

  .. math::
    z_{t+1} = z_t + 2 u_t - u_{t-1},

  the first step being plain (:math:`u_{-1} = u_0`). With ``optax.sgd(eta)``
  this is OGDA, :math:`z_{t+1} = z_t - 2\eta v(z_t) + \eta v(z_{t-1})`
  (optax's ``optimistic_gradient_descent(eta)`` after its first step); with
  ``optax.adam`` it is Optimistic Adam (Daskalakis et al., 2018), which
  applies the optimism to the Adam direction. One field evaluation per step;
  no ``vector_field`` needed.

  Args:
    inner: the optax transform (``per_player`` for different ones).

  Returns:
    An ``optax.GradientTransformationExtraArgs``.

  References:
    Daskalakis et al., 2018, "Training GANs with Optimism",
    https://arxiv.org/abs/1711.00141 ; Mokhtari et al., 2020,
    https://arxiv.org/abs/1901.08511
  """
  inner = as_transform(inner)

  def init_fn(params):
    return OptimisticState(
      count=zeros_count(), previous=optax.tree.zeros_like(params), inner_state=inner.init(params)
    )

  def update_fn(updates, state, params=None, **extra_args):
    check_updates(updates, "optimistic")
    u, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
    first = state.count == 0
    out = jax.tree.map(lambda now, prev: 2 * now - jnp.where(first, now, prev), u, state.previous)
    return out, OptimisticState(
      count=optax.safe_int32_increment(state.count), previous=u, inner_state=inner_state
    )

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)
