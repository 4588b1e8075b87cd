"""The PBT store's SQLite file: its schema, its atomic creation and its WAL journal
(:class:`~minmaxlab.pbt.Store` opens and checks it)."""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
  id INTEGER PRIMARY KEY,
  member INTEGER NOT NULL,
  parent_id INTEGER,
  parent_ckpt TEXT,
  hparams TEXT NOT NULL,
  start_step INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  seed INTEGER NOT NULL,
  status TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  worker TEXT,
  lease_until REAL,
  fitness REAL,
  ckpt TEXT,
  ckpt_deleted INTEGER NOT NULL DEFAULT 0,
  processed INTEGER NOT NULL DEFAULT 0,
  created REAL,
  finished REAL,
  failures INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  objectives TEXT
);
CREATE INDEX IF NOT EXISTS trials_status ON trials(status, id);
CREATE TABLE IF NOT EXISTS population (member INTEGER PRIMARY KEY, trial_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def switch_to_wal(db: sqlite3.Connection, timeout: float) -> None:
  """``PRAGMA journal_mode=WAL``, retried for up to ``timeout`` seconds while another process
  holds the file: SQLite answers "database is locked" at once, without its busy handler, when
  two connections switch a new file's journal mode together or one is recovering the WAL (a
  monitor opening the store while the controller creates it)."""
  deadline = time.monotonic() + timeout
  while True:
    try:
      db.execute("PRAGMA journal_mode=WAL")
      return
    except sqlite3.OperationalError as err:
      if "locked" not in str(err) or time.monotonic() >= deadline:
        raise
      time.sleep(0.05)


def create_tables(db: sqlite3.Connection) -> None:
  for stmt in _SCHEMA.strip().split(";"):
    if stmt.strip():
      db.execute(stmt)


def create_file(path: Path, timeout: float) -> None:
  """Create the store file atomically: written complete under a temporary name, then linked
  to ``path`` unless another process created it first (so an existing ``pbt.sqlite`` is
  always a whole store and an empty one is damage, never a store being created)."""
  tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:6]}.tmp")
  try:
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
      switch_to_wal(db, timeout)
      create_tables(db)
    finally:
      db.close()
    _link(tmp, path)
  finally:
    tmp.unlink(missing_ok=True)


def _link(tmp: Path, path: Path) -> None:
  """``tmp`` becomes ``path`` unless ``path`` exists."""
  try:
    os.link(tmp, path)
  except FileExistsError:
    pass
  except OSError:  # a file system without hard links
    if not path.exists():
      os.replace(tmp, path)
