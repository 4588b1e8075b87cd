"""game_step / apply_game_step equal the hand-written update, apply_updates idiom."""

import chex
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
  chex.assert_trees_all_close((p1, s1), (p2, s2), rtol=1e-5, atol=1e-7)


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


@pytest.mark.parametrize("player", ["min", "max"])
def test_game_step_with_one_player_moves_that_player_alone(player):
  """``player=``: the scheme sees the other player's field as zero (whatever ``field_fn``
  returns for it), the other player's params and state leaves come back unchanged, the
  shared ones (Lookahead's counter, a sync every 2 steps) advance; a sync sets the moving
  player onto its slow weights exactly."""
  tx = mml.lookahead_minmax(mml.extragradient(optax.adam(0.1)), 2)
  other = "max" if player == "min" else "min"
  labels = mml.transforms.player_labels(tx.init(P))

  def masked(q, i):
    losses, v = VAF(q, SCALES[i])
    return losses, v._replace(**{other: jnp.zeros_like(getattr(v, other))})

  step = jax.jit(
    lambda p, s: mml.game_step(tx, lambda q, i: VAF(q, SCALES[i]), p, s, player=player)
  )
  p, s = P, tx.init(P)
  for t in range(3):
    p_new, s_new, losses = step(p, s)
    want_losses, v = masked(p, 0)
    u, s_all = tx.update(v, s, p, vector_field=lambda q, i: masked(q, i)[1])
    want = mml.transforms.apply_lookahead_updates(p, u, s_all)
    np.testing.assert_array_equal(getattr(p_new, other), getattr(p, other))
    np.testing.assert_allclose(getattr(p_new, player), getattr(want, player), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(losses), np.asarray(want_losses), rtol=1e-6)
    by_side = (s_all, s) if player == "min" else (s, s_all)
    want_s = mml.transforms.merge_by_player(labels, *by_side, s_all)
    chex.assert_trees_all_close(s_new, want_s, rtol=1e-6, atol=0.0)
    # the other player's slow weights kept
    chex.assert_trees_all_equal(getattr(s_new.slow[0], other), getattr(s.slow[0], other))
    assert int(s_new.count) == t + 1 and bool(s_new.synced) == (t == 1)
    if t == 1:  # the sync: exactly onto the slow weights
      np.testing.assert_array_equal(getattr(p_new, player), getattr(s_new.slow[0], player))
    p, s = p_new, s_new


def test_game_step_refuses_an_unknown_player():
  tx = optax.sgd(0.1)
  with pytest.raises(ValueError, match="player must be None, 'min' or 'max', got 'both'"):
    mml.game_step(tx, lambda q, i: VAF(q, SCALES[i]), P, tx.init(P), player="both")
