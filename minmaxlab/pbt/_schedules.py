r"""Hyperparameter schedules whose parameters PBT can mutate (Li et al. 2019).

A trial passes its ``start_step`` (and the step inside the trial) to the
schedule, so the lineage log (each trial's parameters and start step) records
the schedule actually followed, and :func:`minmaxlab.pbt.replay` re-trains it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def exponential_decay(step, init_value: float, decay_rate: float, transition_steps: int = 1):
  r""":math:`v(t) = v_0 \, r^{t / T}` (``init_value``, ``decay_rate``, ``transition_steps``)."""
  if transition_steps < 1:
    raise ValueError(f"transition_steps must be >= 1, got {transition_steps!r}")
  return init_value * np.power(decay_rate, np.asarray(step, np.float64) / transition_steps)


def piecewise_constant(step, boundaries: Sequence[int], values: Sequence[float]):
  r""":math:`v(t) = v_i` for :math:`b_{i-1} \le t < b_i`.

  ``values`` has one more entry than ``boundaries``.
  """
  if len(values) != len(boundaries) + 1:
    raise ValueError(
      f"need len(values) == len(boundaries) + 1, got {len(values)}, {len(boundaries)}"
    )
  if any(b2 <= b1 for b1, b2 in zip(boundaries, boundaries[1:])):
    raise ValueError(f"boundaries must increase, got {boundaries!r}")
  return np.asarray(values)[np.searchsorted(np.asarray(boundaries), step, side="right")]
