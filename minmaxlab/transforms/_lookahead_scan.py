"""Lookahead-minmax as blocks of plain inner steps: :func:`lookahead_scan`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from minmaxlab.games import Players
from minmaxlab.transforms._common import as_transform
from minmaxlab.transforms._lookahead import (
  SLOW_INITS,
  LookaheadConfig,
  LookaheadMinmaxState,
  synced_slows,
  validate_level,
)
from minmaxlab.transforms._step import game_step

_INT32_MAX = int(jnp.iinfo(jnp.int32).max)


def lookahead_scan(
  inner: optax.GradientTransformation,
  field_fn: Callable[[Players, Any, int], Any],
  params: Players,
  opt_state: LookaheadMinmaxState,
  xs: Any,
  config: LookaheadConfig = LookaheadConfig(),
  **extra_args: Any,
) -> tuple[Players, LookaheadMinmaxState, Any]:
  r"""Many game steps of :func:`lookahead_minmax` as blocks of ``sync_period`` steps.

  Each block runs the inner scheme's ``k = sync_period`` steps in an inner
  ``lax.scan`` (plain :func:`minmaxlab.game_step` of ``inner``: no counter, no
  ``cond``, nothing more than the inner scheme per step), then the sync: for
  loops whose steps are so short (tens of microseconds) that the transform's
  per-step counter and ``cond`` show. It does the operations of a ``lax.scan``
  of ``game_step`` with ``lookahead_minmax(inner, *config)`` over ``xs`` in the same
  order (params and updates of one dtype, counts below ``2**31 - 1``): op by op
  the params, state and values are equal bit for bit (compiled, XLA may fuse the two programs
  differently: the last bits can differ). A sync sets the params to the slow
  weights exactly, as :func:`minmaxlab.game_step` does.

  Example:
    >>> config = minmaxlab.transforms.LookaheadConfig(sync_period=5, slow_step_size=0.5)
    >>> tx = lookahead_minmax(optax.adam(1e-3), *config)
    >>> state = tx.init(params)
    >>> params, state, losses = lookahead_scan(
    ...     optax.adam(1e-3), lambda p, batch, i: vaf(p, batch[i]), params, state, batches,
    ...     config)

  Args:
    inner: the inner optax transform or game scheme (as given to
      :func:`lookahead_minmax`).
    field_fn: ``field_fn(params, x, i)``: the field (or ``(value, field)``) for
      the ``i``-th evaluation of the step whose slice of ``xs`` is ``x``.
    params: the fast weights.
    opt_state: the state of ``lookahead_minmax(inner, *config)`` at a
      sync boundary (its count a multiple of ``sync_period``, as after ``init``
      or any sync; checked when the count is concrete).
    xs: a pytree of arrays with a leading step axis, its length a multiple of
      ``sync_period``.
    config: the transform's :class:`LookaheadConfig`; its ``sync_period`` a Python int
      (the block length).
    **extra_args: passed to ``game_step`` (e.g. ``unrolled``'s ``loss_fn``).

  Returns:
    ``(params, opt_state, values)``: ``values`` stacks every step's value of
    evaluation 0 (``None`` when ``field_fn`` returns the field alone).
  """
  inner = as_transform(inner)
  old = sorted(set(extra_args) & set(LookaheadConfig._fields))
  if old:
    raise ValueError(
      f"lookahead_scan takes the transform's settings as one LookaheadConfig, got {old[0]}="
      f"{extra_args[old[0]]!r}: pass config=minmaxlab.transforms.LookaheadConfig({old[0]}=...)"
    )
  config = LookaheadConfig(*config)
  n = _check_scan(config, opt_state, xs)
  k, lazy = config.sync_period, config.slow_init == "lazy"

  def step(carry, x):
    p, s = carry
    p, s, value = game_step(inner, lambda q, i: field_fn(q, x, i), p, s, **extra_args)
    return (p, s), value

  def block(carry, xb):
    p, state = carry
    (fast, s), values = jax.lax.scan(step, (p, state.inner_state), xb)
    count = jnp.where(state.count <= _INT32_MAX - k, state.count + k, _INT32_MAX)
    slows = synced_slows(state.slow, fast, count, (k,), (config.slow_step_size,), lazy)
    p = jax.tree.map(lambda a, x: a.astype(x.dtype), slows[0], fast)  # exactly, as game_step
    if config.reset_state:
      s = inner.init(slows[0])
    state = LookaheadMinmaxState(count=count, slow=slows, inner_state=s, synced=jnp.ones([], bool))
    return (p, state), values

  blocks = jax.tree.map(lambda a: a.reshape(n // k, k, *a.shape[1:]), xs)
  (params, opt_state), values = jax.lax.scan(block, (params, opt_state), blocks)
  return params, opt_state, jax.tree.map(lambda a: a.reshape(n, *a.shape[2:]), values)


def _check_scan(config, opt_state, xs) -> int:
  """Check :func:`lookahead_scan`'s arguments; the number of steps in ``xs``."""
  sync_period, slow_step_size, _, slow_init = config
  if isinstance(sync_period, jax.core.Tracer) or not isinstance(sync_period, int):
    raise ValueError(f"sync_period must be a Python int (the block length), got {sync_period!r}")
  validate_level(0, sync_period, slow_step_size)
  if slow_init not in SLOW_INITS:
    raise ValueError(f"slow_init must be one of {SLOW_INITS}, got {slow_init!r}")
  if not isinstance(opt_state, LookaheadMinmaxState) or len(opt_state.slow) != 1:
    raise ValueError("opt_state must be the state of lookahead_minmax(inner, ...) (one level)")
  k = sync_period
  lengths = {jnp.shape(x)[0] if jnp.ndim(x) else None for x in jax.tree.leaves(xs)}
  if len(lengths) != 1 or None in lengths or next(iter(lengths)) % k:
    raise ValueError(
      f"xs must be arrays with one leading step axis whose length is a multiple of"
      f" sync_period={k}, got leading lengths {sorted(lengths, key=str)}"
    )
  if not isinstance(opt_state.count, jax.core.Tracer) and int(opt_state.count) % k:
    raise ValueError(
      f"opt_state.count must be a multiple of sync_period={k} (a sync boundary),"
      f" got {int(opt_state.count)}"
    )
  return lengths.pop()
