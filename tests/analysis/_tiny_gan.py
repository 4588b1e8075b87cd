"""A tiny MLP GAN written here, independent of minmaxlab.gan, for the analysis tests:
``tiny_gan(key) -> (field, params, (real, z))``."""

import jax
import jax.numpy as jnp
import numpy as np

import minmaxlab as mml


def tiny_gan(key, latent=2, hidden=6, dim=2, batch=16):
  ks = jax.random.split(key, 8)

  def dense(k, i, o):
    return {"w": jax.random.normal(k, (i, o)) / np.sqrt(i), "b": 0.1 * jnp.ones(o)}

  G = {"l1": dense(ks[0], latent, hidden), "l2": dense(ks[1], hidden, dim)}
  D = {"l1": dense(ks[2], dim, hidden), "l2": dense(ks[3], hidden, 1)}
  real = jax.random.normal(ks[4], (batch, dim)) + 2.0
  z = jax.random.normal(ks[5], (batch, latent))

  def mlp(p, x):
    return jnp.tanh(x @ p["l1"]["w"] + p["l1"]["b"]) @ p["l2"]["w"] + p["l2"]["b"]

  def loss(params, real, z):
    fake = mlp(params.min, z)
    d_real, d_fake = mlp(params.max, real), mlp(params.max, fake)
    loss_d = jnp.mean(jax.nn.softplus(-d_real) + jax.nn.softplus(d_fake))
    loss_g = jnp.mean(jax.nn.softplus(-d_fake))  # non-saturating
    return loss_g, loss_d

  return mml.vector_field(loss), mml.Players(G, D), (real, z)
