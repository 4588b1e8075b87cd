"""Spectra of the REAL transforms on bilinear games against the closed forms.

sigma = a singular value of A, h = eta * sigma:
GDA rho = sqrt(1 + h^2); AltGDA rho = 1 (h <= 2); EG rho = sqrt(1 - h^2 + h^4);
lookahead over a base with eigenvalues lambda: mu = 1 - alpha + alpha * lambda^k.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml


def _base_eigs(method, h):
  if method == "gda":
    return np.array([1 + 1j * h, 1 - 1j * h])
  if method == "eg":
    return np.array([1 - h**2 + 1j * h, 1 - h**2 - 1j * h])
  if method == "alt":  # F = [[1-h^2, -h], [h, 1]]: trace 2-h^2, det 1
    im = h * np.sqrt(1 - h**2 / 4)
    return np.array([1 - h**2 / 2 + 1j * im, 1 - h**2 / 2 - 1j * im])
  raise ValueError(method)


def _scheme(method, eta):
  return {
    "gda": lambda: optax.sgd(eta),
    "alt": lambda: mml.alternating(optax.sgd(eta)),
    "eg": lambda: mml.extragradient(optax.sgd(eta)),
  }[method]()


def _cycle_map(tx, sigma, steps):
  """Matrix of ``steps`` updates of the real transform on f = sigma * x * y,
  built by applying it to the basis vectors (a fresh state each time, so for a
  lookahead the slow weights start at the point itself: one full cycle)."""
  game = mml.games.bilinear(jnp.array([[sigma]]))
  field = mml.vector_field(game.loss)

  def run(z):
    p = mml.Players(z[:1], z[1:])
    s = tx.init(p)
    for _ in range(steps):
      u, s = tx.update(field(p), s, p, vector_field=lambda q, i: field(q))
      p = optax.apply_updates(p, u)
    return jnp.concatenate(p)

  return np.asarray(jax.jit(jax.vmap(run))(jnp.eye(2)).T)


def _assert_same_eigs(got, want, tol):
  got = np.sort_complex(np.round(got, 12))
  want = np.sort_complex(np.round(want, 12))
  np.testing.assert_allclose(got, want, atol=tol, rtol=0)


@pytest.mark.parametrize("method", ["gda", "alt", "eg"])
@pytest.mark.parametrize("eta", [0.05, 0.1, 0.3, 0.5, 0.9])
@pytest.mark.parametrize("sigma", [1.0, 1.7])
def test_base_spectral_radius(x64, method, eta, sigma):
  h = eta * sigma
  M = _cycle_map(_scheme(method, eta), sigma, 1)
  rho = np.abs(np.linalg.eigvals(M)).max()
  want = {"gda": np.sqrt(1 + h**2), "alt": 1.0, "eg": np.sqrt(1 - h**2 + h**4)}[method]
  np.testing.assert_allclose(rho, want, rtol=0, atol=1e-8)
  _assert_same_eigs(np.linalg.eigvals(M), _base_eigs(method, h), 1e-8)


@pytest.mark.parametrize("method", ["gda", "alt", "eg"])
@pytest.mark.parametrize(
  "eta,k,alpha",
  [(0.1, 5, 0.5), (0.2, 6, 0.4), (0.3, 5, 0.5), (0.3, 15, 0.3), (0.5, 3, 0.7), (0.2, 1, 1.0)],
)
def test_lookahead_spectral_radius(x64, method, eta, k, alpha):
  sigma = 1.3
  h = eta * sigma
  tx = mml.lookahead_minmax(_scheme(method, eta), sync_period=k, slow_step_size=alpha)
  M = _cycle_map(tx, sigma, k)
  mu = 1 - alpha + alpha * _base_eigs(method, h) ** k
  _assert_same_eigs(np.linalg.eigvals(M), mu, 1e-8)
  np.testing.assert_allclose(np.abs(np.linalg.eigvals(M)).max(), np.abs(mu).max(), atol=1e-8)


@pytest.mark.parametrize(
  "method,eta,k,want",
  [
    ("gda", 0.3, 5, 0.8395867964),
    ("alt", 0.3, 5, 0.7297491341),
    ("eg", 0.3, 5, 0.6359344174),
    ("gda", 0.2, 15, 0.3124436848),
    ("eg", 0.5, 5, 0.2168392106),
  ],
)
def test_lookahead_reference_table(x64, method, eta, k, want):
  """Values from research/lookahead_minmax.md section 7 (sigma = 1)."""
  alpha = 0.3 if k == 15 else 0.5
  tx = mml.lookahead_minmax(_scheme(method, eta), sync_period=k, slow_step_size=alpha)
  rho = np.abs(np.linalg.eigvals(_cycle_map(tx, 1.0, k))).max()
  np.testing.assert_allclose(rho, want, atol=1e-9)


@pytest.mark.parametrize("method", ["gda", "eg"])
def test_measured_contraction_per_step(x64, method):
  """GDA and EG are normal operators on x*y: every step scales ||z|| by rho exactly."""
  eta, d = 0.4, 5
  game = mml.games.bilinear(jnp.eye(d))
  field = mml.vector_field(game.loss)
  tx = _scheme(method, eta)
  p = mml.Players(jnp.linspace(-1.0, 1.0, d), jnp.linspace(0.5, 2.0, d))
  s = tx.init(p)
  h = eta
  want = {"gda": np.sqrt(1 + h**2), "eg": np.sqrt(1 - h**2 + h**4)}[method]
  for _ in range(30):
    u, s = tx.update(field(p), s, p, vector_field=lambda q, i: field(q))
    new = optax.apply_updates(p, u)
    ratio = np.linalg.norm(np.concatenate(new)) / np.linalg.norm(np.concatenate(p))
    np.testing.assert_allclose(ratio, want, rtol=1e-12)
    p = new
