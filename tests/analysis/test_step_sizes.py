"""analysis.contractive_step_sizes: closed forms on bilinear and regularised games, and the
rates against the update maps of the real transforms (analysis.update_operator)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from minmaxlab import analysis, games

SIGMA = (0.5, 1.0, 2.0)


def diag_game(sigma=SIGMA):
  return games.bilinear(jnp.diag(jnp.asarray(sigma, jnp.float64)))


def test_bilinear_gda_and_altgda_never_contract(x64):
  got = analysis.contractive_step_sizes(diag_game(), "gda")
  assert got.intervals == () and got.best_step_size is None and got.best_rate is None
  np.testing.assert_allclose(got.rates, np.sqrt(1 + (got.step_sizes * 2.0) ** 2), rtol=1e-12)
  got = analysis.contractive_step_sizes(diag_game(), "alternating")
  assert got.intervals == ()
  h = got.step_sizes * 2.0  # rho = 1 while eta sigma_max <= 2 (the scan ends at 4 / sigma_max)
  np.testing.assert_allclose(got.rates[h <= 2 - 1e-6], 1.0, atol=1e-9)
  assert (got.rates[h > 2 + 1e-6] > 1).all()
  assert "no contractive step size up to 2" in got.summary()


def test_bilinear_extragradient_and_optimistic_closed_forms(x64):
  lo, hi = min(SIGMA), max(SIGMA)
  eg = analysis.contractive_step_sizes(diag_game(), "extragradient")
  ((a, b),) = eg.intervals
  assert a == 0.0 and b == pytest.approx(1 / hi, rel=1e-6)
  eta = 1 / np.sqrt(lo**2 + hi**2)  # the slowest and fastest modes balanced
  assert eg.best_step_size == pytest.approx(eta, rel=1e-6)
  h2 = (eta * lo) ** 2
  assert eg.best_rate == pytest.approx(np.sqrt(1 - h2 + h2**2), rel=1e-9)
  h = eg.step_sizes[:, None] * np.asarray(SIGMA)
  np.testing.assert_allclose(eg.rates, np.sqrt(1 - h**2 + h**4).max(1), rtol=1e-12)
  one = analysis.contractive_step_sizes(diag_game([2.0]), "optimistic")
  ((a, b),) = one.intervals
  assert b == pytest.approx(1 / (np.sqrt(3) * 2.0), rel=1e-6)  # h < 1/sqrt(3)
  assert one.best_step_size == pytest.approx(0.25, rel=1e-5)  # h = 1/2
  assert one.best_rate == pytest.approx(np.sqrt(0.5), rel=1e-7)  # a kink there


def test_regularised_gda_closed_form_from_a_matrix(x64):
  mu, s = 0.5, 1.5  # J = [[mu, s], [-s, mu]], j = mu +- i s
  J = np.array([[mu, s], [-s, mu]])
  got = analysis.contractive_step_sizes(J, "gda")
  assert got.intervals == ((0.0, pytest.approx(2 * mu / (mu**2 + s**2), rel=1e-6)),)
  assert got.best_step_size == pytest.approx(mu / (mu**2 + s**2), rel=1e-6)
  assert got.best_rate == pytest.approx(s / np.sqrt(mu**2 + s**2), rel=1e-9)


def test_lookahead_rates_are_the_closed_forms_per_step(x64):
  for method in ("gda", "alternating", "extragradient", "optimistic"):
    got = analysis.contractive_step_sizes(diag_game(), method, sync_period=5, slow_step_size=0.5)
    grid = analysis.spectral_radius_grid(method, got.step_sizes[::97], [5], [0.5], sigma=SIGMA)
    np.testing.assert_allclose(got.rates[::97], grid.per_step[:, 0, 0], rtol=1e-9, atol=1e-12)
    assert got.intervals, method  # Lookahead with k = 5 contracts every base on this game
    assert got.best_rate < 1 and got.summary().startswith("LA(k=5, alpha=0.5)-")


def sgd_transform(method, eta, max_steps=1):
  sgd = optax.sgd(eta)
  return {
    "gda": lambda: sgd,
    "alternating": lambda: mml.alternating(sgd, max_steps=max_steps),
    "extragradient": lambda: mml.extragradient(sgd),
    "optimistic": lambda: mml.optimistic(sgd),
  }[method]()


@pytest.mark.parametrize("method", ["gda", "alternating", "extragradient", "optimistic"])
def test_rates_match_the_real_transforms_update_maps(x64, method):
  """A non-square, regularised game (3 min, 2 max parameters): the rates at two step sizes are
  the spectral radii of the real transforms' update maps, alone and in a Lookahead cycle."""
  A = jax.random.normal(jax.random.key(3), (3, 2), jnp.float64)
  game = games.quadratic(A, 0.3)
  vf = mml.vector_field(game.loss)
  start = mml.Players(jnp.array([0.3, -1.0, 0.5]), jnp.array([1.2, 0.1]))
  max_steps = 2 if method == "alternating" else 1
  etas = [0.2, 0.7]
  base = analysis.contractive_step_sizes(
    game, method, max_steps=max_steps, max_step_size=0.7, num=140
  )
  la = analysis.contractive_step_sizes(
    game, method, sync_period=3, slow_step_size=0.4, max_steps=max_steps, max_step_size=0.7, num=140
  )
  for eta in etas:
    i = int(np.argmin(np.abs(base.step_sizes - eta)))
    assert base.step_sizes[i] == pytest.approx(eta)
    op = analysis.update_operator(sgd_transform(method, eta, max_steps), vf, start)
    assert base.rates[i] == pytest.approx(op.spectral_radius, abs=1e-9)
    tx = mml.lookahead_minmax(sgd_transform(method, eta, max_steps), 3, 0.4)
    op = analysis.update_operator(tx, vf, start, num_steps=3, augment_state=method == "optimistic")
    assert la.rates[i] == pytest.approx(op.spectral_radius ** (1 / 3), abs=1e-9)


def test_heavy_ball_momentum_matches_sgd_with_momentum(x64):
  """GDA with momentum beta: the rates are those of optax.sgd(eta, momentum=beta)'s update map,
  alone and under Lookahead (whose cycles keep the momentum trace)."""
  game = diag_game((1.0, 2.0))
  vf = mml.vector_field(game.loss)
  start = mml.Players(jnp.array([0.3, -1.0]), jnp.array([1.2, 0.1]))
  for beta in (0.5, 0.9):
    base = analysis.contractive_step_sizes(game, momentum=beta, max_step_size=0.2, num=40)
    la = analysis.contractive_step_sizes(
      game, momentum=beta, sync_period=5, max_step_size=0.2, num=40
    )
    for i in (3, 19):
      eta = float(base.step_sizes[i])
      op = analysis.update_operator(optax.sgd(eta, momentum=beta), vf, start)
      assert base.rates[i] == pytest.approx(op.spectral_radius, abs=1e-9)
      tx = mml.lookahead_minmax(optax.sgd(eta, momentum=beta), 5, 0.5)
      op = analysis.update_operator(tx, vf, start, num_steps=5, augment_state=True)
      assert la.rates[i] == pytest.approx(op.spectral_radius**0.2, abs=1e-9)
  assert "GDA(momentum=0.9)" in base.summary()
  with pytest.raises(ValueError, match="momentum"):
    analysis.contractive_step_sizes(game, "extragradient", momentum=0.5)


def test_field_and_point_and_validation(x64):
  game = diag_game()
  by_field = analysis.contractive_step_sizes(
    mml.vector_field(game.loss), "extragradient", params=game.equilibrium(), num=200
  )
  assert (
    by_field.intervals == analysis.contractive_step_sizes(game, "extragradient", num=200).intervals
  )
  with pytest.raises(ValueError, match="params is required"):
    analysis.contractive_step_sizes(mml.vector_field(game.loss), "extragradient")
  for old in ("adam", "eg", "altgda", "simultaneous"):  # one spelling per scheme
    with pytest.raises(ValueError, match=f"method must be one of .*'extragradient'.*got '{old}'"):
      analysis.contractive_step_sizes(game, old)
  with pytest.raises(ValueError, match="num_min"):
    analysis.contractive_step_sizes(np.eye(4), "alternating")
  with pytest.raises(ValueError, match="square"):
    analysis.contractive_step_sizes(np.ones((2, 3)))
  with pytest.raises(ValueError, match="zero"):
    analysis.contractive_step_sizes(np.zeros((2, 2)))
