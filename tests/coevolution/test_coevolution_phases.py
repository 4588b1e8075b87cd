"""Each phase of a cell's generation alone, on tiny hand-checkable cases.

A toy pair (``tests/coevolution/_toy_cell.py``): the generator is ``G(w, z) = w`` (one number
per sample, whatever the noise), the discriminator ``D(v, x) = v * x``; the "loss" is
``loss_min = -mean(D(fake))`` and ``loss_max = mean(D(fake)) - mean(D(real))``,
so every fitness, gradient and update is a product of the hand-set numbers.
"""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab.coevolution import _phases as ph
from minmaxlab.coevolution._training import CellSpec, train
from minmaxlab.games import Players
from minmaxlab.transforms import player_labels
from tests.coevolution import _toy_cell as toy
from tests.coevolution._toy_cell import PAIR, SCHEME, D, G, loss


def test_pool_flattens_members_and_marks_invalid():
  # M = 2 members x P = 2: member-major order; member 1 is a duplicate (mask False);
  # the cell's second generator is NaN.
  params, opt, lrs = toy.individuals([1.0, np.nan, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
  flat = ph.Individuals(params=params, opt=opt, learning_rates=lrs, fitness=lrs)
  nb = jax.tree.map(lambda x: x.reshape((2, 2) + x.shape[1:]), flat)
  pool = ph.pool(nb, jnp.array([True, False]), 2)
  np.testing.assert_array_equal(pool.params.max["v"], [1, 2, 3, 4])
  assert pool.valid.min.tolist() == [True, False, False, False]
  assert pool.valid.max.tolist() == [True, True, False, False]


def test_fitness_by_hand():
  # D(v, G(w)) = v * w; loss_min(g, d) = -v w; loss_max(d, g) = v w - v (real = 1).
  pool = toy.pool([1.0, 2.0], [1.0, 3.0])
  real, z = jnp.ones((2, 1)), jnp.zeros((2, 1))
  fit, batch = ph.fitness(PAIR, loss, real, z, pool, "average")
  np.testing.assert_allclose(fit.min, [-(1 + 3) / 2, -(2 + 6) / 2])
  np.testing.assert_allclose(fit.max, [((1 - 1) + (2 - 1)) / 2, ((3 - 3) + (6 - 3)) / 2])
  assert batch.fakes.shape == (2, 2, 1) and batch.d_real.shape == (2, 2)
  # An invalid discriminator is no opponent and has fitness +inf; "worst" is the max loss.
  pool = toy.pool([1.0, 2.0], [1.0, 3.0], valid_d=[True, False])
  fit, _ = ph.fitness(PAIR, loss, real, z, pool, "worst")
  np.testing.assert_allclose(fit.min, [-1.0, -2.0])
  assert fit.max[1] == np.inf
  # The trained individuals are scored on the same batch against the same pool.
  trained = Players({"w": jnp.array([5.0])}, {"v": jnp.array([2.0])})
  re = ph.rescore(PAIR, loss, batch, trained, toy.pool([1.0, 2.0], [1.0, 3.0]), "average")
  np.testing.assert_allclose(re.min, [-(5 + 15) / 2])
  np.testing.assert_allclose(re.max, [((2 - 2) + (4 - 2)) / 2])


def test_fresh_fitness_noise_against_a_loop_over_the_pairs():
  # Lipizzaner draws fresh noise for every evaluation. A generator that uses it,
  # G(w, z) = w + z, so each pair's loss depends on its own draw: generator i against
  # discriminator j on zg[i, j], discriminator j against generator i on zd[j, i] (the
  # layout fitness documents), each [F, L]; the rescoring draws again from fold_in(key, 1).
  noisy = SimpleNamespace(
    generator=SimpleNamespace(apply=lambda p, z: p["w"] + z), discriminator=D, latent_dim=1
  )
  w, v, F = [1.0, 2.0, -1.0], [1.0, 3.0, 0.5], 4
  pool = toy.pool(w, v, valid_d=[True, True, False])
  real, key = jnp.ones((F, 1)), jax.random.key(7)
  fit, batch = ph.fitness(noisy, loss, real, key, pool, "average")
  zg, zd = (np.asarray(jax.random.normal(k, (3, 3, F, 1))) for k in jax.random.split(key))
  want_g = [np.mean([-np.mean(v[j] * (w[i] + zg[i, j, :, 0])) for j in (0, 1)]) for i in range(3)]
  want_d = [
    np.mean([np.mean(v[j] * (w[i] + zd[j, i, :, 0])) - v[j] for i in range(3)]) for j in (0, 1)
  ]
  np.testing.assert_allclose(fit.min, want_g, rtol=1e-5)
  np.testing.assert_allclose(fit.max[:2], want_d, rtol=1e-5)
  assert fit.max[2] == np.inf and batch.fakes is None
  # shared noise would give every pair the same draw: a different fitness
  shared, _ = ph.fitness(noisy, loss, real, jnp.asarray(zg[0, 0]), pool, "average")
  assert not np.allclose(shared.min, fit.min)
  trained = Players({"w": jnp.array([5.0])}, {"v": jnp.array([2.0])})
  re = ph.rescore(noisy, loss, batch, trained, pool, "average")
  rg, rd = (
    np.asarray(jax.random.normal(k, (1, 3, F, 1)))
    for k in jax.random.split(jax.random.fold_in(key, 1))
  )
  np.testing.assert_allclose(
    re.min, [np.mean([-np.mean(v[j] * (5.0 + rg[0, j, :, 0])) for j in (0, 1)])], rtol=1e-5
  )
  np.testing.assert_allclose(
    re.max, [np.mean([np.mean(2.0 * (w[i] + rd[0, i, :, 0])) - 2.0 for i in range(3)])], rtol=1e-5
  )


@pytest.mark.slow  # two whole generations compiled (in the "fastest" mode: half the compile)
def test_fresh_fitness_noise_runs_a_generation_and_is_validated():
  from minmaxlab import distributed
  from tests._coevolution_case import PAIR as MLP
  from tests._coevolution_case import RING, ring_coevolution

  kw = dict(rows=2, cols=2, batch_size=16, steps_per_generation=2, fitness_samples=32)
  fastest = distributed.compiler_options("fastest")
  out = {}
  for noise in ("shared", "fresh"):
    coev = ring_coevolution(MLP, mixture_samples=32, fitness_noise=noise, **kw)
    step = jax.jit(coev.step, compiler_options=fastest)
    state, _ = step(jax.random.key(1), coev.init(jax.random.key(0)), RING)
    out[noise] = np.asarray(state.fitness.min)
    assert np.all(np.isfinite(out[noise]))
  assert not np.allclose(out["shared"], out["fresh"])
  with pytest.raises(ValueError, match="fitness_noise must be one of"):
    co.CoevolutionConfig(fitness_noise="sometimes")


def test_select_and_mutate_by_hand():
  pool = toy.pool([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
  labels = player_labels(jax.tree.map(lambda x: x[0], pool.opt))
  fit = Players(jnp.array([3.0, 1.0, 2.0]), jnp.array([0.5, 9.0, 9.0]))
  usable = Players(jnp.array([True, True, True]), jnp.array([True, True, False]))
  keys = tuple(jax.random.split(jax.random.key(0), 3))
  # Large tournaments find the best usable individual; scale 0 with probability 1 clips
  # every learning rate to min_learning_rate = 0.2 (from 0.1), in the scheme's state too.
  sel, idx = ph.select_and_mutate(keys, fit, usable, pool, labels, toy.config(), toy.params())
  assert idx.min.tolist() == [1, 1] and idx.max.tolist() == [0, 0]
  np.testing.assert_array_equal(sel.params.min["w"], [2.0, 2.0])
  np.testing.assert_array_equal(sel.params.max["v"], [4.0, 4.0])
  np.testing.assert_allclose(sel.learning_rates.min, [0.2, 0.2])
  np.testing.assert_allclose(sel.opt.min.hyperparams["learning_rate"], [0.2, 0.2])
  np.testing.assert_allclose(sel.opt.max.hyperparams["learning_rate"], [0.2, 0.2])
  # Probability 0: learning rates untouched; no selection: the cell's own, in place.
  sel, idx = ph.select_and_mutate(
    keys, fit, usable, pool, labels, toy.config(selection=False), toy.params(p=0.0)
  )
  assert idx.min.tolist() == [0, 1] and idx.max.tolist() == [0, 1]
  np.testing.assert_allclose(sel.learning_rates.max, [0.1, 0.1])

  # A swapped-in selection is used for both sides.
  def last(key, fitness, usable, n, config, individuals):
    assert individuals["w" if "w" in individuals else "v"].shape == (3,)
    return jnp.full(n, fitness.shape[0] - 1)

  _, idx = ph.select_and_mutate(keys, fit, usable, pool, labels, toy.config(), toy.params(), last)
  assert idx.min.tolist() == [2, 2] and idx.max.tolist() == [2, 2]


def test_replace_by_hand():
  params, opt, lrs = toy.individuals([1.0, 2.0], [1.0, 2.0])
  local = ph.Individuals(
    params=params,
    opt=opt,
    learning_rates=lrs,
    fitness=Players(jnp.array([1.0, 5.0]), jnp.array([2.0, 1.0])),
  )
  params, opt, lrs = toy.individuals([10.0, 20.0], [10.0, 20.0], lr=0.3)
  trained = ph.Individuals(
    params=params,
    opt=opt,
    learning_rates=lrs,
    fitness=Players(jnp.array([4.0, 0.5]), jnp.array([3.0, 3.0])),
  )
  labels = player_labels(jax.tree.map(lambda x: x[0], opt))
  # Generators: the worst local (5.0, slot 1) <- the best trained (0.5, index 1).
  # Discriminators: the worst local (2.0) vs the best trained (3.0): kept.
  new, src = ph.replace(local, trained, 1, True, labels)
  assert src.min.tolist() == [-1, 1] and src.max.tolist() == [-1, -1]
  np.testing.assert_array_equal(new.params.min["w"], [1.0, 20.0])
  np.testing.assert_array_equal(new.params.max["v"], [1.0, 2.0])
  np.testing.assert_allclose(new.learning_rates.min, [0.1, 0.3])
  np.testing.assert_allclose(new.fitness.min, [1.0, 0.5])
  np.testing.assert_allclose(new.opt.min.hyperparams["learning_rate"], [0.1, 0.3])
  np.testing.assert_allclose(new.opt.max.hyperparams["learning_rate"], [0.1, 0.1])
  # Without selection every trained individual is kept.
  new, src = ph.replace(local, trained, 1, False, labels)
  assert src.min.tolist() == [0, 1]
  np.testing.assert_array_equal(new.params.max["v"], [10.0, 20.0])


def test_mixture_members_and_es():
  # M = 3 members x P = 2; member 2 is not distinct, member 1's generators both diverged.
  pool = toy.pool([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0] * 6)
  fit_g = jnp.array([0.0, 0.0, np.inf, np.inf, 2.0, 1.0])
  gens, usable = ph.mixture_members(pool, fit_g, {"w": jnp.array(9.0)}, jnp.array([1, 1, 0], bool))
  np.testing.assert_array_equal(gens["w"], [9.0, 3.0, 6.0])  # own best first; best per member
  assert usable.tolist() == [True, False, False]

  seen = []

  def score(samples, w):
    seen.append(samples)
    return jnp.sum(w * jnp.mean(samples, axis=(1, 2)))

  usable = jnp.array([True, True, False])
  keys = tuple(jax.random.split(jax.random.key(0), 2))
  w, s, accepted = ph.mixture_es(
    keys, G, score, gens, usable, jnp.array([0.5, 0.5, 0.0]), 0.0, 4, 1
  )
  # Unusable members' samples are zeros; sigma 0 proposes the same weights: not accepted.
  np.testing.assert_array_equal(seen[0][:, 0, 0], [9.0, 3.0, 0.0])
  np.testing.assert_allclose(w, [0.5, 0.5, 0.0])
  np.testing.assert_allclose(s, 6.0)
  assert not accepted
  # A large step lands on a better weighting (more weight on the 3.0 generator).
  w, s, accepted = ph.mixture_es(
    keys, G, score, gens, usable, jnp.array([0.5, 0.5, 0.0]), 10.0, 4, 1
  )
  assert (not accepted and s == 6.0) or (accepted and s < 6.0 and w[1] > 0.5)


def test_diverged_and_repair_by_hand():
  # M = 3 members x P = 1; the cell's own generator arrived NaN.
  pool = toy.pool([np.nan, 2.0, 3.0], [1.0, 2.0, 3.0], valid_g=[False, True, True])
  params, opt, lrs = toy.individuals([7.0], [7.0])
  new = ph.Individuals(
    params=params, opt=opt, learning_rates=lrs, fitness=Players(jnp.array([0.0]), jnp.array([0.0]))
  )
  assert ph.diverged(pool, 1, new, jnp.asarray(True))
  healthy = toy.pool([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
  assert not ph.diverged(healthy, 1, new, jnp.asarray(True))
  assert ph.diverged(healthy, 1, new, jnp.asarray(False))  # e.g. a non-finite loss
  bad = new._replace(params=Players({"w": jnp.array([np.inf])}, new.params.max))
  assert ph.diverged(healthy, 1, bad, jnp.asarray(True))

  fresh_params, fresh_opt, fresh_lr = toy.individuals([-1.0], [-1.0])
  inf = jnp.full(1, np.inf)
  fresh = ph.Individuals(
    params=fresh_params, opt=fresh_opt, learning_rates=fresh_lr, fitness=Players(inf, inf)
  )
  # The donor is the member (other than the cell) with the lowest generator fitness: 2.
  fitness = Players(jnp.array([0.0, 5.0, 4.0]), jnp.array([1.0, 2.0, 3.0]))
  out = ph.repair(jnp.asarray(True), new, pool, fitness, fresh, 3)
  assert out.params.min["w"].tolist() == [3.0] and out.fitness.max.tolist() == [3.0]
  out = ph.repair(jnp.asarray(False), new, pool, fitness, fresh, 3)
  assert out.params.min["w"].tolist() == [7.0]
  # No finite neighbour: fresh networks.
  fitness = Players(jnp.array([0.0, np.inf, np.inf]), jnp.array([1.0, 2.0, 3.0]))
  out = ph.repair(jnp.asarray(True), new, pool, fitness, fresh, 3)
  assert out.params.min["w"].tolist() == [-1.0] and out.fitness.min.tolist() == [np.inf]


@pytest.mark.parametrize("d_every", [1, 2])
def test_train_one_sgd_step_by_hand(d_every):
  # P = 1 plays itself. loss_min = -v w: dw = -v; loss_max = v w - v r: dv = w - r.
  config = co.CoevolutionConfig(
    rows=1, cols=1, batch_size=3, steps_per_generation=2, d_every=d_every
  )
  params, opt, _ = toy.individuals([2.0], [3.0])
  r = 0.5
  spec = CellSpec(
    config=config,
    pair=PAIR,
    scheme=SCHEME,
    labels=player_labels(jax.tree.map(lambda x: x[0], opt)),
    sample_real=lambda data, key, n: jnp.full((n, 1), r),
    score_fn=None,
    losses=(loss,),
    init_individual=None,
  )
  pools = (jnp.ones(5, bool), jnp.ones(5, bool))
  nbrs = jax.tree.map(lambda x: jnp.zeros((4,) + x.shape[1:]), params)
  (p, _), g_losses, d_losses = train(
    spec, loss, jax.random.key(0), None, params, opt, pools, (nbrs.min, nbrs.max), False
  )
  w, v, lr = 2.0, 3.0, 0.1
  want_g, want_d = [], []
  for i in range(2):
    d_step = (i + 1) % d_every == 0
    want_g.append(-v * w)
    if d_step:
      want_d.append(v * w - v * r)
    w, v = w + lr * v, (v - lr * (w - r)) if d_step else v
  np.testing.assert_allclose(g_losses[:, 0], want_g, rtol=1e-6)
  np.testing.assert_allclose(d_losses[:, 0], want_d, rtol=1e-6)
  np.testing.assert_allclose(p.min["w"], [w], rtol=1e-6)
  np.testing.assert_allclose(p.max["v"], [v], rtol=1e-6)


def test_phases_are_swappable():
  calls = []

  def first(key, fitness, usable, n, config, individuals):
    calls.append(n)
    return jnp.zeros(n, jnp.int32)

  phases = co.Phases(selection=first)
  assert phases.selection is first and phases.fitness is ph.fitness
  pair = SimpleNamespace(
    generator=SimpleNamespace(init=lambda k: {"w": jnp.zeros(())}, apply=G.apply),
    discriminator=SimpleNamespace(init=lambda k: {"v": jnp.ones(())}, apply=D.apply),
    latent_dim=1,
  )
  coev = co.Coevolution(
    co.CoevolutionConfig(
      rows=1, cols=2, batch_size=2, steps_per_generation=1, fitness_samples=2, mixture_samples=2
    ),
    pair,
    sample_real=lambda d, k, n: jnp.ones((n, 1)),
    score_fn=lambda d, s, w: jnp.sum(w * jnp.mean(s, axis=(1, 2))),
    scheme=SCHEME,
    phases=phases,
  )
  state = coev.init(jax.random.key(0))
  jax.eval_shape(coev.step, jax.random.key(1), state, None)
  assert calls == [1, 1]  # traced once per side (cells under lax.map)
