"""Mustangs' two modes (issue 17): each individual's loss drawn when it is created and
inherited (``at_creation``, the reference's default), or the generator's drawn anew for
every training batch (``always``); populations of 1 and 2 per cell."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed
from minmaxlab.coevolution import _phases as ph
from minmaxlab.coevolution._training import indexed_loss, train
from minmaxlab.games import Players
from minmaxlab.gan import data, models
from minmaxlab.transforms import player_labels, set_learning_rates
from tests._coevolution_case import ring_coevolution
from tests.coevolution import _toy_cell as toy

RING = data.ring8()
PAIR = models.make_pair("mlp", (2,), latent_dim=4, hidden=(8, 8))
TINY_LR = 1e-20  # Adam moves a weight by about this: the networks stay bit-identical


def _coev(**overrides):
  kw = dict(
    rows=1,
    cols=2,
    population_size=2,
    batch_size=16,
    steps_per_generation=3,
    fitness_samples=32,
    mixture_samples=32,
    learning_rate=2e-3,
    cell_strategy="map",
    loss="mustangs",
  )
  kw.update(overrides)
  return ring_coevolution(PAIR, **kw)


def _no_mutation(coev):
  return coev.default_params()._replace(mutation_probability=jnp.float32(0.0))


def test_config_modes():
  assert co.CoevolutionConfig().mustangs_mode == "at_creation"  # Lipizzaner: randomized unset
  co.CoevolutionConfig(loss="mustangs", mustangs_mode="always")
  with pytest.raises(ValueError, match="mustangs_mode must be one of .*'sometimes'"):
    co.CoevolutionConfig(loss="mustangs", mustangs_mode="sometimes")


# ----------------------------------------------------------- phases by hand
def _double(real_logits, fake_logits):
  lmin, lmax = toy.loss(real_logits, fake_logits)
  return 2.0 * lmin, 3.0 * lmax


def _per_logit(r, f, gi, di):
  return indexed_loss((toy.loss, _double), gi, di)(r, f)


def test_phases_use_and_carry_each_individuals_loss():
  # Toy pair (_toy_cell): loss_min(g, d) = -v w, loss_max(d, g) = v w - v;
  # loss 1 is loss 0 with the generator's part x2 and the discriminator's x3.
  pool = toy.pool([1.0, 2.0], [1.0, 3.0])
  pool = pool._replace(loss_index=Players(jnp.array([0, 1]), jnp.array([1, 0])))
  real, z = jnp.ones((2, 1)), jnp.zeros((2, 1))
  fit, batch = ph.fitness(toy.PAIR, _per_logit, real, z, pool, "average")
  np.testing.assert_allclose(fit.min, [-(1 + 3) / 2, 2 * -(2 + 6) / 2])
  np.testing.assert_allclose(fit.max, [3 * ((1 - 1) + (2 - 1)) / 2, ((3 - 3) + (6 - 3)) / 2])
  # Rescoring a trained pair uses the trained individuals' own losses.
  trained = Players({"w": jnp.array([5.0])}, {"v": jnp.array([2.0])})
  for li, (g, d) in (((0, 0), (1, 1)), ((1, 1), (2, 3)), ((1, 0), (2, 1))):
    index = Players(jnp.array([li[0]]), jnp.array([li[1]]))
    re = ph.rescore(toy.PAIR, _per_logit, batch, trained, pool, "average", index)
    np.testing.assert_allclose(re.min, [g * -(5 + 15) / 2])
    np.testing.assert_allclose(re.max, [d * ((2 - 2) + (4 - 2)) / 2])

  # Selection takes each selected individual's loss with it.
  pool = toy.pool([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
  pool = pool._replace(loss_index=Players(jnp.array([0, 2, 1]), jnp.array([2, 0, 1])))
  labels = player_labels(jax.tree.map(lambda x: x[0], pool.opt))
  fit = Players(jnp.array([3.0, 1.0, 2.0]), jnp.array([9.0, 9.0, 0.5]))
  usable = Players(jnp.ones(3, bool), jnp.ones(3, bool))
  keys = tuple(jax.random.split(jax.random.key(0), 3))
  sel, idx = ph.select_and_mutate(keys, fit, usable, pool, labels, toy.config(), toy.params())
  assert idx.min.tolist() == [1, 1] and idx.max.tolist() == [2, 2]
  assert sel.loss_index.min.tolist() == [2, 2] and sel.loss_index.max.tolist() == [1, 1]

  # Replacement: the generator slot 1 takes trained 1 and its loss; the discriminators stay.
  params, opt, lrs = toy.individuals([1.0, 2.0], [1.0, 2.0])
  local = ph.Individuals(
    params=params,
    opt=opt,
    learning_rates=lrs,
    fitness=Players(jnp.array([1.0, 5.0]), jnp.array([2.0, 1.0])),
    loss_index=Players(jnp.array([0, 0]), jnp.array([0, 0])),
  )
  params, opt, lrs = toy.individuals([10.0, 20.0], [10.0, 20.0], lr=0.3)
  trained = ph.Individuals(
    params=params,
    opt=opt,
    learning_rates=lrs,
    fitness=Players(jnp.array([4.0, 0.5]), jnp.array([3.0, 3.0])),
    loss_index=Players(jnp.array([2, 1]), jnp.array([1, 2])),
  )
  new, src = ph.replace(local, trained, 1, True, labels)
  assert src.min.tolist() == [-1, 1] and src.max.tolist() == [-1, -1]
  assert new.loss_index.min.tolist() == [0, 1] and new.loss_index.max.tolist() == [0, 0]

  # Repair: a diverged cell copies its donor's losses too (donor: member 2 of 3, P = 1).
  pool = toy.pool([np.nan, 2.0, 3.0], [1.0, 2.0, 3.0], valid_g=[False, True, True])
  pool = pool._replace(loss_index=Players(jnp.array([0, 1, 2]), jnp.array([1, 2, 0])))
  one = lambda t: jax.tree.map(lambda x: x[:1], t)
  params, opt, lrs = one((pool.params, pool.opt, pool.learning_rates))
  fresh = ph.Individuals(
    params=params,
    opt=opt,
    learning_rates=lrs,
    fitness=Players(jnp.zeros(1), jnp.zeros(1)),
    loss_index=Players(jnp.array([1]), jnp.array([1])),
  )
  fitness = Players(jnp.array([0.0, 5.0, 4.0]), jnp.array([1.0, 2.0, 3.0]))
  out = ph.repair(jnp.asarray(True), fresh, pool, fitness, fresh, 3)
  assert out.loss_index.min.tolist() == [2] and out.loss_index.max.tolist() == [0]


# ------------------------------------------------------------------ init
def test_init_draws_each_individuals_loss_from_the_key():
  coev = _coev(rows=3, cols=3)
  s1, s2 = coev.init(jax.random.key(0)), coev.init(jax.random.key(0))
  li = np.stack([np.asarray(s1.loss_index.min), np.asarray(s1.loss_index.max)])
  assert li.shape == (2, 3, 3, 2) and li.dtype == np.int32
  assert set(np.unique(li)) == {0, 1, 2}  # 36 draws of 3 losses
  chex.assert_trees_all_equal(s1.loss_index, s2.loss_index)
  other = coev.init(jax.random.key(1)).loss_index.min
  assert not np.array_equal(other, s1.loss_index.min)
  # The networks are those of a plain-loss grid of the same key (the draws have their own key).
  plain = _coev(rows=3, cols=3, loss="ns_bce").init(jax.random.key(0))
  assert plain.loss_index is None
  chex.assert_trees_all_equal(plain.params, s1.params)


# ------------------------------------------------------- whole generations
@pytest.fixture(scope="module")
def programs():
  """Jitted steps, compiled once per (population, mode) for the module, in the "fastest"
  compile mode (half the compile; what the tests compare does not depend on XLA's options)."""
  cache = {}
  fastest = distributed.compiler_options("fastest")

  def get(population, mode="at_creation", loss="mustangs"):
    k = (population, mode, loss)
    if k not in cache:
      coev = _coev(population_size=population, mustangs_mode=mode, loss=loss)
      cache[k] = coev, jax.jit(coev.step, compiler_options=fastest)
    return cache[k]

  return get


def _first_kernel(tree):
  """The first dense kernel of each individual, flattened: ``[..., K]``."""
  leaves = [x for x in jax.tree.leaves(tree) if x.ndim >= 5]  # (rows, cols, P, in, out)
  x = np.asarray(leaves[0])
  return x.reshape(x.shape[:3] + (-1,))


@pytest.mark.parametrize("population,mode", [(1, "always"), (2, "at_creation")])
def test_losses_move_with_their_individuals(programs, population, mode):
  """Learning rates of 1e-20 leave every trained network bit-identical to the one it was
  selected from, so each individual after a generation is a copy of an individual before
  it: its loss must be that individual's (through tournaments across the 1x2 grid,
  replacement of the worst, and in place)."""
  coev, step = programs(population, mode)
  params = _no_mutation(coev)
  s = coev.init(jax.random.key(3))
  tiny = jnp.full(s.learning_rates.min.shape, TINY_LR, jnp.float32)
  s = s._replace(learning_rates=Players(tiny, tiny))
  moved = 0
  for g in range(3):
    new, _ = step(jax.random.key(10 + g), s, RING, params)
    for side in ("min", "max"):
      old_k, new_k = (
        _first_kernel(getattr(s.params, side)),
        _first_kernel(getattr(new.params, side)),
      )
      old_li, new_li = (
        np.asarray(getattr(s.loss_index, side)),
        np.asarray(getattr(new.loss_index, side)),
      )
      old_flat, old_li_flat = old_k.reshape(-1, old_k.shape[-1]), old_li.reshape(-1)
      for r, c, p in np.ndindex(new_li.shape):
        match = np.flatnonzero((old_flat == new_k[r, c, p]).all(-1))
        assert match.size >= 1, "a network that is no copy of an earlier one"
        assert set(old_li_flat[match]) == {new_li[r, c, p]}
        moved += int(match[0] != np.ravel_multi_index((r, c, p), new_li.shape))
    s = new
  assert moved > 0  # some individual did move (from the neighbour or another slot)


@pytest.mark.slow  # compiles a second whole generation (the plain heuristic grid)
def test_forced_loss_equals_the_plain_loss_generation(programs):
  """Every individual's loss forced to 2 (heuristic): the generation is the plain
  ``loss="heuristic"`` generation (same networks, same keys)."""
  coev, step = programs(2, "at_creation")
  plain, plain_step = programs(2, "at_creation", "heuristic")
  s = coev.init(jax.random.key(0))
  s = s._replace(loss_index=jax.tree.map(lambda x: jnp.full_like(x, 2), s.loss_index))
  p = plain.init(jax.random.key(0))
  for g in range(2):
    s, m = step(jax.random.key(5 + g), s, RING)
    p, mp = plain_step(jax.random.key(5 + g), p, RING)
  close = lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
  jax.tree.map(close, (s.params, s.opt_state, s.fitness), (p.params, p.opt_state, p.fitness))
  close(s.mixture_score, p.mixture_score)
  close(m["g_loss"], mp["g_loss"])
  assert (np.asarray(s.loss_index.min) == 2).all() and (np.asarray(m["loss_index"]) == 2).all()


# ------------------------------------------- "always": the generator's per-batch draws
def _trainer(spec, key, params, opt, pools):
  """``loss_index -> (g_losses, d_losses)`` of one cell's training phase, jitted."""
  step = jax.jit(
    lambda li: train(spec, None, key, RING, params, opt, pools, (None, None), False, li)[1:]
  )
  return lambda li: tuple(np.asarray(x) for x in step(li))


def test_always_draws_the_generators_loss_every_batch():
  """Training alone (1 cell, P = 2, tiny learning rates): under ``always`` each batch's
  generator loss is that of the loss drawn from the pair's batch key, the
  discriminators' losses are their own; ``at_creation`` with the same index forced
  gives the same numbers batch by batch."""
  S, P, key = 9, 2, jax.random.key(7)
  runs = {}
  for mode in ("always", "at_creation"):
    coev = _coev(rows=1, cols=1, steps_per_generation=S, mustangs_mode=mode)
    s = coev.init(jax.random.key(0))
    own = lambda t: jax.tree.map(lambda x: x[0, 0], t)
    params, opt = own(s.params), own(s.opt_state)
    tiny = jnp.full(P, TINY_LR, jnp.float32)
    opt = jax.vmap(set_learning_rates)(opt, tiny, tiny)
    N = coev.config.num_members * P
    pools = (jnp.arange(N) < P, jnp.arange(N) < P)

    runs[mode] = _trainer(coev._spec, key, params, opt, pools)
  d_index = jnp.array([1, 2])
  forced = [runs["at_creation"](Players(jnp.full(P, k), d_index)) for k in range(3)]
  g_always, d_always = runs["always"](Players(jnp.array([0, 0]), d_index))
  # The generators' stored index plays no part in their training under "always".
  g_other, _ = runs["always"](Players(jnp.array([2, 1]), d_index))
  np.testing.assert_array_equal(g_always, g_other)

  # The documented draw: randint(fold_in(fold_in(pair key, 0), 3), (), 0, 3), pair key
  # split(split(split(key, S)[s], 3)[2], P)[p].
  def drawn(s, p):
    pair_key = jax.random.split(jax.random.split(jax.random.split(key, S)[s], 3)[2], P)[p]
    return int(jax.random.randint(jax.random.fold_in(jax.random.fold_in(pair_key, 0), 3), (), 0, 3))

  expected = np.array([[drawn(s, p) for p in range(P)] for s in range(S)])
  assert set(expected.ravel()) == {0, 1, 2}
  for s, p in np.ndindex(S, P):
    np.testing.assert_allclose(g_always[s, p], forced[expected[s, p]][0][s, p], rtol=1e-6)
  # The three losses give different numbers, so the match above identifies the loss.
  assert np.abs(forced[0][0] - forced[1][0]).min() > 1e-3
  assert np.abs(forced[0][0] - forced[2][0]).min() > 1e-3
  for _, d_forced in forced:
    np.testing.assert_allclose(d_always, d_forced, rtol=1e-6)
