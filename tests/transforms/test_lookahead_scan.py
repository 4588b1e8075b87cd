"""`lookahead_scan` (issue 11 item 4): blocks of k plain inner steps then the sync give the
params, states and values of a `lax.scan` of `game_step` with `lookahead_minmax`, bit for bit."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml

GAME = mml.games.random_bilinear(jax.random.key(5), 4)
VAF = mml.value_and_vector_field(lambda p, s: s * GAME.loss(p) + 0.05 * s * (p.min @ p.min))
P = mml.Players(jnp.linspace(-1.0, 1.0, 4), jnp.linspace(0.5, -0.7, 4))

INNERS = {
  "gda": lambda: optax.adam(0.1, b1=0.5),
  "alternating": lambda: mml.alternating(optax.adam(0.1, b1=0.5), max_steps=2),
  "extragradient": lambda: mml.extragradient(optax.adam(0.1, b1=0.5)),
  "optimistic": lambda: mml.optimistic(optax.sgd(0.2)),
}

# (sync_period, slow_step_size, reset_state, slow_init)
CONFIGS = {
  "k3": (3, 0.5, False, "params"),
  "k4_lazy_reset": (4, 0.3, True, "lazy"),
  "k1": (1, 0.7, False, "params"),
}


def _field(p, x, i):  # evaluation i of a step uses "batch" x[i]: every step differs
  return VAF(p, x[i])


def _scales(n):
  return 1.0 + 0.5 * jax.random.uniform(jax.random.key(n), (n, 3))


def _reference(tx, params, state, xs):
  """A `lax.scan` of `game_step` with the transform, as a training loop would run it."""

  def body(carry, x):
    p, s = carry
    p, s, value = mml.game_step(tx, lambda q, i: _field(q, x, i), p, s)
    return (p, s), value

  (params, state), values = jax.lax.scan(body, (params, state), xs)
  return params, state, values


def _run(scheme, config, xs, compiled):
  """(helper, reference) over xs from init, then over xs reversed from where they ended."""
  k, alpha, reset, init = CONFIGS[config]
  tx = mml.lookahead_minmax(INNERS[scheme](), k, alpha, reset, init)

  def helper(p, s, xs):
    config = mml.transforms.LookaheadConfig(
      sync_period=k, slow_step_size=alpha, reset_state=reset, slow_init=init
    )
    return mml.lookahead_scan(INNERS[scheme](), _field, p, s, xs, config)

  def reference(p, s, xs):
    return _reference(tx, p, s, xs)

  out = []
  for fn in (helper, reference):
    fn = jax.jit(fn) if compiled else fn
    first = fn(P, tx.init(P), xs)
    out.append((first, fn(*first[:2], xs[::-1])))  # resumes at a sync boundary
  return out


CASES = [(scheme, "k3") for scheme in sorted(INNERS)]
CASES += [("alternating", "k4_lazy_reset"), ("gda", "k4_lazy_reset"), ("extragradient", "k1")]


@pytest.mark.parametrize(("scheme", "config"), CASES)
def test_bit_for_bit_the_transform_op_by_op(scheme, config):
  """The same operations in the same order: equal bit for bit when each runs on its own."""
  k = CONFIGS[config][0]
  with jax.disable_jit():
    got, want = _run(scheme, config, _scales(3 * k), compiled=False)
  chex.assert_trees_all_equal(got, want, strict=True)  # strict: dtypes and shapes too
  # Not a vacuous match: the slow weights moved, and the params sit on them after a sync
  # (one rounding of params + (slow - params)); one value (both losses) per step.
  params, state, (l_min, l_max) = got[0]
  assert l_min.shape == l_max.shape == (3 * k,)
  assert bool(state.synced) and int(state.count) == 3 * k
  np.testing.assert_allclose(
    np.concatenate(params), np.concatenate(state.slow[0]), rtol=1e-6, atol=1e-7
  )
  assert not np.allclose(np.concatenate(state.slow[0]), np.concatenate(P))


@pytest.mark.parametrize("scheme", sorted(INNERS))
def test_compiled_matches_the_transform_to_rounding(scheme):
  """Compiled, XLA may contract a multiply and an add of a plain step into one FMA where
  the transform's `cond` keeps the update apart: the last bits may differ."""
  got, want = _run(scheme, "k3", _scales(12), compiled=True)
  chex.assert_trees_all_close(got, want, rtol=1e-5, atol=1e-6, strict=True)


def test_field_alone_gives_no_values_and_one_step_per_slice():
  tx = mml.lookahead_minmax(optax.sgd(0.1), 2, 0.5)
  field = lambda p, x, i: VAF(p, x)[1]  # noqa: E731
  xs = jnp.arange(1.0, 7.0)
  with jax.disable_jit():  # op by op, as the loop below
    config = mml.transforms.LookaheadConfig(sync_period=2)
    got = mml.lookahead_scan(optax.sgd(0.1), field, P, tx.init(P), xs, config)
  p, s = P, tx.init(P)
  for x in xs:
    p, s, value = mml.game_step(tx, lambda q, i, x=x: field(q, x, i), p, s)
    assert value is None
  assert got[2] is None
  chex.assert_trees_all_equal(got[:2], (p, s), strict=True)


def test_errors_name_the_precondition():
  tx = mml.lookahead_minmax(optax.sgd(0.1), 3, 0.5)
  state = tx.init(P)

  def scan(state, xs, **config):
    config = mml.transforms.LookaheadConfig(**config)
    return mml.lookahead_scan(optax.sgd(0.1), _field, P, state, xs, config)

  with pytest.raises(ValueError, match="multiple of sync_period=3"):
    scan(state, _scales(7), sync_period=3)
  with pytest.raises(ValueError, match="sync boundary"):
    scan(state._replace(count=jnp.int32(2)), _scales(6), sync_period=3)
  with pytest.raises(ValueError, match="Python int"):
    scan(state, _scales(6), sync_period=jnp.int32(3))
  with pytest.raises(ValueError, match="slow_step_size"):
    scan(state, _scales(6), sync_period=3, slow_step_size=1.5)
  nested = mml.nested_lookahead_minmax(optax.sgd(0.1), (3, 6), (0.5, 0.5)).init(P)
  with pytest.raises(ValueError, match="one level"):
    scan(nested, _scales(6), sync_period=3)


def test_settings_come_as_the_transforms_config():
  """`lookahead_scan` takes the `LookaheadConfig` that built the transform; a setting passed
  on its own (the former signature) names the fix."""
  state = mml.lookahead_minmax(optax.sgd(0.1), 3, 0.5).init(P)
  with pytest.raises(ValueError, match=r"sync_period=3: pass config=.*LookaheadConfig"):
    mml.lookahead_scan(optax.sgd(0.1), _field, P, state, _scales(6), sync_period=3)
