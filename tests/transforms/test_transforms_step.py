"""game_step / apply_game_step equal the hand-written update, apply_updates idiom."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml

GAME = mml.games.random_bilinear(jax.random.key(0), 3)
VAF = mml.value_and_vector_field(lambda p, s: s * GAME.loss(p))
P = mml.Players(jnp.ones(3), -jnp.ones(3))
SCALES = jnp.array([1.0, 0.5, 2.0])  # evaluation i uses "batch" SCALES[i]


def by_hand(tx, params, state):
  losses, v = VAF(params, SCALES[0])
  u, state = tx.update(v, state, params, vector_field=lambda p, i: VAF(p, SCALES[i])[1])
  return optax.apply_updates(params, u), state, losses


@pytest.mark.parametrize(
  "make",
  [
    lambda: optax.adam(0.1),
    lambda: mml.extragradient(optax.adam(0.1)),
    lambda: mml.lookahead_minmax(mml.alternating(optax.sgd(0.1), max_steps=2), 2),
    lambda: mml.transforms.ema(mml.optimistic(optax.sgd(0.1)), 0.9),
  ],
)
def test_game_step_is_the_idiom(make):
  tx = make()
  p1 = p2 = P
  s1 = s2 = tx.init(P)
  step = jax.jit(lambda p, s: mml.game_step(tx, lambda q, i: VAF(q, SCALES[i]), p, s))
  for _ in range(3):
    p1, s1, l1 = step(p1, s1)
    p2, s2, l2 = by_hand(tx, p2, s2)
    np.testing.assert_allclose(np.asarray(l1), np.asarray(l2), rtol=1e-6)
  for a, b in zip(jax.tree.leaves((p1, s1)), jax.tree.leaves((p2, s2))):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_game_step_with_a_field_only_returns_no_value():
  field = mml.vector_field(GAME.loss)
  tx = mml.extragradient(optax.sgd(0.1))
  _, _, value = mml.game_step(tx, lambda p, i: field(p), P, tx.init(P))
  assert value is None
  with pytest.raises(ValueError, match="must return the descent field"):
    mml.game_step(tx, lambda p, i: 1.0, P, tx.init(P))


def test_apply_game_step_on_a_flax_train_state():
  train_state = pytest.importorskip("flax.training.train_state")
  tx = mml.lookahead_minmax(mml.extragradient(optax.adam(0.1)), 2)
  state = train_state.TrainState.create(apply_fn=None, params=P, tx=tx)
  params, opt_state = P, tx.init(P)
  for _ in range(3):
    state, losses = mml.apply_game_step(state, lambda q, i: VAF(q, SCALES[i]))
    params, opt_state, _ = by_hand(tx, params, opt_state)
  assert int(state.step) == 3
  np.testing.assert_allclose(state.params.min, params.min, rtol=1e-5)
  np.testing.assert_allclose(state.params.max, params.max, rtol=1e-5)
  with pytest.raises(ValueError, match="TrainState-like"):
    mml.apply_game_step(object(), lambda q, i: VAF(q, 1.0))
