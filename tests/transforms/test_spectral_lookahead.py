"""The Lookahead sync period chosen from a measured spectrum (issue 39, item 5):
the per-step rates equal the closed forms on bilinear games, the rules pick the right
k, and on a bilinear game the real transform decays at the predicted rate, faster
with the chosen k than with a fixed k = 5."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from minmaxlab import analysis
from minmaxlab.transforms import spectral_sync_period
from minmaxlab.transforms._spectral_lookahead import cycle_rates

SIGMA, ETA, ALPHA = np.array([0.5, 1.0]), 0.1, 0.5


def test_rates_are_the_closed_forms_and_the_rules_pick_their_k():
  lam = analysis.gda_eigenvalues(ETA, SIGMA)
  rates = cycle_rates(lam, ALPHA, 80)
  want = [
    analysis.per_step_rate(np.max(np.abs(analysis.lookahead_eigenvalues(lam, k, ALPHA))), k)
    for k in range(1, 81)
  ]
  np.testing.assert_allclose(rates, want, rtol=1e-12)
  smallest = spectral_sync_period(lam, ALPHA, 80, "smallest")
  assert smallest.sync_period == 1 + int(np.flatnonzero(rates < 1)[0])
  fastest = spectral_sync_period(lam, ALPHA, 80, "fastest")
  assert fastest.rate == rates.min() and fastest.sync_period == 1 + int(np.argmin(rates))
  assert fastest.rate < rates[4] < 1 <= rates[smallest.sync_period - 2]  # k = 5 contracts slower
  with pytest.raises(ValueError, match="no sync period <= 50 contracts"):
    spectral_sync_period([1.5], ALPHA, 50)  # a real eigenvalue above 1: no k helps
  with pytest.raises(ValueError, match="rule"):
    spectral_sync_period(lam, rule="largest")


def test_on_a_bilinear_game_the_chosen_k_decays_at_its_rate_and_beats_k5():
  game = mml.games.bilinear(jnp.diag(jnp.asarray(SIGMA)))
  start = mml.Players(jnp.ones(2), jnp.ones(2))
  choice = spectral_sync_period(analysis.gda_eigenvalues(ETA, SIGMA), ALPHA, 80, "fastest")
  steps = 5 * choice.sync_period  # whole cycles of both periods
  finals = {}
  for k in (choice, 5):  # the choice itself is a sync period (lookahead_minmax's hook)
    tx = mml.lookahead_minmax(optax.sgd(ETA), sync_period=k, slow_step_size=ALPHA)
    d = np.asarray(analysis.run_game(tx, game, start, steps).distances["joint"])
    finals[getattr(k, "sync_period", k)] = d[-1] / d[0]
  # The slowest mode decays at the chosen rate: five cycles shrink the distance by at most
  # rate^steps (the slow weights after each cycle; the norm's constant is 1 for a normal map).
  assert finals[choice.sync_period] <= choice.rate**steps * (1 + 1e-4)
  assert finals[choice.sync_period] < finals[5]
