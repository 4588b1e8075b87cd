"""Spectral radii of a method with Lookahead over a grid of step sizes, sync
periods and slow step sizes (the closed forms of ``_closed_form.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from minmaxlab.analysis._closed_form import (
  Scheme,
  closed_form_eigenvalues,
  per_step_rate,
  spectral_radius,
)


class RadiusGrid(NamedTuple):
  """Spectral radii over a grid (see :func:`spectral_radius_grid`).

  Attributes:
    step_sizes, sync_periods, slow_step_sizes: the grid axes (numpy).
    cycle_radius: ``(len(step_sizes), len(sync_periods), len(slow_step_sizes))``
      spectral radius of one lookahead cycle.
    per_step: ``cycle_radius ** (1/k)``, comparable across ``k``.
    base_radius: ``(len(step_sizes),)`` spectral radius of the base method.
  """

  step_sizes: np.ndarray
  sync_periods: np.ndarray
  slow_step_sizes: np.ndarray
  cycle_radius: np.ndarray
  per_step: np.ndarray
  base_radius: np.ndarray

  def best(self):
    """``(eta, k, alpha, per_step_rate)`` minimising the per-step rate."""
    i, j, l = np.unravel_index(np.argmin(self.per_step), self.per_step.shape)
    return (
      float(self.step_sizes[i]),
      int(self.sync_periods[j]),
      float(self.slow_step_sizes[l]),
      float(self.per_step[i, j, l]),
    )


def spectral_radius_grid(
  method: Scheme,
  step_sizes: Sequence[float],
  sync_periods: Sequence[int],
  slow_step_sizes: Sequence[float] = (0.5,),
  sigma=1.0,
  mu: float = 0.0,
  max_steps: int = 1,
) -> RadiusGrid:
  r"""Scan Lookahead(k, alpha) over a base method on a grid of (eta, k, alpha).

  Uses :func:`closed_form_eigenvalues`; the per-step rate
  :math:`\rho_{\text{cycle}}^{1/k}` makes different ``k`` comparable. The best
  ``k`` for GDA is about :math:`\pi / \arg\lambda` (half a turn of the base
  rotation per cycle).

  Args:
    method: base method (``"gda"``, ``"alternating"``, ``"extragradient"``, ``"optimistic"``).
    step_sizes, sync_periods, slow_step_sizes: the grid.
    sigma, mu, max_steps: as in :func:`closed_form_eigenvalues`.

  Returns:
    A :class:`RadiusGrid`.
  """
  etas = np.asarray(step_sizes, np.float64)
  ks = np.asarray(sync_periods, np.int64)
  alphas = np.asarray(slow_step_sizes, np.float64)
  cyc = np.empty((etas.size, ks.size, alphas.size))
  base = np.empty(etas.size)
  for i, eta in enumerate(etas):
    base[i] = spectral_radius(closed_form_eigenvalues(method, eta, sigma, mu, max_steps=max_steps))
    for j, k in enumerate(ks):
      for l, a in enumerate(alphas):
        cyc[i, j, l] = spectral_radius(
          closed_form_eigenvalues(
            method, eta, sigma, mu, sync_period=int(k), slow_step_size=a, max_steps=max_steps
          )
        )
  return RadiusGrid(
    step_sizes=etas,
    sync_periods=ks,
    slow_step_sizes=alphas,
    cycle_radius=cyc,
    per_step=per_step_rate(cyc, ks[None, :, None]),
    base_radius=base,
  )
