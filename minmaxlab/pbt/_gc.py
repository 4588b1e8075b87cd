"""Lineage-aware checkpoint garbage collection of black-box PBT.

A trial's checkpoint is kept while it parents a pending or running trial, is a
member of the current population, is among the ``top_k`` fittest, or is
finished but not yet processed (:func:`needed_trials`); a child is reported
done only after its own checkpoint is durable, so a parent is never deleted
before its child's checkpoint exists.

Bound: each member has at most one pending or running trial, so at most
``2 * population_size + top_k`` checkpoints are kept (a member's current one
and its child's parent, which may have left the population since the child
was created), plus those of finished trials not yet processed (at most one per
worker) and those being written. In practice it stays near
``population_size + top_k`` (measured: 12 for 8 members and top_k 2, see
experiments/pbt/README.md).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from minmaxlab.pbt._objectives import rank_trials
from minmaxlab.pbt._store import DONE, PENDING, RUNNING, Store, Trial


def needed_trials(
  trials: Iterable[Trial], population: Mapping[int, int], top_k: int, ranking=None
) -> set[int]:
  """Ids of the trials whose checkpoints must be kept.

  A trial is needed if it parents a pending or running trial, is in the
  current population, is among the ``top_k`` fittest finished trials (by
  ``ranking``, default the fitness), or is finished but not yet processed by
  the controller.
  """
  trials = list(trials)
  needed = set(population.values())
  for t in trials:
    if t.status in (PENDING, RUNNING) and t.parent_id is not None:
      needed.add(t.parent_id)
    if t.status == DONE and not t.processed:
      needed.add(t.id)
  done = rank_trials([t for t in trials if t.status == DONE], ranking)
  needed.update(t.id for t in done[: max(int(top_k), 0)])
  return needed


def remove_checkpoint(path: str | os.PathLike) -> None:
  """Delete a checkpoint directory: renamed away first (atomic: a reader sees
  the checkpoint or nothing), then removed."""
  p = Path(path)
  if p.exists():
    trash = p.with_name(f".trash-{p.name}-{uuid.uuid4().hex[:6]}")
    p.rename(trash)
    shutil.rmtree(trash, ignore_errors=True)


def collect_garbage(store: Store, top_k: int, ranking=None) -> list[int]:
  """Delete the checkpoints no trial can need any more; return their trial ids.

  The deletions are recorded in the store first (one transaction): a crash
  between the two steps only leaves unreferenced directories, which
  :func:`remove_strays` removes.
  """
  with store.transaction() as db:
    needed = needed_trials(store.trials(), store.population(), top_k, ranking)
    doomed = [t for t in store.collectable() if t.id not in needed]
    store.mark_ckpt_deleted(db, [t.id for t in doomed])
  for t in doomed:
    remove_checkpoint(t.ckpt)
  return [t.id for t in doomed]


def remove_strays(store: Store, ckpt_root: str | os.PathLike) -> None:
  """Delete the directories under ``ckpt_root`` no trial refers to: lost
  attempts and deleted checkpoints left by a crash (a running trial's
  ``trial_<id>_...`` directory is being written and stays)."""
  keep = {str(Path(t.ckpt)) for t in store.live_checkpoints()}
  busy = {t.id for t in store.with_status(RUNNING)}
  for p in Path(ckpt_root).iterdir():
    if str(p) in keep:
      continue
    if p.name.startswith("trial_") and int(p.name.split("_")[1]) in busy:
      continue
    if p.is_dir():
      shutil.rmtree(p, ignore_errors=True)
