"""Known qualitative behaviour on bilinear games (full batch and stochastic)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import minmaxlab as mml
from tests._jax_runner import trajectory


def _full_batch_game():
  # Singular values spread over [0.5, 1.5], random singular vectors, linear terms.
  k1, k2, k3 = jax.random.split(jax.random.key(3), 3)
  q1, _ = jnp.linalg.qr(jax.random.normal(k1, (10, 10)))
  q2, _ = jnp.linalg.qr(jax.random.normal(k2, (10, 10)))
  A = q1 @ jnp.diag(jnp.linspace(0.5, 1.5, 10)) @ q2.T
  b, c = jax.random.normal(k3, (2, 10))
  return mml.games.bilinear(A, b, c), mml.Players(jnp.ones(10), -jnp.ones(10))


def _final_distance(tx, steps=600):
  game, p0 = _full_batch_game()
  traj = trajectory(tx, game.loss, p0, steps)
  d = jax.vmap(lambda x, y: game.distance(mml.Players(x, y))["joint"])(traj.min, traj.max)
  return float(game.distance(p0)["joint"]), np.asarray(d)


def test_gda_diverges():
  d0, d = _final_distance(optax.sgd(0.3), steps=200)
  assert d[-1] > 10 * d0
  assert np.all(np.diff(d) > 0)  # rho > 1 and GDA on a bilinear game is normal


def test_alternating_cycles():
  d0, d = _final_distance(mml.alternating(optax.sgd(0.3)))
  # rho = 1: neither converges nor diverges; stays within a bounded band around d0
  assert 0.2 * d0 < d.min() and d.max() < 5 * d0
  assert d[-100:].min() > 0.2 * d0


def test_lookahead_gda_and_extragradient_converge():
  for tx in [
    mml.lookahead_minmax(optax.sgd(0.3), 6, 0.5),
    mml.extragradient(optax.sgd(0.3)),
    mml.lookahead_minmax(mml.extragradient(optax.sgd(0.3)), 6, 0.5),
    mml.lookahead_minmax(mml.alternating(optax.sgd(0.3)), 6, 0.5),
  ]:
    d0, d = _final_distance(tx, steps=1500)
    assert d[-1] < 1e-3 * d0


def _stochastic_distance(tx, seed, steps, batch):
  game, p0 = mml.games.random_stochastic_bilinear(jax.random.key(100 + seed), d=50)
  vf = mml.vector_field(game.loss)
  tx = optax.with_extra_args_support(tx)

  def body(carry, key):
    p, s = carry
    keys = jax.random.split(key, 2)
    v = vf(p, game.sample(keys[0], batch))
    u, s = tx.update(v, s, p, vector_field=lambda q, i: vf(q, game.sample(keys[i], batch)))
    return (optax.apply_updates(p, u), s), None

  keys = jax.random.split(jax.random.key(seed), steps)
  (p, _), _ = jax.jit(lambda p: jax.lax.scan(body, (p, tx.init(p)), keys))(p0)
  return float(game.distance(p)["sum"]), float(game.distance(p0)["sum"])


def test_stochastic_lookahead_beats_gda():
  """Batch 1 of 50 components: GDA drifts away; LA-GDA with a long sync period
  (about a quarter turn of the mean-field rotation per cycle) ends far closer."""
  steps, eta = 6000, 0.05
  k = 1500  # k * atan(eta * B / n) ~ 1.5 rad
  gda, la = [], []
  for seed in range(3):
    gda.append(_stochastic_distance(optax.sgd(eta), seed, steps, 1)[0])
    la.append(_stochastic_distance(mml.lookahead_minmax(optax.sgd(eta), k, 0.3), seed, steps, 1)[0])
  assert np.mean(la) < 0.5 * np.mean(gda), (la, gda)
