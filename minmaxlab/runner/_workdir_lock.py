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
_HELD: dict[str, list[int]] = {}  # workdir -> [file descriptor, how many times taken]


class WorkdirBusy(RuntimeError):
  """Another process holds the workdir's lock."""


def _holder(fd: int) -> str:
  os.lseek(fd, 0, os.SEEK_SET)
  text = os.read(fd, 64).decode(errors="replace").strip()
  return text if text.isdigit() else "?"


def lock_workdir(workdir: str | os.PathLike) -> None:
  """Take ``workdir``'s lock for this process (creating the folder), until
  :func:`unlock_workdir` or the process ends; :class:`WorkdirBusy` (one line naming the
  holder's pid) if another process holds it."""
  key = str(Path(workdir).expanduser().resolve())
  if key in _HELD:
    _HELD[key][1] += 1
    return
  Path(key).mkdir(parents=True, exist_ok=True)
  fd = os.open(Path(key) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    pid = _holder(fd)
    os.close(fd)
    raise WorkdirBusy(
      f"{key} is in use by process {pid} (one command per workdir); wait for it to end or"
      " use another --workdir"
    ) from None
  os.ftruncate(fd, 0)
  os.write(fd, f"{os.getpid()}\n".encode())
  _HELD[key] = [fd, 1]


def unlock_workdir(workdir: str | os.PathLike) -> None:
  """Give back one :func:`lock_workdir` of this process (the lock is released at the last)."""
  key = str(Path(workdir).expanduser().resolve())
  held = _HELD.get(key)
  if held is None:
    return
  held[1] -= 1
  if held[1] == 0:
    del _HELD[key]
    os.close(held[0])


@contextmanager
def workdir_lock(workdir: str | os.PathLike) -> Iterator[None]:
  """:func:`lock_workdir` for the block."""
  lock_workdir(workdir)
  try:
    yield
  finally:
    unlock_workdir(workdir)
