r"""Ritz values of a jittable linear operator by Arnoldi's method (:func:`arnoldi_eigenvalues`):
the Krylov space of a stated number of power iterations, fully re-orthogonalised, inside
``jax.jit`` (:func:`~minmaxlab.analysis.game_dynamics` runs it on the game Jacobian and on
update operators)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class RitzValues(NamedTuple):
  """Ritz values of an Arnoldi run (see :func:`arnoldi_eigenvalues`).

  Attributes:
    values: ``(m,)`` complex Ritz values, largest modulus first (ties: the
      positive imaginary part first).
    residuals: ``(m,)`` residual norms :math:`\\|M y - \\theta y\\|` of the unit
      Ritz vectors (``|h_{m+1,m}| |e_m^T y|``; ``0`` for an exact eigenvalue).
  """

  values: jax.Array
  residuals: jax.Array


def _orthogonalise(V, w):
  """Classical Gram-Schmidt twice against the rows of ``V`` (zero rows are inert)."""
  h1 = V @ w
  w = w - V.T @ h1
  h2 = V @ w
  return w - V.T @ h2, h1 + h2


def arnoldi_eigenvalues(
  matvec: Callable[[jax.Array], jax.Array],
  n: int,
  key: jax.Array,
  iterations: int = 20,
  dtype: Any = None,
  breakdown_tol: float | None = None,
) -> RitzValues:
  r"""Ritz values of a linear operator from ``iterations`` Arnoldi steps (jittable).

  Builds an orthonormal basis :math:`V_m` of the Krylov space
  :math:`\mathrm{span}\{v_0, M v_0, \dots, M^{m-1} v_0\}` (``m`` =
  ``iterations`` products, classical Gram-Schmidt applied twice) and returns
  the eigenvalues of :math:`H_m = V_m^\top M V_m`. These are the power
  iteration's information used in full: the outer eigenvalues of ``M``
  (largest modulus, largest imaginary part) converge first, and a complex
  conjugate dominant pair, on which a plain power iteration oscillates, is
  resolved. On a breakdown (an invariant subspace found: the new vector's norm
  below ``breakdown_tol`` times that of ``M v_j``) the iteration continues
  from a fresh random vector orthogonal to the basis, so with
  ``iterations = n`` the Ritz values are the whole spectrum (up to rounding).

  The small ``(m, m)`` Hessenberg eigenproblem is solved by ``jnp.linalg.eig``
  (LAPACK on the CPU, cuSOLVER on a GPU).

  Args:
    matvec: ``u -> M u`` on flat vectors of length ``n`` (jittable).
    n: the dimension.
    key: PRNG key of the starting vector and of breakdown restarts.
    iterations: Krylov dimension ``m`` (products of ``M``); clipped to ``n``.
    dtype: of the vectors (default float32, or float64 under ``jax_enable_x64``).
    breakdown_tol: relative breakdown threshold (default ``eps ** (2/3)`` of
      ``dtype``).

  Returns:
    :class:`RitzValues` (``m`` values, largest modulus first).
  """
  n = int(n)
  m = min(int(iterations), n)
  if m < 1:
    raise ValueError(f"iterations must be >= 1, got {iterations}")
  dtype = jnp.dtype(dtype or jnp.result_type(float))
  tol = float(np.finfo(dtype).eps) ** (2.0 / 3.0) if breakdown_tol is None else breakdown_tol
  k0, k_restart = jax.random.split(key)
  v0 = jax.random.normal(k0, (n,), dtype)
  V = jnp.zeros((m + 1, n), dtype).at[0].set(v0 / jnp.linalg.norm(v0))
  H = jnp.zeros((m + 1, m), dtype)

  def unit(w):
    nrm = jnp.linalg.norm(w)
    return jnp.where(nrm > 0, w / jnp.where(nrm > 0, nrm, 1), 0), nrm

  def body(j, carry):
    V, H = carry
    w = jnp.asarray(matvec(V[j]), dtype)
    scale = jnp.linalg.norm(w)
    w, h = _orthogonalise(V, w)
    w_unit, beta = unit(w)
    broke = beta <= tol * scale
    r, _ = _orthogonalise(V, jax.random.normal(jax.random.fold_in(k_restart, j), (n,), dtype))
    r_unit, _ = unit(r)
    H = H.at[:, j].set(h.at[j + 1].set(jnp.where(broke, 0, beta)))
    V = V.at[j + 1].set(jnp.where(broke, r_unit, w_unit))
    return V, H

  V, H = jax.lax.fori_loop(0, m, body, (V, H))
  vals, vecs = jnp.linalg.eig(H[:m, :m])  # unit-norm eigenvectors (LAPACK/cuSOLVER geev)
  res = (jnp.abs(H[m, m - 1]) * jnp.abs(vecs[-1, :])).astype(dtype)
  order = jnp.lexsort((-vals.imag, -jnp.abs(vals)))
  vals, res = vals[order], res[order]
  return RitzValues(vals, res)
