"""One registry-driven suite: every transform through jit, scan, vmap, chain,
inject_hyperparams, stable state and no retracing (optax `_common_test` style)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml

LR = 0.05
INJECT_STATES = (optax.InjectHyperparamsState, optax.InjectStatefulHyperparamsState)


def _sgd():
  return optax.inject_hyperparams(optax.sgd)(learning_rate=LR)


def _adam():
  return optax.inject_hyperparams(optax.adam)(learning_rate=LR)


# name -> factory; every inner learning rate is injectable.
REGISTRY = {
  "gda_sgd": _sgd,
  "gda_adam": _adam,
  "per_player": lambda: mml.per_player(min=_sgd(), max=_adam()),
  "alternating": lambda: mml.alternating(_sgd()),
  "alternating_3": lambda: mml.alternating(_adam(), max_steps=3),
  "extragradient": lambda: mml.extragradient(_adam()),
  "extragradient_shared": lambda: mml.extragradient(_adam(), shared_state=True),
  "optimistic": lambda: mml.optimistic(_adam()),
  "lookahead_adam": lambda: mml.lookahead_minmax(_adam()),
  "lookahead_eg": lambda: mml.lookahead_minmax(mml.extragradient(_adam()), 3, 0.5),
  "lookahead_alt5": lambda: mml.lookahead_minmax(mml.alternating(_sgd(), max_steps=5)),
  "lookahead_lazy_reset": lambda: mml.lookahead_minmax(_adam(), 2, 0.3, True, "lazy"),
  "nested_lookahead": lambda: mml.nested_lookahead_minmax(_sgd(), (2, 6), (0.5, 0.5)),
  "ema": lambda: mml.transforms.ema(mml.lookahead_minmax(_adam()), 0.9),
  "uniform": lambda: mml.transforms.uniform(mml.extragradient(_sgd())),
  "slow_ema": lambda: mml.transforms.slow_ema(mml.lookahead_minmax(_sgd(), 2), 0.9),
}


def _game(key=jax.random.key(0)):
  return mml.games.random_bilinear(key, 4, 3)


def _params():
  return mml.Players(jnp.linspace(-1.0, 1.0, 4), jnp.array([0.3, -0.2, 0.5]))


def _step_fn(tx):
  tx = optax.with_extra_args_support(tx)

  def step(game, params, state):
    field = mml.vector_field(game.loss)
    u, state = tx.update(field(params), state, params, vector_field=lambda p, i: field(p))
    return optax.apply_updates(params, u), state

  return step


@pytest.fixture(params=sorted(REGISTRY))
def tx(request):
  return REGISTRY[request.param]()


def test_jit_and_stable_state(tx):
  game, params = _game(), _params()
  state0 = tx.init(params)
  step = jax.jit(_step_fn(tx))
  p, s = params, state0
  for _ in range(7):
    p, s = step(game, p, s)
  chex.assert_trees_all_equal_structs(s, state0)
  chex.assert_trees_all_equal_shapes_and_dtypes(s, state0)
  chex.assert_trees_all_equal_shapes_and_dtypes(p, params)
  chex.assert_tree_all_finite(p)
  for leaf in jax.tree.leaves(s):
    if jnp.issubdtype(leaf.dtype, jnp.integer):
      assert leaf.dtype == jnp.int32
  assert not np.allclose(np.concatenate(p), np.concatenate(params))


def test_no_retrace(tx):
  chex.clear_trace_counter()
  game, params = _game(), _params()

  @jax.jit
  @chex.assert_max_traces(n=1)
  def step(game, p, s):
    return _step_fn(tx)(game, p, s)

  p, s = params, tx.init(params)
  for _ in range(5):
    p, s = step(game, p, s)


def test_scan_matches_python_loop(tx):
  game, params = _game(), _params()
  step = _step_fn(tx)
  p, s = params, tx.init(params)
  jstep = jax.jit(step)
  for _ in range(10):
    p, s = jstep(game, p, s)
  (q, r), _ = jax.jit(
    lambda p0, s0: jax.lax.scan(lambda c, _: (step(game, *c), None), (p0, s0), None, length=10)
  )(params, tx.init(params))
  chex.assert_trees_all_close(p, q, rtol=1e-5, atol=1e-6)
  chex.assert_trees_all_close(s, r, rtol=1e-5, atol=1e-6)


def test_vmap_over_games(tx):
  games = jax.vmap(_game)(jax.random.split(jax.random.key(1), 3))
  params = jax.tree.map(lambda x: jnp.stack([x, 2 * x, -x]), _params())
  step = _step_fn(tx)
  state = jax.vmap(tx.init)(params)
  p, s = jax.jit(jax.vmap(step))(games, params, state)
  p, s = jax.jit(jax.vmap(step))(games, p, s)
  for i in range(3):
    g_i = jax.tree.map(lambda x: x[i], games)
    p_i = jax.tree.map(lambda x: x[i], params)
    q, r = p_i, tx.init(p_i)
    for _ in range(2):
      q, r = jax.jit(step)(g_i, q, r)
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[i], p), q, rtol=1e-5, atol=1e-6)


def test_chain_with_clipping(tx):
  game, params = _game(), _params()
  chained = optax.chain(optax.clip_by_global_norm(0.1), tx)
  p, s = params, chained.init(params)
  for _ in range(3):
    p, s = jax.jit(_step_fn(chained))(game, p, s)
  chex.assert_tree_all_finite(p)
  chex.assert_trees_all_equal_structs(s, chained.init(params))


def test_chain_clips_the_field():
  game, params = _game(), _params()
  chained = optax.chain(optax.clip_by_global_norm(0.1), mml.lookahead_minmax(optax.sgd(LR)))
  q, _ = _step_fn(chained)(game, params, chained.init(params))
  step_norm = optax.tree.norm(jax.tree.map(jnp.subtract, q, params))
  np.testing.assert_allclose(step_norm, LR * 0.1, rtol=1e-5)


def _set_learning_rates(state, value):
  def visit(x):
    if isinstance(x, INJECT_STATES):
      hp = dict(x.hyperparams, learning_rate=jnp.asarray(value, jnp.float32))
      return x._replace(hyperparams=hp)
    return x

  return jax.tree.map(visit, state, is_leaf=lambda x: isinstance(x, INJECT_STATES))


def test_injected_learning_rate_takes_effect(tx):
  """Setting every inner learning rate to 0 freezes the params (up to a lookahead sync and
  the optimistic correction -u_{t-1}, both checked)."""
  game, params = _game(), _params()
  step = jax.jit(_step_fn(tx))
  p, s = step(game, params, tx.init(params))
  p_frozen, s_frozen = step(game, p, _set_learning_rates(s, 0.0))
  p_moving, _ = step(game, p, s)
  assert not np.allclose(np.concatenate(p_frozen), np.concatenate(p_moving))
  opt = jax.tree.leaves(s, is_leaf=lambda x: isinstance(x, mml.OptimisticState))
  opt = [x for x in opt if isinstance(x, mml.OptimisticState)]
  is_la = lambda x: isinstance(x, mml.LookaheadMinmaxState)
  la = [
    x for x in jax.tree.leaves(s_frozen, is_leaf=is_la) if isinstance(x, mml.LookaheadMinmaxState)
  ]
  if opt:
    want = jax.tree.map(lambda a, b: a - b, p, opt[0].previous)
    chex.assert_trees_all_close(p_frozen, want, rtol=1e-6, atol=1e-7)
  elif la and bool(la[0].synced):
    chex.assert_trees_all_close(p_frozen, mml.lookahead_slow_params(s_frozen), rtol=1e-6)
  else:
    chex.assert_trees_all_close(p_frozen, p, rtol=0, atol=0)


def test_lookahead_hyperparams_injectable():
  """slow_step_size itself can be an injected, mutable hyperparameter."""
  make = optax.inject_hyperparams(mml.lookahead_minmax, static_args=("sync_period",))
  tx = make(inner=optax.sgd(0.1), sync_period=2, slow_step_size=0.5)
  game, params = _game(), _params()
  step = jax.jit(_step_fn(tx))
  s0 = tx.init(params)
  p1, s1 = step(game, *step(game, params, s0))
  s_half = s0._replace(hyperparams=dict(s0.hyperparams, slow_step_size=jnp.float32(1.0)))
  p2, _ = step(game, *step(game, params, s_half))
  # alpha = 1 lands on the fast weights: two plain sgd steps.
  plain = _step_fn(optax.sgd(0.1))
  q = plain(game, *plain(game, params, optax.sgd(0.1).init(params)))[0]
  chex.assert_trees_all_close(p2, q, rtol=1e-6)
  assert not np.allclose(np.concatenate(p1), np.concatenate(p2))
