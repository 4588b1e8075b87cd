"""Lookahead-minmax: joint slow/fast weights over both players."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
import optax

from minmaxlab.games import Players
from minmaxlab.transforms._common import (
  as_transform,
  check_in,
  check_int_at_least,
  check_updates,
  cond,
  require_params,
  tree_sub,
  tree_where,
  zeros_count,
)

SlowInit = Literal["params", "lazy"]
SLOW_INITS = get_args(SlowInit)


def _merged_dtype(onto_slow, u):
  """The dtype of ``jnp.where(synced, onto_slow, u)`` for one leaf."""
  return jnp.result_type(onto_slow, u)


class LookaheadMinmaxState(NamedTuple):
  """State of :func:`lookahead_minmax`.

  Attributes:
    count: full game steps taken (int32); a sync happens when it reaches a
      multiple of the sync period.
    slow: tuple of slow weights (``Players``), one per level; ``slow[0]`` are
      the usual slow weights, ``slow[1]`` the "super-slow" ones of nested
      lookahead.
    inner_state: the inner scheme's state.
    synced: whether the last update ended with a (level-0) sync.
  """

  count: jax.Array
  slow: tuple[Players, ...]
  inner_state: Any
  synced: jax.Array


def validate_level(i, sync_period, slow_step_size):
  check_int_at_least(f"sync_period[{i}]" if i else "sync_period", sync_period, 1)
  check_in(
    f"slow_step_size[{i}]" if i else "slow_step_size",
    slow_step_size,
    lambda a: 0.0 < float(a) <= 1.0,
    "in (0, 1]",
  )


def _due(count, k):
  """Whether the step counter (``>= 0``) is a multiple of ``k``: ``rem`` needs none of
  ``%``'s sign fix-ups (fewer scalar kernels on every step)."""
  return jax.lax.rem(count, jnp.asarray(k, jnp.int32)) == 0


def synced_slows(slows, fast, count, sync_periods, slow_step_sizes, lazy):
  """The slow weights after the sync that ends step ``count`` (a multiple of the first
  period) at the fast weights ``fast``: every level due moves towards them and resets
  the fast weights and every faster level."""
  slows = list(slows)
  for level, (k, alpha) in enumerate(zip(sync_periods, slow_step_sizes)):
    moved = jax.tree.map(lambda s, f: s + alpha * (f - s), slows[level], fast)
    if lazy:  # the reference GAN code copies the fast weights at the first sync
      moved = tree_where(count == k, fast, moved)
    if level == 0:  # level 0 is due at every sync
      new_slow = fast = moved
    else:  # every period is a multiple of the first: any sync is a level-0 sync
      due = _due(count, k)
      new_slow = tree_where(due, moved, slows[level])
      fast = tree_where(due, new_slow, fast)
      # Every faster level restarts from the new slow weights.
      slows = [tree_where(due, new_slow, s) for s in slows[:level]] + slows[level:]
    slows[level] = new_slow
  return tuple(slows)


class LookaheadConfig(NamedTuple):
  """The settings of one :func:`lookahead_minmax`, in its argument order:
  ``lookahead_minmax(inner, *config)`` and ``lookahead_scan(inner, ..., config)`` run the
  same Lookahead (see :func:`lookahead_minmax` for each field)."""

  sync_period: int = 5
  slow_step_size: float = 0.5
  reset_state: bool = False
  slow_init: SlowInit = "params"


class _Config(NamedTuple):
  """The static settings of a (nested) Lookahead, fastest level first."""

  sync_periods: tuple
  slow_step_sizes: tuple
  reset_state: bool
  lazy: bool


def _check_config(sync_periods, slow_step_sizes, slow_init):
  if slow_init not in SLOW_INITS:
    raise ValueError(f"slow_init must be one of {SLOW_INITS}, got {slow_init!r}")
  for i, (k, a) in enumerate(zip(sync_periods, slow_step_sizes)):
    validate_level(i, k, a)
  for i in range(1, len(sync_periods)):
    k0, k1 = sync_periods[i - 1], sync_periods[i]
    if not isinstance(k1, jax.core.Tracer) and not isinstance(k0, jax.core.Tracer):
      if int(k1) % int(k0):
        raise ValueError(f"sync_periods must each divide the next, got {tuple(sync_periods)}")


def _lookahead(inner, sync_periods, slow_step_sizes, reset_state, slow_init):
  inner = as_transform(inner)
  _check_config(sync_periods, slow_step_sizes, slow_init)
  config = _Config(
    sync_periods=tuple(sync_periods),
    slow_step_sizes=tuple(slow_step_sizes),
    reset_state=reset_state,
    lazy=slow_init == "lazy",
  )

  def init_fn(params):
    params = require_params(params, "lookahead_minmax")
    return LookaheadMinmaxState(
      count=zeros_count(),
      slow=tuple(params for _ in sync_periods),
      inner_state=inner.init(params),
      synced=jnp.zeros([], bool),
    )

  def update_fn(updates, state, params=None, **extra_args):
    return _update(inner, config, updates, state, params, extra_args)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _update(inner, config, updates, state, params, extra_args):
  """One update: the inner scheme's, or at a sync the update onto the new slow weights."""
  check_updates(updates, "lookahead_minmax")
  params = require_params(params, "lookahead_minmax")
  u, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
  count = optax.safe_int32_increment(state.count)

  def sync():
    fast = optax.apply_updates(params, u)
    slows = synced_slows(
      state.slow, fast, count, config.sync_periods, config.slow_step_sizes, config.lazy
    )
    # The update onto them, in the dtype `jnp.where(synced, slow - params, u)` gives.
    new = jax.tree.map(lambda d, x: d.astype(_merged_dtype(d, x)), tree_sub(slows[0], params), u)
    return new, slows, jnp.ones([], bool)

  def keep():
    kept = jax.tree.map(lambda x, d: x.astype(_merged_dtype(d, x)), u, params)
    return kept, tuple(state.slow), jnp.zeros([], bool)

  # `synced` comes out of the branches: one `rem`+`eq` fusion gives the branch index.
  out, slows, synced = cond(_due(count, config.sync_periods[0]), sync, keep)
  if config.reset_state:
    inner_state = cond(synced, lambda: inner.init(slows[0]), lambda: inner_state)
  return out, LookaheadMinmaxState(count=count, slow=slows, inner_state=inner_state, synced=synced)


def apply_lookahead_updates(params: Players, updates: Players, opt_state: Any) -> Players:
  """``optax.apply_updates``, except that after a Lookahead sync the params are set to the
  slow weights exactly (``params + (slow - params)`` can be one rounding off).

  The sync is read from the outermost :class:`LookaheadMinmaxState` found in ``opt_state``
  (the state AFTER the update), by type: the same result for ``lookahead_minmax(...)`` bare
  or wrapped (``ema``, ``optax.chain`` with processing in front, ``inject_hyperparams``).
  Without a Lookahead in ``opt_state`` it is ``optax.apply_updates``.
  :func:`minmaxlab.game_step` applies its updates with it.

  Args:
    params: the params the updates were computed at.
    updates: the transform's updates.
    opt_state: the transform's new state.

  Returns:
    The new params.
  """
  new = optax.apply_updates(params, updates)
  found = _find_states(opt_state, LookaheadMinmaxState)
  if not found:
    return new
  la = found[0]

  def onto_slow():
    return jax.tree.map(lambda w, x: w.astype(x.dtype), la.slow[0], params)

  # A cond, not a select: the slow weights are read at a sync only.
  return cond(la.synced, onto_slow, lambda: new)


def lookahead_minmax(
  inner: optax.GradientTransformation,
  sync_period: int = 5,
  slow_step_size: float = 0.5,
  reset_state: bool = False,
  slow_init: SlowInit = "params",
) -> optax.GradientTransformationExtraArgs:
  r"""Lookahead-minmax: joint Lookahead over both players.

  Let :math:`F` be one full step of the inner scheme (one ``update`` call,
  whatever the inner scheme does inside: GDA, ``alternating`` with several
  max-player steps, ``extragradient``, ...). The fast weights
  :math:`z = (x, y)` follow :math:`F`; every ``k = sync_period`` full steps
  BOTH players backtrack together towards the slow weights :math:`\tilde z`:

  .. math::
    \tilde z \leftarrow \tilde z + \alpha (z_{t} - \tilde z), \qquad
    z_t \leftarrow \tilde z .

  For a linear :math:`F` with eigenvalues :math:`\lambda` the slow weights
  evolve by :math:`(1-\alpha) I + \alpha F^k`, eigenvalues
  :math:`\mu = 1 - \alpha + \alpha \lambda^k` per cycle: the backtracking
  damps the rotation that makes GDA cycle or diverge on bilinear games.

  The user's params stay plain :class:`Players` (the fast weights); the slow
  weights live in the state (read them with :func:`lookahead_slow_params`).
  On a sync step the returned update moves the params onto the new slow
  weights (``params + (slow - params)``, which can be one rounding off);
  :func:`minmaxlab.game_step` applies it with :func:`apply_lookahead_updates`,
  which sets them exactly (found by the state's type, so also when the
  transform is wrapped). The inner state is kept at syncs unless ``reset_state``. Extra
  arguments (``vector_field=``) are passed to the inner scheme.

  Example:
    >>> tx = lookahead_minmax(optax.adam(1e-3), sync_period=5, slow_step_size=0.5)
    >>> tx = lookahead_minmax(extragradient(optax.adam(1e-3)))
    >>> tx = lookahead_minmax(alternating(optax.sgd(0.1), max_steps=5))

  Args:
    inner: the inner optax transform or game scheme.
    sync_period: ``k >= 1`` full game steps between syncs, or the choice of
      :func:`spectral_sync_period` from a measured spectrum.
    slow_step_size: ``alpha`` in ``(0, 1]``.
    reset_state: reinitialise the inner state at the slow weights after a sync.
    slow_init: ``"params"`` (slow weights start at the initial params) or
      ``"lazy"`` (they are set to the fast weights at the first sync, which is
      then a no-op, as in the reference GAN code).

  Returns:
    An ``optax.GradientTransformationExtraArgs`` with a
    :class:`LookaheadMinmaxState`.

  References:
    Chavdarova et al., 2021, "Taming GANs with Lookahead-Minmax",
    https://arxiv.org/abs/2006.14567 ; Zhang et al., 2019, "Lookahead
    Optimizer: k steps forward, 1 step back", https://arxiv.org/abs/1907.08610
  """
  k = getattr(sync_period, "sync_period", sync_period)  # a SyncChoice gives its period
  return _lookahead(inner, (k,), (slow_step_size,), reset_state, slow_init)


def nested_lookahead_minmax(
  inner: optax.GradientTransformation,
  sync_periods: Sequence[int] = (5, 100),
  slow_step_sizes: Sequence[float] = (0.5, 0.5),
  reset_state: bool = False,
  slow_init: SlowInit = "params",
) -> optax.GradientTransformationExtraArgs:
  r"""Multi-level ("nested") Lookahead-minmax.

  Level 0 is :func:`lookahead_minmax`. Every ``sync_periods[l]`` steps level
  ``l`` moves its slow weights :math:`\tilde z^{(l)} \leftarrow \tilde z^{(l)}
  + \alpha_l (z - \tilde z^{(l)})` (after the faster levels' syncs of the same
  step) and resets the fast weights and every faster level's slow weights to
  it, as the reference code's "super-slow" weights. Each period must divide
  the next.

  Args:
    inner: the inner optax transform or game scheme.
    sync_periods: periods, fastest level first.
    slow_step_sizes: one ``alpha`` per level.
    reset_state: reinitialise the inner state after any sync.
    slow_init: as in :func:`lookahead_minmax`.

  Returns:
    An ``optax.GradientTransformationExtraArgs`` with a
    :class:`LookaheadMinmaxState` holding one slow copy per level.

  References:
    Chavdarova et al., 2021, https://arxiv.org/abs/2006.14567
  """
  sync_periods, slow_step_sizes = tuple(sync_periods), tuple(slow_step_sizes)
  if not sync_periods or len(sync_periods) != len(slow_step_sizes):
    raise ValueError(
      "sync_periods and slow_step_sizes must be non-empty and of equal"
      f" length, got {sync_periods} and {slow_step_sizes}"
    )
  return _lookahead(inner, sync_periods, slow_step_sizes, reset_state, slow_init)


def _find_states(tree, kind):
  found = []

  def visit(x):
    if isinstance(x, kind):
      found.append(x)
    return x

  jax.tree.map(visit, tree, is_leaf=lambda x: isinstance(x, kind))
  return found


def lookahead_slow_params(opt_state: Any, level: int = 0) -> Players:
  """The slow weights of the (outermost) lookahead inside any optimizer state.

  Use them for evaluation: they are the point the method converges through.

  Args:
    opt_state: a state containing a :class:`LookaheadMinmaxState` (e.g. the
      state of ``lookahead_minmax(optax.chain(clip, adam))`` or of an
      ``transforms.ema`` around it; processing goes inside the scheme, see
      :func:`minmaxlab.game_step`).
    level: which level of a nested lookahead (0 = the usual slow weights).

  Returns:
    The slow :class:`Players`.
  """
  found = _find_states(opt_state, LookaheadMinmaxState)
  if not found:
    raise ValueError("opt_state contains no LookaheadMinmaxState")
  slow = found[0].slow
  if not -len(slow) <= level < len(slow):
    raise ValueError(f"level must be in [0, {len(slow)}), got {level}")
  return slow[level]
