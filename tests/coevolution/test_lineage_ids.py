"""Lineage ids (issue 33 item 3): every individual carries ``cell * 2**16 + generation`` of
its birth, and every operator that moves an individual moves its id (selection, the
replacement test, the repair from a neighbour; fresh networks start a new lineage).

The takeover test uses the toy pair of ``_toy_cell`` (``G(w, z) = w``,
``D(v, x) = v x``) with a learning rate so small that no number moves: one cell's
generator (``w = 8``, every other ``w = 0``, every ``v = 1``) has by construction a far
lower non-saturating loss against every discriminator, so on a 3x3 von Neumann torus a
tournament over the whole neighbourhood picks it wherever it is a member and it wins the
replacement test: it reaches the 4 neighbours in generation 1 and the rest of the torus
(at distance 2) in generation 2. With ``selection=False`` every cell keeps its own.
"""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab.coevolution import _phases as ph
from minmaxlab.games import Players
from minmaxlab.transforms import player_labels
from tests.coevolution import _toy_cell as toy

STRONG = 4  # the centre cell of the 3x3 torus holds the strong generator


def test_ids_encode_cell_and_generation():
  ids = co.lineage_id(np.array([0, 3, 8]), np.array([0, 7, 2**20]))
  assert ids.dtype == jnp.int32
  cell, gen = co.lineage_origin(ids)
  assert cell.tolist() == [0, 3, 8] and gen.tolist() == [0, 7, 2**16 - 1]  # saturated


def test_phases_move_each_individuals_lineage():
  # Selection: tournament winners take their ids (pool 3 x P=1, as in the Mustangs test).
  pool = toy.pool([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
  pool = pool._replace(lineage=Players(jnp.array([10, 11, 12]), jnp.array([20, 21, 22])))
  labels = player_labels(jax.tree.map(lambda x: x[0], pool.opt))
  fit = Players(jnp.array([3.0, 1.0, 2.0]), jnp.array([9.0, 9.0, 0.5]))
  usable = Players(jnp.ones(3, bool), jnp.ones(3, bool))
  keys = tuple(jax.random.split(jax.random.key(0), 3))
  sel, idx = ph.select_and_mutate(keys, fit, usable, pool, labels, toy.config(), toy.params())
  assert idx.min.tolist() == [1, 1] and idx.max.tolist() == [2, 2]
  assert sel.lineage.min.tolist() == [11, 11] and sel.lineage.max.tolist() == [22, 22]
  # Without selection the cell's own individuals stay where they are, ids included.
  own, _ = ph.select_and_mutate(
    keys, fit, usable, pool, labels, toy.config(selection=False), toy.params()
  )
  assert own.lineage.min.tolist() == [10, 11] and own.lineage.max.tolist() == [20, 21]

  # Replacement: local generator slot 1 (fitness 5) takes trained 1 (0.5) and its id.
  params, opt, lrs = toy.individuals([1.0, 2.0], [1.0, 2.0])
  fit_local = Players(jnp.array([1.0, 5.0]), jnp.array([2.0, 1.0]))
  local = ph.Individuals(
    params=params,
    opt=opt,
    learning_rates=lrs,
    fitness=fit_local,
    loss_index=None,
    lineage=Players(jnp.array([1, 2]), jnp.array([3, 4])),
  )
  params, opt, lrs = toy.individuals([10.0, 20.0], [10.0, 20.0], lr=0.3)
  fit_trained = Players(jnp.array([4.0, 0.5]), jnp.array([3.0, 3.0]))
  lineage = Players(jnp.array([7, 8]), jnp.array([9, 6]))
  trained = ph.Individuals(
    params=params,
    opt=opt,
    learning_rates=lrs,
    fitness=fit_trained,
    loss_index=None,
    lineage=lineage,
  )
  new, src = ph.replace(local, trained, 1, True, labels)
  assert src.min.tolist() == [-1, 1] and src.max.tolist() == [-1, -1]
  assert new.lineage.min.tolist() == [1, 8] and new.lineage.max.tolist() == [3, 4]
  kept, _ = ph.replace(local, trained, 1, False, labels)  # trained in place: all kept
  assert kept.lineage.min.tolist() == [7, 8] and kept.lineage.max.tolist() == [9, 6]

  # Repair: a diverged cell copies its best neighbour (member 2 of 3) with its ids;
  # without a finite neighbour it takes the fresh individuals and their new ids.
  pool = toy.pool([np.nan, 2.0, 3.0], [1.0, 2.0, 3.0], valid_g=[False, True, True])
  pool = pool._replace(lineage=Players(jnp.array([30, 31, 32]), jnp.array([40, 41, 42])))
  one = lambda t: jax.tree.map(lambda x: x[:1], t)
  born = Players(jnp.array([99]), jnp.array([99]))
  params, opt, lrs = one((pool.params, pool.opt, pool.learning_rates))
  fresh = ph.Individuals(
    params=params,
    opt=opt,
    learning_rates=lrs,
    fitness=Players(jnp.zeros(1), jnp.zeros(1)),
    loss_index=None,
    lineage=born,
  )
  fitness = Players(jnp.array([0.0, 5.0, 4.0]), jnp.array([1.0, 2.0, 3.0]))
  out = ph.repair(jnp.asarray(True), fresh, pool, fitness, fresh, 3)
  assert out.lineage.min.tolist() == [32] and out.lineage.max.tolist() == [42]
  alone = ph.repair(
    jnp.asarray(True), fresh, pool, Players(jnp.full(3, jnp.inf), fitness.max), fresh, 3
  )
  assert alone.lineage.min.tolist() == [99]


def _toy_coevolution(selection: bool) -> co.Coevolution:
  pair = SimpleNamespace(
    generator=SimpleNamespace(init=lambda k: {"w": jnp.zeros(())}, apply=toy.G.apply),
    discriminator=SimpleNamespace(init=lambda k: {"v": jnp.ones(())}, apply=toy.D.apply),
    latent_dim=1,
  )
  config = co.CoevolutionConfig(
    rows=3,
    cols=3,
    batch_size=4,
    steps_per_generation=1,
    fitness_samples=4,
    mixture_samples=4,
    learning_rate=1e-20,  # Adam moves a weight by about this: nothing changes
    mutation_probability=0.0,
    tournament_size=5,  # the whole von Neumann neighbourhood, drawn without replacement
    tournament_sampling="without_replacement",
    selection=selection,
    cell_strategy="map",
  )
  return co.Coevolution(
    config,
    pair,
    sample_real=lambda d, k, n: jnp.zeros((n, 1)),
    score_fn=lambda d, samples, w: jnp.sum(w) * 0.0,
  )


@pytest.mark.parametrize("selection", [True, False])
def test_takeover_on_a_3x3_torus(selection):
  coev = _toy_coevolution(selection)
  state = coev.init(jax.random.key(0))
  ids0 = np.asarray(state.lineage.min)
  np.testing.assert_array_equal(ids0[..., 0], co.lineage_id(np.arange(9).reshape(3, 3), 0))
  w = state.params.min["w"].at[STRONG // 3, STRONG % 3].set(8.0)
  state = state._replace(params=Players({"w": w}, state.params.max))
  step = jax.jit(coev.step)
  counts, m = [], None
  for g in range(3):
    state, m = step(jax.random.key(g), state, None)
    counts.append(len(np.unique(np.asarray(m["lineage_g"]))))
  np.testing.assert_array_equal(m["lineage_g"], state.lineage.min)
  np.testing.assert_array_equal(m["lineage_d"], state.lineage.max)
  cell, born = co.lineage_origin(state.lineage.min)
  assert np.all(born == 0)  # nothing diverged: no lineage was born after the start
  if selection:
    assert counts == [5, 1, 1]  # the centre and its 4 neighbours, then the whole torus
    assert np.all(cell == STRONG)
    # the strong generator itself went with its id
    np.testing.assert_allclose(state.params.min["w"], 8.0, atol=1e-6)
  else:
    assert counts == [9, 9, 9]
    np.testing.assert_array_equal(cell[..., 0], np.arange(9).reshape(3, 3))


def test_a_fresh_reseed_starts_a_lineage_here_and_now():
  """Every cell diverged: no finite neighbour to copy, so each takes fresh networks born
  in its own cell at the generation being taken."""
  coev = _toy_coevolution(True)
  state = coev.init(jax.random.key(0))
  nan = jnp.full_like(state.params.min["w"], jnp.nan)
  state = state._replace(params=Players({"w": nan}, state.params.max), generation=jnp.int32(5))
  state, m = jax.jit(coev.step)(jax.random.key(0), state, None)
  assert int(m["divergences"]) == 9
  cell, born = co.lineage_origin(state.lineage.min)
  np.testing.assert_array_equal(cell[..., 0], np.arange(9).reshape(3, 3))
  assert np.all(born == 5)
