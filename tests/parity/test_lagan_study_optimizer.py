"""The optimizer the Lookahead v3 study and the outcome-parity study run
(``experiments.gan.lookahead_study._notebook_tx``, ``optimizer: "notebook"``) against the
golden files of the reference's MNIST notebook: 10 float32 steps on the golden inputs, the
generator, the discriminator and the notebook's ``G_ema`` (read the way the study reads it,
``lookahead_study._points``) within the golden tests' float32 tolerance."""

from __future__ import annotations

import types

import jax
import ml_collections
import numpy as np
import pytest

import minmaxlab as mml
from experiments.gan import lookahead_study
from tests.parity import test_lagan_golden as golden

# the golden file that exercises every option of the composition: ExtraGrad's update point and
# extrapolation, the lazy slow weights, the EMA inside Lookahead (AltGAN: the same Adam and EMA)
CASES = {"notebook_la_extragrad": "extragradient"}


def _config(scheme: str, lookahead: bool):
  return ml_collections.ConfigDict(
    dict(
      lr_min=1e-3,
      lr_max=1e-3,
      b1=0.05,
      b2=0.999,
      scheme=scheme,
      max_steps=1,
      lookahead=lookahead,
      sync_period=golden.K,
      slow_step_size=golden.ALPHA,
      optimizer="notebook",
    )
  )


@pytest.mark.slow  # one compile of 10 steps
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_study_optimizer_matches_the_notebook_golden_file(case):
  config = _config(CASES[case], "_la_" in case)
  tx = lookahead_study._tx(config, 1.0 / (1.0 - golden.EMA))
  field = mml.value_and_vector_field(golden.bce_losses)
  zg, real, zd = golden._draws(case, 10, np.float32)

  def step(carry, xs):
    params, state = carry
    params, state, _ = mml.game_step(
      tx, lambda p, i: field(p, (xs[0][i], xs[1][i], xs[2][i])), params, state
    )
    points = lookahead_study._points(config, types.SimpleNamespace(params=params, opt_state=state))
    return (params, state), dict(g=params.min, d=params.max, g_ema=points["ema"])

  params = golden._initial(np.float32)
  _, traj = jax.jit(lambda c, xs: jax.lax.scan(step, c, xs))(
    (params, tx.init(params)), (zg, real, zd)
  )
  ref, _ = golden.golden(case)
  for net, tree in traj.items():
    for name, value in tree.items():
      gap = np.max(np.abs(np.asarray(value[9]) - ref[f"f32/s10/{net}/{name}"]))
      assert gap < golden.ATOL32, (case, net, name, gap)
