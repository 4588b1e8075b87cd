"""Unrolled GAN (Metz et al. 2017) against closed forms and an independent numpy computation."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from minmaxlab import Players


def _bilinear(a):
  def loss(p, i):
    del i
    return p.min @ a @ p.max  # zero-sum: min minimises f, max maximises it

  return loss


def _step(tx, params, state, loss_fn):
  field = mml.vector_field(lambda p: loss_fn(p, 0))(params)
  updates, state = tx.update(field, state, params, loss_fn=loss_fn)
  return optax.apply_updates(params, updates), state


def _random(shape, seed):
  return np.random.default_rng(seed).normal(size=shape)


def test_zero_unroll_steps_is_simultaneous_gda(x64):
  a = jnp.asarray(_random((3, 2), 0))
  params = Players(jnp.asarray(_random(3, 1)), jnp.asarray(_random(2, 2)))
  loss = _bilinear(a)
  inner = mml.per_player(min=optax.adam(0.1), max=optax.sgd(0.05, momentum=0.5))
  tx, gda = mml.unrolled(inner, unroll_steps=0), inner
  p, s = params, tx.init(params)
  q, t = params, gda.init(params)
  step = jax.jit(lambda p, s: _step(tx, p, s, loss))
  for _ in range(7):
    p, s = step(p, s)
    field = mml.vector_field(lambda z: loss(z, 0))(q)
    u, t = gda.update(field, t, q)
    q = optax.apply_updates(q, u)
  chex.assert_trees_all_close(p, q, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_bilinear_sgd_closed_form(k, x64):
  # f = x^T A y with SGD(eta): the simulated ascent steps give y_k = y + k eta A^T x, so
  # d/dx f(x, y_k(x)) = A y + 2 k eta A A^T x (k = 1 is the hand-derived one-step case).
  eta = 0.07
  a = _random((3, 2), 3)
  x, y = _random(3, 4), _random(2, 5)
  tx = mml.unrolled(optax.sgd(eta), unroll_steps=k)
  params = Players(jnp.asarray(x), jnp.asarray(y))
  new, _ = _step(tx, params, tx.init(params), _bilinear(jnp.asarray(a)))
  np.testing.assert_allclose(new.min, x - eta * (a @ y + 2 * k * eta * a @ a.T @ x), rtol=1e-12)
  np.testing.assert_allclose(new.max, y + eta * a.T @ x, rtol=1e-12)  # the ordinary max step
  # Without the derivative through the unroll: only the partial derivative at y_k.
  tx = mml.unrolled(optax.sgd(eta), unroll_steps=k, differentiate_through_unroll=False)
  new, _ = _step(tx, params, tx.init(params), _bilinear(jnp.asarray(a)))
  np.testing.assert_allclose(new.min, x - eta * a @ (y + k * eta * a.T @ x), rtol=1e-12)


def test_quadratic_game_closed_form(x64):
  # f = x^T A y + a/2 |x|^2 - b/2 |y|^2. The max player's SGD(eta) ascent is the linear map
  # y <- c y + eta A^T x with c = 1 - eta b, so y_k = c^k y + s A^T x, s = (1 - c^k) / b, and
  # d/dx f(x, y_k(x)) = A y_k + a x + s A (A^T x - b y_k).
  eta, lr, k, qa, qb = 0.1, 0.03, 3, 0.4, 0.7
  am = _random((4, 3), 6)
  x, y = _random(4, 7), _random(3, 8)

  def loss(p, i):
    del i
    return p.min @ am @ p.max + qa / 2 * p.min @ p.min - qb / 2 * p.max @ p.max

  c = 1 - eta * qb
  s = (1 - c**k) / qb
  y_k = c**k * y + s * am.T @ x
  grad = am @ y_k + qa * x + s * am @ (am.T @ x - qb * y_k)
  inner = mml.per_player(min=optax.sgd(lr), max=optax.sgd(eta))
  tx = mml.unrolled(inner, unroll_steps=k)
  params = Players(jnp.asarray(x), jnp.asarray(y))
  new, state = jax.jit(lambda p, s: _step(tx, p, s, loss))(params, tx.init(params))
  np.testing.assert_allclose(new.min, x - lr * grad, rtol=1e-12)
  np.testing.assert_allclose(new.max, y + eta * (am.T @ x - qb * y), rtol=1e-12)
  assert int(state.count) == 1


def test_non_zero_sum_against_numpy_finite_differences(x64):
  # loss_max = |y - tanh(B x)|^2 / 2 (the max player tracks tanh(Bx));
  # loss_min = sum(softplus(-(C x) * y)) (not -loss_max). Unrolled SGD in numpy, central
  # differences of the surrogate loss_min(x, y_k(x)), with and without y_k's dependence on x.
  eta, k = 0.3, 3
  bm, cm = _random((2, 3), 10), _random((2, 3), 11)
  x, y = _random(3, 12), _random(2, 13)

  def loss(p, i):
    del i
    loss_max = 0.5 * jnp.sum((p.max - jnp.tanh(bm @ p.min)) ** 2)
    loss_min = jnp.sum(jax.nn.softplus(-(cm @ p.min) * p.max))
    return loss_min, loss_max

  def np_loss_min(x, y):
    return np.sum(np.logaddexp(0.0, -(cm @ x) * y))

  def np_unroll(x):
    yk = y.copy()
    for _ in range(k):
      yk = yk - eta * (yk - np.tanh(bm @ x))
    return yk

  def central(f, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(3)])

  params = Players(jnp.asarray(x), jnp.asarray(y))
  for through, surrogate in [
    (True, lambda xx: np_loss_min(xx, np_unroll(xx))),
    (False, lambda xx: np_loss_min(xx, np_unroll(x))),
  ]:
    tx = mml.unrolled(optax.sgd(1.0), k, through, unroll_optimizer=optax.sgd(eta))
    new, _ = _step(tx, params, tx.init(params), loss)
    np.testing.assert_allclose(x - new.min, central(surrogate), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(new.max, y - (y - np.tanh(bm @ x)), rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_unrolling_turns_divergent_gda_into_a_contraction(k, x64):
  # f = x y, SGD(eta): one step is linear, [[1 - 2 k eta^2, -eta], [eta, 1]], whose
  # eigenvalues have modulus sqrt(det) = sqrt(1 - (2k - 1) eta^2) < 1 (GDA: sqrt(1 + eta^2)).
  eta = 0.2
  loss = lambda p, i: p.min * p.max  # noqa: E731
  tx = mml.unrolled(optax.sgd(eta), unroll_steps=k)
  columns = []
  for e in np.eye(2):
    params = Players(jnp.asarray(e[0]), jnp.asarray(e[1]))
    new, _ = _step(tx, params, tx.init(params), loss)
    columns.append([float(new.min), float(new.max)])
  operator = np.array(columns).T
  np.testing.assert_allclose(operator, [[1 - 2 * k * eta**2, -eta], [eta, 1]], atol=1e-14)
  rho = max(abs(np.linalg.eigvals(operator)))
  np.testing.assert_allclose(rho, np.sqrt(1 - (2 * k - 1) * eta**2), rtol=1e-12)


def test_adam_minibatches_state_and_lookahead_composition():
  # Each evaluation i gets its own minibatch; Adam (eps_root > 0 to differentiate through it)
  # under jit and inside lookahead_minmax; the real max state advances once per step.
  k = 3
  rng = np.random.default_rng(0)
  mats = jnp.asarray(rng.normal(size=(k + 1, 3, 3)), jnp.float32)
  seen = []

  def loss(p, i):
    seen.append(i)
    return p.min @ mats[i] @ p.max + 0.05 * (p.min @ p.min - p.max @ p.max)

  adam = optax.adam(0.05, b1=0.5, eps_root=1e-8)
  tx = mml.lookahead_minmax(mml.unrolled(adam, unroll_steps=k), sync_period=4)
  params = Players(jnp.ones(3), jnp.zeros(3))  # a zero gradient coordinate at the start

  @jax.jit
  def step(p, s):
    field = mml.vector_field(lambda z: loss(z, 0))(p)
    u, s = tx.update(field, s, p, loss_fn=loss)
    return optax.apply_updates(p, u), s

  state = tx.init(params)
  for _ in range(8):
    params, state = step(params, state)
  assert sorted(set(seen)) == list(range(k + 1))
  assert all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree.leaves(params))
  inner = state.inner_state
  assert int(inner.count) == 8
  assert int(inner.inner_state.max[0].count) == 8  # simulated steps leave it alone
  # The unroll changes the min player's gradient (Adam's first moment), not the max player's.
  gda = mml.lookahead_minmax(mml.unrolled(adam, unroll_steps=0), sync_period=4)
  p0 = Players(jnp.ones(3), jnp.zeros(3))
  field = mml.vector_field(lambda z: loss(z, 0))(p0)
  _, s_gda = gda.update(field, gda.init(p0), p0, loss_fn=loss)
  _, s_unr = tx.update(field, tx.init(p0), p0, loss_fn=loss)
  mu_gda, mu_unr = (s.inner_state.inner_state for s in (s_gda, s_unr))
  np.testing.assert_allclose(mu_gda.min[0].mu, 0.5 * field.min, rtol=1e-6)
  assert float(jnp.max(jnp.abs(mu_gda.min[0].mu - mu_unr.min[0].mu))) > 1e-3
  np.testing.assert_allclose(mu_gda.max[0].mu, mu_unr.max[0].mu, rtol=1e-6)


def test_errors():
  with pytest.raises(ValueError, match="unroll_steps"):
    mml.unrolled(optax.sgd(0.1), unroll_steps=-1)
  with pytest.raises(ValueError, match="unroll_steps"):
    mml.unrolled(optax.sgd(0.1), unroll_steps=1.5)
  tx = mml.unrolled(optax.sgd(0.1), unroll_steps=1)
  params = Players(jnp.ones(2), jnp.ones(2))
  state = tx.init(params)
  with pytest.raises(ValueError, match="loss_fn"):
    tx.update(params, state, params)
  with pytest.raises(ValueError, match="params"):
    tx.update(params, state, None, loss_fn=lambda p, i: 0.0)
  with pytest.raises(ValueError, match="Players"):
    tx.init(jnp.ones(2))
