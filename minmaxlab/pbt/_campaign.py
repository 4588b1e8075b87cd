"""The black-box PBT controller's bookkeeping steps on the store (one transaction each).

The decisions themselves are in :mod:`minmaxlab.pbt._selection`; these
functions only record what a controller starting, draining or noticing failed
trials must write, so :class:`minmaxlab.pbt.Controller` stays a loop.
"""

from __future__ import annotations

import sys
from typing import Any

from minmaxlab.pbt._store import DRAIN, EPOCH, FAILED, MAX_ATTEMPTS, TASK, Store, Trial
from minmaxlab.pbt._worker import FINISHED

STOPPED = "stopped_members"  # kv key: members the early-stopping rule ended


class CampaignFailed(RuntimeError):
  """More trials failed than the campaign's ``max_failed_trials`` allows."""


def begin_epoch(store: Store, epoch: str, max_attempts: int, task: dict[str, Any]) -> None:
  """A controller takes over: re-queue running trials, clear the finished and
  drain flags, publish its epoch (workers of an earlier controller stop), the
  attempt limit and the task a joining worker reads (its NAME, never code)."""
  with store.transaction() as db:
    store.requeue_running(db)
    store.put(db, FINISHED, False)
    store.put(db, DRAIN, False)
    store.put(db, EPOCH, epoch)
    store.put(db, MAX_ATTEMPTS, max_attempts)
    store.put(db, TASK, task)


def set_flag(store: Store, key: str, value: Any) -> None:
  """Write one kv flag (``FINISHED``, ``DRAIN``) in its own transaction."""
  with store.transaction() as db:
    store.put(db, key, value)


def record_failed(store: Store, max_failed_trials: int | None) -> list[Trial]:
  """Print one line per newly failed trial, mark them processed and return
  every failed trial; :class:`CampaignFailed` once ``max_failed_trials`` failed."""
  new = store.unprocessed(FAILED)
  if new:
    with store.transaction() as db:
      store.mark_processed(db, [t.id for t in new])
    for t in new:
      print(
        f"PBT: trial {t.id} (member {t.member}) failed after {t.failures} attempts: {t.error}",
        file=sys.stderr,
        flush=True,
      )
  failed = store.with_status(FAILED)
  if max_failed_trials is not None and len(failed) >= max_failed_trials:
    first = failed[0]
    raise CampaignFailed(
      f"PBT campaign stopped: {len(failed)} trial(s) failed (max_failed_trials="
      f"{max_failed_trials}); trial {first.id} after {first.failures} attempts: {first.error}"
    )
  return failed
