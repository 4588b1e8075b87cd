"""The options that reproduce the LAGAN code (``extragradient``'s ``update_point`` and
``extrapolate_from``) on small games: where they must equal the textbook rule, where they
must not, and their one-line errors. Their match with the original's output is in
``test_lagan_golden.py``."""

import chex
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml


def _quadratic_game(p, _):
  """Each player's field depends on its own params (unlike a bilinear game)."""
  x, y = p.min, p.max
  f = x @ jnp.array([[1.0, 2.0], [-1.0, 0.5]]) @ y + 0.3 * jnp.sum(x**2) - 0.2 * jnp.sum(y**4)
  return f, -f


def _bilinear_game(p, _):
  f = p.min @ jnp.array([[1.0, 2.0], [-1.0, 0.5]]) @ p.max
  return f, -f


def _steps(tx, loss, n=6, outer=None):
  field = mml.value_and_vector_field(loss)
  params = mml.Players(jnp.array([0.5, -1.0]), jnp.array([1.0, 0.25]))
  tx = outer(tx) if outer else tx
  state = tx.init(params)
  for _ in range(n):
    params, state, _ = mml.game_step(tx, lambda p, i: field(p, i), params, state)
  return np.concatenate([np.asarray(params.min), np.asarray(params.max)])


def test_opponent_extrapolated_is_textbook_eg_on_a_bilinear_game():
  textbook = _steps(mml.extragradient(optax.sgd(0.1)), _bilinear_game)
  reference = _steps(
    mml.extragradient(optax.sgd(0.1), update_point="opponent_extrapolated"), _bilinear_game
  )
  np.testing.assert_allclose(reference, textbook, rtol=1e-6, atol=1e-7)


def test_opponent_extrapolated_differs_where_a_field_depends_on_its_own_player():
  textbook = _steps(mml.extragradient(optax.sgd(0.1)), _quadratic_game)
  reference = _steps(
    mml.extragradient(optax.sgd(0.1), update_point="opponent_extrapolated"), _quadratic_game
  )
  assert np.max(np.abs(reference - textbook)) > 1e-3


def test_last_iterate_is_the_params_without_an_outer_transform():
  plain = _steps(mml.extragradient(optax.adam(0.05)), _quadratic_game)
  last = _steps(
    mml.extragradient(optax.adam(0.05), extrapolate_from="last_iterate"), _quadratic_game
  )
  np.testing.assert_array_equal(last, plain)


def test_last_iterate_departs_after_a_lookahead_sync_that_moves_the_params():
  def outer(tx):
    return mml.lookahead_minmax(tx, 2, 0.5)  # eager slow weights: the first sync moves them

  for n, same in ((2, True), (3, False)):
    plain = _steps(mml.extragradient(optax.adam(0.05)), _quadratic_game, n, outer)
    last = _steps(
      mml.extragradient(optax.adam(0.05), extrapolate_from="last_iterate"),
      _quadratic_game,
      n,
      outer,
    )
    assert bool(np.max(np.abs(last - plain)) == 0.0) is same, n


def test_last_iterate_is_kept_in_the_state():
  tx = mml.extragradient(optax.sgd(0.1), extrapolate_from="last_iterate")
  params = mml.Players(jnp.ones(2), jnp.zeros(2))
  state = tx.init(params)
  chex.assert_trees_all_equal(state.last_iterate, params)
  assert mml.extragradient(optax.sgd(0.1)).init(params).last_iterate is None


@pytest.mark.parametrize(
  "kwargs, name",
  [({"update_point": "own"}, "update_point"), ({"extrapolate_from": "slow"}, "extrapolate_from")],
)
def test_unknown_values_are_refused_in_one_line(kwargs, name):
  with pytest.raises(ValueError, match=name) as err:
    mml.extragradient(optax.sgd(0.1), **kwargs)
  assert "\n" not in str(err.value) and repr(next(iter(kwargs.values()))) in str(err.value)
