"""The operators' tunable ``CoevolutionParams`` (evosax style): traced leaves of
``Coevolution.step``, so a population of grids vmaps over them and vectorized PBT
tunes them. Fitness convention: coevolution scores are lower-is-better losses,
PBT fitness is higher-is-better, so PBT maximises ``-score``."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed, pbt
from minmaxlab.gan import data, metrics, models

RING = data.ring8()
PAIR = models.make_pair("mlp", (2,), latent_dim=4, hidden=(8,))
COEV = co.Coevolution(
  co.CoevolutionConfig(
    rows=1,
    cols=2,
    batch_size=16,
    steps_per_generation=2,
    fitness_samples=16,
    mixture_samples=16,
    learning_rate=2e-3,
    mutation_probability=1.0,
    cell_strategy="vmap",
  ),
  PAIR,
  sample_real=lambda d, k, n: d.sample(k, n),
  score_fn=metrics.mode_tvd_score,
)


def _params(h):
  """The member's tuned parameters over the config's defaults."""
  return COEV.default_params()._replace(
    mutation_scale=h["mutation_scale"], mixture_sigma=h["mixture_sigma"]
  )


def _fitness(state):
  """PBT's higher-is-better fitness: minus the grid's best (lowest) mixture score."""
  score = state.mixture_score
  return -jnp.min(jnp.where(jnp.isfinite(score), score, jnp.inf))


def test_default_params_are_the_config_and_trace():
  p = COEV.default_params()
  assert p._fields == (
    "mutation_probability",
    "mutation_scale",
    "min_learning_rate",
    "mixture_sigma",
  )
  np.testing.assert_allclose([float(x) for x in p], [1.0, 1e-4, 1e-7, 0.01], rtol=1e-6)
  state = jax.eval_shape(COEV.init, jax.random.key(0))
  # Two populations of parameters vmapped over one grid state: shapes only, nothing runs.
  batched = jax.tree.map(lambda x: jnp.stack([x, 2 * x]), p)
  run = lambda st, q: jax.vmap(lambda qq: COEV.step(jax.random.key(1), st, RING, qq))(q)  # noqa: E731
  out, _ = jax.eval_shape(run, state, batched)
  assert out.learning_rates.min.shape == (2, 1, 2, 1)


@pytest.mark.slow
def test_vectorized_pbt_tunes_mutation_scale_and_mixture_sigma():
  space = {
    "mutation_scale": pbt.Continuous(low=1e-6, high=1e-2),
    "mixture_sigma": pbt.Continuous(low=1e-3, high=1.0),
  }
  runner = pbt.vectorized_pbt(
    lambda key, h: (COEV.init(key), jnp.zeros(())),
    lambda key, s, o, h, d: (COEV.step(key, s, d, _params(h))[0], o, {}),
    lambda key, s, o, h, d: _fitness(s),
    space,
    steps=1,
    exploit="truncation",
    truncation_fraction=0.5,
    jit=False,  # jitted here, as the plain generation, in the "fastest" mode (half the compile)
  )
  fastest = distributed.compiler_options("fastest")
  P = 4
  state = runner.init(jax.random.key(0), P)
  key = jax.random.key(1)
  new, m = jax.jit(runner.step, compiler_options=fastest)(key, state, RING)
  # Every member's round equals one plain generation with that member's parameters.
  k_train = jax.random.split(key, 4)[0]
  step = jax.jit(COEV.step, compiler_options=fastest)
  direct = []
  for i in range(P):
    k = jax.random.split(jax.random.split(k_train, P)[i], 1)[0]
    member = jax.tree.map(lambda x: x[i], state.params)
    h = {n: state.hparams[n][i] for n in space}
    direct.append(step(k, member, RING, _params(h))[0])
  want_fitness = np.array([float(_fitness(s)) for s in direct])
  np.testing.assert_allclose(m["fitness"], want_fitness, rtol=1e-5, atol=1e-6)
  source = np.asarray(m["source"])
  for i in range(P):
    got = jax.tree.map(lambda x: x[i], new.params)
    chex.assert_trees_all_close(got, direct[source[i]], rtol=1e-4, atol=1e-6)
  # The members' learning-rate mutations scale with their own mutation_scale.
  lr0 = COEV.config.learning_rate
  spread = [float(np.max(np.abs(np.asarray(s.learning_rates.min) - lr0))) for s in direct]
  scale = np.asarray(state.hparams["mutation_scale"])
  assert all(sp <= 6 * sc + 1e-7 for sp, sc in zip(spread, scale, strict=True))
  # Truncation: the worse half copied the better half's grids and explored their parameters.
  assert int(m["num_copied"]) == 2
  copied = np.asarray(m["copied"])
  assert (want_fitness[source[copied]] >= want_fitness[copied]).all()
