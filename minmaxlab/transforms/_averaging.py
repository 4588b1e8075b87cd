"""Averages of iterates for evaluation: EMA, uniform, and EMA of the slow weights."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from minmaxlab.games import Players
from minmaxlab.transforms._common import (
  as_transform,
  check_in,
  check_int_at_least,
  require_params,
  tree_where,
  zeros_count,
)
from minmaxlab.transforms._lookahead import LookaheadMinmaxState, _find_states


class AveragingState(NamedTuple):
  """State of the averaging wrappers.

  Attributes:
    count: full game steps taken (int32).
    num_averaged: how many points the average holds (int32; uniform/slow).
    average: the running average (``Players``), initialised at the params.
    inner_state: the wrapped transform's state.
  """

  count: jax.Array
  num_averaged: jax.Array
  average: Players
  inner_state: Any


def _wrapper(inner, combine):
  """An optax wrapper that folds the new iterate into a running average."""
  inner = as_transform(inner)

  def init_fn(params):
    params = require_params(params, "averaging")
    return AveragingState(
      count=zeros_count(),
      num_averaged=jnp.ones([], jnp.int32),
      average=params,
      inner_state=inner.init(params),
    )

  def update_fn(updates, state, params=None, **extra_args):
    params = require_params(params, "averaging")
    u, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
    new_params = optax.apply_updates(params, u)
    average, num = combine(state, new_params, inner_state)
    count = optax.safe_int32_increment(state.count)
    return u, AveragingState(
      count=count, num_averaged=num, average=average, inner_state=inner_state
    )

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _ema(average, point, decay):
  return jax.tree.map(lambda a, p: decay * a + (1 - decay) * p, average, point)


def ema(inner: optax.GradientTransformation, decay: float = 0.999):
  r"""Exponential moving average of the iterates, for evaluation.

  .. math:: \bar z_{t+1} = \beta \bar z_t + (1 - \beta) z_{t+1}, \quad \bar z_0 = z_0,

  taken after every full step of ``inner`` (after a lookahead sync when
  ``inner`` is a lookahead). The updates are those of ``inner``, unchanged;
  read the average with :func:`averaged_params`.

  Args:
    inner: the transform whose iterates are averaged.
    decay: :math:`\beta \in [0, 1)` (the reference GAN code uses 0.9999).

  References:
    Yazici et al., 2019, "The Unusual Effectiveness of Averaging in GAN
    Training", https://arxiv.org/abs/1806.04498
  """
  check_in("decay", decay, lambda d: 0.0 <= float(d) < 1.0, "in [0, 1)")

  def combine(state, new_params, inner_state):
    return _ema(state.average, new_params, decay), state.num_averaged + 1

  return _wrapper(inner, combine)


def uniform(inner: optax.GradientTransformation, start_step: int = 0):
  r"""Uniform running mean of the iterates from ``start_step`` on.

  .. math:: \bar z = \frac{1}{n} \sum_{t=s}^{s+n-1} z_t ,

  including the initial point when ``start_step = 0`` (then
  :math:`\bar z_T = \frac{1}{T+1}\sum_{t=0}^T z_t`).

  Args:
    inner: the transform whose iterates are averaged.
    start_step: first step whose iterate enters the mean.
  """
  check_int_at_least("start_step", start_step, 0)

  def combine(state, new_params, inner_state):
    t = state.count + 1  # index of the new iterate
    restart = t <= start_step  # before the window: the average is the iterate
    num = jnp.where(restart, 1, state.num_averaged + 1)
    w = 1.0 / num.astype(jnp.result_type(float))
    mean = jax.tree.map(lambda a, p: a + w * (p - a), state.average, new_params)
    return tree_where(restart, new_params, mean), num

  return _wrapper(inner, combine)


def slow_ema(inner: optax.GradientTransformation, decay: float = 0.9999):
  r"""EMA of the lookahead slow weights, updated only at syncs.

  ``inner`` must contain a :func:`lookahead_minmax`; at each of its syncs
  :math:`\bar z \leftarrow \beta \bar z + (1-\beta)\tilde z` with the new slow
  weights :math:`\tilde z` (the reference code's ``G_ema_slow``: with ``decay=0.9999``
  around ``lookahead_minmax(..., slow_init="lazy")`` it matches the output of
  ``lagan/trainer.py``, tests/parity/test_lagan_golden.py). A decay of ``b**k``
  averages over the same number of STEPS as an ``ema`` of decay ``b``; the
  reference's 0.9999 per sync averages over 1e4 syncs.

  Args:
    inner: a transform containing a lookahead.
    decay: :math:`\beta \in [0, 1)`.
  """
  check_in("decay", decay, lambda d: 0.0 <= float(d) < 1.0, "in [0, 1)")

  def combine(state, new_params, inner_state):
    found = _find_states(inner_state, LookaheadMinmaxState)
    if not found:
      raise ValueError("slow_ema needs an inner transform containing lookahead_minmax")
    la = found[0]
    moved = _ema(state.average, la.slow[0], decay)
    num = jnp.where(la.synced, state.num_averaged + 1, state.num_averaged)
    return tree_where(la.synced, moved, state.average), num

  return _wrapper(inner, combine)


def averaged_params(opt_state: Any) -> Players:
  """The running average held by the outermost averaging wrapper in ``opt_state``."""
  found = _find_states(opt_state, AveragingState)
  if not found:
    raise ValueError("opt_state contains no AveragingState (ema/uniform/slow_ema)")
  return found[0].average
