"""Read-only views of a black-box PBT campaign for progress lines and live tables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from minmaxlab.pbt._store import Store


def campaign_status(
  store: Store, ckpt_root: str | os.PathLike, failed_trials: list[int], ranking=None
) -> dict[str, Any]:
  """Trial counts per status (``pending``, ``running``, ``done``, ``failed``),
  ``failed_trials``, ``best_fitness`` / ``best_trial`` and ``checkpoints`` (the
  trial checkpoint directories now under ``ckpt_root``)."""
  best = store.best(ranking)
  return {
    **store.counts(),
    "failed_trials": list(failed_trials),
    "best_fitness": None if best is None else best.fitness,
    "best_trial": None if best is None else best.id,
    "best_objectives": None if best is None else best.objectives,
    "checkpoints": sum(1 for p in Path(ckpt_root).iterdir() if p.name.startswith("trial_")),
  }


def population_rows(store: Store) -> list[dict[str, Any]]:
  """One row per member for a live table: its newest trial and its last result.

  Keys: ``member``, ``trial`` (the member's newest trial), ``parent``,
  ``status`` (of that trial), ``hparams`` (that trial's), ``fitness`` (of the
  member's current population entry, ``None`` before its first result) and
  ``fitness_trial`` (the trial that fitness belongs to).
  """
  population = store.population()
  rows = []
  for t in sorted(store.newest_per_member(), key=lambda t: t.member):
    current = population.get(t.member)
    fit = None if current is None else store.trial(current).fitness
    rows.append(
      {
        "member": t.member,
        "trial": t.id,
        "parent": t.parent_id,
        "status": t.status,
        "hparams": dict(t.hparams),
        "fitness": fit,
        "fitness_trial": current,
      }
    )
  return rows
