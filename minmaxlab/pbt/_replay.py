"""Replay of a black-box PBT lineage: re-train it from scratch following its trials."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minmaxlab.pbt._store import CONFIG, STORE_FILE, Store, Trial
from minmaxlab.pbt._task import resolve_task, task_spec


def replay(
  workdir: str | os.PathLike,
  init_fn: Callable | None = None,
  train_fn: Callable | None = None,
  trial_id: int | None = None,
) -> tuple[float, Any, list[Trial]]:
  """Re-train a lineage from scratch, following the hyperparameters (schedule
  parameters included) each of its trials used.

  Args:
    workdir: the run's directory (its ``pbt.sqlite``).
    init_fn, train_fn: the task's functions (default: the named task recorded
      in the store, imported here).
    trial_id: the lineage's last trial (default: the fittest trial).

  Returns:
    ``(fitness, state, lineage)``: the final fitness and state of the replay and
    the chain of trials it followed (root first).
  """
  store = Store(Path(workdir) / STORE_FILE)
  try:
    if trial_id is None:
      best = store.best()
      if best is None:
        raise ValueError(f"no finished trial in {workdir}")
      trial_id = best.id
    chain = store.lineage(trial_id)
    stored = (store.get(CONFIG) or {}).get("task")
  finally:
    store.close()
  if init_fn is None or train_fn is None:
    if stored is None:
      raise ValueError(f"{workdir}: no named task recorded; pass init_fn and train_fn")
    init_fn, train_fn = resolve_task(task_spec(stored["target"], stored["args"]), workdir)
  state = init_fn(chain[0])
  fitness = None
  for t in chain:
    fitness, state = train_fn(dict(t.hparams), state, t)
  return float(fitness), state, chain
