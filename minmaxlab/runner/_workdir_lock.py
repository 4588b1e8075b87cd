"""One process per workdir: an advisory lock (``fcntl.flock``) on ``<workdir>/.lock``.

Every command that writes a workdir takes it (GAN and coevolution runs, the PBT
controller); a second one stops with one line naming the holder's pid. The kernel drops a
``flock`` when its process ends, however it ends, so a lock left by a dead process is
simply taken. The lock is per process: taking it again in the same process only counts.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".lock"  # in the workdir; holds the pid of the process holding the lock
_HELD: dict[str, list] = {}  # workdir -> [file descriptor, times taken, made the lock file]
_CREATED: set[str] = set()  # workdirs this process made (lock_workdir)


class WorkdirBusy(RuntimeError):
  """Another process holds the workdir's lock."""


def _holder(fd: int) -> str:
  os.lseek(fd, 0, os.SEEK_SET)
  text = os.read(fd, 64).decode(errors="replace").strip()
  return text if text.isdigit() else "?"


def _folder(key: str) -> bool:
  """Make the workdir folder; whether this call made it (``mkdir`` is atomic: of several
  processes making it at once exactly one is told so). A path that is a file, or empty, is
  a ``ValueError`` naming it."""
  path = Path(key)
  try:
    path.mkdir(parents=True)
    return True
  except FileExistsError:
    if not path.is_dir():
      raise ValueError(
        f"the workdir {key} is a file, not a folder; use another --workdir"
      ) from None
    return False


def _same_file(fd: int, path: Path) -> bool:
  """Whether ``fd`` is still the file at ``path`` (not unlinked or replaced meanwhile)."""
  try:
    st = os.stat(path)
  except FileNotFoundError:
    return False
  own = os.fstat(fd)
  return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _open_lock(path: Path) -> tuple[int, bool]:
  """The lock file's descriptor, and whether this call created the file."""
  try:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
  except FileExistsError:
    return os.open(path, os.O_RDWR), False


def lock_workdir(workdir: str | os.PathLike) -> bool:
  """Take ``workdir``'s lock for this process (creating the folder), until
  :func:`unlock_workdir` or the process ends; :class:`WorkdirBusy` (one line naming the
  holder's pid) if another process holds it. Returns whether this process created the
  folder (so a failed command removes only a folder it made, see ``experiments._cli``).

  The lock is taken before anything is decided about the workdir: a refused process has
  created nothing (except, at most, an empty folder and its lock file that another process
  then took). A lock file unlinked between ``open`` and ``flock`` (a failed command removing
  the empty folder it made) is not trusted: the lock is taken again on the file now there.
  """
  if not os.fspath(workdir).strip():
    raise ValueError("the workdir is empty; give a folder (--workdir=<folder>)")
  key = str(Path(workdir).expanduser().resolve())
  if key in _HELD:
    _HELD[key][1] += 1
    return key in _CREATED
  for _ in range(100):
    if _folder(key):
      _CREATED.add(key)
    try:
      fd, made = _open_lock(Path(key) / LOCK_FILE)
    except FileNotFoundError:  # the folder was removed meanwhile: make it again
      continue
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      pid = _holder(fd)
      os.close(fd)
      raise WorkdirBusy(
        f"{key} is in use by process {pid} (one command per workdir); wait for it to end or"
        " use another --workdir"
      ) from None
    if _same_file(fd, Path(key) / LOCK_FILE):
      break
    os.close(fd)  # a lock on a removed file locks nothing
  else:
    raise WorkdirBusy(f"{key}: its lock file keeps being replaced; use another --workdir")
  os.ftruncate(fd, 0)
  os.write(fd, f"{os.getpid()}\n".encode())
  _HELD[key] = [fd, 1, made]
  return key in _CREATED


def unlock_workdir(workdir: str | os.PathLike) -> None:
  """Give back one :func:`lock_workdir` of this process (the lock is released at the last;
  a lock file this process created is removed first, so a command leaves the workdir's files
  as it found them; a process that opened the removed file finds it replaced and retries)."""
  key = str(Path(workdir).expanduser().resolve())
  held = _HELD.get(key)
  if held is None:
    return
  held[1] -= 1
  if held[1] == 0:
    del _HELD[key]
    path = Path(key) / LOCK_FILE
    if held[2] and _same_file(held[0], path):  # a lock file it made goes, while still held
      path.unlink(missing_ok=True)
    os.close(held[0])


@contextmanager
def workdir_lock(workdir: str | os.PathLike) -> Iterator[bool]:
  """:func:`lock_workdir` for the block (``as created``: whether this process made the folder)."""
  created = lock_workdir(workdir)
  try:
    yield created
  finally:
    unlock_workdir(workdir)
