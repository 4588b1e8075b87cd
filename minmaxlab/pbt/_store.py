"""The persistent PBT store: trials, lineage, population and checkpoints in SQLite.

Every state change is one ``BEGIN IMMEDIATE`` transaction, so any number of
worker processes and one controller can share the file, and a process killed at
any moment leaves a consistent store (SQLite's journal rolls back an unfinished
transaction).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path, PurePath
from typing import Any, Literal, NamedTuple, get_args

import numpy as np

from minmaxlab.pbt._sqlite_file import create_file, create_tables, switch_to_wal

TrialStatus = Literal["pending", "running", "done", "failed"]
PENDING, RUNNING, DONE, FAILED = get_args(TrialStatus)
MAX_ATTEMPTS = "max_attempts"  # kv key: attempts before a trial is marked failed
EPOCH = "controller_epoch"  # kv key: the id of the controller now running the campaign
TASK = "task"  # kv key: the named task and timing a joining worker reads
CONFIG = "config"  # kv key: the campaign's configuration fingerprint
DRAIN = "drain"  # kv key: true while the campaign's budget is spent: no trial is handed out
STORE_FILE = "pbt.sqlite"  # the store's file name in a run's workdir
CAMPAIGN = "campaign_id"  # kv key: the campaign's id, also in every checkpoint's manifest
CKPT_DIR = "checkpoints"  # the trial checkpoints' folder in a run's workdir
_CKPT_NAME = re.compile(r"trial_(\d+)_a\d+")
_TABLES = {"trials", "population", "kv"}


class ControllerGone(RuntimeError):
  """The controller that started a worker no longer runs the campaign."""


class StoreError(ValueError):
  """A ``pbt.sqlite`` that is not a usable PBT store (empty, truncated, damaged or foreign)."""


def checkpoint_trial(name: str) -> int | None:
  """The trial id of a checkpoint folder name ``trial_<id>_a<attempt>`` (else ``None``)."""
  m = _CKPT_NAME.fullmatch(name)
  return None if m is None else int(m.group(1))


def relative_ckpt(path: str | None) -> str | None:
  """The stored form of a checkpoint path: ``checkpoints/trial_<id>_a<k>``, relative to the
  workdir, for a trial checkpoint folder wherever the workdir was (a moved campaign or a
  store written with absolute paths); any other path unchanged (garbage collection never
  deletes it)."""
  if path is None:
    return None
  p = PurePath(path)
  if p.parent.name == CKPT_DIR and checkpoint_trial(p.name) is not None:
    return f"{CKPT_DIR}/{p.name}"
  return str(path)


class Trial(NamedTuple):
  """One unit of work: train ``steps`` steps from the parent's checkpoint.

  Attributes:
    id: trial id (1, 2, ...).
    member: population slot the trial belongs to.
    parent_id: trial whose checkpoint it warm-starts from (``None``: fresh).
    parent_ckpt: that checkpoint's directory.
    hparams: hyperparameters (schedule parameters included), JSON numbers.
    start_step: training steps behind the parent checkpoint.
    steps: steps to train.
    seed: the trial's seed (a re-run of the trial gets the same one).
    status: ``pending`` / ``running`` / ``done`` / ``failed``.
    attempt: how many times it was handed to a worker.
    worker: the worker holding it.
    fitness: reported fitness (higher is better; of a multi-objective trial,
      the first objective).
    ckpt: its own checkpoint directory once done.
    ckpt_deleted: whether garbage collection removed it.
    processed: whether the controller has used the result.
    failures: failed attempts (an exception in the task, its worker process
      dying, its lease lapsing); at ``max_attempts`` the trial is ``failed``.
    error: the last failure, one line.
    objectives: every reported objective (a scalar fitness is a 1-tuple).
  """

  id: int
  member: int
  parent_id: int | None
  parent_ckpt: str | None
  hparams: dict
  start_step: int
  steps: int
  seed: int
  status: TrialStatus
  attempt: int
  worker: str | None
  fitness: float | None
  ckpt: str | None
  ckpt_deleted: bool
  processed: bool
  failures: int = 0
  error: str | None = None
  objectives: tuple[float, ...] | None = None


_COLUMNS = ", ".join(Trial._fields)  # a row of these columns is one Trial's fields


def _trial(row, workdir: Path) -> Trial:
  t = dict(zip(Trial._fields, row, strict=True))
  for name in ("parent_ckpt", "ckpt"):  # absolute paths in this workdir
    rel = relative_ckpt(t[name])
    t[name] = rel if rel is None or PurePath(rel).is_absolute() else str(workdir / rel)
  t["hparams"] = json.loads(t["hparams"])
  t["ckpt_deleted"], t["processed"] = bool(t["ckpt_deleted"]), bool(t["processed"])
  t["objectives"] = None if t["objectives"] is None else tuple(json.loads(t["objectives"]))
  return Trial(**t)


def _check_store(db: sqlite3.Connection, path: str) -> None:
  """:class:`StoreError` (one line naming ``path``) unless ``db`` is an undamaged PBT store."""
  tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
  if not _TABLES <= tables:
    raise StoreError(
      f"{path} is not a PBT store (it has no {', '.join(sorted(_TABLES - tables))} table):"
      " refusing to start a campaign over it; restore the campaign's store or use a new workdir"
    )
  problems = [r[0] for r in db.execute("PRAGMA quick_check")]
  if problems != ["ok"]:
    raise StoreError(f"{path} is damaged ({problems[0]}); restore it or use a new workdir")


class Store:
  """SQLite store shared by the controller and the workers (one file).

  Checkpoint paths are stored relative to the store's folder (the workdir), so a moved or
  copied campaign keeps its checkpoints. An existing file that is empty, truncated, damaged
  or another program's database is refused (:class:`StoreError`, one line naming it).

  Args:
    path: the database file (created with its tables if missing).
    timeout: seconds a writer waits for the lock.
  """

  def __init__(self, path: str | os.PathLike, timeout: float = 60.0):
    self.path = str(Path(path).expanduser().resolve())
    self.workdir = Path(self.path).parent
    self.ckpt_root = self.workdir / CKPT_DIR
    self.workdir.mkdir(parents=True, exist_ok=True)
    if not Path(self.path).exists():
      create_file(Path(self.path), timeout)
    elif Path(self.path).stat().st_size == 0:
      raise StoreError(
        f"{self.path} is empty (0 bytes), not a PBT store: refusing to start a new campaign"
        " over it; restore the campaign's store or use a new workdir"
      )
    self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
    try:
      _check_store(self._db, self.path)
      switch_to_wal(self._db, timeout)
    except sqlite3.DatabaseError as e:
      self._db.close()
      raise StoreError(
        f"{self.path} is not a readable PBT store ({e}); restore it or use a new workdir"
      ) from None
    except StoreError:
      self._db.close()
      raise
    self._db.execute("PRAGMA synchronous=FULL")
    create_tables(self._db)
    columns = {r[1] for r in self._db.execute("PRAGMA table_info(trials)")}
    added = (("failures", "INTEGER NOT NULL DEFAULT 0"), ("error", "TEXT"), ("objectives", "TEXT"))
    for name, decl in added:
      if name not in columns:  # a store written before these columns existed
        self._db.execute(f"ALTER TABLE trials ADD COLUMN {name} {decl}")

  def close(self) -> None:
    self._db.close()

  @contextmanager
  def transaction(self):
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on an exception)."""
    self._db.execute("BEGIN IMMEDIATE")
    try:
      yield self._db
    except BaseException:
      self._db.execute("ROLLBACK")
      raise
    self._db.execute("COMMIT")

  # --- controller state -----------------------------------------------------------------
  def get(self, key: str, default: Any = None) -> Any:
    row = self._db.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
    return default if row is None else json.loads(row[0])

  def put(self, db, key: str, value: Any) -> None:
    db.execute("INSERT OR REPLACE INTO kv(key, value) VALUES (?, ?)", (key, json.dumps(value)))

  # --- trials -----------------------------------------------------------------------------
  def add_trial(self, db, member, parent: Trial | None, hparams, start_step, steps, seed) -> int:
    cur = db.execute(
      "INSERT INTO trials(member, parent_id, parent_ckpt, hparams, start_step, steps, seed,"
      " status, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      (
        member,
        None if parent is None else parent.id,
        None if parent is None else relative_ckpt(parent.ckpt),
        json.dumps(hparams),
        int(start_step),
        int(steps),
        int(seed),
        PENDING,
        time.time(),
      ),
    )
    return cur.lastrowid

  def trial(self, trial_id: int) -> Trial:
    row = self._db.execute(f"SELECT {_COLUMNS} FROM trials WHERE id=?", (trial_id,)).fetchone()
    if row is None:
      raise KeyError(trial_id)
    return _trial(row, self.workdir)

  def trials(self, where: str = "1", args: tuple = ()) -> list[Trial]:
    rows = self._db.execute(f"SELECT {_COLUMNS} FROM trials WHERE {where} ORDER BY id", args)
    return [_trial(r, self.workdir) for r in rows]

  def claim(self, worker: str, lease_s: float, epoch: str | None = None) -> Trial | None:
    """Hand the oldest claimable pending trial to ``worker`` (``None`` if none).

    A trial is claimable when its parent is done (a parent being re-run after
    a corrupt checkpoint blocks its children); the parent's checkpoint path is
    read at claim time, so a re-run parent's new checkpoint is used.

    ``epoch``: the controller that started this worker; if another controller
    has taken over the store since, :class:`ControllerGone` is raised and
    nothing is claimed (a worker of a dead controller never takes work).
    """
    with self.transaction() as db:
      if epoch is not None and self.get(EPOCH) != epoch:
        raise ControllerGone(f"the controller that started worker {worker} is gone")
      if self.get(DRAIN, False):  # the budget is spent: running trials finish, no new ones
        return None
      row = db.execute(
        "SELECT t.id, p.ckpt FROM trials t LEFT JOIN trials p ON t.parent_id = p.id"
        " WHERE t.status=? AND (t.parent_id IS NULL OR p.status=?) ORDER BY t.id LIMIT 1",
        (PENDING, DONE),
      ).fetchone()
      if row is None:
        return None
      db.execute(
        "UPDATE trials SET status=?, worker=?, attempt=attempt+1, lease_until=?, parent_ckpt=?"
        " WHERE id=?",
        (RUNNING, worker, 0, row[1], row[0]),  # lease_until: the lease's renewal count
      )
    return self.trial(row[0])

  def report_broken_parent(self, trial_id: int, worker: str) -> list[int]:
    """The parent checkpoint of ``trial_id`` could not be restored: re-queue the
    trial and re-run its parent (and, where their checkpoints are gone too, the
    ancestors up to one with a usable checkpoint or the root) with the same
    hyperparameters and seeds. Returns the ids of the trials to re-run.
    """
    with self.transaction() as db:
      if self.requeue(db, "id=? AND worker=?", (trial_id, worker)) != 1:
        return []
      rerun = []
      t = self.trial(trial_id)
      while t.parent_id is not None and t.parent_id not in rerun:  # (a cycle: damaged)
        p = self.trial(t.parent_id)
        if p.status != DONE:  # already being re-run
          break
        rerun.append(p.id)
        db.execute(
          "UPDATE trials SET status=?, worker=NULL, lease_until=NULL, ckpt=NULL, ckpt_deleted=0"
          " WHERE id=?",
          (PENDING, p.id),
        )
        if p.parent_id is None:
          break
        grand = self.trial(p.parent_id)
        if grand.ckpt is not None and not grand.ckpt_deleted and Path(grand.ckpt).is_dir():
          break
        t = p
    return rerun

  def renew(self, trial_id: int, worker: str, lease_s: float) -> bool:
    """Renew a running trial's lease (count one more renewal; no clock is written: the
    controller times the renewals on its own, see ``_campaign.LeaseWatch``); ``False`` if
    ``worker`` no longer holds it. ``lease_s`` is not used (kept for the MPI proxy)."""
    with self.transaction() as db:
      cur = db.execute(
        "UPDATE trials SET lease_until=COALESCE(lease_until, 0) + 1"
        " WHERE id=? AND status=? AND worker=?",
        (trial_id, RUNNING, worker),
      )
    return cur.rowcount == 1

  def complete(self, trial_id: int, worker: str, fitness, ckpt: str) -> bool:
    """Record a finished trial (its checkpoint is already durable); ``fitness`` is
    a number or a sequence of objectives. A report from a worker that lost the
    trial (lease expired, re-queued) is ignored."""
    objectives = [float(v) for v in np.asarray(fitness, np.float64).reshape(-1)]
    stored = relative_ckpt(str(ckpt))
    with self.transaction() as db:
      cur = db.execute(
        "UPDATE trials SET status=?, fitness=?, objectives=?, ckpt=?, finished=?"
        " WHERE id=? AND status=? AND worker=?",
        (DONE, objectives[0], json.dumps(objectives), stored, time.time(), trial_id, RUNNING,
         worker),
      )  # fmt: skip
    return cur.rowcount == 1

  def fail(self, trial_id: int, worker: str, error: str) -> bool:
    """Record a failed attempt of a running trial held by ``worker``: the trial is
    re-queued, or marked ``failed`` once it has failed ``max_attempts`` times."""
    with self.transaction() as db:
      return self.fail_running(db, "id=? AND worker=?", (trial_id, worker), error) == 1

  def fail_running(self, db, where: str, args: tuple, error: str) -> int:
    """:meth:`fail` for every running trial matching ``where``; returns how many."""
    limit = int(self.get(MAX_ATTEMPTS, 0) or 0)
    rows = db.execute(
      f"SELECT id, failures FROM trials WHERE status=? AND ({where})", (RUNNING, *args)
    ).fetchall()
    for tid, failures in rows:
      failed = limit > 0 and failures + 1 >= limit
      db.execute(
        "UPDATE trials SET status=?, worker=NULL, lease_until=NULL, failures=failures+1,"
        " error=?, processed=? WHERE id=?",
        (FAILED if failed else PENDING, str(error)[:2000], 0, tid),
      )
    return len(rows)

  def requeue(self, db, where: str, args: tuple = ()) -> int:
    cur = db.execute(
      f"UPDATE trials SET status=?, worker=NULL, lease_until=NULL WHERE status=? AND ({where})",
      (PENDING, RUNNING, *args),
    )
    return cur.rowcount

  def fail_worker(self, db, worker: str, error: str) -> int:
    """:meth:`fail` every running trial held by ``worker`` (its process died)."""
    return self.fail_running(db, "worker=?", (worker,), error)

  def leases(self) -> list[tuple]:
    """``(id, worker, attempt, renewals)`` of every running trial."""
    sql = "SELECT id, worker, attempt, COALESCE(lease_until, 0) FROM trials WHERE status=?"
    return [tuple(r) for r in self._db.execute(sql, (RUNNING,))]

  def fail_lapsed(self, db, lapsed, error: str) -> int:
    """:meth:`fail` every trial of ``lapsed`` (``(id, worker, renewals)``) still held by that
    worker with that many renewals (one renewed meanwhile keeps its lease)."""
    where = "id=? AND worker=? AND COALESCE(lease_until, 0)=?"
    return sum(self.fail_running(db, where, held, error) for held in lapsed)

  def requeue_running(self, db) -> int:
    """Put every running trial back to pending (a new controller takes over)."""
    return self.requeue(db, "1")

  # --- controller queries -----------------------------------------------------------------
  def num_trials(self) -> int:
    """How many trials were created."""
    return self._db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]

  def unprocessed(self, status: TrialStatus | None = None) -> list[Trial]:
    """Trials the controller has not used yet (with ``status``, those only)."""
    if status is None:
      return self.trials("processed=0")
    return self.trials("status=? AND processed=0", (status,))

  def with_status(self, *statuses: str) -> list[Trial]:
    """The trials whose status is one of ``statuses``."""
    return self.trials(f"status IN ({', '.join('?' * len(statuses))})", tuple(statuses))

  def mark_processed(self, db, trial_ids: list[int]) -> None:
    db.executemany("UPDATE trials SET processed=1 WHERE id=?", [(int(i),) for i in trial_ids])

  def newest_per_member(self) -> list[Trial]:
    """Each member's newest trial."""
    return self.trials("id IN (SELECT MAX(id) FROM trials GROUP BY member)")

  # --- checkpoints ------------------------------------------------------------------------
  def collectable(self) -> list[Trial]:
    """Done trials whose checkpoint exists (not yet garbage collected)."""
    return self.trials("status=? AND ckpt IS NOT NULL AND ckpt_deleted=0", (DONE,))

  def trial_ids(self) -> set[int]:
    """The ids of every trial the store holds."""
    return {r[0] for r in self._db.execute("SELECT id FROM trials")}

  def live_checkpoints(self) -> list[Trial]:
    """Trials with a checkpoint that garbage collection has not removed."""
    return self.trials("ckpt IS NOT NULL AND ckpt_deleted=0")

  def mark_ckpt_deleted(self, db, trial_ids: list[int]) -> None:
    db.executemany("UPDATE trials SET ckpt_deleted=1 WHERE id=?", [(int(i),) for i in trial_ids])

  def population(self) -> dict[int, int]:
    return dict(self._db.execute("SELECT member, trial_id FROM population ORDER BY member"))

  def set_member(self, db, member: int, trial_id: int) -> None:
    db.execute(
      "INSERT OR REPLACE INTO population(member, trial_id) VALUES (?, ?)", (member, trial_id)
    )

  def counts(self) -> dict[str, int]:
    out = {PENDING: 0, RUNNING: 0, DONE: 0, FAILED: 0}
    out.update(dict(self._db.execute("SELECT status, COUNT(*) FROM trials GROUP BY status")))
    return out

  def lineage(self, trial_id: int) -> list[Trial]:
    """The chain of trials from a root trial to ``trial_id`` (oldest first); a
    :class:`StoreError` (one line) for parents that form a cycle (a damaged store)."""
    chain, seen = [], set()
    t = self.trial(trial_id)
    while True:
      if t.id in seen:
        raise StoreError(f"{self.path}: the parents of trial {trial_id} form a cycle (damaged)")
      seen.add(t.id)
      chain.append(t)
      if t.parent_id is None:
        return chain[::-1]
      t = self.trial(t.parent_id)

  def best(self, ranking=None) -> Trial | None:
    """The fittest finished trial (ties: the older one); ``ranking``: a
    :class:`minmaxlab.pbt.Ranking` over every finished trial's objectives."""
    if ranking is not None and ranking.kind != "scalar":
      from minmaxlab.pbt._objectives import rank_trials

      ranked = rank_trials(self.with_status(DONE), ranking)
      return ranked[0] if ranked else None
    row = self._db.execute(
      f"SELECT {_COLUMNS} FROM trials WHERE status=? AND fitness IS NOT NULL"
      " ORDER BY fitness DESC, id LIMIT 1",
      (DONE,),
    ).fetchone()
    return None if row is None else _trial(row, self.workdir)
