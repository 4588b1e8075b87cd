"""Supervision of black-box PBT workers: local worker processes and the controller's heartbeat.

:class:`Supervisor` starts ``python -m minmaxlab.pbt worker`` processes bound to
one controller (its epoch and pid), notices the ones that exited (their trials
count a failed attempt) and restarts them while work is left, and at the end
waits for them (then terminates, then kills). :class:`Heartbeat` rewrites the
controller's heartbeat in the store from a thread with its own connection, so
workers whose controller stopped beating exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from minmaxlab.pbt._groups import kill_group
from minmaxlab.pbt._store import Store
from minmaxlab.pbt._worker import HEARTBEAT


def worker_env(workdir: str | os.PathLike | None = None) -> dict[str, str]:
  """The environment of a local worker: this process's import path (so the
  worker imports the same installed code) without its entries inside ``workdir``, and JAX
  on the CPU unless set. The worker is started with ``python -P`` (:meth:`Supervisor.command`):
  its current directory is not put on its import path."""
  env = dict(os.environ)
  folder = None if workdir is None else Path(workdir).expanduser().resolve()
  paths = [os.path.abspath(p or os.curdir) for p in sys.path if os.path.isdir(p or os.curdir)]
  if folder is not None:
    paths = [
      p for p in paths if not (Path(p).resolve() == folder or folder in Path(p).resolve().parents)
    ]
  env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
  env.setdefault("JAX_PLATFORMS", "cpu")
  return env


class Supervisor:
  """The local worker processes of one controller run.

  Args:
    workdir: the run's directory (the workers read the task from its store).
    store: the controller's store (failed attempts of dead workers are recorded there).
    epoch: the controller's epoch; a worker of another epoch claims nothing.
  """

  def __init__(self, workdir: str | os.PathLike, store: Store, epoch: str):
    self.workdir, self.store, self.epoch = Path(workdir), store, epoch
    self.procs: dict[str, subprocess.Popen] = {}
    self.restarted = 0

  def command(self, name: str) -> list[str]:
    """The command line of the local worker ``name``."""
    cmd = [sys.executable, "-P", "-m", "minmaxlab.pbt", "worker", "--workdir", str(self.workdir)]
    return cmd + ["--name", name, "--epoch", self.epoch, "--parent-pid", str(os.getpid())]

  def start(self) -> str:
    """Start one worker process; returns its name."""
    name = f"w{len(self.procs) + self.restarted}-{uuid.uuid4().hex[:6]}"
    self.procs[name] = subprocess.Popen(  # its own group: ended whole, its task's children too
      self.command(name), env=worker_env(self.workdir), stdin=subprocess.DEVNULL,
      start_new_session=True,
    )  # fmt: skip
    return name

  def reap(self, work_left: bool) -> list[str]:
    """Record a failed attempt for the trial of every exited worker and, while
    ``work_left``, start a replacement. Returns the names of the exited workers."""
    exited = []
    for name, proc in list(self.procs.items()):
      if proc.poll() is None:
        continue
      kill_group(proc.pid)  # what its task started and left behind
      del self.procs[name]
      exited.append(name)
      with self.store.transaction() as db:
        self.store.fail_worker(
          db, name, f"worker process {name} exited with status {proc.returncode}"
        )
      if work_left:
        self.restarted += 1
        self.start()
    return exited

  def stop(self, wait_s: float = 30.0, term_s: float = 10.0) -> None:
    """Wait for every worker (told by the store the run is finished) up to
    ``wait_s``; terminate one that does not exit, kill it after ``term_s``."""
    for proc in self.procs.values():
      try:
        proc.wait(timeout=wait_s)
      except subprocess.TimeoutExpired:
        proc.terminate()
        try:
          proc.wait(timeout=term_s)
        except subprocess.TimeoutExpired:
          proc.kill()
          proc.wait()
      kill_group(proc.pid)
    self.procs.clear()


class Heartbeat:
  """Rewrites the controller's heartbeat (``time.time()``) in the store every
  ``period_s`` seconds from a daemon thread with its own connection, from
  :meth:`start` until :meth:`stop`."""

  def __init__(self, store_path: str | os.PathLike, period_s: float):
    self.store_path, self.period_s = str(store_path), float(period_s)
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._beat, daemon=True)

  def _beat(self) -> None:
    store = Store(self.store_path)
    try:
      while True:
        with store.transaction() as db:
          store.put(db, HEARTBEAT, time.time())
        if self._stop.wait(self.period_s):
          break
    finally:
      store.close()

  def start(self) -> Heartbeat:
    self._thread.start()
    return self

  def stop(self) -> None:
    self._stop.set()
    self._thread.join()
