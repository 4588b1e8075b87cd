r"""A Lookahead sync period chosen from a measured spectrum (issue 39, item 5).

Lookahead over a base scheme whose linearised one-step operator :math:`F` has eigenvalues
:math:`\lambda_j` moves the slow weights by :math:`(1-\alpha) I + \alpha F^k` per cycle of
:math:`k` steps, eigenvalues :math:`\mu_j(k) = 1 - \alpha + \alpha \lambda_j^k`, a per-step
rate :math:`r(k) = \max_j |\mu_j(k)|^{1/k}`. Given measured :math:`\lambda_j` (for example
``analysis.game_dynamics(...).operator_eigenvalues`` of the base scheme, or the closed forms
of ``analysis``), :func:`spectral_sync_period` picks :math:`k`:

- ``"smallest"``: the smallest :math:`k` whose cycle contracts, :math:`r(k) < 1`;
- ``"fastest"``: the :math:`k \le` ``max_period`` with the smallest :math:`r(k)`.

With only the outer eigenvalues measured (Arnoldi), contraction of those is necessary, not
sufficient, for the whole operator's.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

import numpy as np

SyncRule = Literal["smallest", "fastest"]
SYNC_RULES = get_args(SyncRule)


def cycle_rates(eigenvalues, slow_step_size: float = 0.5, max_period: int = 1000) -> np.ndarray:
  r"""The per-step rates :math:`r(k) = \max_j |1 - \alpha + \alpha \lambda_j^k|^{1/k}` for
  :math:`k = 1, \dots,` ``max_period`` (index ``k - 1``); ``inf`` where a power overflows."""
  lam = np.asarray(eigenvalues, complex).ravel()
  if lam.size == 0 or not np.all(np.isfinite(lam)):
    raise ValueError(f"eigenvalues must be finite and non-empty, got {eigenvalues!r}")
  if not 0 < slow_step_size <= 1:
    raise ValueError(f"slow_step_size must be in (0, 1], got {slow_step_size!r}")
  if isinstance(max_period, bool) or not isinstance(max_period, int) or max_period < 1:
    raise ValueError(f"max_period must be an integer >= 1, got {max_period!r}")
  k = np.arange(1, max_period + 1)
  a = float(slow_step_size)
  with np.errstate(over="ignore", invalid="ignore"):
    mu = 1.0 - a + a * lam[None, :] ** k[:, None]
    rates = np.max(np.abs(mu), axis=1) ** (1.0 / k)
  return np.where(np.isfinite(rates), rates, np.inf)


class SyncChoice(NamedTuple):
  """The chosen period and the per-step rates it was chosen from.

  Attributes:
    sync_period: the chosen :math:`k`.
    rate: :math:`r(k)`, the per-step rate of the chosen cycle.
    rates: :math:`r(1), \\dots, r(k_{max})`.
  """

  sync_period: int
  rate: float
  rates: np.ndarray


def spectral_sync_period(
  eigenvalues, slow_step_size: float = 0.5, max_period: int = 1000, rule: SyncRule = "smallest"
) -> SyncChoice:
  """The sync period of ``rule`` (:data:`SYNC_RULES`) for a base scheme whose one-step
  operator has ``eigenvalues``. ``ValueError`` (naming the best rate) when no
  :math:`k \\le` ``max_period`` contracts."""
  if rule not in SYNC_RULES:
    raise ValueError(f"rule must be one of {SYNC_RULES}, got {rule!r}")
  rates = cycle_rates(eigenvalues, slow_step_size, max_period)
  contracting = np.flatnonzero(rates < 1.0)
  if contracting.size == 0:
    best = int(np.argmin(rates))
    raise ValueError(
      f"no sync period <= {max_period} contracts at slow_step_size={slow_step_size}: the best,"
      f" k = {best + 1}, has per-step rate {rates[best]:.6g}"
    )
  i = int(contracting[0]) if rule == "smallest" else int(np.argmin(rates))
  return SyncChoice(sync_period=i + 1, rate=float(rates[i]), rates=rates)
