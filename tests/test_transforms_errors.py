"""Bad input raises a clear ValueError naming the offending value."""

import jax.numpy as jnp
import optax
import pytest

import minmaxlab as mml

P = mml.Players(jnp.ones(2), jnp.ones(2))


@pytest.mark.parametrize("k", [0, -3, 2.5, "5"])
def test_bad_sync_period(k):
  with pytest.raises(ValueError, match=f"sync_period must be an integer >= 1, got {k!r}"):
    mml.lookahead_minmax(optax.sgd(0.1), sync_period=k)


@pytest.mark.parametrize("alpha", [0.0, -0.5, 1.5, float("nan")])
def test_bad_slow_step_size(alpha):
  with pytest.raises(ValueError, match=r"slow_step_size must be in \(0, 1\]"):
    mml.lookahead_minmax(optax.sgd(0.1), slow_step_size=alpha)


def test_bad_slow_init_and_nested_periods():
  with pytest.raises(ValueError, match="slow_init"):
    mml.lookahead_minmax(optax.sgd(0.1), slow_init="eager")
  with pytest.raises(ValueError, match=r"\(4, 6\)"):
    mml.nested_lookahead_minmax(optax.sgd(0.1), (4, 6), (0.5, 0.5))
  with pytest.raises(ValueError, match="equal"):
    mml.nested_lookahead_minmax(optax.sgd(0.1), (4, 8), (0.5,))


@pytest.mark.parametrize("n", [0, -1, 1.5])
def test_bad_max_steps(n):
  with pytest.raises(ValueError, match=f"max_steps must be an integer >= 1, got {n!r}"):
    mml.alternating(optax.sgd(0.1), max_steps=n)


def test_inner_must_be_a_transform():
  for factory in (mml.alternating, mml.extragradient, mml.optimistic, mml.lookahead_minmax):
    with pytest.raises(ValueError, match="GradientTransformation"):
      factory("adam")


@pytest.mark.parametrize("make", [
    lambda: mml.alternating(optax.sgd(0.1)),
    lambda: mml.extragradient(optax.sgd(0.1)),
    lambda: mml.lookahead_minmax(mml.extragradient(optax.sgd(0.1))),
])
def test_missing_vector_field(make):
  tx = make()
  s = tx.init(P)
  with pytest.raises(ValueError, match="vector_field"):
    tx.update(P, s, P)


@pytest.mark.parametrize("make", [
    lambda: mml.alternating(optax.sgd(0.1)),
    lambda: mml.extragradient(optax.sgd(0.1)),
    lambda: mml.lookahead_minmax(optax.sgd(0.1)),
    lambda: mml.per_player(min=optax.sgd(0.1), max=optax.sgd(0.1)),
])
def test_params_must_be_players(make):
  tx = make()
  with pytest.raises(ValueError, match="Players"):
    tx.init((jnp.ones(2), jnp.ones(2)))
  s = tx.init(P)
  with pytest.raises(ValueError, match="Players"):
    tx.update((jnp.ones(2), jnp.ones(2)), s, P, vector_field=lambda p, i: p)


def test_lookahead_needs_params():
  tx = mml.lookahead_minmax(optax.sgd(0.1))
  with pytest.raises(ValueError, match="params"):
    tx.update(P, tx.init(P), None)


def test_bad_averaging_arguments():
  with pytest.raises(ValueError, match="decay"):
    mml.averaging.ema(optax.sgd(0.1), decay=1.0)
  with pytest.raises(ValueError, match="start_step"):
    mml.averaging.uniform(optax.sgd(0.1), start_step=-1)
  with pytest.raises(ValueError, match="AveragingState"):
    mml.averaging.averaged_params(optax.sgd(0.1).init(P))
  with pytest.raises(ValueError, match="LookaheadMinmaxState"):
    mml.lookahead_slow_params(optax.sgd(0.1).init(P))
