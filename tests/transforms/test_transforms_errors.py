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


@pytest.mark.parametrize(
  "make",
  [
    lambda: mml.alternating(optax.sgd(0.1)),
    lambda: mml.extragradient(optax.sgd(0.1)),
    lambda: mml.lookahead_minmax(mml.extragradient(optax.sgd(0.1))),
  ],
)
def test_missing_vector_field(make):
  tx = make()
  s = tx.init(P)
  with pytest.raises(ValueError, match="vector_field"):
    tx.update(P, s, P)


@pytest.mark.parametrize(
  "make",
  [
    lambda: mml.alternating(optax.sgd(0.1)),
    lambda: mml.extragradient(optax.sgd(0.1)),
    lambda: mml.lookahead_minmax(optax.sgd(0.1)),
    lambda: mml.per_player(min=optax.sgd(0.1), max=optax.sgd(0.1)),
  ],
)
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
    mml.transforms.ema(optax.sgd(0.1), decay=1.0)
  with pytest.raises(ValueError, match="start_step"):
    mml.transforms.uniform(optax.sgd(0.1), start_step=-1)
  with pytest.raises(ValueError, match="AveragingState"):
    mml.transforms.averaged_params(optax.sgd(0.1).init(P))
  with pytest.raises(ValueError, match="LookaheadMinmaxState"):
    mml.lookahead_slow_params(optax.sgd(0.1).init(P))


def test_vector_field_helper_passed_as_the_keyword_is_refused():
  field = mml.vector_field(lambda p, scale: scale * p.min @ p.max)
  tx = mml.extragradient(optax.sgd(0.1))
  with pytest.raises(ValueError, match=r"got minmaxlab.vector_field\(loss_fn\) itself.*lambda"):
    tx.update(field(P, 2.0), tx.init(P), P, vector_field=field)
  vaf = mml.value_and_vector_field(lambda p: p.min @ p.max)
  with pytest.raises(ValueError, match="value_and_vector_field"):
    tx.update(vaf(P)[1], tx.init(P), P, vector_field=vaf)


def test_field_structure_is_checked_against_params():
  tx = mml.alternating(optax.sgd(0.1))
  s = tx.init(P)
  with pytest.raises(ValueError, match=r"at \.max: field shape \(1,\), params shape \(2,\)"):
    tx.update(P, s, P, vector_field=lambda p, i: mml.Players(p.min, p.max[:1]))
  with pytest.raises(ValueError, match="tree differs"):
    tx.update(P, s, P, vector_field=lambda p, i: mml.Players(p.min, {"w": p.max}))
  with pytest.raises(ValueError, match=r"\(value, field\).*\[1\]"):
    tx.update(P, s, P, vector_field=lambda p, i: ((0.0, 0.0), p))


def test_per_player_inside_a_chain_under_alternating():
  inner = optax.chain(optax.clip(1.0), mml.per_player(optax.sgd(1.0), optax.sgd(1.0)))
  with pytest.raises(ValueError, match=r"single player's params \(ArrayImpl\).*per_player\(min="):
    mml.alternating(inner).init(P)


def test_loss_returning_a_dict():
  field = mml.vector_field(lambda p: {"g": p.min @ p.max, "d": -p.min @ p.max})
  with pytest.raises(ValueError, match=r"got a dict with keys \['d', 'g'\].*has_aux=True"):
    field(P)
  with pytest.raises(ValueError, match="loss_max = a dict"):
    mml.vector_field(lambda p: (p.min @ p.max, {"d": 1.0}))(P)


def test_chained_in_front_of_a_fetching_scheme_raises_through_game_step():
  field = mml.vector_field(lambda p: 100.0 * p.min @ p.max)
  for scheme in (mml.extragradient, mml.alternating):
    tx = mml.lookahead_minmax(optax.chain(optax.clip_by_global_norm(1.0), scheme(optax.sgd(1.0))))
    with pytest.raises(ValueError, match=r"chained in front.*extragradient\(optax.chain\("):
      mml.game_step(tx, lambda p, i: field(p), P, tx.init(P))


def test_with_field_processing_needs_stateless_processing():
  tx = mml.with_field_processing(
    mml.extragradient(optax.sgd(0.1)), optax.scale_by_schedule(lambda n: 0.1)
  )
  with pytest.raises(ValueError, match="stateless.*inner transform"):
    tx.init(P)


def test_hyperparam_reads_the_copies_and_names_them_when_they_differ():
  inner = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1)
  state = mml.extragradient(inner).init(P)
  with pytest.raises(KeyError, match="multiple values"):  # optax's own getter
    optax.tree_utils.tree_get(state, "learning_rate")
  assert float(mml.transforms.hyperparam(state)) == pytest.approx(0.1)
  state = optax.tree_utils.tree_set(state, learning_rate=0.3)  # sets both copies
  assert float(mml.transforms.hyperparam(state)) == pytest.approx(0.3)
  state = state._replace(
    update_state=optax.tree_utils.tree_set(state.update_state, learning_rate=0.5)
  )
  with pytest.raises(ValueError, match="differ.*extrapolation_state.*update_state"):
    mml.transforms.hyperparam(state)
  with pytest.raises(ValueError, match="no injected hyperparameter 'b1'"):
    mml.transforms.hyperparam(state, "b1")
