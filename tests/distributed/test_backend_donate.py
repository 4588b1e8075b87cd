"""``make_backend(..., donate=True)``: the jitted step donates its input state (the input
is deleted by the call) and computes the same bits as without donation."""

from __future__ import annotations

import chex
import jax
import pytest

from minmaxlab import distributed
from tests import _coevolution_case as case


@pytest.mark.slow  # two compiles of a 1x1 generation step
def test_donated_step_gives_the_same_bits_and_consumes_its_input():
  coev = case.ring_coevolution(
    case.PAIR, rows=1, cols=1, batch_size=16, steps_per_generation=2, fitness_samples=16,
    mixture_samples=16,
  )  # fmt: skip
  results = {}
  for donate in (False, True):
    backend = distributed.make_backend(coev.config, compile="fastest", donate=donate)
    assert backend.donate is donate
    init, step = backend.jit(coev)
    state = init(jax.random.key(0))
    first = jax.tree.leaves(state)[0]
    for g in range(2):
      state, _ = step(jax.random.key(g), state, case.RING)
    assert first.is_deleted() is donate  # a donated input is gone
    results[donate] = jax.device_get(state)
  chex.assert_trees_all_equal(results[False], results[True])
