"""analysis.game_dynamics: spectral radii of the update operators (GDA, extragradient,
alternating, Lookahead over them) on bilinear games, against the closed forms and against
the real transforms' update maps (``update_operator`` runs them)."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest

import minmaxlab as mml
from minmaxlab import analysis, games
from tests.analysis._linear_games import ETA, N, bilinear_jacobian, exact, point

# the programs run long (thousands of operator products):
# compiled at -O1, not the session's -O0 (tests/_xla.py)
pytestmark = pytest.mark.optimized_code

CLOSED = {"gda": "gda", "extragradient": "extragradient", "alternating": "alternating"}
CASES = [  # (scheme, max_steps, sync_period)
  ("gda", 1, None),
  ("extragradient", 1, None),
  ("alternating", 2, None),
  ("alternating", 1, 5),
  ("extragradient", 1, 3),
]


def sgd_transform(scheme, max_steps, sync_period, inner=None):
  inner = optax.sgd(ETA) if inner is None else inner
  tx = {
    "gda": lambda: inner,
    "extragradient": lambda: mml.extragradient(inner),
    "alternating": lambda: mml.alternating(inner, max_steps=max_steps),
  }[scheme]()
  if sync_period is not None:
    tx = mml.lookahead_minmax(tx, sync_period, 0.5)
  return tx


@pytest.mark.parametrize(("scheme", "max_steps", "sync_period"), CASES)
def test_radius_equals_closed_form_and_the_real_transform(x64, scheme, max_steps, sync_period):
  game = games.random_bilinear(jax.random.key(1), N)
  sigma = np.linalg.svd(np.asarray(game.A), compute_uv=False)
  run = exact(scheme=scheme, max_steps=max_steps, sync_period=sync_period, num_eigenvalues=4)
  k = sync_period or 1
  for mu in (0.0, 0.1):
    out = run(point(), bilinear_jacobian(game.A, mu), jax.random.key(0), ETA)
    want = analysis.closed_form_eigenvalues(
      CLOSED[scheme],
      ETA,
      sigma,
      mu,
      sync_period=sync_period,
      slow_step_size=0.5,
      max_steps=max_steps,
    )
    rho = analysis.spectral_radius(want)
    assert out.row("d/")["d/spectral_radius"] == float(out.spectral_radius)
    assert float(out.spectral_radius) == pytest.approx(rho, rel=1e-10)
    assert float(out.log_spectral_radius) == pytest.approx(np.log(rho), rel=1e-8, abs=1e-12)
    assert float(out.spectral_radius_per_step) == pytest.approx(rho ** (1 / k), rel=1e-10)
    for e in np.asarray(out.operator_eigenvalues):  # each one a closed-form eigenvalue
      assert np.min(np.abs(want - e)) < 1e-9
    if mu > 0:  # the real transform's map on the (linear) regularised game: the same radius
      real = analysis.update_operator(
        sgd_transform(scheme, max_steps, sync_period),
        mml.vector_field(games.quadratic(game.A, mu).loss),
        point(),
        num_steps=k,
      )
      assert float(out.spectral_radius) == pytest.approx(real.spectral_radius, rel=1e-10)


def test_per_player_step_sizes_match_the_real_transform(x64):
  """A step per player (a ``Players`` of scalars) against the real AltGDA over
  ``per_player(sgd(eta_min), sgd(eta_max))``, with Lookahead."""
  A = games.random_bilinear(jax.random.key(2), N).A
  run = exact(scheme="alternating", max_steps=2, sync_period=3, num_eigenvalues=4)
  out = run(point(), bilinear_jacobian(A, 0.05), jax.random.key(0), mml.Players(0.1, 0.4))
  inner = mml.per_player(min=optax.sgd(0.1), max=optax.sgd(0.4))
  real = analysis.update_operator(
    sgd_transform("alternating", 2, 3, inner),
    mml.vector_field(games.quadratic(A, 0.05).loss),
    point(),
    num_steps=3,
  )
  assert float(out.spectral_radius) == pytest.approx(real.spectral_radius, rel=1e-10)
  assert float(out.spectral_radius) != pytest.approx(
    float(
      run(
        point(), bilinear_jacobian(A, 0.05), jax.random.key(0), mml.Players(0.1, 0.1)
      ).spectral_radius
    ),
    rel=1e-3,
  )
