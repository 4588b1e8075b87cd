"""The coevolution case shared by the distributed tests and their MPI script: a
4x4 grid of tiny MLP pairs on the 8-Gaussian ring, 3 generations, each network's parameters
one vector (``models.flat_pair``, as the experiments' smoke config): 25 state leaves instead
of 65, and a generation compiles in about 60% of the CPU time of the layered pair's (the same
exchanges, one message per dtype and hop whatever the leaves; the layered pair runs on a mesh
in tests/coevolution/test_coevolution.py)."""

import jax

from minmaxlab import coevolution as co
from minmaxlab.gan import data, metrics, models

RING = data.ring8()
PAIR = models.make_pair("mlp", (2,), latent_dim=8, hidden=(16, 16))
FLAT = models.flat_pair(PAIR)  # the shared case's pair
GENERATIONS = 3


def coevolution(neighbourhood="von_neumann", exchange=None, cell_strategy="map"):
  config = co.CoevolutionConfig(
    rows=4,
    cols=4,
    neighbourhood=neighbourhood,
    batch_size=32,
    steps_per_generation=3,
    fitness_samples=64,
    mixture_samples=64,
    learning_rate=2e-3,
    cell_strategy=cell_strategy,
  )
  return co.Coevolution(
    config,
    FLAT,
    sample_real=lambda d, k, n: d.sample(k, n),
    score_fn=metrics.mode_tvd_score,
    exchange=exchange,
  )


def run(coev, step, state=None, generations=GENERATIONS):
  """``generations`` steps from ``init(key(0))``; returns ``(state, [host metrics])``."""
  state = coev.init(jax.random.key(0)) if state is None else state
  metrics = []
  for g in range(generations):
    state, m = step(jax.random.fold_in(jax.random.key(1), g), state, RING)
    metrics.append(jax.device_get(m))
  return state, metrics


def ring_coevolution(pair, **config) -> co.Coevolution:
  """A ``Coevolution`` of ``pair`` on the 8-Gaussian ring, scored by mode TVD (the unit
  tests' case); ``config``: the ``CoevolutionConfig`` fields."""
  return co.Coevolution(
    co.CoevolutionConfig(**config),
    pair,
    sample_real=lambda d, k, n: d.sample(k, n),
    score_fn=metrics.mode_tvd_score,
  )
