"""Lookahead-minmax's update through its `cond` (issue 11 item 4) against the former layout,
and game_step's exact sync (`apply_lookahead_updates`).

The transform now routes the inner scheme's update through the `lax.cond` with the slow
weights instead of merging it outside with `jnp.where(synced, slow - params, u)` (fewer
parameter-sized copies per step). `_former_lookahead` is the former update, kept here
verbatim as the reference: the new one must give the same updates and states bit for
bit over two sync periods for every inner scheme, `slow_init="lazy"`, `reset_state`,
nested levels, mixed dtypes and under `vmap`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from minmaxlab.transforms._common import as_transform, tree_sub, tree_where, zeros_count
from minmaxlab.transforms._lookahead import LookaheadMinmaxState
from tests import _xla


def _former_lookahead(inner, sync_periods, slow_step_sizes, reset_state=False, lazy=False):
  """The update of `lookahead_minmax` before issue 11 item 4 (commit 53ce52e)."""
  inner = as_transform(inner)

  def init_fn(params):
    slow = tuple(params for _ in sync_periods)
    return LookaheadMinmaxState(
      count=zeros_count(), slow=slow, inner_state=inner.init(params), synced=jnp.zeros([], bool)
    )

  def update_fn(updates, state, params=None, **extra_args):
    u, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
    count = optax.safe_int32_increment(state.count)
    synced = count % jnp.asarray(sync_periods[0], jnp.int32) == 0

    def sync_slow():
      fast = optax.apply_updates(params, u)
      slows = list(state.slow)
      for level, (k, alpha) in enumerate(zip(sync_periods, slow_step_sizes)):
        due = count % jnp.asarray(k, jnp.int32) == 0
        moved = jax.tree.map(lambda s, f: s + alpha * (f - s), slows[level], fast)
        if lazy:
          moved = tree_where(count == k, fast, moved)
        new_slow = tree_where(due, moved, slows[level])
        fast = tree_where(due, new_slow, fast)
        slows = [tree_where(due, new_slow, s) for s in slows[:level]] + slows[level:]
        slows[level] = new_slow
      return tuple(slows)

    slows = jax.lax.cond(synced, sync_slow, lambda: tuple(state.slow))
    new_updates = tree_where(synced, tree_sub(slows[0], params), u)
    if reset_state:
      inner_state = jax.lax.cond(synced, lambda: inner.init(slows[0]), lambda: inner_state)
    return new_updates, LookaheadMinmaxState(
      count=count, slow=slows, inner_state=inner_state, synced=synced
    )

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


GAME = mml.games.random_bilinear(jax.random.key(3), 4)
FIELD = mml.vector_field(lambda p, s: s * GAME.loss(p) + 0.05 * s * (p.min @ p.min))
P = mml.Players(jnp.linspace(-1.0, 1.0, 4), jnp.linspace(0.5, -0.7, 4))
SCALES = jnp.array([1.0, 0.7, 1.3])  # evaluation i of a step uses "batch" SCALES[i]

INNERS = {
  "gda": lambda: optax.adam(0.1, b1=0.5),
  "alternating": lambda: mml.alternating(optax.adam(0.1, b1=0.5), max_steps=2),
  "extragradient": lambda: mml.extragradient(optax.adam(0.1, b1=0.5)),
  "optimistic": lambda: mml.optimistic(optax.adam(0.1, b1=0.5)),
}

# (sync_periods, slow_step_sizes, reset_state, lazy)
CONFIGS = {
  "k3": ((3,), (0.5,), False, False),
  "k3_lazy_reset": ((3,), (0.3,), True, True),
  "nested_2_4": ((2, 4), (0.5, 0.4), False, False),
}


def _new(inner, periods, alphas, reset, lazy):
  init = "lazy" if lazy else "params"
  if len(periods) == 1:
    return mml.lookahead_minmax(inner, periods[0], alphas[0], reset, init)
  return mml.nested_lookahead_minmax(inner, periods, alphas, reset, init)


def _trajectory(tx, params, steps):
  """Every step's update and state, one jitted `update` + `apply_updates` per step."""

  @jax.jit
  def step(p, s):
    v = FIELD(p, SCALES[0])
    u, s = tx.update(v, s, p, vector_field=lambda q, i: FIELD(q, SCALES[i]))
    return optax.apply_updates(p, u), s, u

  s, out = tx.init(params), []
  for _ in range(steps):
    params, s, u = step(params, s)
    out.append((u, s, params))
  return out


def _assert_bitwise(a, b):
  la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for x, y in zip(la, lb):
    assert x.dtype == y.dtype
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("scheme", sorted(INNERS))
def test_same_updates_bit_for_bit_as_the_former_layout(scheme, config):
  periods, alphas, reset, lazy = CONFIGS[config]
  steps = 2 * periods[-1]  # two full periods of the slowest level
  new = _trajectory(_new(INNERS[scheme](), periods, alphas, reset, lazy), P, steps)
  old = _trajectory(_former_lookahead(INNERS[scheme](), periods, alphas, reset, lazy), P, steps)
  synced = [bool(s.synced) for _, s, _ in new]
  assert synced == [(t + 1) % periods[0] == 0 for t in range(steps)]
  for n, o in zip(new, old):
    _assert_bitwise(n, o)
  # The sync really happened: after it the params are the slow weights (one rounding of
  # params + (slow - params)), and the slow weights moved away from the start.
  u, s, p = new[periods[0] - 1]
  np.testing.assert_allclose(
    np.concatenate(p), np.concatenate(mml.lookahead_slow_params(s)), rtol=1e-6
  )
  assert not np.allclose(np.concatenate(s.slow[0]), np.concatenate(P))


def test_mixed_dtypes_match_the_former_layout():
  """bfloat16 params with a float32 update, and float32 params with a bfloat16 update: the
  update keeps the dtype `jnp.where(synced, slow - params, u)` gives (promoted). Run op by
  op: under `jit` XLA's CPU compiler may keep a bfloat16 product in float32 where a convert
  follows it, which depends on the fusion and not on the transform's arithmetic."""
  params = mml.Players(P.min.astype(jnp.bfloat16), P.max)
  field = FIELD(P, 1.0)
  v = mml.Players(field.min, field.max.astype(jnp.bfloat16))
  for make in (lambda: optax.sgd(0.1), lambda: optax.adam(0.1)):
    seqs = []
    for tx in (mml.lookahead_minmax(make(), 2, 0.5), _former_lookahead(make(), (2,), (0.5,))):
      update, s, p, seq = tx.update, tx.init(params), params, []
      for _ in range(4):
        u, s = update(v, s, p)
        p = optax.apply_updates(p, u)
        seq.append((u, s, p))
      seqs.append(seq)
    assert seqs[0][0][0].min.dtype == jnp.float32 and seqs[0][0][0].max.dtype == jnp.float32
    _assert_bitwise(seqs[0], seqs[1])


def test_vmap_with_batched_counters_matches_the_former_layout():
  """Under `vmap` with counters that differ per game the `cond` becomes a select."""
  batch = jax.tree.map(lambda x: jnp.stack([x, 2 * x, -x]), P)
  seqs = []
  for tx in (
    mml.lookahead_minmax(optax.adam(0.1), 3, 0.5),
    _former_lookahead(optax.adam(0.1), (3,), (0.5,)),
  ):
    s = jax.vmap(tx.init)(batch)._replace(count=jnp.array([0, 1, 2], jnp.int32))
    # XLA's default code (tests/_xla.py): its fused kernels give both layouts the same bits
    step = jax.jit(
      jax.vmap(lambda p, s, tx=tx: tx.update(FIELD(p, 1.0), s, p)), compiler_options=_xla.DEFAULTS
    )
    p, seq = batch, []
    for _ in range(4):
      u, s = step(p, s)
      p = optax.apply_updates(p, u)
      seq.append((u, s, p))
    seqs.append(seq)
  assert [bool(x) for x in seqs[0][0][1].synced] == [False, False, True]
  _assert_bitwise(seqs[0], seqs[1])


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("scheme", sorted(INNERS))
def test_game_step_is_update_then_apply_with_an_exact_sync(scheme, config):
  """game_step against `update` + `apply_updates` from the same params and state, op by
  op: the same state bit for bit; the same params on the steps without a sync; on a sync
  the params are EXACTLY the new slow weights, where `params + (slow - params)` can be one
  rounding off."""
  periods, alphas, reset, lazy = CONFIGS[config]
  tx = _new(INNERS[scheme](), periods, alphas, reset, lazy)
  vf = lambda q, i: FIELD(q, SCALES[i])  # noqa: E731
  p, s = P, tx.init(P)
  with jax.disable_jit():
    for t in range(2 * periods[-1]):
      u, s_update = tx.update(FIELD(p, SCALES[0]), s, p, vector_field=vf)
      p_update = optax.apply_updates(p, u)
      p, s, _ = mml.game_step(tx, vf, p, s)
      _assert_bitwise(s, s_update)
      if (t + 1) % periods[0]:
        _assert_bitwise(p, p_update)
      else:
        _assert_bitwise(p, mml.lookahead_slow_params(s))
        np.testing.assert_allclose(np.concatenate(p), np.concatenate(p_update), rtol=1e-6)
  assert not np.allclose(np.concatenate(s.slow[0]), np.concatenate(P))


def test_game_step_syncs_exactly_compiled_and_under_vmap():
  """game_step with Lookahead lands on the slow weights exactly at every sync, compiled as
  op by op (to rounding), and under `vmap` with batched counters (the cond a select)."""
  tx = mml.lookahead_minmax(mml.alternating(optax.adam(0.1)), 3, 0.5)
  step = lambda p, s: mml.game_step(tx, lambda q, i: FIELD(q, SCALES[i]), p, s)[:2]  # noqa: E731
  p, s = P, tx.init(P)
  p_jit, s_jit = p, s
  for _ in range(3):
    with jax.disable_jit():
      p, s = step(p, s)
    p_jit, s_jit = jax.jit(step)(p_jit, s_jit)
  assert bool(s.synced) and bool(s_jit.synced)
  _assert_bitwise(p, mml.lookahead_slow_params(s))
  _assert_bitwise(p_jit, mml.lookahead_slow_params(s_jit))
  np.testing.assert_allclose(np.concatenate(p_jit), np.concatenate(p), rtol=1e-5, atol=1e-6)
  batch = jax.tree.map(lambda x: jnp.stack([x, 2 * x, -x]), P)
  sb = jax.vmap(tx.init)(batch)._replace(count=jnp.array([0, 1, 2], jnp.int32))
  pb, sb = jax.jit(jax.vmap(step))(batch, sb)
  assert [bool(x) for x in sb.synced] == [False, False, True]
  for g in range(3):
    one = lambda x, g=g: x[g]  # noqa: E731
    s_g = jax.tree.map(one, sb)
    want = mml.lookahead_slow_params(s_g) if g == 2 else None
    if want is not None:
      _assert_bitwise(jax.tree.map(one, pb), want)
    else:  # no sync: the params moved and the slow weights did not
      np.testing.assert_array_equal(
        np.concatenate(mml.lookahead_slow_params(s_g)), np.concatenate(jax.tree.map(one, batch))
      )
      assert not np.allclose(np.concatenate(jax.tree.map(one, pb)), np.concatenate(s_g.slow[0]))


@pytest.mark.parametrize("config", ["k3_lazy_reset", "nested_2_4"])
def test_eager_steps_after_the_first_cycles_lower_nothing(config):
  """Updates run eagerly (outside ``jit``, as in a notebook) pick the sync's branch in
  Python: once the first cycles have compiled each op for its shapes, the later steps lower
  and compile no program (an eager ``lax.cond`` of new closures is traced, lowered and
  compiled at every call: two or three programs per step before), and the trajectory is the
  compiled one's to rounding."""
  periods, alphas, reset, lazy = CONFIGS[config]
  tx = _new(INNERS["extragradient"](), periods, alphas, reset, lazy)
  vf = lambda q, i: FIELD(q, SCALES[i])  # noqa: E731
  p, s = P, tx.init(P)
  with _xla.lowerings() as lowered:  # a program is lowered before it is compiled
    for t in range(3 * periods[-1]):
      if t == periods[-1]:
        lowered.clear()
      p, s, _ = mml.game_step(tx, vf, p, s)
  assert lowered == []
  p_jit, s_jit = P, tx.init(P)
  step = jax.jit(lambda p, s: mml.game_step(tx, vf, p, s)[:2])
  for _ in range(3 * periods[-1]):
    p_jit, s_jit = step(p_jit, s_jit)
  assert bool(s.synced) and int(s.count) == int(s_jit.count) == 3 * periods[-1]
  _assert_bitwise(p, mml.lookahead_slow_params(s))
  np.testing.assert_allclose(np.concatenate(p), np.concatenate(p_jit), rtol=1e-5, atol=1e-6)


def test_apply_lookahead_updates_is_exact_where_apply_updates_rounds():
  """Params and slow weights of unrelated magnitudes and signs: `params + (slow - params)`
  rounds for some of 1000 entries per player; `apply_lookahead_updates` lands on the slow
  weights exactly (and matches `apply_updates` to that rounding); without a sync, or without
  a Lookahead in the state, it is `apply_updates`."""
  k1, k2 = jax.random.split(jax.random.key(7))
  p = mml.Players(*jax.random.normal(k1, (2, 1000)) * 100.0)
  slow = mml.Players(*jax.random.normal(k2, (2, 1000)) * 1e-3)
  tx = mml.lookahead_minmax(optax.sgd(0.1), 2, 0.5)
  s = tx.init(p)._replace(count=jnp.ones([], jnp.int32), slow=(slow,))
  field = mml.Players(p.min, -p.max)
  u, s_new = jax.jit(tx.update)(field, s, p)
  new = jax.jit(mml.transforms.apply_lookahead_updates)(p, u, s_new)
  via_update = optax.apply_updates(p, u)
  assert bool(s_new.synced)
  _assert_bitwise(new, mml.lookahead_slow_params(s_new))
  differ = np.concatenate(via_update) != np.concatenate(new)
  assert differ.any(), "the update path should round somewhere here"
  np.testing.assert_allclose(np.concatenate(via_update), np.concatenate(new), atol=2e-5)
  u1, s1 = tx.update(field, tx.init(p), p)  # count 1 of period 2: no sync
  apply = mml.transforms.apply_lookahead_updates
  _assert_bitwise(apply(p, u1, s1), optax.apply_updates(p, u1))
  _assert_bitwise(apply(p, u1, optax.sgd(0.1).init(p)), optax.apply_updates(p, u1))
