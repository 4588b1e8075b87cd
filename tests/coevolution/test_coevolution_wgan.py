"""Lipizzaner's WGAN variant in the jitted generation (issue 17): a critic on the
Wasserstein loss, RMSprop, weight clipping after every critic update and ``n_critic``
critic updates per generator update, checked against a hand-written loop."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed
from minmaxlab.coevolution._training import train, train_schedule
from minmaxlab.games import Players
from minmaxlab.gan import data, models
from minmaxlab.transforms import count_learning_rates
from tests._coevolution_case import ring_coevolution

RING = data.ring8()
PAIR = models.make_pair("mlp", (2,), latent_dim=4, hidden=(8, 8))
B, S, N_CRITIC, LR, CLIP = 16, 4, 2, 5e-3, 0.01


def _coev(**overrides):
  kw = dict(
    rows=1,
    cols=1,
    selection=False,  # Lipizzaner trains in place: the trained pair is the state's
    opponents="selected",
    batch_size=B,
    steps_per_generation=S,
    fitness_samples=32,
    mixture_samples=32,
    learning_rate=LR,
    cell_strategy="map",
    loss="wgan",
    n_critic=N_CRITIC,
  )
  kw.update(overrides)
  return ring_coevolution(PAIR, **kw)


@pytest.fixture(scope="module")
def wgan():
  """The generation, compiled in the "fastest" mode (half the compile; checked to the same
  tolerances against the hand-written loop)."""
  coev = _coev()
  return coev, jax.jit(coev.step, compiler_options=distributed.compiler_options("fastest"))


def test_config_and_construction():
  with pytest.raises(ValueError, match="n_critic must be 1 when d_every > 1"):
    co.CoevolutionConfig(steps_per_generation=4, d_every=2, n_critic=2)
  with pytest.raises(ValueError, match="n_critic must be an integer in"):
    co.CoevolutionConfig(steps_per_generation=4, n_critic=5)
  with pytest.raises(ValueError, match="wgan_clip must be > 0"):
    co.CoevolutionConfig(loss="wgan", wgan_clip=0.0)
  with pytest.raises(ValueError, match="optimizer must be"):
    co.default_scheme(optimizer="sgd")
  # A user scheme is kept (Adam here); the default for "wgan" is RMSprop without Lookahead.
  adam = _coev(n_critic=1)
  assert adam.scheme is not None
  user = co.Coevolution(
    adam.config, PAIR, sample_real=None, score_fn=None, scheme=co.default_scheme(LR)
  )
  kinds = {type(x).__name__ for x in jax.tree.leaves(_opt(user), is_leaf=_is_state)}
  assert "ScaleByAdamState" in kinds and "ScaleByRmsState" not in kinds


def _is_state(x):
  return isinstance(x, (optax.ScaleByRmsState, optax.ScaleByAdamState))


def _opt(coev):
  return coev.init(jax.random.key(0)).opt_state


@pytest.mark.parametrize("steps,n_critic", [(7, 2), (6, 3), (4, 4), (3, 1)])
def test_train_schedule_critic_steps(steps, n_critic):
  """Batch i trains the generator only when (i + 1) % n_critic == 0, the critic always."""

  def both(carry, i):
    g, d = carry
    return (g.at[i].add(1), d.at[i].add(1)), jnp.stack([i, -i]).astype(jnp.float32)

  def one(player):
    def step(carry, i):
      g, d = carry
      carry = (g.at[i].add(1), d) if player == "g" else (g, d.at[i].add(1))
      return carry, (i if player == "g" else -i).astype(jnp.float32)

    return step

  zeros = jnp.zeros(steps, jnp.int32)
  (g, d), g_losses, d_losses = train_schedule(
    both, one("g"), (zeros, zeros), jnp.arange(steps), 1, n_critic, one("d")
  )
  i = np.arange(steps)
  np.testing.assert_array_equal(d, np.ones(steps))
  np.testing.assert_array_equal(g, (i + 1) % n_critic == 0)
  np.testing.assert_array_equal(d_losses, -i)
  np.testing.assert_array_equal(g_losses, i[(i + 1) % n_critic == 0])
  with pytest.raises(ValueError, match="cannot both exceed 1"):
    train_schedule(both, one("g"), (zeros, zeros), jnp.arange(steps), 2, 2, one("d"))


def test_update_counts_from_the_losses_arrays():
  """5 batches with n_critic = 2: 5 critic losses and 2 generator losses per pair
  (the fifth batch, a partial group, is a critic step)."""
  coev = _coev(population_size=2)
  spec = coev._spec._replace(config=dataclasses.replace(coev.config, steps_per_generation=5))
  s = coev.init(jax.random.key(0))
  own = lambda t: jax.tree.map(lambda x: x[0, 0], t)
  pools = (jnp.arange(10) < 2, jnp.arange(10) < 2)
  (params, _), g, d = jax.jit(
    lambda p, o: train(
      spec, spec.losses[0], jax.random.key(1), RING, p, o, pools, (None,) * 2, False
    )
  )(own(s.params), own(s.opt_state))
  assert g.shape == (2, 2) and d.shape == (5, 2)
  assert np.isfinite(g).all() and np.isfinite(d).all()
  for w in jax.tree.leaves(params.max):
    assert np.abs(np.asarray(w)).max() <= CLIP


def _rmsprop(w, g, nu, lr):
  """torch.optim.RMSprop's step (alpha 0.99, eps 1e-8 outside the root)."""
  nu = 0.99 * nu + 0.01 * g * g
  return w - lr * g / (np.sqrt(nu) + 1e-8), nu


def _reference_generation(key, state):
  """One 1x1 generation of the pair by hand: the cell's training keys as the library
  derives them, batches 0 and 2 critic-only, 1 and 3 both from one forward pass."""
  G, D = PAIR.generator, PAIR.discriminator
  g, d = jax.tree.map(lambda x: np.asarray(x[0, 0, 0], np.float64), state.params)
  nu_g, nu_d = jax.tree.map(np.zeros_like, g), jax.tree.map(np.zeros_like, d)
  cell_keys = jax.random.split(jax.random.fold_in(key, 0), 9)
  f32 = lambda t: jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), t)
  critic = lambda dp, gp, real, z: (
    jnp.mean(D.apply(dp, G.apply(gp, z))) - jnp.mean(D.apply(dp, real))
  )
  gen = lambda gp, dp, z: -jnp.mean(D.apply(dp, G.apply(gp, z)))
  # jitted: one program each (op by op, every op of both gradients compiled alone)
  grad_critic, grad_gen = jax.jit(jax.grad(critic)), jax.jit(jax.grad(gen))
  for i, k in enumerate(jax.random.split(cell_keys[6], S)):
    pair_key = jax.random.split(jax.random.split(k, 3)[2], 1)[0]
    kk = jax.random.fold_in(pair_key, 0)
    real = RING.sample(jax.random.fold_in(kk, 0), B)
    z = jax.random.normal(jax.random.fold_in(kk, 1), (B, PAIR.latent_dim))
    grad_d = grad_critic(f32(d), f32(g), real, z)
    if (i + 1) % N_CRITIC == 0:  # the generator's step, against the critic before its update
      grad_g = grad_gen(f32(g), f32(d), z)
      upd = jax.tree.map(
        lambda w, gr, n: _rmsprop(w, np.asarray(gr, np.float64), n, LR), g, grad_g, nu_g
      )
      g = jax.tree.map(lambda u: u[0], upd, is_leaf=lambda x: isinstance(x, tuple))
      nu_g = jax.tree.map(lambda u: u[1], upd, is_leaf=lambda x: isinstance(x, tuple))
    upd = jax.tree.map(
      lambda w, gr, n: _rmsprop(w, np.asarray(gr, np.float64), n, LR), d, grad_d, nu_d
    )
    d = jax.tree.map(
      lambda u: np.clip(u[0], -CLIP, CLIP), upd, is_leaf=lambda x: isinstance(x, tuple)
    )
    nu_d = jax.tree.map(lambda u: u[1], upd, is_leaf=lambda x: isinstance(x, tuple))
  return g, d


def test_generation_matches_a_hand_written_loop(wgan):
  coev, step = wgan
  params = coev.default_params()._replace(mutation_probability=jnp.float32(0.0))
  s0 = coev.init(jax.random.key(0))
  key = jax.random.key(4)
  s1, m = step(key, s0, RING, params)
  assert int(m["divergences"]) == 0
  g_ref, d_ref = _reference_generation(key, s0)
  mine = jax.tree.map(lambda x: np.asarray(x[0, 0, 0]), s1.params)
  close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  jax.tree.map(close, mine.min, g_ref)
  jax.tree.map(close, mine.max, d_ref)
  # The critic is inside the box after the generation (it starts outside: 0.01 is small),
  # the generator is not clipped.
  d_max = max(np.abs(x).max() for x in jax.tree.leaves(mine.max))
  g_max = max(np.abs(x).max() for x in jax.tree.leaves(mine.min))
  start = max(np.abs(np.asarray(x)).max() for x in jax.tree.leaves(s0.params.max))
  assert d_max <= CLIP < start and g_max > CLIP
  assert np.isclose(d_max, CLIP)  # some weight sits on the box


def test_rmsprop_state_and_mutated_learning_rates(wgan):
  coev, step = wgan
  s0 = coev.init(jax.random.key(0))
  kinds = {type(x).__name__ for x in jax.tree.leaves(s0.opt_state, is_leaf=_is_state)}
  assert "ScaleByRmsState" in kinds and "ScaleByAdamState" not in kinds
  assert count_learning_rates(jax.tree.map(lambda x: x[0, 0, 0], s0.opt_state))[1:] == (1, 1)
  # Mutation with probability 1 writes the new rates into RMSprop's injected hyperparams.
  params = coev.default_params()._replace(
    mutation_probability=jnp.float32(1.0), mutation_scale=jnp.float32(1e-3)
  )
  s1, _ = step(jax.random.key(4), s0, RING, params)
  lr = s1.learning_rates
  assert not np.isclose(float(lr.min[0, 0, 0]), LR) and not np.isclose(float(lr.max[0, 0, 0]), LR)
  np.testing.assert_allclose(s1.opt_state.min.hyperparams["learning_rate"], lr.min)
  np.testing.assert_allclose(s1.opt_state.max.hyperparams["learning_rate"], lr.max)
  rms = [x for x in jax.tree.leaves(s1.opt_state, is_leaf=_is_state) if _is_state(x)]
  # One RMSprop state per player, its second moments filled by the generation's updates.
  assert len(rms) == 2
  assert all(any(float(jnp.max(v)) > 0 for v in jax.tree.leaves(x.nu)) for x in rms)


def test_experiment_flags_reach_the_config():
  """``--config.loss=wgan --config.n_critic=5 ...`` of experiments/coevolution: the base
  config has the fields (so the flags parse), they reach ``CoevolutionConfig``, and the
  cells' scheme is RMSprop for ``wgan``."""
  from experiments.coevolution import experiment
  from experiments.coevolution.configs import base

  c = base.get_config()
  assert (c.mustangs_mode, c.n_critic, c.wgan_clip) == ("at_creation", 1, 0.01)
  c.loss, c.n_critic, c.wgan_clip, c.lookahead = "wgan", 5, 0.02, False
  cc = experiment.coevolution_config(c)
  assert (cc.loss, cc.n_critic, cc.wgan_clip) == ("wgan", 5, 0.02)
  params = jax.eval_shape(lambda k: PAIR.generator.init(k), jax.random.key(0))
  state = jax.eval_shape(experiment.scheme_from_config(c).init, Players(params, params))
  assert any(
    _is_state(x) and "Rms" in type(x).__name__ for x in jax.tree.leaves(state, is_leaf=_is_state)
  )
  c.loss, c.mustangs_mode = "mustangs", "always"
  assert experiment.coevolution_config(c).mustangs_mode == "always"
