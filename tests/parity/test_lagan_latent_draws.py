"""The MNIST notebook's latent draws as a named option of the Lookahead study's field:
``latent_draws="per_player"`` gives each player's field its own latent batch (the notebook
draws a fresh one for each player's step; its ExtraGrad takes four per step), where
``"shared"`` gives both players' fields of one evaluation the same batch."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

import minmaxlab as mml
from experiments.gan import lookahead_study


def _loss(p, real, z, key=None):
  fake = jnp.tanh(z @ p.min)  # a linear "generator" and "discriminator"
  d_real, d_fake = real @ p.max, fake @ p.max
  loss_d = jnp.mean(jax.nn.softplus(-d_real)) + jnp.mean(jax.nn.softplus(d_fake))
  return jnp.mean(jax.nn.softplus(-d_fake)), loss_d


def test_each_players_field_takes_its_own_latent_batch():
  k = jax.random.split(jax.random.key(0), 5)
  p = mml.Players(jax.random.normal(k[0], (3, 4)), jax.random.normal(k[1], (4,)))
  real = jax.random.normal(k[2], (6, 4))
  z_min, z_max = jax.random.normal(k[3], (6, 3)), jax.random.normal(k[4], (6, 3))
  vaf = mml.value_and_vector_field(_loss)
  losses, field = lookahead_study.per_player_field(vaf)(p, real, (z_min, z_max))
  at_min, at_max = vaf(p, real, z_min), vaf(p, real, z_max)
  np.testing.assert_array_equal(field.min, at_min[1].min)
  np.testing.assert_array_equal(field.max, at_max[1].max)
  np.testing.assert_array_equal(losses[0], at_min[0][0])
  assert np.max(np.abs(field.max - at_min[1].max)) > 1e-3  # "shared" would differ
  same = lookahead_study.per_player_field(vaf)(p, real, (z_min, z_min))[1]
  np.testing.assert_array_equal(same.max, at_min[1].max)


def test_an_unknown_latent_draws_is_refused():
  config = ml_collections.ConfigDict({"batch_size": 2, "latent_draws": "per_step"})
  exp = types.SimpleNamespace(loss_fn=_loss, pair=types.SimpleNamespace(latent_dim=3))
  with pytest.raises(ValueError, match="latent_draws must be one of .*'per_step'"):
    lookahead_study._chunk(exp, config)
