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

import ctypes
import math
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minmaxlab.pbt._groups import end_own_group
from minmaxlab.pbt._manifest import read_manifest, write_manifest
from minmaxlab.pbt._objectives import as_objectives
from minmaxlab.pbt._store import EPOCH, STORE_FILE, TASK, ControllerGone, Store, Trial
from minmaxlab.pbt._task import resolve_task, task_spec

FINISHED = "finished"
HEARTBEAT = "controller_heartbeat"  # kv key: rewritten by the live controller every few seconds
ORPHAN_EXIT = 3  # exit status of a worker whose controller is gone
TIMEOUT_EXIT = 4  # exit status of a process that ended a trial past its time limit
INLINE_PREFIX = "inline-"  # worker name of trials the controller runs in its own process
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> bool:
  """Ask Linux to send this process SIGTERM when its parent dies (``prctl
  PR_SET_PDEATHSIG``); exit at once if the parent is already gone. Returns
  whether the signal could be set (``False`` off Linux: the store heartbeat is
  then the only guard)."""
  armed = False
  if sys.platform.startswith("linux"):
    try:
      # the process's own symbols (libc's among them): find_library would run `ldconfig -p`
      libc = ctypes.CDLL(None, use_errno=True)
      armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
    except OSError:
      armed = False
  if os.getppid() != parent_pid:  # died before the signal was armed
    os._exit(ORPHAN_EXIT)
  return armed


class _Watch:
  """Notices a controller that stopped beating: the heartbeat value unchanged
  for ``orphan_s`` seconds of this process's own clock (no clock is shared)."""

  def __init__(self, orphan_s: float | None):
    self.orphan_s = orphan_s
    self.value, self.since = object(), time.monotonic()

  def gone(self, store) -> bool:
    if not self.orphan_s:
      return False
    value = store.get(HEARTBEAT)
    now = time.monotonic()
    if value != self.value:
      self.value, self.since = value, now
      return False
    return now - self.since > self.orphan_s


def _error_line(e: BaseException) -> str:
  text = f"{type(e).__name__}: {e}".strip().splitlines()
  return text[0] if text else type(e).__name__


class TrialTimeout(RuntimeError):
  """A trial ran longer than the campaign's per-trial time limit (``trial_timeout_s``)."""


def _timeout_line(trial: Trial, limit: float) -> str:
  return f"TrialTimeout: trial {trial.id} ran longer than trial_timeout_s={limit:g} s"


def _fail_and_exit(open_store: Callable, trial: Trial, name: str, limit: float) -> None:
  """Record a failed attempt of a trial past its time limit and end this process (a hung
  task cannot be stopped inside its process)."""
  store = open_store()
  store.fail(trial.id, name, _timeout_line(trial, limit))
  store.close()
  print(
    f"[pbt {name}] {_timeout_line(trial, limit)}: counted as a failed attempt; exiting",
    file=sys.stderr,
    flush=True,
  )
  end_own_group()  # the task's child processes end with it
  os._exit(TIMEOUT_EXIT)


@contextmanager
def inline_time_limit(store_path: str, trial: Trial, name: str, limit: float | None) -> Iterator:
  """The time limit of a trial run inline: after ``limit`` seconds :class:`TrialTimeout` is
  raised in the main thread (``SIGALRM``; a failed attempt, the campaign goes on); a task that
  does not come back to Python within as long again has hung its process: the attempt is
  recorded failed and the process exits (:data:`TIMEOUT_EXIT`; the same command continues)."""
  if not limit:
    yield
    return
  done = threading.Event()

  def watchdog():
    if not done.wait(2 * limit):
      _fail_and_exit(lambda: Store(store_path), trial, name, limit)

  threading.Thread(target=watchdog, daemon=True).start()
  alarm = threading.current_thread() is threading.main_thread()
  if alarm:

    def on_alarm(signum, frame):
      raise TrialTimeout(_timeout_line(trial, limit).split(": ", 1)[1])

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
  try:
    yield
  finally:
    done.set()
    if alarm:
      signal.setitimer(signal.ITIMER_REAL, 0)
      signal.signal(signal.SIGALRM, previous)


class BrokenCheckpointError(RuntimeError):
  """A parent checkpoint is missing, partial or corrupt."""


def checkpoint_dir(ckpt_root: str | os.PathLike, trial: Trial) -> Path:
  """Where attempt ``trial.attempt`` of a trial writes its checkpoint (one
  directory per attempt, so a stale worker never races a re-run)."""
  return Path(ckpt_root) / f"trial_{trial.id:06d}_a{trial.attempt}"


def load_checkpoint(path: str | os.PathLike, target: Any) -> Any:
  """Restore the pytree saved by a trial into the structure of ``target``.

  Every leaf comes back with the dtype of ``target``'s leaf: one a jax array
  cannot hold (``numpy.float64`` or ``int64`` with jax's x64 off) as a numpy
  array, so a warm start -- and :func:`minmaxlab.pbt.replay` -- continues from
  exactly the saved values.
  """
  from minmaxlab.runner import CheckpointManager

  tree, _ = CheckpointManager(path, max_to_keep=None).restore(target)
  return tree


def run_trial(trial: Trial, ckpt_root, init_fn: Callable, train_fn: Callable) -> tuple[Any, str]:
  """Warm-start, train and checkpoint one trial; return ``(fitness, checkpoint)``
  (``fitness``: a float, or a tuple of floats for a multi-objective task).

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
  objectives = as_objectives(fitness)
  if any(math.isnan(v) or v == math.inf for v in objectives):  # would rank first or anywhere
    raise ValueError(f"fitness must be a number < +inf (not NaN), got {fitness!r}")
  fitness = objectives[0] if np.ndim(fitness) == 0 else objectives
  path = checkpoint_dir(ckpt_root, trial)
  campaign = read_manifest(Path(ckpt_root).parent)  # the controller's copy of the store's id
  if campaign is not None:  # before the state: garbage collection deletes only what names it
    write_manifest(path, campaign, trial=trial.id)
  CheckpointManager(path, max_to_keep=None).save(
    trial.start_step + trial.steps,
    state,
    metadata={
      "trial": trial.id,
      "fitness": fitness,
      "hparams": trial.hparams,
      "campaign": campaign,
    },
  )
  return fitness, str(path)


def worker_loop(
  store_path: str,
  ckpt_root: str,
  init_fn: Callable,
  train_fn: Callable,
  name: str | None = None,
  lease_s: float = 60.0,
  poll_s: float = 0.05,
  max_trials: int | None = None,
  epoch: str | None = None,
  orphan_s: float | None = None,
  trial_timeout_s: float | None = None,
) -> int:
  """Claim and run trials until the controller marks the run finished.

  A background thread renews the lease every ``lease_s / 3`` seconds while a
  trial trains. Returns the number of trials this worker completed.
  ``epoch``/``orphan_s``/``trial_timeout_s``: see :func:`serve_trials`.
  """
  return serve_trials(
    lambda: Store(store_path),
    ckpt_root,
    init_fn,
    train_fn,
    name,
    lease_s,
    poll_s,
    max_trials,
    epoch=epoch,
    orphan_s=orphan_s,
    trial_timeout_s=trial_timeout_s,
  )


def run_one(
  store: Store,
  name: str,
  ckpt_root,
  init_fn: Callable,
  train_fn: Callable,
  lease_s: float,
  trial_timeout_s: float | None = None,
) -> bool:
  """Claim one trial as worker ``name``, run it and report it (in this thread, no
  lease renewal: the controller's inline mode). Returns whether a trial was claimed.
  A failing task is reported with :meth:`Store.fail` (counted against
  ``max_attempts``), a broken parent checkpoint with :meth:`Store.report_broken_parent`;
  ``trial_timeout_s``: see :func:`inline_time_limit`."""
  trial = store.claim(name, lease_s)
  if trial is None:
    return False
  try:
    with inline_time_limit(store.path, trial, name, trial_timeout_s):
      fitness, ckpt = run_trial(trial, ckpt_root, init_fn, train_fn)
  except BrokenCheckpointError:
    store.report_broken_parent(trial.id, name)
    return True
  except Exception as e:  # counted against max_attempts; the campaign goes on
    store.fail(trial.id, name, _error_line(e))
    return True
  store.complete(trial.id, name, fitness, ckpt)
  return True


def serve_trials(
  open_store: Callable[[], Any],
  ckpt_root: str,
  init_fn: Callable,
  train_fn: Callable,
  name: str | None = None,
  lease_s: float = 60.0,
  poll_s: float = 0.05,
  max_trials: int | None = None,
  *,
  epoch: str | None = None,
  orphan_s: float | None = None,
  trial_timeout_s: float | None = None,
) -> int:
  """:func:`worker_loop` over any store-like object from ``open_store()``.

  The object needs ``claim``, ``renew``, ``complete``, ``fail``,
  ``report_broken_parent``, ``get`` and ``close`` with :class:`Store`'s
  meaning: the SQLite store itself (local and external workers) or a proxy
  forwarding each call to the MPI rank that owns the store
  (:func:`minmaxlab.pbt.run_mpi`), so every kind of worker follows one
  claim/lease/report protocol. The lease thread opens its own object and never
  overlaps the main thread's calls (it is joined before the report).

  Failures: an exception in the task is reported (``Store.fail``: the trial is
  re-queued, or marked failed after ``max_attempts``) and the worker goes on
  with the next trial. The worker ends when its controller is gone: ``epoch``
  (the controller that started it) is no longer the store's, or the
  controller's heartbeat has not changed for ``orphan_s`` seconds: between
  trials :class:`ControllerGone` is raised, during a trial the lease thread
  ends the process (exit status :data:`ORPHAN_EXIT`; the trial is re-queued
  by the next controller). A trial still training after ``trial_timeout_s`` seconds
  (a hung task) is recorded as a failed attempt by the lease thread, which then ends the
  process (exit status :data:`TIMEOUT_EXIT`; a local worker is restarted).
  """
  name = name or f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
  lease = _Lease(name=name, lease_s=lease_s, epoch=epoch, orphan_s=orphan_s,
                 trial_timeout_s=trial_timeout_s)  # fmt: skip
  store = open_store()
  watch = _Watch(orphan_s)
  done = 0
  try:
    while max_trials is None or done < max_trials:
      if watch.gone(store):
        raise ControllerGone(f"no controller heartbeat for {orphan_s:g} s")
      if epoch is None:
        trial = store.claim(name, lease_s)
      else:
        trial = store.claim(name, lease_s, epoch)  # ControllerGone if replaced
      if trial is None:
        if store.get(FINISHED, False):
          break
        time.sleep(poll_s)
        continue
      out = _train_leased(open_store, lease, trial, ckpt_root, init_fn, train_fn)
      if out.broken:
        store.report_broken_parent(trial.id, name)
      elif out.failure is not None:
        store.fail(trial.id, name, out.failure)
      elif store.complete(trial.id, name, out.fitness, out.ckpt):
        done += 1
  finally:
    store.close()
  return done


class _Lease(NamedTuple):
  """How a worker holds its trials: its name, the lease, the controller's epoch, and the
  orphan and trial time limits (see :func:`serve_trials`)."""

  name: str
  lease_s: float
  epoch: str | None
  orphan_s: float | None
  trial_timeout_s: float | None


class _Outcome(NamedTuple):
  """What training one trial gave: its fitness and checkpoint, a broken parent checkpoint,
  or the task's failure (one line)."""

  fitness: Any = None
  ckpt: str | None = None
  broken: bool = False
  failure: str | None = None


def _train_leased(open_store, lease: _Lease, trial: Trial, ckpt_root, init_fn, train_fn):
  """Train ``trial`` while a lease thread (:func:`_hold_lease`) renews its lease; the
  thread is joined before this returns, so its calls never overlap the caller's report."""
  stop = threading.Event()
  args = (open_store, lease, trial, stop, time.monotonic())
  thread = threading.Thread(target=_hold_lease, args=args, daemon=True)
  thread.start()
  try:
    fitness, ckpt = run_trial(trial, ckpt_root, init_fn, train_fn)
    return _Outcome(fitness=fitness, ckpt=ckpt)
  except BrokenCheckpointError:
    return _Outcome(broken=True)
  except Exception as e:  # the task failed: report it, go on with the next trial
    failure = _error_line(e)
    print(
      f"[pbt worker {lease.name}] trial {trial.id} (attempt {trial.attempt}) failed: {failure}",
      file=sys.stderr,
      flush=True,
    )
    if os.environ.get("MINMAXLAB_DEBUG"):
      traceback.print_exc()
    return _Outcome(failure=failure)
  finally:
    stop.set()
    thread.join()  # before any report: the lease thread's calls never overlap ours


def _hold_lease(open_store, lease: _Lease, trial: Trial, stop, started: float) -> None:
  """The lease thread of ``trial`` (until ``stop``): renews the lease; ends the process
  when the trial runs past its time limit (recorded as a failed attempt) or the controller
  is gone (the trial is re-queued by the next controller)."""
  hb = open_store()
  beat = _Watch(lease.orphan_s)
  period = min(lease.lease_s / 3, lease.orphan_s / 4 if lease.orphan_s else lease.lease_s)
  period = min(period, lease.trial_timeout_s / 4) if lease.trial_timeout_s else period
  try:
    while not stop.wait(period):
      if lease.trial_timeout_s and time.monotonic() - started > lease.trial_timeout_s:
        _fail_and_exit(lambda: hb, trial, lease.name, lease.trial_timeout_s)
      hb.renew(trial.id, lease.name, lease.lease_s)
      lost_epoch = lease.epoch is not None and hb.get(EPOCH) != lease.epoch
      if lost_epoch or beat.gone(hb):
        why = f"controller gone while training trial {trial.id}"
        print(f"[pbt worker {lease.name}] {why}: exiting", file=sys.stderr, flush=True)
        os._exit(ORPHAN_EXIT)  # the trial is re-queued by the next controller
  finally:
    hb.close()


def join_run(
  workdir: str | os.PathLike,
  name: str | None = None,
  wait_s: float = 120.0,
  epoch: str | None = None,
) -> int:
  """Work for the controller of ``workdir`` from any process that sees its files.

  Waits up to ``wait_s`` seconds for the controller to publish its task in the
  store, then claims and runs trials until the run is finished (see
  :func:`worker_loop`). The store holds only the task's name and JSON
  arguments; the task is imported here, so the same code must be installed.
  The worker exits when the controller's heartbeat stops for the run's
  ``orphan_s`` (or, with ``epoch``, when another controller takes over).
  Returns the number of trials completed.
  """
  workdir = Path(workdir).expanduser().resolve()
  store_path = workdir / STORE_FILE
  deadline = time.monotonic() + wait_s
  while True:
    if store_path.exists():
      store = Store(store_path)
      try:
        task = store.get(TASK)
      finally:
        store.close()
      if task is not None:
        break
    if time.monotonic() > deadline:
      raise TimeoutError(f"no PBT controller published a task in {workdir} within {wait_s} s")
    time.sleep(0.1)
  if not isinstance(task, dict) or not isinstance(task.get("task"), dict):
    raise ValueError(f"{store_path}: no named task in the store (functions run inline only)")
  spec = task_spec(task["task"]["target"], task["task"]["args"])
  init_fn, train_fn = resolve_task(spec, workdir)  # never a module of the workdir
  return worker_loop(
    str(store_path),
    str(workdir / "checkpoints"),
    init_fn,
    train_fn,
    name=name,
    lease_s=float(task["lease_s"]),
    poll_s=float(task["poll_s"]),
    epoch=epoch,
    orphan_s=float(task["orphan_s"]),
    trial_timeout_s=task.get("trial_timeout_s"),
  )
