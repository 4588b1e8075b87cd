r"""Closed-form update-operator spectra of GDA, AltGDA, EG, OGDA and Lookahead
over each, on bilinear (and bilinear-plus-quadratic) games.

With :math:`h = \eta\sigma` for a singular value :math:`\sigma` of the
bilinear matrix: GDA :math:`\rho = \sqrt{1 + h^2}`, AltGDA :math:`\rho = 1`
for :math:`h \le 2`, EG :math:`\rho = \sqrt{1 - h^2 + h^4}`; Lookahead maps a
base eigenvalue :math:`\lambda` to :math:`1 - \alpha + \alpha\lambda^k` per cycle.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

# The schemes with a closed form; the trainers and the transforms spell them the same way.
Scheme = Literal["gda", "alternating", "extragradient", "optimistic"]
SCHEMES: tuple[str, ...] = get_args(Scheme)


def _modes(eta, sigma, mu):
  sigma = np.atleast_1d(np.asarray(sigma, np.float64))
  return float(eta), sigma, float(mu)


def _jacobian_eigs(sigma, mu):
  """Eigenvalues mu +- i sigma of the game Jacobian, one conjugate pair per mode."""
  return np.concatenate([mu + 1j * sigma, mu - 1j * sigma])


def _alternating_block(eta, s, mu, max_steps):
  """2x2 AltGDA map on one singular mode (x_j, y_j), AltGAN order (y first)."""
  a = 1.0 - eta * mu
  h = eta * s
  # y <- a y + h x, applied max_steps times at fixed x
  ay = a**max_steps
  gy = h * sum(a**i for i in range(max_steps))
  # y_n = ay y + gy x ; x' = a x - h y_n
  return np.array([[a - h * gy, -h * ay], [gy, ay]])


def _optimistic_companion(eta, j):
  """2x2 companion of z_{t+1} = (1 - 2 eta j) z_t + eta j z_{t-1} on (z_t, u_{t-1}).

  With u_t = -eta j z_t (the inner SGD output) and z_{t+1} = z_t + 2u_t - u_{t-1},
  the state (z, u_prev) maps to ((1 - 2 eta j) z - u_prev, -eta j z).
  """
  return np.array([[1.0 - 2.0 * eta * j, -1.0], [-eta * j, 0.0]], dtype=complex)


def gda_eigenvalues(eta: float, sigma, mu: float = 0.0) -> np.ndarray:
  r"""Eigenvalues of simultaneous GDA with step ``eta``: :math:`\lambda = 1 - \eta j`.

  ``j = mu +- i sigma`` are the eigenvalues of the game Jacobian of
  :math:`x^\top A y + \tfrac{\mu}{2}(\|x\|^2 - \|y\|^2)` (``sigma`` = singular
  values of ``A``). For ``mu = 0``: :math:`|\lambda| = \sqrt{1 + h^2}`,
  ``h = eta sigma``: GDA diverges for every ``eta > 0``.
  """
  eta, sigma, mu = _modes(eta, sigma, mu)
  return 1.0 - eta * _jacobian_eigs(sigma, mu)


def extragradient_eigenvalues(eta: float, sigma, mu: float = 0.0) -> np.ndarray:
  r"""Eigenvalues of extragradient (both players extrapolate from the same point).

  :math:`\lambda = 1 - \eta j + \eta^2 j^2`; for ``mu = 0``
  :math:`|\lambda| = \sqrt{1 - h^2 + h^4} < 1` iff ``0 < h < 1``.
  """
  eta, sigma, mu = _modes(eta, sigma, mu)
  j = _jacobian_eigs(sigma, mu)
  return 1.0 - eta * j + (eta * j) ** 2


def alternating_eigenvalues(eta: float, sigma, mu: float = 0.0, max_steps: int = 1) -> np.ndarray:
  r"""Eigenvalues of alternating GDA (max player first, ``max_steps`` steps).

  On a singular mode with ``h = eta sigma`` and ``mu = 0``, one step maps
  :math:`(x, y)` by :math:`[[1 - n h^2, -h], [n h, 1]]` (``n = max_steps``):
  determinant 1, trace :math:`2 - n h^2`, so :math:`|\lambda| = 1` for
  :math:`n h^2 \le 4` (``h <= 2`` for ``n = 1``): AltGDA cycles, neither
  converging nor diverging. With ``mu > 0`` both players' own terms shrink
  by :math:`1 - \eta\mu` per step.
  """
  eta, sigma, mu = _modes(eta, sigma, mu)
  return np.concatenate(
    [np.linalg.eigvals(_alternating_block(eta, s, mu, int(max_steps))) for s in sigma]
  )


def optimistic_eigenvalues(eta: float, sigma, mu: float = 0.0) -> np.ndarray:
  r"""Eigenvalues of optimistic GDA, :math:`z_{t+1} = z_t - 2\eta v(z_t) + \eta v(z_{t-1})`.

  On a Jacobian eigenvalue ``j`` the two-step recursion has characteristic
  polynomial

  .. math::
    \lambda^2 - (1 - 2\eta j)\lambda - \eta j = 0,

  two roots per ``j``. For ``mu = 0`` (``j = i sigma``, ``h = eta sigma``):
  :math:`\lambda = \tfrac12(1 - 2ih \pm \sqrt{1 - 4h^2})`, so
  :math:`\rho = \sqrt{(1 + \sqrt{1 - 4h^2})/2}` for ``h <= 1/2`` and
  :math:`\rho = \tfrac12\sqrt{1 + (2h + \sqrt{4h^2 - 1})^2}` above:
  OGDA converges iff :math:`0 < h < 1/\sqrt3`.
  """
  eta, sigma, mu = _modes(eta, sigma, mu)
  j = _jacobian_eigs(sigma, mu)
  b = 1.0 - 2.0 * eta * j
  disc = np.sqrt(b * b + 4.0 * eta * j + 0j)
  return np.concatenate([(b + disc) / 2.0, (b - disc) / 2.0])


def lookahead_eigenvalues(base_eigenvalues, sync_period: int, slow_step_size: float) -> np.ndarray:
  r"""Eigenvalues of one Lookahead cycle over a base with eigenvalues ``lambda``.

  The slow weights evolve by :math:`(1-\alpha) I + \alpha F^k`, so

  .. math::
    \mu = 1 - \alpha + \alpha \lambda^k \quad\text{per cycle of } k \text{ steps},

  (spectral mapping; exact for any linear base without memory). The per-step
  rate is :math:`|\mu|^{1/k}` (:func:`per_step_rate`). For OGDA, whose memory
  is not reset at a sync, use :func:`closed_form_eigenvalues` with
  ``method="optimistic"``.
  """
  lam = np.asarray(base_eigenvalues, complex)
  a = float(slow_step_size)
  return 1.0 - a + a * lam ** int(sync_period)


def _lookahead_optimistic_eigenvalues(eta, sigma, mu, k, alpha):
  """One LA cycle over OGDA on (z, u_prev): the slow weights cover z only.

  From a synced point the cycle maps (z, p) to
  ((1 - alpha) z + alpha [C^k z]_z, [C^k z]_p): M = diag(1 - alpha, 0) + diag(alpha, 1) C^k.
  """
  out = []
  for j in _jacobian_eigs(sigma, mu):
    Ck = np.linalg.matrix_power(_optimistic_companion(eta, j), int(k))
    M = np.diag([1.0 - alpha, 0.0]) + np.diag([alpha, 1.0]) @ Ck
    out.append(np.linalg.eigvals(M))
  return np.concatenate(out)


def closed_form_eigenvalues(
  method: Scheme,
  eta: float,
  sigma=1.0,
  mu: float = 0.0,
  sync_period: int | None = None,
  slow_step_size: float = 0.5,
  max_steps: int = 1,
) -> np.ndarray:
  r"""Exact update-operator eigenvalues of a method on the bilinear game.

  Game: :math:`x^\top A y + b^\top x + c^\top y + \tfrac{\mu}{2}(\|x\|^2 -
  \|y\|^2)` with ``A`` square, singular values ``sigma``; both players use
  the same step ``eta`` (``optax.sgd(eta)`` as the inner transform).

  Args:
    method: ``"gda"``, ``"alternating"``, ``"extragradient"`` or ``"optimistic"`` (the base).
    eta: step size.
    sigma: singular values of ``A`` (scalar or array).
    mu: regularisation.
    sync_period: ``k`` for Lookahead over the base (``None``: the base alone).
    slow_step_size: ``alpha`` of Lookahead.
    max_steps: max-player steps of ``"alternating"``.

  Returns:
    Eigenvalues per step of the base, or per lookahead cycle. For ``"optimistic"``
    they are those of the map on :math:`(z_t, u_{t-1})` (two per Jacobian
    eigenvalue); for lookahead over ``"optimistic"`` they are those of the cycle map
    on :math:`(z, u_{\text{prev}})` (the zeros the slow copy adds are left out).

  References:
    Chavdarova et al., 2021, https://arxiv.org/abs/2006.14567 (section 3);
    Gidel et al., 2019, https://arxiv.org/abs/1807.04740 (AltGDA);
    Mokhtari et al., 2020, https://arxiv.org/abs/1901.08511 (OGDA/EG).
  """
  if method not in SCHEMES:
    raise ValueError(f"method must be one of {SCHEMES}, got {method!r}")
  if sync_period is not None and int(sync_period) < 1:
    raise ValueError(f"sync_period must be >= 1, got {sync_period}")
  if not 0.0 < float(slow_step_size) <= 1.0:
    raise ValueError(f"slow_step_size must be in (0, 1], got {slow_step_size}")
  if method == "optimistic" and sync_period is not None:
    e, s, m = _modes(eta, sigma, mu)
    return _lookahead_optimistic_eigenvalues(e, s, m, int(sync_period), float(slow_step_size))
  base = {
    "gda": lambda: gda_eigenvalues(eta, sigma, mu),
    "extragradient": lambda: extragradient_eigenvalues(eta, sigma, mu),
    "optimistic": lambda: optimistic_eigenvalues(eta, sigma, mu),
    "alternating": lambda: alternating_eigenvalues(eta, sigma, mu, max_steps),
  }[method]()
  if sync_period is None:
    return base
  return lookahead_eigenvalues(base, sync_period, slow_step_size)


def spectral_radius(eigenvalues) -> float:
  """``max |eigenvalues|``."""
  return float(np.abs(np.asarray(eigenvalues)).max())


def per_step_rate(cycle_radius, sync_period) -> np.ndarray:
  r"""Per-step contraction rate :math:`\rho^{1/k}` of a ``k``-step cycle."""
  return np.asarray(cycle_radius, np.float64) ** (1.0 / np.asarray(sync_period, np.float64))
