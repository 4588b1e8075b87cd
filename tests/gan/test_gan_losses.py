"""minmaxlab.gan.losses: known values, numpy references, signs, the vector field, WGAN-GP."""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minmaxlab as mml
from minmaxlab.gan import losses, models

LOG2 = math.log(2.0)


def _np_softplus(t):
  return np.logaddexp(0.0, t)


def _np_sigmoid(t):
  return 1.0 / (1.0 + np.exp(-t))


# Independent numpy references: (loss_min, loss_max) from real logits r and fake logits f.
NUMPY = {
  "ns_bce": lambda r, f: (
    np.mean(_np_softplus(-f)),
    np.mean(_np_softplus(-r)) + np.mean(_np_softplus(f)),
  ),
  "minimax_bce": lambda r, f: (
    np.mean(np.log(1 - _np_sigmoid(f))),
    -np.mean(np.log(_np_sigmoid(r))) - np.mean(np.log(1 - _np_sigmoid(f))),
  ),
  "lsgan": lambda r, f: (
    0.5 * np.mean((f - 1) ** 2),
    0.5 * np.mean((r - 1) ** 2) + 0.5 * np.mean(f**2),
  ),
  "hinge": lambda r, f: (
    -np.mean(f),
    np.mean(np.maximum(0, 1 - r)) + np.mean(np.maximum(0, 1 + f)),
  ),
  "wgan_gp": lambda r, f: (-np.mean(f), np.mean(f) - np.mean(r)),
  "heuristic": lambda r, f: (
    -0.5 * np.mean(np.log(_np_sigmoid(f))),
    -np.mean(np.log(_np_sigmoid(r))) - np.mean(np.log(1 - _np_sigmoid(f))),
  ),
  "mse_sigmoid": lambda r, f: (
    np.mean((_np_sigmoid(f) - 1) ** 2),
    np.mean((_np_sigmoid(r) - 1) ** 2) + np.mean(_np_sigmoid(f) ** 2),
  ),
}

# Known values at r = f = 0.
AT_ZERO = {
  "ns_bce": (LOG2, 2 * LOG2),
  "minimax_bce": (-LOG2, 2 * LOG2),
  "lsgan": (0.5, 0.5),
  "hinge": (0.0, 2.0),
  "wgan_gp": (0.0, 0.0),
  "heuristic": (0.5 * LOG2, 2 * LOG2),
  "mse_sigmoid": (0.25, 0.5),
}


def test_registry_names():
  assert {"ns_bce", "minimax_bce", "lsgan", "hinge", "wgan_gp", "heuristic"} <= set(losses.LOSSES)
  assert set(NUMPY) == set(losses.LOSSES)


@pytest.mark.parametrize("name", sorted(AT_ZERO))
def test_known_values_at_zero_logits(name):
  zero = jnp.zeros(7)
  loss_min, loss_max = losses.LOSSES[name](zero, zero)
  np.testing.assert_allclose([loss_min, loss_max], AT_ZERO[name], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_matches_numpy_reference(name, x64):
  rng = np.random.default_rng(0)
  r, f = 3 * rng.normal(size=32), 3 * rng.normal(size=32)
  got = losses.LOSSES[name](jnp.asarray(r), jnp.asarray(f))
  np.testing.assert_allclose(got, NUMPY[name](r, f), rtol=1e-10)


def test_hinge_margins():
  # No discriminator loss once real logits >= 1 and fake logits <= -1.
  _, loss_max = losses.hinge(jnp.array([1.0, 3.0]), jnp.array([-1.0, -5.0]))
  assert float(loss_max) == 0.0
  _, loss_max = losses.hinge(jnp.array([0.5, 2.0]), jnp.array([-2.0, 0.0]))
  np.testing.assert_allclose(loss_max, 0.5 * 0.5 + 0.5 * 1.0)


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_large_logits_stay_finite(name):
  big = jnp.array([-200.0, 0.0, 200.0])
  out = losses.LOSSES[name](big, -big)
  grads = jax.grad(lambda r, f: sum(losses.LOSSES[name](r, f)), argnums=(0, 1))(big, -big)
  assert all(bool(jnp.all(jnp.isfinite(x))) for x in (*out, *grads))


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_sign_conventions(name):
  # At r = f = 1/2 (inside every margin): D lowers its loss by raising real logits and
  # lowering fake ones; G lowers its loss by raising fake logits and does not see real ones.
  zero = jnp.full(4, 0.5)
  d_min = jax.grad(lambda r, f: losses.LOSSES[name](r, f)[0], argnums=(0, 1))(zero, zero)
  d_max = jax.grad(lambda r, f: losses.LOSSES[name](r, f)[1], argnums=(0, 1))(zero, zero)
  assert bool(jnp.all(d_max[0] < 0)) and bool(jnp.all(d_max[1] > 0))
  assert bool(jnp.all(d_min[1] < 0)) and bool(jnp.all(d_min[0] == 0))


def _point_pair():
  """G(z) = theta (a point mass), D(x) = psi * x: a scalar Dirac-like GAN pair."""
  generator = models.Model(lambda key: jnp.zeros(()), lambda theta, z: theta + 0.0 * z[:, :1])
  discriminator = models.Model(lambda key: jnp.zeros(()), lambda psi, x: psi * x[:, 0])
  return models.GANPair(generator=generator, discriminator=discriminator, latent_dim=1)


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_vector_field_descent_directions(name, key):
  # Real data at +1, the generator at -1, D(x) = psi x with psi = 1/4: D already ranks
  # real above fake. The descent field must make D more confident (psi up: v.max < 0)
  # and move G towards the data (theta up: v.min < 0).
  pair = _point_pair()
  params = mml.Players(jnp.array(-1.0), jnp.array(0.25))
  real, z = jnp.ones((8, 1)), jnp.zeros((8, 1))
  (loss_min, loss_max), v = mml.value_and_vector_field(losses.game_loss(pair, name))(
    params, real, z, key
  )
  assert float(v.min) < 0 and float(v.max) < 0
  if name != "wgan_gp":  # with the penalty the D loss adds 10 (|psi| - 1)^2
    np.testing.assert_allclose(
      (loss_min, loss_max), NUMPY[name](np.full(8, 0.25), np.full(8, -0.25)), rtol=1e-6
    )


def test_ns_bce_field_closed_form(key):
  # l_G = sp(-psi theta): dl_G/dtheta = -psi sigma(-psi theta);
  # l_D = sp(-psi) + sp(psi theta): dl_D/dpsi = -sigma(-psi) + theta sigma(psi theta).
  pair = _point_pair()
  theta, psi = -0.7, 0.4
  v = mml.vector_field(losses.game_loss(pair, "ns_bce"))(
    mml.Players(jnp.array(theta), jnp.array(psi)), jnp.ones((5, 1)), jnp.zeros((5, 1))
  )
  np.testing.assert_allclose(v.min, -psi * _np_sigmoid(-psi * theta), rtol=1e-6)
  np.testing.assert_allclose(
    v.max, -_np_sigmoid(-psi) + theta * _np_sigmoid(psi * theta), rtol=1e-6
  )


def test_minimax_bce_field_is_zero_sum(key):
  # The field of the minimax loss equals the field of the zero-sum game f = -l_D.
  pair = _point_pair()
  params = mml.Players(jnp.array(0.3), jnp.array(-0.8))
  real, z = jnp.full((4, 1), 2.0), jnp.zeros((4, 1))
  v = mml.vector_field(losses.game_loss(pair, "minimax_bce"))(params, real, z)
  zero_sum = lambda p, real, z: -losses.game_loss(pair, "ns_bce")(p, real, z)[1]
  w = mml.vector_field(zero_sum)(params, real, z)
  np.testing.assert_allclose([v.min, v.max], [w.min, w.max], rtol=1e-6)


def test_gradient_penalty_linear_discriminator_closed_form(key):
  # D(x) = w.x + b has grad_x D = w everywhere: penalty = (|w| - 1)^2 for any interpolation.
  w = jnp.array([[1.5], [-2.0], [0.5]])
  apply = lambda params, x: (x.reshape(x.shape[0], -1) @ params["w"])[:, 0] + params["b"]
  params = {"w": w, "b": jnp.array(0.3)}
  real = jnp.asarray(np.random.default_rng(0).normal(size=(6, 3)), jnp.float32)
  fake = real[::-1] + 1.0
  gp = losses.gradient_penalty(apply, params, real, fake, key)
  np.testing.assert_allclose(gp, (np.linalg.norm(np.asarray(w)) - 1) ** 2, rtol=1e-6)


def test_gradient_penalty_quadratic_discriminator(key):
  # D(x) = |x|^2 / 2 has grad_x D = x; with real == fake the interpolation is x itself.
  apply = lambda params, x: 0.5 * jnp.sum(x.reshape(x.shape[0], -1) ** 2, axis=1)
  x = jnp.asarray(np.random.default_rng(1).normal(size=(5, 2, 2, 1)), jnp.float32)
  gp = losses.gradient_penalty(apply, None, x, x, key)
  norms = np.linalg.norm(np.asarray(x).reshape(5, -1), axis=1)
  np.testing.assert_allclose(gp, np.mean((norms - 1) ** 2), rtol=1e-5)


def test_wgan_gp_game_loss_adds_the_penalty(key):
  # A linear critic on flattened images: the penalty is gp_weight (|w| - 1)^2.
  d = models.Model(
    lambda key: {"w": jnp.full((4,), 0.25)}, lambda p, x: x.reshape(x.shape[0], -1) @ p["w"]
  )
  g = models.Model(lambda key: jnp.zeros((2, 2, 1)), lambda p, z: p + z[:, :4].reshape(-1, 2, 2, 1))
  pair = models.GANPair(generator=g, discriminator=d, latent_dim=4)
  params = mml.Players(g.init(key), d.init(key))
  real = jnp.ones((3, 2, 2, 1))
  z = jnp.zeros((3, 4))
  plain = losses.game_loss(pair, losses.wasserstein)(params, real, z)
  gp_min, gp_max = losses.game_loss(pair, "wgan_gp", gp_weight=7.0)(params, real, z, key)
  np.testing.assert_allclose(gp_min, plain[0])
  np.testing.assert_allclose(gp_max - plain[1], 7.0 * (0.5 - 1.0) ** 2, rtol=1e-6)
  with pytest.raises(ValueError, match="key"):
    losses.game_loss(pair, "wgan_gp")(params, real, z)


@pytest.mark.parametrize("name", ["ns_bce", "wgan_gp"])
def test_game_loss_on_real_models_under_jit_and_vmap(name, key):
  # A population of 2 MLP pairs: the vmapped field equals each member's field, and the max
  # player's field is the plain gradient of its own loss (no negation for (l_min, l_max)).
  pair = models.make_pair("mlp", (2,), hidden=(16,), latent_dim=4)
  keys = jax.random.split(key, 2)
  params = mml.Players(jax.vmap(pair.generator.init)(keys), jax.vmap(pair.discriminator.init)(keys))
  rng = np.random.default_rng(2)
  real = jnp.asarray(rng.normal(size=(8, 2)), jnp.float32)
  z = jnp.asarray(rng.normal(size=(8, 4)), jnp.float32)
  loss_fn = losses.game_loss(pair, name)
  vaf = mml.value_and_vector_field(loss_fn)

  def member(p):
    (lmin, lmax), v = vaf(p, real, z, key)
    g_max = jax.grad(lambda d: loss_fn(mml.Players(p.min, d), real, z, key)[1])(p.max)
    return lmin, lmax, v, g_max

  batched = jax.jit(jax.vmap(member))(params)
  single = jax.jit(member)
  for i in range(2):
    one = single(jax.tree.map(lambda a, i=i: a[i], params))
    chex.assert_trees_all_close(
      jax.tree.map(lambda a, i=i: a[i], batched), one, rtol=1e-4, atol=1e-6
    )
    chex.assert_trees_all_close(one[2].max, one[3], rtol=1e-6, atol=1e-7)


def test_bad_loss_name():
  pair = _point_pair()
  with pytest.raises(ValueError, match="unknown loss"):
    losses.game_loss(pair, "bce")
