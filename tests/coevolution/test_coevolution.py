"""The jitted coevolution generation end to end on the 8-Gaussian ring."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed
from minmaxlab.coevolution._layout import transposed_indices
from minmaxlab.gan import data, models
from minmaxlab.transforms import player_labels
from tests import _xla
from tests._coevolution_case import ring_coevolution

RING = data.ring8()
PAIR = models.make_pair("mlp", (2,), latent_dim=8, hidden=(16, 16))


def _coev(**overrides):
  kw = dict(
    rows=2,
    cols=4,
    batch_size=32,
    steps_per_generation=4,
    fitness_samples=64,
    mixture_samples=64,
    learning_rate=2e-3,
    cell_strategy="map",
  )
  kw.update(overrides)
  return ring_coevolution(PAIR, **kw)


def _run(coev, step, generations, key=0, state=None):
  state = coev.init(jax.random.key(key)) if state is None else state
  metrics = []
  for g in range(generations):
    state, m = step(jax.random.fold_in(jax.random.key(key + 1), g), state, RING)
    metrics.append(m)
  return state, metrics


@pytest.fixture(scope="module")
def coev_map():
  coev = _coev()
  traces = []

  def counted(key, state, d):
    traces.append(1)
    return coev.step(key, state, d)

  return coev, jax.jit(counted), traces


def test_generation_traced_once_and_deterministic(coev_map):
  coev, step, traces = coev_map
  s1, m1 = _run(coev, step, 3)
  s2, m2 = _run(coev, step, 3)
  assert len(traces) == 1
  chex.assert_trees_all_equal(s1, s2)
  assert int(s1.generation) == 3
  for m in m1:
    assert m["g_loss"].shape == (2, 4) and m["mixture_score"].shape == (2, 4)
    assert int(m["divergences"]) == 0
  # State keeps its structure and dtypes across generations.
  s0 = coev.init(jax.random.key(0))
  assert jax.tree.structure(s0) == jax.tree.structure(s1)
  jax.tree.map(lambda a, b: (a.shape, a.dtype) == (b.shape, b.dtype) or pytest.fail(), s0, s1)
  # Learning rates were mutated (probability 0.5 per selected individual) and stay positive.
  lr = np.asarray(s1.learning_rates.min)
  assert (lr > 0).all() and not np.allclose(lr, 2e-3)
  # Mixture weights stay on the simplex.
  w = np.asarray(s1.mixture_weights)
  np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
  assert (w >= 0).all()


def test_different_keys_differ(coev_map):
  coev, step, _ = coev_map
  a, _ = _run(coev, step, 1, key=0)
  b, _ = _run(coev, step, 1, key=5)
  assert not np.allclose(
    np.asarray(jax.tree.leaves(a.params)[0]), np.asarray(jax.tree.leaves(b.params)[0])
  )


def test_nan_cell_is_repaired_and_run_continues(coev_map):
  coev, step, traces = coev_map
  state, _ = _run(coev, step, 1)
  poisoned = state._replace(params=jax.tree.map(lambda x: x.at[0, 1].set(jnp.nan), state.params))
  state, m = step(jax.random.key(7), poisoned, RING)
  diverged = np.asarray(m["diverged"])
  assert diverged[0, 1] and int(m["divergences"]) >= 1
  for leaf in jax.tree.leaves((state.params, state.opt_state)):
    if jnp.issubdtype(leaf.dtype, jnp.inexact):
      assert np.isfinite(np.asarray(leaf)).all()
  state, m = step(jax.random.key(8), state, RING)
  assert int(m["divergences"]) == 0
  assert np.isfinite(np.asarray(m["best_score"]))
  assert len(traces) == 1


@pytest.mark.slow  # a whole generation compiled for the mesh
@pytest.mark.parametrize("mesh_shape", [(2, 2)])  # row blocks: tests/distributed/
def test_sharded_vmap_matches_single_device_map(coev_map, mesh_shape):
  """The cells batched by vmap and sharded over 2 or 4 devices give the numbers of the
  sequential lax.map on one device (the distributed backend's contract)."""
  coev, step, _ = coev_map
  want, want_m = _run(coev, step, 2)
  coev_v = _coev(cell_strategy="vmap")
  n = mesh_shape[0] * mesh_shape[1]
  mesh = distributed.grid_mesh(mesh_shape, jax.devices()[:n])
  state = distributed.shard_grid(coev_v.init(jax.random.key(0)), mesh, 2, 4)
  # the sharded program in the "fastest" compile mode (half the compile): equal to the default
  # mode's single-device numbers to the same tolerance
  fastest = distributed.compiler_options("fastest")
  got, got_m = _run(coev_v, distributed.sharded_step(coev_v, mesh, state, fastest), 2, state=state)
  assert len(jax.tree.leaves(got.params)[0].sharding.device_set) == n
  chex.assert_trees_all_close(got, want, rtol=2e-4, atol=2e-5)
  np.testing.assert_array_equal(got_m[-1]["best_cell"], want_m[-1]["best_cell"])


def test_grid_must_fit_the_mesh():
  coev = _coev(cell_strategy="vmap")
  mesh = distributed.grid_mesh((1, 3), jax.devices()[:3])
  with pytest.raises(ValueError, match="2x4 grid cannot be split into 1x3"):
    distributed.sharded_step(coev, mesh, coev.init(jax.random.key(0)))
  with pytest.raises(ValueError, match="does not fit"):
    distributed.grid_mesh((3, 1), jax.devices()[:4])
  with pytest.raises(ValueError, match="vmap"):
    distributed.sharded_step(
      _coev(), distributed.grid_mesh((2, 1), jax.devices()[:2]), coev.init(jax.random.key(0))
    )


def test_mixture_readout(coev_map):
  coev, step, _ = coev_map
  state, metrics = _run(coev, step, 2)
  gens, weights = coev.mixture(state)
  assert jax.tree.leaves(gens)[0].shape[0] == 5
  np.testing.assert_allclose(float(jnp.sum(weights)), 1.0, rtol=1e-5)
  samples = coev.sample_mixture(jax.random.key(0), gens, weights, 100)
  assert samples.shape == (100, 2) and np.isfinite(np.asarray(samples)).all()
  assert int(np.argmin(np.asarray(state.mixture_score))) == int(metrics[-1]["best_cell"])
  with pytest.raises(ValueError, match="cell"):
    coev.mixture(state, cell=8)


@pytest.mark.parametrize("layout,neighbourhood", [("rows", "moore"), ("transposed", "von_neumann")])
def test_mixture_of_every_cell_is_each_members_best_from_one_program(layout, neighbourhood):
  """``mixture(state, cell)``: the cell's own best generator, then each neighbour's best by
  stored fitness (indices worked out here in numpy), with the cell's weights; every cell of
  the grid from at most one new program (run eagerly, the first call compiled each of its
  gathers, takes and selects: 57 and 92 programs for these grids)."""
  coev = _coev(
    rows=3, cols=3, population_size=2, neighbourhood=neighbourhood, neighbourhood_layout=layout
  )
  state = coev.init(jax.random.key(0))
  fit = jax.random.uniform(jax.random.key(1), state.fitness.min.shape)
  weights = jax.random.dirichlet(
    jax.random.key(2), jnp.ones(state.mixture_weights.shape[-1]), (3, 3)
  )
  state = state._replace(fitness=state.fitness._replace(min=fit), mixture_weights=weights)
  members = (transposed_indices if layout == "transposed" else co.neighbour_indices)(
    3, 3, neighbourhood
  )
  leaves, fit = jax.tree.leaves(state.params.min), np.asarray(fit)
  with _xla.lowerings() as lowered:
    got = [coev.mixture(state, cell=cell) for cell in range(9)]
  assert len(lowered) <= 1  # 0 when an earlier test compiled it for these shapes
  for cell, (gens, w) in enumerate(got):
    r, c = divmod(cell, 3)
    assert members[r, c, 0] == cell
    rc = [divmod(int(m), 3) for m in members[r, c]]
    best = [int(np.argmin(fit[mr, mc])) for mr, mc in rc]
    for leaf, got_leaf in zip(leaves, jax.tree.leaves(gens), strict=True):
      want = np.stack([np.asarray(leaf)[mr, mc, p] for (mr, mc), p in zip(rc, best)])
      np.testing.assert_array_equal(np.asarray(got_leaf), want)
    np.testing.assert_array_equal(np.asarray(w), np.asarray(weights)[r, c])


def test_bad_construction():
  with pytest.raises(ValueError, match="loss"):
    _coev(loss="wgan_gp")
  import optax

  with pytest.raises(ValueError, match="learning rate"):
    co.Coevolution(
      co.CoevolutionConfig(rows=1, cols=1),
      PAIR,
      sample_real=None,
      score_fn=None,
      scheme=optax.adam(1e-3),
    )


@pytest.mark.parametrize("steps,d_every", [(7, 2), (6, 3), (4, 4), (3, 1)])
def test_train_schedule_order(steps, d_every):
  """Batch i trains the discriminator only when (i + 1) % d_every == 0, the generator always;
  losses come back in batch order."""
  from minmaxlab.coevolution._training import train_schedule

  def both(carry, i):
    g, d = carry
    return (g.at[i].add(1), d.at[i].add(1)), jnp.stack([i, -i]).astype(jnp.float32)

  def g_only(carry, i):
    g, d = carry
    return (g.at[i].add(1), d), i.astype(jnp.float32)

  zeros = jnp.zeros(steps, jnp.int32)
  (g, d), g_losses, d_losses = train_schedule(
    both, g_only, (zeros, zeros), jnp.arange(steps), d_every
  )
  i = np.arange(steps)
  np.testing.assert_array_equal(g, np.ones(steps))
  np.testing.assert_array_equal(d, (i + 1) % d_every == 0)
  np.testing.assert_array_equal(g_losses, i)
  np.testing.assert_array_equal(d_losses, -i[(i + 1) % d_every == 0])


def _step_counts(opt_state):
  """{label: set of values} of every optimizer step counter, by player."""
  labels = player_labels(opt_state)
  out = {}
  for (path, leaf), label in zip(
    jax.tree_util.tree_leaves_with_path(opt_state), jax.tree.leaves(labels)
  ):
    if isinstance(path[-1], jax.tree_util.GetAttrKey) and path[-1].name == "count":
      out.setdefault(label, set()).update(np.asarray(leaf).ravel().tolist())
  return out


def test_d_every_2_discriminator_every_second_step():
  """Lipizzaner's schedule end to end: with d_every=2 and 3 steps per generation the
  generators take 3 optimizer steps per generation and the discriminators 1 (the leftover
  batch is a generator step), counted by their own Adam states; Lookahead's shared counter
  counts batches. Selection off and one individual per cell, so the trained pair is kept
  whenever replacement accepts it (checked via the metrics)."""
  coev = _coev(
    rows=1, cols=2, selection=False, mutation_probability=0.0, steps_per_generation=3, d_every=2
  )
  # compiled in the "fastest" mode (half the compile): the step counts do not depend on
  # XLA's options, and the default mode's generation is compiled by the tests above
  _, step = distributed.make_backend(coev.config, compile="fastest").jit(coev)
  state = coev.init(jax.random.key(0))
  SHARED, MIN, MAX = 0, 1, 2
  assert _step_counts(state.opt_state) == {SHARED: {0}, MIN: {0}, MAX: {0}}
  kept_g = kept_d = 0
  for g in range(2):
    new, m = step(jax.random.key(g + 1), state, RING)
    assert int(m["divergences"]) == 0
    rg, rd = np.asarray(m["replaced_g"]), np.asarray(m["replaced_d"])
    for cell in range(2):
      old_c = _step_counts(_cell(state.opt_state, cell))
      new_c = _step_counts(_cell(new.opt_state, cell))
      gen_changed = _changed(state.params.min, new.params.min, cell)
      disc_changed = _changed(state.params.max, new.params.max, cell)
      if rg[0, cell]:  # the trained generator replaced the local one: 3 more steps
        kept_g += 1
        assert new_c[MIN] == {c + 3 for c in old_c[MIN]} and gen_changed
      else:
        assert new_c[MIN] == old_c[MIN] and not gen_changed
      if rd[0, cell]:  # the trained discriminator: 1 more step
        kept_d += 1
        assert new_c[MAX] == {c + 1 for c in old_c[MAX]} and disc_changed
      else:
        assert new_c[MAX] == old_c[MAX] and not disc_changed
    state = new
  assert kept_g >= 2 and kept_d >= 2  # the test above was not vacuous


def _cell(tree, cell):
  return jax.tree.map(lambda x: x[0, cell], tree)


def _changed(a, b, cell):
  return any(
    not np.array_equal(x[0, cell], y[0, cell])
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
  )
