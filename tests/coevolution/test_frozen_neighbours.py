"""Selection off (issue 33): a cell's individuals train against opponents drawn every batch
from the whole neighbourhood, where the cell's own opponents are live (the ones being trained)
and the neighbours' are the copies gathered at the start of the generation, frozen until the
next exchange, as Lipizzaner's ``all_discriminators`` (neighbours' individuals fetched once per
iteration, plus the local population trained in place).

The toy pair of ``_toy_cell`` (``G(w) = w``, ``D(v, x) = v x``, SGD 0.1): the
generator's step is ``w += lr v_opp``, the discriminator's ``v -= lr (w_opp - r)``. A
hand-written loop draws the same opponents from the same keys (``_training._step_draws``:
``k_g, k_d = split(batch key, 3)[:2]``, one categorical draw each over the usable pool) and
plays the frozen neighbour values; the neighbours' own values are never moved.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab import coevolution as co
from minmaxlab import distributed
from minmaxlab.coevolution._training import CellSpec, train
from minmaxlab.transforms import player_labels
from tests.coevolution import _toy_cell as toy

STEPS, LR, R = 6, 0.1, 0.5


def test_own_opponents_live_neighbours_frozen():
  config = co.CoevolutionConfig(
    rows=1, cols=2, selection=False, batch_size=2, steps_per_generation=STEPS
  )
  params, opt, _ = toy.individuals([2.0], [3.0])
  labels = player_labels(jax.tree.map(lambda x: x[0], opt))
  sample = lambda data, key, n: jnp.full((n, 1), R)
  spec = CellSpec(
    config=config,
    pair=toy.PAIR,
    scheme=toy.SCHEME,
    labels=labels,
    sample_real=sample,
    score_fn=None,
    losses=(toy.loss,),
    init_individual=None,
  )
  nbr_w, nbr_v = -1.0, 0.5  # the neighbour's generator and discriminator (pool slot 1)
  nbrs, _, _ = toy.individuals([nbr_w], [nbr_v])
  pools = (jnp.ones(2, bool), jnp.ones(2, bool))
  key = jax.random.key(7)
  fast = distributed.compiler_options("fastest")
  run = jax.jit(
    lambda p, o, n: train(spec, toy.loss, key, None, p, o, pools, n, True), compiler_options=fast
  )
  (p, _), _, _ = run(params, opt, (nbrs.min, nbrs.max))
  w, v, drawn = 2.0, 3.0, set()
  for k in jax.random.split(key, STEPS):
    k_g, k_d, _ = jax.random.split(k, 3)
    i_g = int(jax.random.categorical(k_g, jnp.zeros(2), shape=(1,))[0])
    i_d = int(jax.random.categorical(k_d, jnp.zeros(2), shape=(1,))[0])
    drawn |= {("g", i_g), ("d", i_d)}
    w_opp = w if i_g == 0 else nbr_w  # own: live; neighbour: its generation-start copy
    v_opp = v if i_d == 0 else nbr_v
    w, v = w + LR * v_opp, v - LR * (w_opp - R)  # simultaneous: both from the same state
  assert {("g", 1), ("d", 1), ("g", 0), ("d", 0)} <= drawn  # both kinds of opponent played
  np.testing.assert_allclose(p.min["w"], [w], rtol=1e-6)
  np.testing.assert_allclose(p.max["v"], [v], rtol=1e-6)
  assert (float(nbrs.min["w"][0]), float(nbrs.max["v"][0])) == (nbr_w, nbr_v)
