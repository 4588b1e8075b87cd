"""analysis.game_dynamics on a small MLP GAN (57 parameters, non-saturating loss) against
the dense Jacobian of the existing tools (``analysis.jacobian``, ``summarize_jacobian``)
and the dense update operators built from it."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import minmaxlab as mml
from minmaxlab import analysis
from tests.analysis._linear_games import FAST, top_by_modulus
from tests.analysis._tiny_gan import tiny_gan

# the programs run long (dense Jacobians of a GAN):
# compiled at -O1, not the session's -O0 (tests/_xla.py)
pytestmark = pytest.mark.optimized_code

STEPS = mml.Players(0.3, 0.6)  # per-player step sizes (generator, discriminator)


@pytest.fixture(scope="module")
def gan():
  """The MLP GAN in float64 and its dense Jacobian."""
  with jax.enable_x64(True):
    field, params, args = tiny_gan(jax.random.key(0))
    J = np.asarray(analysis.jacobian(field, params, *args))
    yield field, params, args, J


def dynamics(field, **static):
  fn = functools.partial(analysis.game_dynamics, field, step_size=STEPS, **static)
  return jax.jit(lambda p, args, key: fn(p, *args, key=key), compiler_options=FAST)


def test_top_eigenvalues_and_share_agree_with_the_dense_jacobian(x64, gan):
  field, params, args, J = gan
  out = dynamics(field, eigen_iterations=30, num_probes=None, scheme=None, num_eigenvalues=4)(
    params, args, jax.random.key(0)
  )
  dense = analysis.summarize_jacobian(J)
  lam = dense.eigenvalues
  # 30 Arnoldi steps (of 57 dimensions): the 4 outer eigenvalues to 1e-7, residuals small.
  np.testing.assert_allclose(out.eigenvalues, top_by_modulus(lam, 4), rtol=1e-7, atol=1e-9)
  assert np.all(np.asarray(out.eigenvalue_residuals) < 1e-6)
  by_imag = lam[np.argsort(-lam.imag)]
  np.testing.assert_allclose(out.rotational_eigenvalues[:2], by_imag[:2], rtol=1e-6)
  assert float(out.max_imag) == pytest.approx(np.abs(lam.imag).max(), rel=1e-7)
  # Exact traces: the dense rotation ratio.
  assert float(out.rotation_share) == pytest.approx(dense.rotation_ratio, rel=1e-10)
  assert 0.0 < float(out.rotation_share) < 1.0


def dense_operator(J, scheme, n_min, max_steps=1, sync_period=None, alpha=0.5):
  n = J.shape[0]
  eta = np.where(np.arange(n) < n_min, STEPS.min, STEPS.max)[:, None]
  eye = np.eye(n)
  if scheme == "gda":
    T = eye - eta * J
  elif scheme == "extragradient":
    T = eye - eta * J @ (eye - eta * J)
  else:
    mask_min = (np.arange(n) < n_min)[:, None]
    T_min = eye - mask_min * eta * J
    T_max = eye - ~mask_min * eta * J
    T = T_min @ np.linalg.matrix_power(T_max, max_steps)
  if sync_period is not None:
    T = eye + alpha * (np.linalg.matrix_power(T, sync_period) - eye)
  return T


@pytest.mark.parametrize(
  ("scheme", "max_steps", "sync_period"),
  [("extragradient", 1, None), ("alternating", 2, None), ("alternating", 1, 5), ("gda", 1, 3)],
)
def test_update_operator_radius_agrees_with_the_dense_operator(
  x64, gan, scheme, max_steps, sync_period
):
  field, params, args, J = gan
  n = J.shape[0]
  n_min = int(sum(x.size for x in jax.tree.leaves(params.min)))
  out = dynamics(
    field,
    eigen_iterations=4,
    radius_iterations=n,
    num_probes=2,
    scheme=scheme,
    max_steps=max_steps,
    sync_period=sync_period,
    num_eigenvalues=4,
  )(params, args, jax.random.key(0))
  T = dense_operator(J, scheme, n_min, max_steps, sync_period)
  mu = np.linalg.eigvals(T)
  rho = np.abs(mu).max()
  assert float(out.spectral_radius) == pytest.approx(rho, rel=1e-8)
  assert float(out.log_spectral_radius) == pytest.approx(np.log(rho), rel=1e-6, abs=1e-10)
  np.testing.assert_allclose(
    np.abs(out.operator_eigenvalues), np.sort(np.abs(mu))[::-1][:4], rtol=1e-7
  )


def test_float32_estimates_agree_with_the_float64_dense_ones(gan):
  """The trainer's precision: float32 products, 20 Arnoldi steps, 8 probes."""
  field, params, args, J = gan
  params32, args32 = jax.tree.map(lambda x: np.asarray(x, np.float32), (params, args))
  out = dynamics(
    field,
    eigen_iterations=20,
    radius_iterations=20,
    num_probes=64,
    scheme="alternating",
    num_eigenvalues=2,
  )(params32, args32, jax.random.key(0))
  assert out.eigenvalues.dtype == np.complex64
  lam = analysis.summarize_jacobian(J)
  np.testing.assert_allclose(out.eigenvalues, top_by_modulus(lam.eigenvalues, 2), rtol=1e-3)
  assert float(out.rotation_share) == pytest.approx(lam.rotation_ratio, abs=0.05)
  n_min = int(sum(x.size for x in jax.tree.leaves(params.min)))
  rho = np.abs(np.linalg.eigvals(dense_operator(J, "alternating", n_min))).max()
  assert float(out.spectral_radius) == pytest.approx(rho, rel=1e-3)
