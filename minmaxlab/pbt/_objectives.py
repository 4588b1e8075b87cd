r"""Multi-objective fitness for black-box PBT: pluggable rankings of a population.

A trial's ``train`` may return a scalar fitness or a tuple of objectives (every
objective higher-is-better). A :class:`Ranking` turns the objectives of a set
of trials into one score per trial (higher is better, relative to that set);
selection (tournament, truncation), the ``top_k`` checkpoints kept and the
"best" trial all use it. Provided:

- :func:`scalar` (the default): one objective, the score is the fitness;
- :func:`weighted_sum`: :math:`s_i = \sum_j w_j f_{ij}`;
- :func:`pareto_rank`: non-dominated sorting, :math:`s_i = -r_i` with
  :math:`r_i = 0` for the trials no other trial dominates, :math:`r_i = 1` for
  those dominated only by rank-0 trials, and so on (Deb et al. 2002);
- :func:`key_ranking`: any user ``key(objectives) -> float``;
- :func:`comparator_ranking`: any user ``cmp(a, b)`` (``> 0``: ``a`` is
  better, ``0``: a tie), i.e. the paper's user-defined comparison.

NaN objectives count as :math:`-\infty`. Ties in a score are broken by trial
id (the older trial first) wherever one trial must be chosen.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

KINDS = ("scalar", "weighted", "pareto", "key", "comparator")


def as_objectives(fitness: Any) -> tuple[float, ...]:
  """A trial's fitness as a tuple of floats (a scalar is a 1-tuple)."""
  arr = np.asarray(fitness, dtype=np.float64)
  if arr.ndim > 1 or arr.size == 0:
    raise ValueError(f"fitness must be a number or a flat sequence of numbers, got {fitness!r}")
  return tuple(float(v) for v in arr.reshape(-1))


def _clean(objectives: Sequence[Sequence[float]]) -> np.ndarray:
  f = np.asarray([list(o) for o in objectives], np.float64)
  return np.where(np.isnan(f), -np.inf, f)


def pareto_fronts(objectives: Sequence[Sequence[float]]) -> np.ndarray:
  """Non-dominated sorting (all objectives maximised): the front index of each row.

  Row ``a`` dominates row ``b`` when ``a >= b`` everywhere and ``a > b``
  somewhere. Front 0 holds the rows nothing dominates; front ``k`` the rows
  dominated only by rows of fronts ``< k``.
  """
  f = _clean(objectives)
  n = len(f)
  if n == 0:
    return np.zeros((0,), np.int64)
  ge = (f[:, None, :] >= f[None, :, :]).all(-1)
  gt = (f[:, None, :] > f[None, :, :]).any(-1)
  dominates = ge & gt  # dominates[a, b]: a dominates b
  front = np.full((n,), -1, np.int64)
  left, k = np.ones((n,), bool), 0
  while left.any():
    idx = np.flatnonzero(left)
    now = idx[~dominates[np.ix_(idx, idx)].any(0)]
    front[now] = k
    left[now] = False
    k += 1
  return front


RankingKind = Literal["scalar", "weighted", "pareto", "key", "comparator"]


class Ranking(NamedTuple):
  """How the objectives of a set of trials become scores (higher is better).

  Build one with :func:`scalar`, :func:`weighted_sum`, :func:`pareto_rank`,
  :func:`key_ranking` or :func:`comparator_ranking`.
  """

  kind: RankingKind = "scalar"
  weights: tuple[float, ...] = ()
  fn: Callable | None = None

  def scores(self, objectives: Sequence[Sequence[float]]) -> np.ndarray:
    """One score per row of ``objectives`` (relative to these rows)."""
    rows = [tuple(o) for o in objectives]
    if not rows:
      return np.zeros((0,), np.float64)
    if self.kind in ("scalar", "weighted"):
      want = 1 if self.kind == "scalar" else len(self.weights)
      for o in rows:
        if len(o) != want:
          hint = (
            "; a tuple fitness needs ranking=pbt.pareto_rank(), pbt.weighted_sum(...),"
            " pbt.key_ranking(...) or pbt.comparator_ranking(...)"
            if self.kind == "scalar"
            else ""
          )
          raise ValueError(f"{self.kind} ranking expects {want} objective(s), got {o!r}{hint}")
      f = _clean(rows)
      if self.kind == "scalar":
        return f[:, 0]
      with np.errstate(invalid="ignore"):
        s = f @ np.asarray(self.weights, np.float64)
      return np.where(np.isnan(s), -np.inf, s)
    if self.kind == "pareto":
      return -pareto_fronts(rows).astype(np.float64)
    if self.kind == "key":
      s = np.asarray([float(self.fn(o)) for o in rows], np.float64)
      return np.where(np.isnan(s), -np.inf, s)
    # comparator: sort worst first, equal neighbours share a level
    order = sorted(
      range(len(rows)), key=functools.cmp_to_key(lambda i, j: self.fn(rows[i], rows[j]))
    )
    s, level = np.zeros((len(rows),), np.float64), 0
    for a, b in zip(order, order[1:]):
      level += self.fn(rows[b], rows[a]) != 0
      s[b] = level
    return s

  def to_json(self) -> dict[str, Any]:
    """The ranking in a config fingerprint (a user function by its import name)."""
    out: dict[str, Any] = {"kind": self.kind}
    if self.kind == "weighted":
      out["weights"] = list(self.weights)
    if self.fn is not None:
      out["fn"] = f"{self.fn.__module__}:{self.fn.__qualname__}"
    return out

  @classmethod
  def from_json(cls, spec: dict[str, Any] | None) -> Ranking:
    """Inverse of :meth:`to_json` (a user function is imported by its name)."""
    if not spec:
      return scalar()
    fn = None
    if spec.get("fn"):
      module, _, name = spec["fn"].partition(":")
      fn = importlib.import_module(module)
      for part in name.split("."):
        fn = getattr(fn, part)
    return cls(spec["kind"], tuple(spec.get("weights", ())), fn)


def scalar() -> Ranking:
  """One objective; the score is the fitness (the default)."""
  return Ranking(kind="scalar")


def weighted_sum(weights: Sequence[float]) -> Ranking:
  """Scalarisation: the score is ``sum_j weights[j] * objectives[j]``."""
  w = tuple(float(v) for v in weights)
  if not w or not all(math.isfinite(v) for v in w):
    raise ValueError(f"weights must be a non-empty sequence of finite numbers, got {weights!r}")
  return Ranking(kind="weighted", weights=w)


def pareto_rank() -> Ranking:
  """Pareto rank: the score is minus the trial's non-dominated front (:func:`pareto_fronts`)."""
  return Ranking(kind="pareto")


def key_ranking(key: Callable[[tuple[float, ...]], float]) -> Ranking:
  """The score is ``key(objectives)`` (a module-level function, so a rerun can import it)."""
  if not callable(key):
    raise ValueError(f"key must be callable, got {key!r}")
  return Ranking(kind="key", weights=(), fn=key)


def comparator_ranking(cmp: Callable[[tuple, tuple], float]) -> Ranking:
  """A user comparison: ``cmp(a, b) > 0`` when objectives ``a`` are better than
  ``b``, ``0`` for a tie (a module-level function, so a rerun can import it)."""
  if not callable(cmp):
    raise ValueError(f"cmp must be callable, got {cmp!r}")
  return Ranking(kind="comparator", weights=(), fn=cmp)


def trial_objectives(t: Any) -> tuple[float, ...]:
  """A finished trial's objectives (stores older than them hold only ``fitness``)."""
  return tuple(t.objectives) if t.objectives is not None else (float(t.fitness),)


def rank_trials(trials: Sequence[Any], ranking: Ranking | None) -> list[Any]:
  """Finished trials (with a fitness), best first (ties: older trial first)."""
  done = [t for t in trials if t.fitness is not None]
  s = (ranking or scalar()).scores([trial_objectives(t) for t in done])
  order = sorted(range(len(done)), key=lambda i: (-s[i], done[i].id))
  return [done[i] for i in order]
