"""Black-box PBT workers as MPI ranks: ``mpirun -n P``, rank 0 the controller.

Rank 0 builds the :class:`~minmaxlab.pbt.Controller` and alone opens the
SQLite store and selects; ranks ``1 .. P-1`` are stateless workers. A worker
rank runs the very loop local worker processes run
(:func:`~minmaxlab.pbt._worker.serve_trials`: claim, lease heartbeats, train,
atomic checkpoint, report, re-queue on a broken parent), except that each
store call is a message to rank 0, which performs it on the store and answers.
So the trial semantics (leases, re-queue, late reports ignored, resume) are
exactly those of local processes, and only checkpoints need a file system
shared by the ranks: the SQLite file is opened by one process only (SQLite's
WAL mode does not work across hosts on NFS).

Failure handling, bounded in time:

- A rank that dies is, under MPICH's ``mpirun`` (Hydra), the end of the whole
  job: the launcher kills every rank and prints ``BAD TERMINATION``. The store
  holds every finished trial; the same command with the same workdir resumes
  (the dead rank's trial, left ``running``, is re-queued on entry).
- Under a launcher that keeps the other ranks alive, a rank silent for longer
  than the lease loses its trial (re-queued for another rank when the lease
  lapses) and is counted lost; if every worker rank is lost the controller
  raises instead of waiting forever; at the end, lost ranks make rank 0 abort
  the job (exit code 3) once its caller is done, as mpirun would wait for them.
- An exception on any rank prints its traceback and calls ``MPI_Abort``, so no
  rank is left blocked in a receive.

Messages are typed data, never pickles: each request and reply is UTF-8 JSON
sent as an MPI byte buffer (``Send``/``Recv``), and the task travels as its
name and JSON arguments (each worker rank imports it), so a peer that can
reach a rank can at worst send wrong numbers, not code.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from minmaxlab.pbt._store import Store, Trial
from minmaxlab.pbt._task import resolve_task, task_spec
from minmaxlab.pbt._worker import FINISHED, serve_trials

_TAG = 77  # requests to rank 0; replies come back with _TAG + 1


def mpi_world(comm=None, min_size: int = 2):
  """``MPI.COMM_WORLD`` (or ``comm``) after checking it has ``min_size`` ranks.

  Raises:
    ImportError: mpi4py is not installed (``python3 dev.py mpi`` in the checkout).
    ValueError: fewer than ``min_size`` ranks (rank 0 is the controller, the
      others are workers, so PBT over MPI needs at least 2).
  """
  if comm is None:
    try:
      from mpi4py import MPI
    except ImportError as e:
      raise ImportError(
        "MPI workers need mpi4py: run `python3 dev.py mpi` in the checkout (MPICH and mpi4py"
        " into .venv), or `pip install mpich 'mpi4py>=4'`"
      ) from e
    comm = MPI.COMM_WORLD
  if comm.Get_size() < min_size:
    raise ValueError(
      f"PBT over MPI needs at least {min_size} ranks (rank 0 runs the controller, ranks"
      f" 1..P-1 are workers), got {comm.Get_size()}: launch with `mpirun -n P ...`, P >= 2"
    )
  return comm


def _abort(comm, what: str) -> None:
  print(f"[rank {comm.Get_rank()}] {what}; aborting the MPI job", file=sys.stderr)
  traceback.print_exc()
  sys.stderr.flush()
  sys.stdout.flush()
  comm.Abort(1)


def _encode(value: Any) -> Any:
  if isinstance(value, Trial):
    return {"trial": value._asdict()}
  return {"value": value}


def _decode(message: Any) -> Any:
  if "trial" in message:
    return Trial(**message["trial"])
  return message["value"]


def _send(comm, obj: Any, dest: int, tag: int) -> None:
  """Send JSON data as a byte buffer (no pickle)."""
  from mpi4py import MPI

  data = bytearray(json.dumps(obj, allow_nan=True).encode())
  comm.Send([data, MPI.BYTE], dest=dest, tag=tag)


def _recv(comm, source: int, tag: int) -> tuple[Any, int]:
  """Receive one JSON byte buffer; returns ``(data, source)``."""
  from mpi4py import MPI

  status = MPI.Status()
  comm.Probe(source=source, tag=tag, status=status)
  buf = bytearray(status.Get_count(MPI.BYTE))
  comm.Recv([buf, MPI.BYTE], source=status.Get_source(), tag=tag)
  return json.loads(buf.decode()), status.Get_source()


class _RankStore:
  """The store calls a worker makes, forwarded to rank 0 (one request at a time)."""

  def __init__(self, comm):
    self.comm = comm

  def _call(self, op: str, *args):
    _send(self.comm, {"op": op, "args": list(args)}, 0, _TAG)
    return _decode(_recv(self.comm, 0, _TAG + 1)[0])

  def claim(self, worker, lease_s):
    return self._call("claim", worker, lease_s)

  def fail(self, trial_id, worker, error):
    return self._call("fail", trial_id, worker, error)

  def renew(self, trial_id, worker, lease_s):
    return self._call("renew", trial_id, worker, lease_s)

  def complete(self, trial_id, worker, fitness, ckpt):
    return self._call("complete", trial_id, worker, fitness, ckpt)

  def report_broken_parent(self, trial_id, worker):
    return self._call("report_broken_parent", trial_id, worker)

  def get(self, key, default=None):
    return self._call("get", key, default)

  def close(self):
    pass


class _RankServer:
  """Rank 0's side: answer worker ranks' store calls; notice silent ranks."""

  _OPS = ("claim", "renew", "complete", "fail", "report_broken_parent")

  def __init__(self, comm, controller):
    from mpi4py import MPI

    self.MPI, self.comm, self.controller = MPI, comm, controller
    self.store: Store = controller.store
    self.ranks = list(range(1, comm.Get_size()))
    now = time.monotonic()
    # A rank is first heard from after its imports; give it one lease from now.
    self.last_seen = {r: now for r in self.ranks}
    self.stopped: set[int] = set()  # told the run is finished
    self.lost: set[int] = set()

  def _task(self):
    c = self.controller
    return {
      "task": c.task.to_json(),
      "lease_s": c.lease_s,
      "poll_s": c.poll_s,
      "ckpt_root": str(c.ckpt_root),
    }

  def _answer(self, source: int, op: str, args: tuple) -> Any:
    if op == "task":
      return self._task()
    if op == "get":
      value = self.store.get(*args)
      if args[0] == FINISHED and value:
        self.stopped.add(source)
      return value
    if op in self._OPS:
      return getattr(self.store, op)(*args)
    raise ValueError(f"unknown request {op!r} from rank {source}")

  def serve(self, seconds: float) -> None:
    """Answer requests for about ``seconds`` (at least one probe)."""
    deadline = time.monotonic() + seconds
    status = self.MPI.Status()
    while True:
      if self.comm.Iprobe(source=self.MPI.ANY_SOURCE, tag=_TAG, status=status):
        request, source = _recv(self.comm, status.Get_source(), _TAG)
        self.last_seen[source] = time.monotonic()
        self.lost.discard(source)
        if not (isinstance(request, dict) and isinstance(request.get("args"), list)):
          raise ValueError(f"malformed request from rank {source}")
        answer = self._answer(source, str(request.get("op")), tuple(request["args"]))
        _send(self.comm, _encode(answer), source, _TAG + 1)
        continue
      if time.monotonic() >= deadline:
        break
      time.sleep(min(0.002, seconds))
    self._check_silent()

  def _check_silent(self) -> None:
    now = time.monotonic()
    for r in self.ranks:
      if r not in self.stopped and r not in self.lost:
        if now - self.last_seen[r] > self.controller.lease_s:
          self.lost.add(r)
          print(
            f"[rank 0] worker rank {r} silent for > {self.controller.lease_s:g} s (lease):"
            " counted lost; its trial is re-queued when the lease lapses",
            file=sys.stderr,
            flush=True,
          )
    alive = [r for r in self.ranks if r not in self.lost and r not in self.stopped]
    if not alive and len(self.stopped) < len(self.ranks) and not self.store.get(FINISHED, False):
      raise RuntimeError(
        f"every MPI worker rank is lost (silent > lease_s={self.controller.lease_s:g} s):"
        f" {sorted(self.lost)}; the store keeps the finished trials, rerun to resume"
      )

  def drain(self) -> None:
    """After the run: answer until every live rank was told it is finished."""
    while any(r not in self.stopped and r not in self.lost for r in self.ranks):
      self.serve(self.controller.poll_s)


def mpi_worker(comm=None) -> int:
  """Worker rank: fetch the task from rank 0, then claim and run trials until
  the run is finished. Returns the number of trials this rank completed. An
  exception prints its traceback and aborts the job (nothing blocks forever)."""
  comm = mpi_world(comm)
  if comm.Get_rank() == 0:
    raise ValueError("mpi_worker runs on ranks 1..P-1; rank 0 runs the controller")
  try:
    proxy = _RankStore(comm)
    task = proxy._call("task")
    spec = task_spec(task["task"]["target"], task["task"]["args"])
    init_fn, train_fn = resolve_task(spec, os.path.dirname(task["ckpt_root"]))
    return serve_trials(
      lambda: proxy,
      task["ckpt_root"],
      init_fn,
      train_fn,
      name=f"rank{comm.Get_rank()}",
      lease_s=float(task["lease_s"]),
      poll_s=float(task["poll_s"]),
    )
  except BaseException:
    _abort(comm, "PBT worker failed")
    raise  # not reached: Abort ends the process


def run_mpi(
  make_controller: Callable[[], Any],
  *,
  comm=None,
  timeout: float | None = None,
  on_progress: Callable | None = None,
  budget_s: float | None = None,
) -> tuple[Any, dict[str, Any]] | None:
  """Run black-box PBT with the MPI ranks as workers (``mpirun -n P``, ``P >= 2``).

  Every rank calls this. Rank 0 calls ``make_controller()`` (so only it builds
  the task and opens the store; the controller must have ``workers=0``), runs
  it to the end (or resumes it) while answering the worker ranks, and returns
  ``(controller, summary)``: the store stays open for the caller, ``summary``
  is :meth:`Controller.run`'s plus ``worker_ranks`` and ``lost_ranks``. Ranks
  ``1 .. P-1`` run :func:`mpi_worker` and return ``None``.

  The number of ranks is checked first, before any work: fewer than 2 raises
  ``ValueError``. An exception on rank 0 before the end aborts the job.

  Example (``mpirun -n 5 python run.py``: a controller and 4 workers)::

    config = pbt.ControllerConfig(population_size=8, num_trials=64, steps_per_trial=100)
    out = pbt.run_mpi(lambda: pbt.Controller("runs/p", space, init_fn, train_fn, config=config))
    if out is not None:   # rank 0
      controller, summary = out
  """
  comm = mpi_world(comm)
  if comm.Get_rank() != 0:
    mpi_worker(comm)
    return None
  try:
    controller = make_controller()
    if controller.task is None:
      raise ValueError(
        "run_mpi: worker ranks import the task by name; build the controller with"
        " task='package.module:function' (and JSON task_args)"
      )
    if controller.workers != 0:
      raise ValueError(
        f"run_mpi: the MPI ranks are the workers; build the controller with workers=0,"
        f" got workers={controller.workers}"
      )
    controller.external_workers = True  # never train inline on rank 0
    server = _RankServer(comm, controller)
    summary = controller.run(
      timeout=timeout, on_progress=on_progress, serve=server.serve, budget_s=budget_s
    )
    server.drain()
  except BaseException:
    _abort(comm, "PBT controller failed")
    raise  # not reached
  lost = sorted(server.lost)
  if lost:
    # A lost rank (alive but silent, e.g. stopped or hung) would keep `mpirun`
    # waiting forever: once the caller has written its results and Python exits,
    # end the job (this runs before mpi4py's own MPI_Finalize handler).
    atexit.register(_abort_lost, comm, lost)
  summary = {**summary, "worker_ranks": len(server.ranks), "lost_ranks": lost}
  return controller, summary


def _abort_lost(comm, lost) -> None:
  print(
    f"[rank 0] PBT run finished, but worker ranks {lost} were lost; aborting the MPI job"
    " so that mpirun does not wait for them",
    file=sys.stderr,
    flush=True,
  )
  sys.stdout.flush()
  comm.Abort(3)
