"""The order of the players' updates in a generation: Lipizzaner's schedule (generator, then
the discriminator against the UPDATED generator with fresh fakes) and the simultaneous one,
each against a hand-written loop on a tiny deterministic game."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from minmaxlab import coevolution as co
from minmaxlab.coevolution._training import train
from minmaxlab.games import Players
from minmaxlab.gan import losses, metrics
from minmaxlab.gan.models import GANPair, Model

LR = 0.5  # SGD in the order tests: each player's step follows the other's move linearly
REAL = jnp.linspace(0.5, 1.5, 8)[:, None]


# A generator that ignores its noise (fakes = b) and a linear discriminator: the game is
# deterministic, so a hand-written loop can replay it without the library's random streams.
def _g_apply(p, z):
  return jnp.broadcast_to(p["b"], (z.shape[0], 1)) + 0.0 * z[:, :1]


def _d_apply(p, x):
  return (x @ p["w"] + p["c"])[:, 0]


PAIR = GANPair(
  generator=Model(lambda k: {"b": jnp.array([-0.3])}, _g_apply),
  discriminator=Model(lambda k: {"w": jnp.array([[0.2]]), "c": jnp.array(0.1)}, _d_apply),
  latent_dim=2,
)


def _scheme(optimizer):
  if optimizer in ("adam", "lookahead"):  # Lookahead-minmax syncing every 2 batches
    return co.default_scheme(LR, lookahead=optimizer == "lookahead", sync_period=2)
  sgd = lambda: optax.inject_hyperparams(optax.sgd)(learning_rate=LR)  # noqa: E731
  return mml.per_player(min=sgd(), max=sgd())


def _coev(schedule, d_every, steps, population=1, optimizer="sgd"):
  cfg = co.CoevolutionConfig(
    rows=1, cols=1, population_size=population, selection=False, n_replacements=0,
    mutation_probability=0.0, batch_size=8, steps_per_generation=steps, d_every=d_every,
    schedule=schedule, fitness_samples=8, mixture_samples=8, learning_rate=LR,
  )  # fmt: skip
  return co.Coevolution(cfg, PAIR, sample_real=lambda d, k, n: REAL[:n],
                        score_fn=metrics.mode_tvd_score,
                        scheme=_scheme(optimizer))  # fmt: skip


def _train(coev, key=0):
  """The library's training phase of one cell (``_training.train``) from the initial pair."""
  P, M = coev.config.population_size, coev.config.num_members
  params, opt = jax.vmap(coev._init_pair)(jax.random.split(jax.random.key(1), P))
  per_logit = lambda r, f: losses.ns_bce(r, f)
  pools = (jnp.ones(M * P, bool), jnp.ones(M * P, bool))
  nbrs = jax.tree.map(lambda x: jnp.repeat(x, M - 1, 0), (params.min, params.max))
  run = jax.jit(lambda p, o, k: train(coev._spec, per_logit, k, None, p, o, pools, nbrs, False))
  return run(params, opt, jax.random.key(key))


def _g_loss(g, d):
  return losses.ns_bce(_d_apply(d, REAL), _d_apply(d, _g_apply(g, jnp.zeros((8, 2)))))[0]


def _d_loss(d, g):
  return losses.ns_bce(_d_apply(d, REAL), _d_apply(d, _g_apply(g, jnp.zeros((8, 2)))))[1]


def _reference(schedule, d_every, steps):
  """The hand-written loop, plain gradient steps."""
  g, d = PAIR.generator.init(None), PAIR.discriminator.init(None)
  step = lambda p, grad: jax.tree.map(lambda x, y: x - LR * y, p, grad)  # noqa: E731
  g_losses, d_losses = [], []
  for i in range(steps):
    g_old = g
    g_losses.append(_g_loss(g, d))
    g = step(g, jax.grad(_g_loss)(g, d))
    if (i + 1) % d_every == 0:
      # Lipizzaner: against the generator just updated; simultaneous: the one before.
      opp = g if schedule == "lipizzaner" else g_old
      d_losses.append(_d_loss(d, opp))
      d = step(d, jax.grad(_d_loss)(d, opp))
  return Players(g, d), np.array(g_losses), np.array(d_losses)


@pytest.mark.parametrize("d_every,steps", [(1, 3), (2, 5)])
@pytest.mark.parametrize("schedule", ["lipizzaner", "simultaneous"])
def test_update_order_matches_hand_written_loop(schedule, d_every, steps):
  (params, opt), g_losses, d_losses = _train(_coev(schedule, d_every, steps))
  want, want_g, want_d = _reference(schedule, d_every, steps)
  got = jax.tree.map(lambda x: x[0], params)
  close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # noqa: E731
  jax.tree.map(close, got, want)
  close(np.asarray(g_losses)[:, 0], want_g)
  close(np.asarray(d_losses)[:, 0], want_d)
  # The other schedule's loop gives different discriminators: the check is not vacuous.
  other = _reference("simultaneous" if schedule == "lipizzaner" else "lipizzaner", d_every, steps)
  gap = np.abs(np.asarray(got.max["w"]) - np.asarray(other[0].max["w"])).max()
  assert gap > 1e-3, gap  # against the 1e-6 tolerance above


def _counts(opt_state):
  """(generator, discriminator) Adam step counts of every individual."""
  labels = mml.transforms.player_labels(opt_state)
  out = {}
  for (path, leaf), label in zip(
    jax.tree_util.tree_leaves_with_path(opt_state), jax.tree.leaves(labels)
  ):
    if isinstance(path[-1], jax.tree_util.GetAttrKey) and path[-1].name == "count":
      out.setdefault(label, set()).update(np.asarray(leaf).ravel().tolist())
  return out


@pytest.mark.parametrize("population", [1, 2])
def test_lipizzaner_adam_steps_per_player(population):
  """7 batches with d_every=2: 7 generator steps and 3 discriminator steps per individual
  (the leftover batch trains the generator alone), also with a vmapped population of 2."""
  (_, opt), g_losses, d_losses = _train(_coev("lipizzaner", 2, 7, population, "adam"))
  assert _counts(opt) == {1: {7}, 2: {3}}
  assert g_losses.shape == (7, population) and d_losses.shape == (3, population)


def test_lookahead_counts_batches_and_syncs_both_players_together():
  """With Lookahead-minmax (sync every 2 batches) and d_every=1, Lipizzaner's two updates per
  batch advance the shared counter once per batch, and both players sync on the same batches:
  after batch 4 both sit on their (moved) slow weights."""
  coev = _coev("lipizzaner", 1, 4, optimizer="lookahead")
  (params, opt), _, _ = _train(coev)
  assert _counts(opt) == {0: {4}, 1: {4}, 2: {4}}  # batch counter 4 (not 8); Adam 4 each
  slow = opt.slow[0]
  chex.assert_trees_all_equal(params, slow)
  init = PAIR.generator.init(None), PAIR.discriminator.init(None)
  assert not np.allclose(np.asarray(slow.min["b"])[0], init[0]["b"])
  assert not np.allclose(np.asarray(slow.max["w"])[0], init[1]["w"])


def test_schedule_is_validated():
  with pytest.raises(ValueError, match="schedule"):
    co.CoevolutionConfig(schedule="alternating")
