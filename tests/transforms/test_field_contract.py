"""The field contract of ``game_step``: how many evaluations a step makes
(``num_field_evaluations``), one fresh key per evaluation (``key=``), and a stack of
minibatches read with a check instead of JAX's silent clamping (``take_batch``)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from minmaxlab import analysis

BILINEAR = mml.vector_field(lambda p, b: jnp.sum(b * p.min * p.max))
PARAMS = mml.Players(jnp.ones(2), jnp.ones(2))


@pytest.mark.parametrize(
  "tx, n",
  [
    (optax.sgd(0.1), 1),
    (mml.optimistic(optax.sgd(0.1)), 1),
    (mml.extragradient(optax.adam(1e-3)), 2),
    (mml.alternating(optax.sgd(0.1), max_steps=5), 6),
    (mml.lookahead_minmax(mml.alternating(optax.adam(1e-3), max_steps=5)), 6),
    (mml.lookahead_minmax(mml.extragradient(optax.adam(1e-3))), 2),
    (mml.with_field_processing(mml.extragradient(optax.sgd(0.1)), optax.clip(1.0)), 2),
  ],
)
def test_num_field_evaluations(tx, n):
  assert mml.num_field_evaluations(tx) == n
  assert mml.num_field_evaluations(tx, PARAMS, lambda p, i: BILINEAR(p, 1.0)) == n
  assert analysis.field_evaluations_per_step(tx, BILINEAR, PARAMS, 1.0) == n
  seen = []  # game_step asks for exactly i = 0 .. n - 1

  def field(p, i):
    seen.append(i)
    return BILINEAR(p, 1.0)

  mml.game_step(tx, field, PARAMS, tx.init(PARAMS))
  assert seen == list(range(n))


def test_key_form_gives_each_evaluation_a_fresh_key():
  tx = mml.lookahead_minmax(mml.alternating(optax.sgd(0.1), max_steps=2))
  key = jax.random.key(3)
  seen = []

  def field(p, k):
    seen.append(jax.random.key_data(k))
    return BILINEAR(p, jax.random.normal(k, (2,)))

  params, opt_state, _ = mml.game_step(tx, field, PARAMS, tx.init(PARAMS), key=key)
  want = [jax.random.key_data(jax.random.fold_in(key, i)) for i in range(3)]
  np.testing.assert_array_equal(np.stack(seen), np.stack(want))
  assert len({tuple(np.asarray(k).ravel()) for k in seen}) == 3
  # under jit, the same step: the same numbers
  step = jax.jit(lambda p, s, k: mml.game_step(tx, field, p, s, key=k))
  again, _, _ = step(PARAMS, tx.init(PARAMS), key)
  np.testing.assert_allclose(np.asarray(again.min), np.asarray(params.min), rtol=1e-6)


def test_key_form_rejects_a_non_key():
  with pytest.raises(ValueError, match="key must be a jax.random key"):
    mml.game_step(optax.sgd(0.1), lambda p, k: BILINEAR(p, 1.0), PARAMS, (), key=3)


def test_take_batch_raises_past_the_stack_instead_of_clamping():
  tx = mml.lookahead_minmax(mml.alternating(optax.sgd(0.1), max_steps=5))
  n = mml.num_field_evaluations(tx)
  assert n == 6
  batches = jnp.arange(1.0, 3.0)[:, None] * jnp.ones((2, 2))  # only 2 minibatches
  step = jax.jit(
    lambda p, s, b: mml.game_step(tx, lambda q, i: BILINEAR(q, mml.take_batch(b, i)), p, s)
  )
  with pytest.raises(
    IndexError,
    match=r"field evaluation 2 needs minibatch 2, but batches holds 2.*num_field_evaluations",
  ):
    step(PARAMS, tx.init(PARAMS), batches)
  # with n minibatches it runs, and evaluation i reads minibatch i (not a clamped one)
  batches = jnp.arange(1.0, n + 1.0)[:, None] * jnp.ones((n, 2))
  read = []

  def field(q, i):
    read.append(float(mml.take_batch(batches, i)[0]))
    return BILINEAR(q, mml.take_batch(batches, i))

  mml.game_step(tx, field, PARAMS, tx.init(PARAMS))
  assert read == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_take_batch_of_a_pytree_and_its_errors():
  batches = {"x": jnp.zeros((3, 4)), "y": jnp.arange(3)}
  assert int(mml.take_batch(batches, 2)["y"]) == 2
  with pytest.raises(IndexError, match="field evaluation 3"):
    mml.take_batch(batches, 3)
  with pytest.raises(IndexError, match="field evaluation -1"):
    mml.take_batch(batches, -1)
  with pytest.raises(ValueError, match="one common leading axis"):
    mml.take_batch({"x": jnp.zeros((3, 4)), "y": jnp.zeros(2)}, 0)
  with pytest.raises(ValueError, match="one common leading axis"):
    mml.take_batch(jnp.float32(1.0), 0)
