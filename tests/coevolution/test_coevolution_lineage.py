"""generator_selection="lineage" (issue 18): a cell keeps its own generators while its
discriminators are still selected by tournament; checked on a hand-set pool."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from minmaxlab import coevolution as co
from minmaxlab.coevolution import _phases as ph
from minmaxlab.games import Players
from minmaxlab.transforms import per_player, player_labels, set_learning_rates

SCHEME = optax.with_extra_args_support(
  per_player(
    min=optax.inject_hyperparams(optax.sgd)(learning_rate=0.1),
    max=optax.inject_hyperparams(optax.sgd)(learning_rate=0.1),
  )
)


def _pool(w, v):
  params = Players({"w": jnp.asarray(w, jnp.float32)}, {"v": jnp.asarray(v, jnp.float32)})
  lrs = jnp.full(len(w), 0.1, jnp.float32)
  opt = jax.vmap(set_learning_rates)(jax.vmap(SCHEME.init)(params), lrs, lrs)
  ok = jnp.ones(len(w), bool)
  return ph.Pool(params=params, opt=opt, learning_rates=Players(lrs, lrs), valid=Players(ok, ok))


@pytest.mark.parametrize("population", [1, 2])
def test_lineage_keeps_own_generators_and_selects_discriminators(population):
  # Pool of 3 members x P: the cell's own individuals first. The neighbours' generators
  # and discriminators are far fitter, so a 64-candidate tournament picks them.
  n = 3 * population
  pool = _pool(np.arange(n, dtype=np.float32), 10.0 + np.arange(n, dtype=np.float32))
  labels = player_labels(jax.tree.map(lambda x: x[0], pool.opt))
  fit_g = jnp.where(jnp.arange(n) < population, 5.0, 1.0).at[n - 1].set(0.0)
  fit_d = jnp.where(jnp.arange(n) < population, 5.0, 1.0).at[population].set(0.0)
  fit = Players(fit_g, fit_d)
  usable = Players(jnp.ones(n, bool), jnp.ones(n, bool))
  keys = tuple(jax.random.split(jax.random.key(0), 3))
  params = co.CoevolutionParams(
    mutation_probability=0.0, mutation_scale=0.0, min_learning_rate=1e-7, mixture_sigma=0.0
  )  # no mutation: learning rates kept

  def select(mode):
    config = co.CoevolutionConfig(
      rows=1,
      cols=1,
      population_size=population,
      n_replacements=population,
      tournament_size=64,
      generator_selection=mode,
    )
    return ph.select_and_mutate(keys, fit, usable, pool, labels, config, params)

  # Lipizzaner's tournament: the best neighbour's generator moves into the cell.
  _, idx = select("tournament")
  assert idx.min.tolist() == [n - 1] * population
  assert idx.max.tolist() == [population] * population
  # Lineage: the cell's own generators, in place (with their own scheme states and
  # learning rates); the discriminators still come from the same tournament.
  sel, idx = select("lineage")
  assert idx.min.tolist() == list(range(population))
  assert idx.max.tolist() == [population] * population
  np.testing.assert_array_equal(sel.params.min["w"], np.arange(population))
  np.testing.assert_array_equal(sel.params.max["v"], [10.0 + population] * population)
  np.testing.assert_array_equal(sel.fitness.min, [5.0] * population)


def test_generator_selection_is_validated():
  with pytest.raises(ValueError, match="generator_selection must be one of"):
    co.CoevolutionConfig(generator_selection="niche")
