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
``population_size + top_k`` (experiments/pbt/README.md).

Safety: only folders in the campaign's own ``checkpoints/`` named
``trial_<id>_a<k>`` after a trial the store holds, whose manifest names the store's
campaign id, are ever deleted; a stored path elsewhere is left alone with one warning
line, and a store that does not know the checkpoints on disk (empty, new, replaced) or
belongs to another campaign stops the campaign before anything is deleted
(:func:`check_checkpoints`). (A store written before campaign ids has none: its
checkpoints are matched by trial id only.)
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from minmaxlab.pbt._manifest import read_manifest
from minmaxlab.pbt._objectives import rank_trials
from minmaxlab.pbt._store import (
  CAMPAIGN,
  DONE,
  PENDING,
  RUNNING,
  Store,
  StoreError,
  Trial,
  checkpoint_trial,
)


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


def _ours(store: Store, folder: Path, campaign: str | None) -> bool:
  """Whether ``folder``'s manifest names ``campaign`` (the store's id; a store without one,
  written before campaign ids: every folder)."""
  return campaign is None or read_manifest(folder) == campaign


def owned_checkpoint(store: Store, t: Trial, campaign: str | None = None) -> Path | None:
  """``t``'s checkpoint folder if the store created it: ``checkpoints/trial_<t.id>_a<k>`` in
  the store's workdir whose manifest names the store's campaign (``campaign``: that id,
  read from the store when not given); else ``None``."""
  if t.ckpt is None:
    return None
  p = Path(t.ckpt)
  if p.parent != store.ckpt_root or checkpoint_trial(p.name) != t.id:
    return None
  return p if _ours(store, p, campaign or store.get(CAMPAIGN)) else None


def check_checkpoints(store: Store) -> None:
  """:class:`StoreError` (one line) if ``checkpoints/`` holds a trial folder of a trial the
  store does not hold (an empty, new or replaced store next to a campaign's checkpoints), or
  it or a trial folder names another campaign than the store's id in its manifest (a valid
  store of another campaign)."""
  if not store.ckpt_root.is_dir():
    return
  known = store.trial_ids()
  unknown = sorted(
    p.name for p in store.ckpt_root.iterdir() if checkpoint_trial(p.name) not in known | {None}
  )
  if unknown:
    raise StoreError(
      f"the store and the checkpoints disagree: {store.path} does not know {len(unknown)}"
      f" checkpoint folder(s) in {store.ckpt_root} (e.g. {unknown[0]}); nothing was deleted;"
      " restore the campaign's store or use a new workdir"
    )
  campaign = store.get(CAMPAIGN)
  if campaign is None:
    return
  folders = [store.ckpt_root.parent] + [
    p for p in store.ckpt_root.iterdir() if checkpoint_trial(p.name) is not None
  ]
  for p in folders:
    other = read_manifest(p)
    if other is not None and other != campaign:
      raise StoreError(
        f"the store and the checkpoints belong to different campaigns: {store.path} is campaign"
        f" {campaign}, {p} names campaign {other}; nothing was deleted; restore the campaign's"
        " store or use a new workdir"
      )


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
  campaign = store.get(CAMPAIGN)
  with store.transaction() as db:
    needed = needed_trials(store.trials(), store.population(), top_k, ranking)
    doomed = [t for t in store.collectable() if t.id not in needed]
    store.mark_ckpt_deleted(db, [t.id for t in doomed])
  for t in doomed:
    path = owned_checkpoint(store, t, campaign)
    if path is not None:
      remove_checkpoint(path)
    else:
      p = Path(t.ckpt) if t.ckpt is not None else None
      ours = p is not None and p.parent == store.ckpt_root and checkpoint_trial(p.name) == t.id
      why = f"does not name campaign {campaign}" if ours else f"is not in {store.ckpt_root}"
      print(f"PBT: trial {t.id}'s checkpoint {t.ckpt} {why}; not deleting it", file=sys.stderr)
  return [t.id for t in doomed]


def remove_strays(store: Store) -> None:
  """Delete the folders in the store's ``checkpoints/`` no trial refers to: lost attempts
  and deleted checkpoints left by a crash, of trials the store holds (a running trial's
  ``trial_<id>_...`` folder is being written and stays) whose manifest names this campaign.
  Nothing else is touched."""
  if not store.ckpt_root.is_dir():
    return
  campaign = store.get(CAMPAIGN)
  keep = {p for t in store.live_checkpoints() if (p := owned_checkpoint(store, t, campaign))}
  busy = {t.id for t in store.with_status(RUNNING)}
  known = store.trial_ids()
  for p in store.ckpt_root.iterdir():
    trash = p.name.startswith(".trash-trial_")
    tid = checkpoint_trial(p.name)
    if trash or (tid in known and tid not in busy and p not in keep and _ours(store, p, campaign)):
      if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
