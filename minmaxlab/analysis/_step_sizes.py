r"""Step sizes for which a game optimizer's update map contracts, from the game Jacobian.

Near an equilibrium the descent field is :math:`v(z) \approx J (z - z^*)`, and every
first-order scheme with an SGD inner step is a linear map whose eigenvalues are functions of
``eta`` and of the eigenvalues ``j`` of ``J`` (``_closed_form.py`` writes them for the bilinear
game, ``j = mu +- i sigma``; here ``j`` is any eigenvalue): the scheme converges locally iff that
map's spectral radius is below 1. :func:`contractive_step_sizes` scans ``eta``, finds where the
radius crosses 1 and where it is smallest.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from jax.flatten_util import ravel_pytree
from scipy.optimize import brentq, minimize_scalar

from minmaxlab.analysis._closed_form import (
  SCHEMES,
  Scheme,
  lookahead_eigenvalues,
  per_step_rate,
  spectral_radius,
)
from minmaxlab.analysis._jacobian import jacobian as dense_jacobian

_NAMES = {"gda": "GDA", "alternating": "AltGDA", "extragradient": "EG", "optimistic": "OGDA"}


class StepSizes(NamedTuple):
  """Where a method's update map contracts (see :func:`contractive_step_sizes`).

  Attributes:
    method: the base method (``"gda"``, ``"alternating"``, ``"extragradient"`` or
      ``"optimistic"``).
    sync_period, slow_step_size: Lookahead's ``k`` and ``alpha`` (``None``: no Lookahead).
    momentum: heavy-ball ``beta`` of ``"gda"`` (0: none).
    intervals: the step sizes with rate < 1, as open intervals ``(lo, hi)`` (``lo = 0.0``:
      every small enough step); empty when no step size in the scan contracts.
    best_step_size: the step size of the smallest rate (``None`` when ``intervals`` is empty).
    best_rate: that rate (``None`` likewise).
    step_sizes: the scanned step sizes (numpy).
    rates: the rate at each of them: the spectral radius of one step, or for Lookahead the
      per-step rate ``rho_cycle ** (1/k)`` (comparable across ``k``).

  On the bilinear game :math:`x^\\top A y` (:math:`j = \\pm i\\sigma`): GDA never contracts
  (:math:`\\rho = \\sqrt{1 + \\eta^2\\sigma^2}`), AltGDA neither (:math:`\\rho = 1` up to
  :math:`\\eta\\sigma = 2`), EG contracts for :math:`\\eta < 1/\\sigma_{\\max}` with the best
  :math:`\\eta = 1/\\sqrt{\\sigma_{\\min}^2 + \\sigma_{\\max}^2}`, OGDA for
  :math:`\\eta < 1/(\\sqrt3\\,\\sigma_{\\max})`. A zero eigenvalue of ``J`` (a direction the
  field ignores, e.g. a non-square ``A``) gives :math:`\\rho \\ge 1` at every step size.
  """

  method: Scheme
  sync_period: int | None
  slow_step_size: float | None
  momentum: float
  intervals: tuple[tuple[float, float], ...]
  best_step_size: float | None
  best_rate: float | None
  step_sizes: np.ndarray
  rates: np.ndarray

  def summary(self) -> str:
    """One line: the method, its contractive step sizes and the best one."""
    name = _NAMES[self.method]
    if self.momentum:
      name = f"{name}(momentum={self.momentum:g})"
    if self.sync_period is not None:
      name = f"LA(k={self.sync_period}, alpha={self.slow_step_size:g})-{name}"
    if not self.intervals:
      top = float(self.step_sizes[-1])
      return f"{name}: no contractive step size up to {top:.3g} (rate >= 1)"
    spans = ", ".join(f"{lo:.4g} < eta < {hi:.4g}" for lo, hi in self.intervals)
    return f"{name}: {spans}; best eta {self.best_step_size:.4g} (rate {self.best_rate:.4f})"


def _companions(eta, j, method, momentum):
  """Per Jacobian eigenvalue ``j``, the 2x2 map of a scheme with memory on ``(z, m)``.

  OGDA: ``m = u_{t-1}``, ``(z, m) -> ((1 - 2 eta j) z - m, -eta j z)``. Heavy ball (GDA with
  ``optax.sgd(eta, momentum=beta)``): ``m`` the trace, ``t = j z + beta m``,
  ``(z, m) -> (z - eta t, t)``.
  """
  C = np.empty((j.size, 2, 2), complex)
  if method == "optimistic":
    C[:, 0, 0], C[:, 0, 1], C[:, 1, 0], C[:, 1, 1] = 1 - 2 * eta * j, -1.0, -eta * j, 0.0
  else:
    C[:, 0, 0], C[:, 0, 1], C[:, 1, 0], C[:, 1, 1] = 1 - eta * j, -eta * momentum, j, momentum
  return C


def _eigs_for(J: np.ndarray, method: str, num_min: int | None, max_steps: int):
  """``eigs(eta) -> eigenvalues of one step`` of a memoryless base method."""
  if method == "alternating":
    n = J.shape[0]
    Px, Py = np.zeros((n, n)), np.zeros((n, n))
    Px[:num_min, :], Py[num_min:, :] = J[:num_min, :], J[num_min:, :]
    eye = np.eye(n)

    def alt(eta):  # the max player's steps first, then the min player's (AltGAN order)
      step_max = np.linalg.matrix_power(eye - eta * Py, max_steps)
      return np.linalg.eigvals((eye - eta * Px) @ step_max)

    return alt
  j = np.linalg.eigvals(J)
  if method == "gda":
    return lambda eta: 1.0 - eta * j
  return lambda eta: 1.0 - eta * j + (eta * j) ** 2


def _rate_fn(J, method, num_min, max_steps, sync_period, slow_step_size, momentum):
  """``rate(eta)``: the spectral radius per step (per-step rate of a Lookahead cycle)."""
  k = None if sync_period is None else int(sync_period)
  alpha = float(slow_step_size)
  if method == "optimistic" or momentum:  # memory, not reset at a sync: 2x2 blocks per eigenvalue
    j = np.linalg.eigvals(J)
    keep, pull = np.diag([1.0 - alpha, 0.0]), np.diag([alpha, 1.0])

    def with_memory(eta):
      C = _companions(eta, j, method, momentum)
      if k is None:
        return spectral_radius(np.linalg.eigvals(C))
      cycle = keep + pull @ np.linalg.matrix_power(C, k)
      return float(per_step_rate(spectral_radius(np.linalg.eigvals(cycle)), k))

    return with_memory
  eigs = _eigs_for(J, method, num_min, max_steps)
  if k is None:
    return lambda eta: spectral_radius(eigs(eta))

  def la(eta):
    return float(per_step_rate(spectral_radius(lookahead_eigenvalues(eigs(eta), k, alpha)), k))

  return la


def _intervals(etas, rates, rate, tol):
  """Open intervals of ``rate < 1 - tol``, their ends refined by Brent's method."""
  inside = rates < 1.0 - tol
  out, lo = [], 0.0 if inside[0] else None
  f = lambda eta: rate(eta) - (1.0 - tol)  # noqa: E731
  for i in range(1, etas.size):
    if inside[i] and not inside[i - 1]:
      lo = brentq(f, etas[i - 1], etas[i], xtol=1e-12 * etas[-1])
    elif inside[i - 1] and not inside[i]:
      out.append((float(lo), brentq(f, etas[i - 1], etas[i], xtol=1e-12 * etas[-1])))
      lo = None
  if lo is not None:
    out.append((float(lo), float(etas[-1])))
  return tuple(out)


def _best(etas, rates, rate):
  """The minimum of ``rate`` near the scan's best point (bounded Brent on its neighbours)."""
  i = int(np.argmin(rates))
  lo, hi = etas[max(i - 1, 0)], etas[min(i + 1, etas.size - 1)]
  res = minimize_scalar(rate, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12 * hi})
  if res.fun < rates[i]:
    return float(res.x), float(res.fun)
  return float(etas[i]), float(rates[i])


def _game_jacobian(game_or_field, params, args):
  """``(J, num_min)`` of a game (``.loss``) or a descent field at ``params``."""
  from minmaxlab.games import vector_field  # noqa: PLC0415

  field = game_or_field
  if hasattr(game_or_field, "loss"):
    field = vector_field(game_or_field.loss)
    if params is None and hasattr(game_or_field, "equilibrium"):
      params = game_or_field.equilibrium()
  if params is None:
    raise ValueError("params is required with a descent field (the point of the Jacobian)")
  J = np.asarray(dense_jacobian(field, params, *args), np.float64)
  return J, int(ravel_pytree(params.min)[0].shape[0])


def contractive_step_sizes(
  jacobian: Any,
  method: Scheme = "gda",
  *,
  params: Any = None,
  args: tuple = (),
  num_min: int | None = None,
  sync_period: int | None = None,
  slow_step_size: float = 0.5,
  max_steps: int = 1,
  momentum: float = 0.0,
  max_step_size: float | None = None,
  num: int = 2000,
  tol: float = 1e-9,
) -> StepSizes:
  r"""The step sizes for which a method's update map contracts, and the best one.

  With :math:`j` the eigenvalues of the game Jacobian :math:`J` (the descent field's,
  :func:`jacobian`) and one step size :math:`\eta` for both players, one step of

  * ``"gda"`` (simultaneous) has eigenvalues :math:`1 - \eta j`;
  * ``"extragradient"`` :math:`1 - \eta j + \eta^2 j^2`;
  * ``"optimistic"`` the roots of :math:`\lambda^2 - (1 - 2\eta j)\lambda - \eta j`
    (the map on :math:`(z_t, u_{t-1})`);
  * ``"gda"`` with ``momentum=beta`` (heavy ball, ``optax.sgd(eta, momentum=beta)``) the roots
    of :math:`\lambda^2 - (1 + \beta - \eta j)\lambda + \beta`;
  * ``"alternating"`` (the max player's ``max_steps`` steps first) those of
    :math:`(I - \eta P_{\min} J)(I - \eta P_{\max} J)^{n}`, :math:`P` keeping one player's rows;
  * Lookahead over a base (``sync_period=k``, ``slow_step_size=alpha``) per cycle
    :math:`1 - \alpha + \alpha\lambda^k` (over ``"optimistic"`` or momentum, whose memory is not
    reset at a sync, the cycle map on :math:`(z, m)`), rated per step as
    :math:`\rho_{\text{cycle}}^{1/k}`.

  These are the linear parts of the real transforms with ``optax.sgd(eta)`` inside (checked
  against :func:`update_operator` in the tests); for a nonlinear game they hold at the point's
  linearisation. The rate ``rho(eta)`` is evaluated on ``num`` evenly spaced step sizes in
  ``(0, max_step_size]``; the ends of every interval with ``rho < 1 - tol`` are refined by Brent's
  method and the minimum by bounded Brent around the scan's best point.

  Args:
    jacobian: the Jacobian ``J`` (``(n, n)``, ``min`` player's coordinates first, as
      :func:`jacobian` returns it); or a game (an object with ``loss(params)``, e.g.
      ``minmaxlab.games.bilinear(A)``, at ``params`` or at its ``equilibrium()``); or a descent
      field ``field(params, *args) -> Players`` at ``params``.
    method: ``"gda"`` (simultaneous), ``"alternating"``, ``"extragradient"`` or
      ``"optimistic"``.
    params: the point (a ``Players``) for a game or a field.
    args: extra arguments of the field.
    num_min: the ``min`` player's number of parameters, needed by ``"alternating"`` with a matrix
      (read from ``params`` otherwise).
    sync_period: Lookahead's ``k`` (``None``: the base method alone).
    slow_step_size: Lookahead's ``alpha`` in ``(0, 1]``.
    max_steps: the max player's steps per step of ``"alternating"``.
    momentum: ``beta`` of heavy-ball momentum in ``[0, 1)``, with ``"gda"`` only.
    max_step_size: the largest step size scanned (default ``4 / max|j|``, past which no
      method here contracts on a rotational game).
    num: scanned step sizes.
    tol: a rate counts as contractive below ``1 - tol`` (AltGDA on a bilinear game sits at 1
      up to rounding).

  Returns:
    A :class:`StepSizes`; ``.summary()`` is one line.

  Example:
    >>> game = minmaxlab.games.bilinear(jnp.diag(jnp.array([1.0, 2.0])))
    >>> contractive_step_sizes(game, "extragradient").summary()
    'EG: 0 < eta < 0.5; best eta 0.4472 (rate 0.9165)'
  """
  method = _base_method(method)
  _check_numbers(sync_period, slow_step_size, max_steps, num, momentum, method)
  J, num_min = _square_jacobian(jacobian, method, params, args, num_min)
  max_step_size = _default_max_step_size(J) if max_step_size is None else max_step_size
  rate = _rate_fn(J, method, num_min, int(max_steps), sync_period, slow_step_size, momentum)
  return StepSizes(
    method=method,
    sync_period=None if sync_period is None else int(sync_period),
    slow_step_size=None if sync_period is None else float(slow_step_size),
    momentum=float(momentum),
    **_scan(rate, max_step_size, num, tol),
  )


def _scan(rate, max_step_size, num: int, tol: float) -> dict[str, Any]:
  """The fields of :class:`StepSizes` that the scan of ``rate`` over ``(0, max_step_size]``
  gives: the step sizes, their rates, the contractive intervals and the best point."""
  etas = np.linspace(0.0, float(max_step_size), int(num) + 1)[1:]
  rates = np.array([rate(e) for e in etas])
  intervals = _intervals(etas, rates, rate, tol)
  best_eta, best_rate = _best(etas, rates, rate) if intervals else (None, None)
  return dict(
    intervals=intervals, best_step_size=best_eta, best_rate=best_rate, step_sizes=etas, rates=rates
  )


def _base_method(method: str) -> str:
  if method not in SCHEMES:
    raise ValueError(f"method must be one of {SCHEMES}, got {method!r}")
  return method


def _square_jacobian(jacobian, method: str, params, args, num_min):
  """``(J as float64, num_min)`` of a matrix, a game or a field; ``ValueError`` (one line)
  for a non-square Jacobian or ``"alternating"`` without the min player's size."""
  if callable(jacobian) or hasattr(jacobian, "loss"):
    J, num_min = _game_jacobian(jacobian, params, args)
  else:
    J = np.asarray(jacobian, np.float64)
  if J.ndim != 2 or J.shape[0] != J.shape[1]:
    raise ValueError(f"the Jacobian must be square, got shape {J.shape}")
  if method == "alternating" and (num_min is None or not 0 < int(num_min) < J.shape[0]):
    raise ValueError(f"alternating needs num_min in (0, {J.shape[0]}) (the min player's size)")
  return J, num_min


def _check_numbers(sync_period, slow_step_size, max_steps, num, momentum, method: str) -> None:
  """``ValueError`` (one line) for a Lookahead, step-count or momentum setting out of range."""
  if sync_period is not None and int(sync_period) < 1:
    raise ValueError(f"sync_period must be >= 1, got {sync_period}")
  if not 0.0 < float(slow_step_size) <= 1.0:
    raise ValueError(f"slow_step_size must be in (0, 1], got {slow_step_size}")
  if int(max_steps) < 1 or int(num) < 2:
    raise ValueError(f"max_steps must be >= 1 and num >= 2, got {max_steps} and {num}")
  if not 0.0 <= float(momentum) < 1.0 or (momentum and method != "gda"):
    raise ValueError(f"momentum must be in [0, 1) and needs method 'gda', got {momentum}")


def _default_max_step_size(J: np.ndarray) -> float:
  """``4 / max|j|``, past which no method here contracts on a rotational game."""
  scale = float(np.abs(np.linalg.eigvals(J)).max())
  if scale == 0.0:
    raise ValueError("the Jacobian is zero: every step size leaves the point where it is")
  return 4.0 / scale
