"""analysis.game_dynamics on linear games: eigenvalues and rotational share against closed
forms (bilinear: +-i sigma and share 1; potential: real eigenvalues and share 0; a random
Jacobian: the dense summary), Hutchinson's error against its probes, Arnoldi's restarts."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minmaxlab as mml
from minmaxlab import analysis, games
from tests.analysis._linear_games import (
  ETA,
  FAST,
  N,
  assert_same_spectrum,
  bilinear_jacobian,
  exact,
  linear_field,
  point,
  program,
  top_by_modulus,
)

# the programs run long (restarted Arnoldi iterations):
# compiled at -O1, not the session's -O0 (tests/_xla.py)
pytestmark = pytest.mark.optimized_code


def no_radius():
  return exact(scheme=None, num_eigenvalues=4)


def test_bilinear_and_regularised_bilinear_equal_closed_forms(x64):
  game = games.random_bilinear(jax.random.key(1), N)
  sigma = np.linalg.svd(np.asarray(game.A), compute_uv=False)
  for mu in (0.0, 0.1):
    out = no_radius()(point(), bilinear_jacobian(game.A, mu), jax.random.key(0), ETA)
    lam = np.concatenate([mu + 1j * sigma, mu - 1j * sigma])
    # The top 4 by modulus: mu +- i sigma_1, mu +- i sigma_2 (upper half first).
    np.testing.assert_allclose(out.eigenvalues, top_by_modulus(lam, 4), atol=1e-10)
    np.testing.assert_allclose(out.eigenvalue_residuals, 0.0, atol=1e-10)
    np.testing.assert_allclose(out.rotational_eigenvalues, mu + 1j * sigma[:4], atol=1e-10)
    assert float(out.max_imag) == pytest.approx(sigma[0], rel=1e-12)
    # Share 1 for the bilinear game, ||A||_F sqrt2 / (mu sqrt(2N) + ||A||_F sqrt2) with mu.
    a = np.sqrt(2.0) * np.linalg.norm(np.asarray(game.A))
    assert float(out.rotation_share) == pytest.approx(a / (mu * np.sqrt(2 * N) + a), abs=1e-12)
    assert float(out.frobenius_sq) == pytest.approx(2 * N * mu**2 + a**2, rel=1e-12)
    assert float(out.trace_jj) == pytest.approx(2 * N * mu**2 - a**2, rel=1e-12)
    assert float(out.frobenius_sq_stderr) == 0.0
    assert np.isnan(float(out.spectral_radius))  # no scheme, no radius
    row = out.row()
    assert row["dynamics/rotation_share"] == float(out.rotation_share)
    assert row["dynamics/top_abs"] == pytest.approx(np.hypot(mu, sigma[0]), rel=1e-12)
    assert row["dynamics/eigenvalues_im"] == [float(e.imag) for e in out.eigenvalues]
    assert "dynamics/spectral_radius" not in row and "dynamics/operator_eigenvalues_re" not in row


def test_library_bilinear_field_gives_the_same_numbers(x64):
  """``minmaxlab.vector_field`` of ``games.bilinear`` is the linear field of the helper."""
  game = games.random_bilinear(jax.random.key(1), N)
  fn = jax.jit(
    functools.partial(
      analysis.game_dynamics,
      mml.vector_field(game.loss),
      eigen_iterations=2 * N,
      radius_iterations=2 * N,
      num_probes=None,
      scheme=None,
    ),
    compiler_options=FAST,
  )
  got = fn(point(), key=jax.random.key(0))
  want = no_radius()(point(), bilinear_jacobian(game.A), jax.random.key(0), ETA)
  for g, w in zip(got, want, strict=True):
    np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_random_game_exact_traces_and_spectrum_match_the_dense_summary(x64):
  M = jax.random.normal(jax.random.key(4), (2 * N, 2 * N))
  out = no_radius()(point(), M, jax.random.key(0), ETA)
  dense = analysis.summarize_jacobian(M)
  assert float(out.rotation_share) == pytest.approx(dense.rotation_ratio, rel=1e-12)
  Mn = np.asarray(M)
  assert float(out.frobenius_sq) == pytest.approx(np.sum(Mn**2), rel=1e-12)
  assert float(out.trace_jj) == pytest.approx(np.trace(Mn @ Mn), rel=1e-10)
  np.testing.assert_allclose(out.eigenvalues, top_by_modulus(dense.eigenvalues, 4), atol=1e-9)
  assert float(out.max_imag) == pytest.approx(np.abs(dense.eigenvalues.imag).max(), rel=1e-10)


def spd_jacobian(key):
  """A potential game: each player minimises its own convex quadratic (J = diag(P, Q))."""
  k1, k2 = jax.random.split(key)
  P = jax.random.normal(k1, (N, N))
  Q = jax.random.normal(k2, (N, N))
  zero = jnp.zeros((N, N))
  return jnp.block([[P @ P.T / N + 0.1 * jnp.eye(N), zero], [zero, Q @ Q.T / N + 0.5 * jnp.eye(N)]])


def test_potential_game_share_zero_and_bilinear_share_one_with_three_probes(x64):
  """Hutchinson is exact probe by probe for a symmetric J (v^T J J v = ||J v||^2) and an
  antisymmetric one (= -||J v||^2): shares 0 and 1 from 3 probes. Per-coordinate steps
  (a flat vector): the radius of I - diag(eta) J."""
  run = program(
    eigen_iterations=2 * N, radius_iterations=2 * N, num_probes=3, scheme="gda", num_eigenvalues=4
  )
  M = spd_jacobian(jax.random.key(3))
  eta = jnp.linspace(0.1, 0.6, 2 * N)
  out = run(point(), M, jax.random.key(0), eta)
  assert float(out.rotation_share) == pytest.approx(0.0, abs=1e-7)
  lam = np.linalg.eigvalsh(np.asarray(M))
  np.testing.assert_allclose(out.eigenvalues, np.sort(lam)[::-1][:4], atol=1e-10)
  assert float(out.max_imag) < 1e-10
  T = np.eye(2 * N) - np.asarray(eta)[:, None] * np.asarray(M)
  rho = np.abs(np.linalg.eigvals(T)).max()
  assert float(out.spectral_radius) == pytest.approx(rho, rel=1e-10)
  A = games.random_bilinear(jax.random.key(1), N).A
  bil = run(point(), bilinear_jacobian(A), jax.random.key(0), eta)
  assert float(bil.rotation_share) == pytest.approx(1.0, abs=1e-7)


def test_hutchinson_error_shrinks_with_probes_and_matches_its_stderr(x64):
  M = jax.random.normal(jax.random.key(4), (2 * N, 2 * N)) + 0.5 * jnp.eye(2 * N)
  Mn = np.asarray(M)
  frob, trace = np.sum(Mn**2), np.trace(Mn @ Mn)
  share = analysis.summarize_jacobian(M).rotation_ratio
  errors, stderrs = {}, {}
  for probes in (16, 4096):
    run = program(eigen_iterations=4, num_probes=probes, scheme=None, num_eigenvalues=2)
    outs = [run(point(), M, jax.random.key(s), ETA) for s in range(4)]
    errors[probes] = max(abs(float(o.rotation_share) - share) for o in outs)
    stderrs[probes] = np.mean([float(o.frobenius_sq_stderr) for o in outs])
    for o in outs:  # the reported standard errors cover the errors (4 sigma)
      assert abs(float(o.frobenius_sq) - frob) < 4 * float(o.frobenius_sq_stderr)
      assert abs(float(o.trace_jj) - trace) < 4 * float(o.trace_jj_stderr)
  assert errors[4096] < 0.01
  assert errors[4096] < errors[16]
  assert stderrs[4096] < stderrs[16] / 8  # 1/sqrt(probes): a factor 16
  # Determinism: the same key gives the same numbers, another key other probes.
  run = program(eigen_iterations=4, num_probes=16, scheme=None, num_eigenvalues=2)
  a, b = run(point(), M, jax.random.key(0), ETA), run(point(), M, jax.random.key(0), ETA)
  c = run(point(), M, jax.random.key(1), ETA)
  for x, y in zip(a, b, strict=True):
    np.testing.assert_array_equal(x, y)
  assert float(a.frobenius_sq) != float(c.frobenius_sq)


def test_arnoldi_restarts_after_breakdown_and_finds_repeated_eigenvalues(x64):
  """Krylov spaces of a matrix with repeated eigenvalues are invariant early: the restarts
  still give every eigenvalue with ``iterations = n``."""
  D = jnp.diag(jnp.array([3.0, 3.0, 2.0, 2.0, 1.0, -1.0]))
  Q, _ = jnp.linalg.qr(jax.random.normal(jax.random.key(5), (6, 6)))
  M = Q @ D @ Q.T
  ritz = jax.jit(
    lambda M, key: analysis.arnoldi_eigenvalues(lambda u: M @ u, 6, key, 6), compiler_options=FAST
  )(M, jax.random.key(0))
  # 1 and -1 have one modulus: their order is rounding's (AMD and Intel hosts differ), so the
  # values are compared as multisets and the order only by modulus
  assert_same_spectrum(ritz.values, [3, 3, 2, 2, 1, -1], 1e-10)
  np.testing.assert_allclose(np.abs(ritz.values), [3, 3, 2, 2, 1, 1], atol=1e-10)
  np.testing.assert_allclose(ritz.residuals, 0.0, atol=1e-10)


def test_game_dynamics_validates():
  p = point()
  fn = functools.partial(analysis.game_dynamics, linear_field, p, jnp.eye(2 * N))
  with pytest.raises(ValueError, match="scheme"):
    fn(key=jax.random.key(0), scheme="optimistic")
  with pytest.raises(ValueError, match="num_eigenvalues"):
    fn(key=jax.random.key(0), num_eigenvalues=30)
  with pytest.raises(ValueError, match="sync_period"):
    fn(key=jax.random.key(0), sync_period=0)
  with pytest.raises(ValueError, match="num_probes"):
    fn(key=jax.random.key(0), num_probes=0)
  with pytest.raises(ValueError, match="Players"):
    analysis.game_dynamics(
      lambda w: w, jnp.zeros(4), key=jax.random.key(0), scheme="alternating", num_eigenvalues=2
    )
  with pytest.raises(TypeError):
    analysis.game_dynamics(linear_field, p, jnp.eye(2 * N))  # the key is required
