"""A stateless PBT worker: claim a trial, warm-start, train, checkpoint, report.

A worker sees only the trial it holds (hyperparameters, parent checkpoint,
steps, seed), never another trial's fitness. Its checkpoint is written
atomically (``minmaxlab.runner.CheckpointManager``: temporary directory, then
rename) BEFORE the trial is reported done, so a reported trial always has a
durable checkpoint; a worker killed at any moment leaves the trial ``running``
until its lease lapses or the controller sees the process die, and the trial is
then re-queued and re-run from its (still kept) parent checkpoint.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minmaxlab.pbt._store import Store, Trial

FINISHED = "finished"


class BrokenCheckpointError(RuntimeError):
  """A parent checkpoint is missing, partial or corrupt."""


def checkpoint_dir(ckpt_root: str | os.PathLike, trial: Trial) -> Path:
  """Where attempt ``trial.attempt`` of a trial writes its checkpoint (one
  directory per attempt, so a stale worker never races a re-run)."""
  return Path(ckpt_root) / f"trial_{trial.id:06d}_a{trial.attempt}"


def load_checkpoint(path: str | os.PathLike, target: Any) -> Any:
  """Restore the pytree saved by a trial into the structure of ``target``."""
  from minmaxlab.runner import CheckpointManager

  tree, _ = CheckpointManager(path, max_to_keep=None).restore(target)
  return tree


def run_trial(trial: Trial, ckpt_root, init_fn: Callable, train_fn: Callable) -> tuple[float, str]:
  """Warm-start, train and checkpoint one trial; return ``(fitness, checkpoint)``.

  ``init_fn(trial) -> state`` builds a fresh state (also the restore target);
  ``train_fn(hparams, state, trial) -> (fitness, state)`` trains
  ``trial.steps`` steps starting at ``trial.start_step``.
  """
  from minmaxlab.runner import CheckpointManager

  state = init_fn(trial)
  if trial.parent_id is not None:
    try:
      state = load_checkpoint(trial.parent_ckpt, state)
    except Exception as e:  # orbax raises many types for damaged files
      raise BrokenCheckpointError(f"trial {trial.id}: parent checkpoint {trial.parent_ckpt}") from e
  fitness, state = train_fn(dict(trial.hparams), state, trial)
  path = checkpoint_dir(ckpt_root, trial)
  CheckpointManager(path, max_to_keep=None).save(
    trial.start_step + trial.steps,
    state,
    metadata={"trial": trial.id, "fitness": float(fitness), "hparams": trial.hparams},
  )
  return float(fitness), str(path)


def worker_loop(
  store_path: str,
  ckpt_root: str,
  init_fn: Callable,
  train_fn: Callable,
  name: str | None = None,
  lease_s: float = 60.0,
  poll_s: float = 0.05,
  max_trials: int | None = None,
) -> int:
  """Claim and run trials until the controller marks the run finished.

  A background thread renews the lease every ``lease_s / 3`` seconds while a
  trial trains. Returns the number of trials this worker completed.
  """
  return serve_trials(
    lambda: Store(store_path), ckpt_root, init_fn, train_fn, name, lease_s, poll_s, max_trials
  )


def serve_trials(
  open_store: Callable[[], Any],
  ckpt_root: str,
  init_fn: Callable,
  train_fn: Callable,
  name: str | None = None,
  lease_s: float = 60.0,
  poll_s: float = 0.05,
  max_trials: int | None = None,
) -> int:
  """:func:`worker_loop` over any store-like object from ``open_store()``.

  The object needs ``claim``, ``renew``, ``complete``, ``report_broken_parent``,
  ``get`` and ``close`` with :class:`Store`'s meaning: the SQLite store itself
  (local and external workers) or a proxy forwarding each call to the MPI rank
  that owns the store (:func:`minmaxlab.pbt.run_mpi`), so every kind of worker
  follows one claim/lease/report protocol. The lease thread opens its own
  object and never overlaps the main thread's calls (it is joined before the
  report).
  """
  name = name or f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
  store = open_store()
  done = 0
  try:
    while max_trials is None or done < max_trials:
      trial = store.claim(name, lease_s)
      if trial is None:
        if store.get(FINISHED, False):
          break
        time.sleep(poll_s)
        continue
      stop = threading.Event()

      def heartbeat(trial_id=trial.id):
        hb = open_store()
        try:
          while not stop.wait(lease_s / 3):
            hb.renew(trial_id, name, lease_s)
        finally:
          hb.close()

      thread = threading.Thread(target=heartbeat, daemon=True)
      thread.start()
      try:
        fitness, ckpt = run_trial(trial, ckpt_root, init_fn, train_fn)
      except BrokenCheckpointError:
        store.report_broken_parent(trial.id, name)
        continue
      finally:
        stop.set()
        thread.join()
      if store.complete(trial.id, name, fitness, ckpt):
        done += 1
  finally:
    store.close()
  return done
