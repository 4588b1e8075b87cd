"""The black-box PBT controller's bookkeeping steps on the store (one transaction each).

The decisions themselves are in :mod:`minmaxlab.pbt._selection`; these
functions only record what a controller starting, draining or noticing failed
trials must write, so :class:`minmaxlab.pbt.Controller` stays a loop.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from typing import Any

from minmaxlab.pbt._store import (
  CAMPAIGN,
  CONFIG,
  DRAIN,
  EPOCH,
  FAILED,
  MAX_ATTEMPTS,
  TASK,
  Store,
  Trial,
)
from minmaxlab.pbt._worker import FINISHED, INLINE_PREFIX

STOPPED = "stopped_members"  # kv key: members the early-stopping rule ended


class CampaignFailed(RuntimeError):
  """More trials failed than the campaign's ``max_failed_trials`` allows."""


def check_limits(
  population_size: int = 2,
  num_trials: int = 2,
  steps_per_trial: int = 1,
  workers: int = 0,
  top_k: int = 0,
  *,
  max_attempts: int = 1,
  max_failed_trials: int | None = None,
  orphan_s: float = 1.0,
  trial_timeout_s: float | None = None,
) -> None:
  """``ValueError`` (one line) for a controller argument out of its range."""
  if trial_timeout_s is not None and not float(trial_timeout_s) > 0:
    raise ValueError(f"trial_timeout_s must be > 0 or None, got {trial_timeout_s!r}")
  if int(max_attempts) < 1:
    raise ValueError(f"max_attempts must be >= 1, got {max_attempts!r}")
  if max_failed_trials is not None and int(max_failed_trials) < 1:
    raise ValueError(f"max_failed_trials must be >= 1 or None, got {max_failed_trials!r}")
  if not float(orphan_s) > 0:
    raise ValueError(f"orphan_s must be > 0, got {orphan_s!r}")
  if int(population_size) < 2:
    raise ValueError(f"population_size must be >= 2, got {population_size!r}")
  if int(num_trials) < int(population_size):
    raise ValueError(f"num_trials must be >= population_size, got {num_trials!r}")
  if int(steps_per_trial) < 1 or int(workers) < 0 or int(top_k) < 0:
    raise ValueError("steps_per_trial must be >= 1, workers and top_k >= 0")


def initialize(
  store: Store, first: list[tuple[dict, int]], steps_per_trial: int, fingerprint: dict
) -> None:
  """Create every member's first trial (``first``: ``(hparams, seed)`` per member)
  and store the campaign's fingerprint and a new campaign id, in one transaction."""
  with store.transaction() as db:
    for m, (hp, trial_seed) in enumerate(first):
      store.add_trial(db, m, None, hp, 0, steps_per_trial, trial_seed)
    store.put(db, "initialized", True)
    store.put(db, CONFIG, fingerprint)
    store.put(db, CAMPAIGN, uuid.uuid4().hex)  # named by every checkpoint's manifest


def begin_epoch(store: Store, epoch: str, max_attempts: int, task: dict[str, Any]) -> None:
  """A controller takes over: count a failed attempt for a trial an earlier controller
  was running inline (its process ended during the trial: killed, or the task ended it),
  re-queue the other running trials, clear the finished and drain flags, publish its
  epoch (workers of an earlier controller stop), the attempt limit and the task a joining
  worker reads (its NAME, never code)."""
  with store.transaction() as db:
    store.put(db, MAX_ATTEMPTS, max_attempts)
    died = "the controller process ended while it ran this trial inline"
    store.fail_running(db, "worker LIKE ?", (f"{INLINE_PREFIX}%",), died)
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


class LeaseWatch:
  """Leases timed on the controller's own monotonic clock (no clock is shared: a worker
  whose wall clock is minutes off, a suspend or an NTP step fails no healthy trial).

  A worker only counts its renewals in the store (:meth:`Store.renew`); a running trial's
  lease lapses when its count has not changed for ``lease_s`` seconds of this clock since
  the controller last saw it change (or first saw the trial running)."""

  def __init__(self, lease_s: float):
    self.lease_s = float(lease_s)
    self.seen: dict[tuple, tuple[float, float]] = {}  # (id, worker, attempt) -> (count, when)

  def lapsed(self, running, now: float | None = None) -> list[tuple[int, str, float]]:
    """``(id, worker, renewals)`` of the trials of ``running`` (:meth:`Store.leases`) whose
    lease lapsed."""
    now = time.monotonic() if now is None else now
    seen, out = {}, []
    for tid, worker, attempt, count in running:
      key = (tid, worker, attempt)
      before = self.seen.get(key)
      seen[key] = (count, now) if before is None or before[0] != count else before
      if before is not None and before[0] == count and now - before[1] > self.lease_s:
        out.append((tid, worker, count))
    self.seen = seen
    return out


def usable_cpus() -> int:
  """The CPUs this process may run on."""
  try:
    return len(os.sched_getaffinity(0))
  except (AttributeError, OSError):
    return os.cpu_count() or 1


def cap_workers(asked: int, population_size: int) -> int:
  """Local worker processes to start: ``asked``, at most the population (no more trials run
  at once) and the CPUs; one line on stderr when fewer than asked are started."""
  cpus = usable_cpus()
  started = min(int(asked), int(population_size), cpus)
  if started < int(asked):
    print(
      f"PBT: {asked} workers asked for, {started} started (at most the population,"
      f" {population_size}, and the CPUs, {cpus})",
      file=sys.stderr,
      flush=True,
    )
  return started
