"""Players, the descent vector field and the games' known equilibria."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minmaxlab as mml


def test_players_is_a_pytree():
  p = mml.Players(jnp.ones(2), {"w": jnp.zeros(3)})
  leaves, tree = jax.tree.flatten(p)
  assert len(leaves) == 2
  rebuilt = jax.tree.unflatten(tree, leaves)
  assert isinstance(rebuilt, mml.Players) and rebuilt.min is leaves[0]
  q = jax.tree.map(lambda x: x + 1, p)
  assert isinstance(q, mml.Players)
  np.testing.assert_allclose(q.max["w"], 1.0)


def test_zero_sum_field_negates_max_gradient_once():
  field = mml.vector_field(lambda p: p.min * p.max)  # f = x y
  v = field(mml.Players(jnp.array(2.0), jnp.array(3.0)))
  np.testing.assert_allclose(v.min, 3.0)  # df/dx = y
  np.testing.assert_allclose(v.max, -2.0)  # -(df/dy) = -x


def test_two_loss_field_takes_each_players_own_gradient():
  # min minimises (x - y)^2, max minimises (y - 2x)^2 + x^3 (x^3 must not leak into max's grad
  # w.r.t. x; only each player's own gradient of its own loss counts).
  def loss(p):
    x, y = p
    return (x - y) ** 2, (y - 2 * x) ** 2 + x**3

  (lmin, lmax), v = mml.value_and_vector_field(loss)(mml.Players(jnp.array(1.0), jnp.array(3.0)))
  np.testing.assert_allclose(lmin, 4.0)
  np.testing.assert_allclose(lmax, 2.0)
  np.testing.assert_allclose(v.min, 2 * (1.0 - 3.0))
  np.testing.assert_allclose(v.max, 2 * (3.0 - 2.0))


def test_has_aux():
  field = mml.vector_field(lambda p, s: (s * p.min * p.max, {"s": s}), has_aux=True)
  v, aux = field(mml.Players(jnp.array(1.0), jnp.array(2.0)), 3.0)
  np.testing.assert_allclose(v.min, 6.0)
  np.testing.assert_allclose(v.max, -3.0)
  assert aux["s"] == 3.0


@pytest.mark.parametrize("bad", [(jnp.ones(2), jnp.ones(2)), {"min": 1}, jnp.ones(3)])
def test_field_rejects_non_players(bad):
  with pytest.raises(ValueError, match="Players"):
    mml.vector_field(lambda p: 0.0)(bad)


def test_loss_output_must_be_scalar_or_pair():
  with pytest.raises(ValueError, match="shape"):
    mml.vector_field(lambda p: p.min * jnp.ones(3))(mml.Players(jnp.array(1.0), jnp.array(1.0)))
  with pytest.raises(ValueError, match="length 3"):
    mml.vector_field(lambda p: (p.min, p.max, p.min))(mml.Players(jnp.array(1.0), jnp.array(1.0)))


def test_bilinear_equilibrium_zeroes_the_field(x64):
  g = mml.games.random_bilinear(jax.random.key(0), 5)
  star = g.equilibrium()
  v = mml.vector_field(g.loss)(star)
  np.testing.assert_allclose(np.concatenate(v), 0.0, atol=1e-9)
  assert float(g.distance(star)["joint"]) == 0.0


def test_bilinear_validates_shapes():
  with pytest.raises(ValueError, match="shape"):
    mml.games.bilinear(jnp.ones((2, 3)), jnp.ones(3))
  with pytest.raises(ValueError, match="2-D"):
    mml.games.bilinear(jnp.ones(3))


def test_quadratic_equilibrium_and_jacobian(x64):
  A = jnp.array([[1.0, 2.0], [0.5, -1.0]])
  g = mml.games.quadratic(A, 0.3, jnp.array([1.0, -1.0]), jnp.array([0.2, 0.1]))
  v = mml.vector_field(g.loss)
  np.testing.assert_allclose(np.concatenate(v(g.equilibrium())), 0.0, atol=1e-10)
  J = jax.jacfwd(lambda z: jnp.concatenate(v(mml.Players(z[:2], z[2:]))))(jnp.zeros(4))
  eig = np.linalg.eigvals(np.asarray(J))
  np.testing.assert_allclose(eig.real, 0.3, atol=1e-10)
  np.testing.assert_allclose(
    np.sort(np.abs(eig.imag)), np.sort(np.repeat(np.linalg.svd(A, compute_uv=False), 2)), atol=1e-10
  )


def test_stochastic_bilinear_sums_components(x64):
  game, p = mml.games.random_stochastic_bilinear(jax.random.key(1), d=8)
  idx = jnp.arange(8)
  full = game.loss(p)
  np.testing.assert_allclose(game.loss(p, idx), full, rtol=1e-12)
  parts = sum(game.loss(p, jnp.array([i])) for i in range(8))
  np.testing.assert_allclose(parts, full, rtol=1e-12)
  # The expected minibatch field is (B / n) times the full field.
  vf = mml.vector_field(game.loss)
  B = 3
  subsets = [jnp.array(s) for s in __import__("itertools").combinations(range(8), B)]
  mean = jax.tree.map(lambda *xs: sum(xs) / len(xs), *[vf(p, s) for s in subsets])
  full_v = vf(p)
  np.testing.assert_allclose(np.concatenate(mean), B / 8 * np.concatenate(full_v), rtol=1e-10)
  np.testing.assert_allclose(np.concatenate(vf(game.equilibrium())), 0.0, atol=1e-12)


def test_stochastic_sample_validates_batch_size():
  game, _ = mml.games.random_stochastic_bilinear(jax.random.key(1), d=4)
  with pytest.raises(ValueError, match="batch_size"):
    game.sample(jax.random.key(0), 5)
  idx = game.sample(jax.random.key(0), 4)
  assert sorted(np.asarray(idx).tolist()) == [0, 1, 2, 3]


def test_dirac_gan_equilibrium_and_rotation(x64):
  g = mml.games.dirac_gan()
  v = mml.vector_field(g.loss)
  np.testing.assert_allclose(np.stack(v(g.equilibrium())), 0.0, atol=1e-12)
  J = jax.jacfwd(lambda z: jnp.stack(v(mml.Players(z[0], z[1]))))(jnp.zeros(2))
  np.testing.assert_allclose(np.linalg.eigvals(np.asarray(J)), [0.5j, -0.5j], atol=1e-12)
  g_reg = mml.games.dirac_gan(gamma=0.4)
  v_reg = mml.vector_field(g_reg.loss)
  J = jax.jacfwd(lambda z: jnp.stack(v_reg(mml.Players(z[0], z[1]))))(jnp.zeros(2))
  np.testing.assert_allclose(np.asarray(J), [[0.0, 0.5], [-0.5, 0.4]], atol=1e-12)
  with pytest.raises(ValueError, match="gamma"):
    mml.games.dirac_gan(-1.0)
