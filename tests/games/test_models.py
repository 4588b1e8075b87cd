"""Two flax.nnx or equinox models as the game's Players (``split_models``/``merge_models``):
the round trip, a game step on them, and the analysis functions on them."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import minmaxlab as mml
from minmaxlab import analysis


def _nnx_pair():
  rngs = nnx.Rngs(0)
  return nnx.Linear(1, 2, rngs=rngs), nnx.Linear(2, 1, rngs=rngs)


def _zero_sum(apply_g, apply_d, z):
  """f = mean(D(G(z))): the generator minimises it, the discriminator maximises it."""
  return lambda g, d: jnp.mean(apply_d(d, apply_g(g, z)))


def test_nnx_split_is_the_params_and_merge_rebuilds_the_models():
  g, d = _nnx_pair()
  z = jnp.arange(3.0).reshape(3, 1)
  defs, params = mml.split_models(g, d)
  assert isinstance(params, mml.Players) and isinstance(params.min, nnx.State)
  assert sorted(params.min.keys()) == ["bias", "kernel"]
  g2, d2 = mml.merge_models(defs, params)
  np.testing.assert_array_equal(d2(g2(z)), d(g(z)))
  # other values in, other models out; the originals are untouched
  shifted = jax.tree.map(lambda x: x + 1.0, params)
  g3, d3 = mml.merge_models(defs, shifted)
  np.testing.assert_array_equal(g3.bias[...], g.bias[...] + 1.0)
  assert not np.array_equal(d3(g3(z)), d(g(z)))
  nnx.update(g, shifted.min)  # and back into the live module
  np.testing.assert_array_equal(g(z), g3(z))


def test_game_step_trains_nnx_models_under_jit():
  g, d = _nnx_pair()
  z = jnp.ones((4, 1))
  defs, params = mml.split_models(g, d)

  def loss_fn(p):
    g, d = mml.merge_models(defs, p)
    return jnp.mean(d(g(z)))

  field = mml.value_and_vector_field(loss_fn)
  tx = mml.lookahead_minmax(mml.extragradient(optax.adam(1e-2)), sync_period=2)
  opt_state = tx.init(params)
  step = jax.jit(lambda p, s: mml.game_step(tx, lambda q, i: field(q), p, s))
  new, opt_state, value = step(params, opt_state)
  assert isinstance(new.min, nnx.State) and jax.tree.structure(new) == jax.tree.structure(params)
  diff = jax.tree.leaves(jax.tree.map(lambda a, b: jnp.abs(a - b).max(), new, params))
  assert all(x > 0 for x in diff)
  np.testing.assert_allclose(value[0], loss_fn(params), rtol=1e-6)


def test_jacobian_of_an_nnx_pair_is_that_of_the_same_game_on_arrays():
  """analysis.jacobian on Players of nnx.State equals the Jacobian of the same zero-sum game
  written on plain arrays (same weights, same flattening order: bias then kernel)."""
  g, d = _nnx_pair()
  z = jnp.array([[0.5], [-1.0], [2.0]])
  defs, params = mml.split_models(g, d)

  def nnx_loss(p):
    g, d = mml.merge_models(defs, p)
    return jnp.mean(d(jnp.tanh(g(z))))

  def array_loss(p):
    h = jnp.tanh(z @ p.min["kernel"] + p.min["bias"])
    return jnp.mean(h @ p.max["kernel"] + p.max["bias"])

  arrays = mml.Players(*({k: v[...] for k, v in s.items()} for s in params))
  j_nnx = analysis.jacobian(mml.vector_field(nnx_loss), params)
  j_arr = analysis.jacobian(mml.vector_field(array_loss), arrays)
  assert j_nnx.shape == (7, 7)  # G: kernel 1x2 + bias 2; D: kernel 2x1 + bias 1
  np.testing.assert_allclose(j_nnx, j_arr, rtol=1e-5, atol=1e-6)
  summary = analysis.summarize_jacobian(j_nnx)
  assert 0.0 < float(summary.rotation_ratio) <= 1.0


def test_equinox_split_merge_and_step():
  eqx = pytest.importorskip("equinox")
  k1, k2 = jax.random.split(jax.random.key(0))
  g = eqx.nn.MLP(1, 2, width_size=3, depth=1, key=k1)
  d = eqx.nn.MLP(2, "scalar", width_size=3, depth=1, key=k2)
  z = jnp.ones((5, 1))
  defs, params = mml.split_models(g, d)
  assert [m.kind for m in defs] == ["equinox", "equinox"]
  n = sum(x.size for x in jax.tree.leaves(params))
  assert n == (1 * 3 + 3 + 3 * 2 + 2) + (2 * 3 + 3 + 3 + 1)

  def loss_fn(p):
    g, d = mml.merge_models(defs, p)
    return jnp.mean(jax.vmap(d)(jax.vmap(g)(z)))

  g2, d2 = mml.merge_models(defs, params)
  np.testing.assert_array_equal(jax.vmap(d2)(jax.vmap(g2)(z)), jax.vmap(d)(jax.vmap(g)(z)))
  field = mml.value_and_vector_field(loss_fn)
  tx = mml.extragradient(optax.sgd(0.1))
  new, _, _ = mml.game_step(tx, lambda q, i: field(q), params, tx.init(params))
  assert jax.tree.structure(new) == jax.tree.structure(params)
  assert analysis.jacobian(mml.vector_field(loss_fn), params).shape == (n, n)


def test_split_models_errors():
  g, d = _nnx_pair()
  with pytest.raises(ValueError, match="already minmaxlab.Players"):
    mml.split_models(mml.Players(g, d), d)
  defs, params = mml.split_models(g, d)
  with pytest.raises(ValueError, match="the two minmaxlab.Players that split_models returned"):
    mml.merge_models(params, params.min)
  with pytest.raises(ValueError, match="must be the ModelDef"):
    mml.merge_models(mml.Players(1, defs.max), params)


def test_a_model_that_is_not_nnx_needs_equinox(monkeypatch):
  monkeypatch.setitem(__import__("sys").modules, "equinox", None)  # as if not installed
  g, _ = _nnx_pair()
  with pytest.raises(ImportError, match=r"max_model is not a flax.nnx.Module.*pip install equinox"):
    mml.split_models(g, {"w": jnp.zeros(2)})
