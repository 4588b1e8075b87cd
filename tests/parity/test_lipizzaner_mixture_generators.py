"""``mixture_generators="trained"`` (issue 45): Lipizzaner's mixture ES reads each
neighbour's best generator over HTTP when it runs, after the neighbour's own training; the
library's default weighs the generators gathered at the generation's start. With
``"trained"`` the returned mixture score is the score of the returned weights on the
members the NEW state holds (what :meth:`Coevolution.mixture` reads out), with the cell's
own mixture noise; the default's score is not (the perturbed twin)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed
from minmaxlab.coevolution._cell import cell_keys
from minmaxlab.gan.models import GANPair, mlp_discriminator, mlp_generator

S = 8  # mixture samples


def score(data, samples, w):  # lower is better; depends on the weights and every member
  del data
  return jnp.sum(w * jnp.mean(jnp.abs(samples - 0.3), axis=(1, 2)))


def grid(mixture_generators, cell_strategy="vmap", layout="transposed", exchange=None):
  cfg = co.CoevolutionConfig(
    rows=3,
    cols=3,
    steps_per_generation=3,
    batch_size=4,
    fitness_samples=4,
    mixture_samples=S,
    mixture_sigma=0.3,
    learning_rate=0.3,
    selection=False,
    neighbourhood_layout=layout,
    cell_strategy=cell_strategy,
    mixture_generators=mixture_generators,
  )
  pair = GANPair(
    generator=mlp_generator((2,), 2, (3,), None),
    discriminator=mlp_discriminator((2,), (3,)),
    latent_dim=2,
  )
  sample = lambda data, k, n: data[jax.random.randint(k, (n,), 0, data.shape[0])]
  scheme = co.default_scheme(0.3, lookahead=False)
  return co.Coevolution(
    cfg, pair, sample_real=sample, score_fn=score, scheme=scheme, exchange=exchange
  )


def _rescored(coev, key, new):
  """Every cell's score of its returned weights on the new state's members, with the
  cell's own mixture noise (``cell_keys(fold_in(key, cell id)).mixture_noise``)."""
  out = []
  for cell in range(coev.config.num_cells):
    gens, w = coev.mixture(new, cell=cell)
    ck = cell_keys(jax.random.fold_in(key, jnp.uint32(cell)))
    z = jax.random.normal(ck.mixture_noise, (S, coev.pair.latent_dim))
    samples = jax.vmap(coev.pair.generator.apply, (0, None))(gens, z)
    out.append(float(score(None, samples, w)))
  return np.asarray(out).reshape(3, 3)


@pytest.fixture(scope="module")
def runs():
  data = jax.random.normal(jax.random.key(1), (64, 2))
  key, out = jax.random.key(7), {}
  for mode, strategy in (("trained", "vmap"), ("trained", "map"), ("pool", "vmap")):
    coev = grid(mode, strategy)
    state = coev.init(jax.random.key(0))
    new, metrics = jax.jit(coev.step)(key, state, data)
    out[mode, strategy] = coev, new, metrics
  return key, out


def test_trained_scores_the_members_the_new_state_holds(runs):
  """mixture_generators="trained": each cell's returned score is the score of its returned
  weights on its members' generators after their generation (as Lipizzaner's ES reads them)."""
  key, out = runs
  coev, new, metrics = out["trained", "vmap"]
  got = np.asarray(new.mixture_score)
  np.testing.assert_allclose(got, _rescored(coev, key, new), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(metrics["mixture_score"]), got)
  assert np.all(np.isfinite(got)) and not np.any(np.asarray(metrics["diverged"]))
  # some proposals are taken: the weights left their uniform start
  assert np.any(np.asarray(metrics["mixture_accepted"]))
  assert not np.allclose(np.asarray(new.mixture_weights), 0.2)


def test_the_default_scores_the_generators_of_the_generations_start(runs):
  """The default ("pool") misses that score (the perturbed twin); training is the same."""
  key, out = runs
  coev, new, _ = out["pool", "vmap"]
  got = np.asarray(new.mixture_score)
  assert np.max(np.abs(got / _rescored(coev, key, new) - 1)) > 1e-2
  # training is the same in both modes: only the mixture differs
  trained = out["trained", "vmap"][1]
  for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(trained.params), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_cells_one_after_another_give_the_vmapped_result(runs):
  """The second exchange with cells one after another gives the vmapped weights."""
  _, out = runs
  a, b = out["trained", "vmap"][1], out["trained", "map"][1]
  np.testing.assert_allclose(np.asarray(a.mixture_score), np.asarray(b.mixture_score), rtol=1e-5)
  np.testing.assert_allclose(
    np.asarray(a.mixture_weights), np.asarray(b.mixture_weights), rtol=1e-5
  )


@pytest.mark.slow  # a generation compiled for a 3-device mesh
def test_three_devices_give_the_one_device_mixture():
  """The second exchange through the mesh's halos: the same weights and scores as on one
  device (row blocks of one cell, each cell's members on other devices)."""
  data, key = jax.random.normal(jax.random.key(1), (64, 2)), jax.random.key(7)
  one = grid("trained", "map", layout="rows")
  want, _ = jax.jit(one.step)(key, one.init(jax.random.key(0)), data)
  mesh = distributed.grid_mesh((3, 1), jax.devices()[:3])
  sharded = grid("trained", "map", layout="rows", exchange=distributed.MeshExchange(mesh, 3, 3))
  state = distributed.shard_grid(sharded.init(jax.random.key(0)), mesh, 3, 3)
  got, _ = distributed.sharded_step(sharded, mesh, state)(key, state, data)
  np.testing.assert_allclose(np.asarray(got.mixture_score), np.asarray(want.mixture_score), 1e-5)
  np.testing.assert_allclose(
    np.asarray(got.mixture_weights), np.asarray(want.mixture_weights), 1e-5, 1e-6
  )


def test_mixture_generators_is_validated():
  with pytest.raises(ValueError, match="mixture_generators"):
    co.CoevolutionConfig(mixture_generators="current")
