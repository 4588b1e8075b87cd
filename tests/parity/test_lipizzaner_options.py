"""The options that reproduce Lipizzaner's behaviours (issue 45), beyond the golden files.

``schedule="reference"`` (one opponent per batch for the whole population),
``d_phase="first"`` (the discriminator's batches 0, k, 2k, ...), ``neighbourhood_layout=
"transposed"`` (its ``_adjacent_cells``) and ``cell_seeds="shared"`` (its
``get_heuristic_seed``): each on a case small enough to check by hand, each against the
default it departs from. tests/parity/test_lipizzaner_golden.py checks them against the
reference's own output.
"""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from minmaxlab import coevolution as co
from minmaxlab.coevolution._layout import TransposedGrid, gather_transposed, transposed_indices
from minmaxlab.coevolution._schedule import train_schedule
from minmaxlab.coevolution._training import CellSpec, train
from minmaxlab.games import Players
from minmaxlab.gan.models import GANPair, mlp_discriminator, mlp_generator
from minmaxlab.transforms import per_player, player_labels, set_learning_rates


@pytest.mark.parametrize("steps", [4, 5, 6])
def test_d_phase_first_updates_both_on_batches_0_k_2k(steps):
  both = lambda c, x: ((c[0] + 1, c[1] + 1), jnp.stack([x, x]))
  g_only = lambda c, x: ((c[0] + 1, c[1]), x)
  xs = jnp.arange(steps)
  (g, d), gl, dl = train_schedule(both, g_only, (0, 0), xs, 2, d_phase="first")
  assert (int(g), int(d)) == (steps, (steps + 1) // 2)
  assert dl.tolist() == list(range(0, steps, 2))  # the discriminator's batches
  assert gl.tolist() == list(range(steps))
  _, _, last = train_schedule(both, g_only, (0, 0), xs, 2)
  assert last.tolist() == list(range(1, steps, 2))  # the default: batches 1, 3, 5, ...


def test_d_phase_is_validated():
  with pytest.raises(ValueError, match="d_phase"):
    co.CoevolutionConfig(d_phase="middle")
  with pytest.raises(ValueError, match="cell_seeds"):
    co.CoevolutionConfig(cell_seeds="each")
  with pytest.raises(ValueError, match="neighbourhood_layout"):
    co.CoevolutionConfig(rows=2, cols=3, neighbourhood_layout="transposed")


# A toy pair: G(w, z) = w, D(v, x) = v * x, generator loss -mean(D(fake)): a generator's
# SGD step is lr * (its opponent's v), so the step says whom it played.
G = SimpleNamespace(apply=lambda p, z: jnp.broadcast_to(p["w"], z.shape[:1] + (1,)))
D = SimpleNamespace(apply=lambda p, x: p["v"] * x[..., 0])
PAIR = SimpleNamespace(generator=G, discriminator=D, latent_dim=1)
SCHEME = optax.with_extra_args_support(
  per_player(
    min=optax.inject_hyperparams(optax.sgd)(learning_rate=1.0),
    max=optax.inject_hyperparams(optax.sgd)(learning_rate=0.0),
  )
)


def loss(real_logits, fake_logits):
  return -jnp.mean(fake_logits), jnp.mean(fake_logits) - jnp.mean(real_logits)


def generator_steps(schedule):
  P = 4
  cfg = co.CoevolutionConfig(
    rows=1,
    cols=1,
    population_size=P,
    steps_per_generation=1,
    batch_size=2,
    schedule=schedule,
    opponents="selected",
  )
  params = Players({"w": jnp.zeros(P)}, {"v": jnp.arange(1.0, P + 1)})
  opt = jax.vmap(SCHEME.init)(params)
  lr = jnp.ones(P)
  opt = jax.vmap(set_learning_rates)(opt, lr, jnp.zeros(P))
  spec = CellSpec(
    config=cfg,
    pair=PAIR,
    scheme=SCHEME,
    labels=player_labels(SCHEME.init(jax.tree.map(lambda x: x[0], params))),
    sample_real=lambda data, k, n: jnp.zeros((n, 1)),
    score_fn=None,
    losses=(loss,),
    init_individual=None,
  )
  pools = (jnp.arange(P) < P, jnp.arange(P) < P)
  steps = []
  for seed in range(6):
    (p, _), _, _ = train(
      spec, loss, jax.random.key(seed), None, params, opt, pools, (None, None), False
    )
    steps.append(np.asarray(p.min["w"]))
  return np.stack(steps)  # [seeds, P]: each generator's opponent's v


def test_reference_schedule_one_opponent_for_the_population():
  ref = generator_steps("reference")
  assert np.all(ref == ref[:, :1])  # every generator played the same discriminator
  own = generator_steps("lipizzaner")
  assert not np.all(own == own[:, :1])  # one draw per individual: they differ


def test_transposed_layout_gathers_the_references_members():
  ids = jnp.arange(9).reshape(3, 3)
  got = np.asarray(gather_transposed(ids))
  assert got[0, 1].tolist()[0] == 1 and set(got[0, 1].tolist()[1:]) == {0, 4, 5, 6}
  assert np.array_equal(got, transposed_indices(3, 3))
  grid = TransposedGrid(3, 3)
  flat, idx = grid.members(ids, "von_neumann")
  assert np.array_equal(np.asarray(flat)[idx], got)
  rows = np.asarray(co.gather_neighbours(ids))
  assert set(rows[0, 1].tolist()) == {1, 0, 2, 4, 7}  # the default: its own neighbours


def tiny(rows, **over):
  cfg = co.CoevolutionConfig(
    rows=rows,
    cols=rows,
    steps_per_generation=2,
    batch_size=4,
    fitness_samples=4,
    mixture_samples=4,
    cell_strategy="vmap",
    **over,
  )
  pair = GANPair(
    generator=mlp_generator((2,), 2, (3,), None),
    discriminator=mlp_discriminator((2,), (3,)),
    latent_dim=2,
  )
  sample = lambda data, k, n: data[jax.random.randint(k, (n,), 0, data.shape[0])]
  score = lambda data, samples, w: jnp.mean(jnp.abs(samples))
  return co.Coevolution(
    cfg, pair, sample_real=sample, score_fn=score, scheme=co.default_scheme(1e-2, lookahead=False)
  )


def test_transposed_mixture_reads_the_transposed_members():
  coev = tiny(3, neighbourhood_layout="transposed")
  assert isinstance(coev.exchange, TransposedGrid)
  state = coev.init(jax.random.key(0))
  gens, _ = coev.mixture(state, cell=1)
  first = lambda c: jax.tree.leaves(state.params.min)[0][c // 3, c % 3, 0]
  got = jax.tree.leaves(gens)[0]
  for m, cell in enumerate(transposed_indices(3, 3)[0, 1]):
    np.testing.assert_array_equal(got[m], first(int(cell)))


@pytest.mark.slow
def test_shared_cell_seeds_make_identical_cells_stay_identical():
  data = jax.random.normal(jax.random.key(1), (32, 2))
  out = {}
  for seeds in ("shared", "per_cell"):
    coev = tiny(2, cell_seeds=seeds, selection=False, opponents="selected", rescore_own="trained")
    state = coev.init(jax.random.key(0))
    same = lambda x: jnp.broadcast_to(x[:1, :1], x.shape)  # every cell a copy of cell 0
    state = state._replace(
      params=jax.tree.map(same, state.params), opt_state=jax.tree.map(same, state.opt_state)
    )
    new, _ = jax.jit(coev.step)(jax.random.key(2), state, data)
    out[seeds] = np.asarray(jax.tree.leaves(new.params.min)[0]).reshape(4, -1)
  assert np.all(out["shared"] == out["shared"][:1])  # Lipizzaner: every client one seed
  assert not np.all(out["per_cell"] == out["per_cell"][:1])


def test_rescore_own_trained_plays_the_cells_trained_individuals():
  from minmaxlab.coevolution import _phases as ph
  from minmaxlab.coevolution._rescore_own import with_trained_own

  # P = 1, two members: own (w 1, v 1), a neighbour (w 2, v 2); trained own: w 0.5, v 3.
  params = Players({"w": jnp.asarray([1.0, 2.0])}, {"v": jnp.asarray([1.0, 2.0])})
  ok = jnp.ones(2, bool)
  pool = ph.Pool(params=params, opt=None, learning_rates=Players(ok, ok), valid=Players(ok, ok))
  real, z = jnp.ones((4, 1)), jnp.zeros((4, 1))
  _, batch = ph.fitness(PAIR, loss, real, z, pool, "average")
  trained = Players({"w": jnp.asarray([0.5])}, {"v": jnp.asarray([3.0])})
  at_start = ph.rescore(PAIR, loss, batch, trained, pool, "average")
  pool2, batch2 = with_trained_own(PAIR, pool, batch, trained)
  own = ph.rescore(PAIR, loss, batch2, trained, pool2, "average")
  # generator 0.5 against v = 1 (its pre-training D) and 2, or 3 (its trained D) and 2
  np.testing.assert_allclose(at_start.min, [-(1 * 0.5 + 2 * 0.5) / 2])
  np.testing.assert_allclose(own.min, [-(3 * 0.5 + 2 * 0.5) / 2])
  # discriminator v = 3 against fakes 1 (the pre-training G) and 2, or 0.5 and 2 (real = 1)
  np.testing.assert_allclose(at_start.max, [((3 - 3) + (6 - 3)) / 2])
  np.testing.assert_allclose(own.max, [((1.5 - 3) + (6 - 3)) / 2])
  with pytest.raises(ValueError, match="rescore_own"):
    co.CoevolutionConfig(rescore_own="fresh")
