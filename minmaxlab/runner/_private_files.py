"""Folders and files that hold code this library loads (compiled programs), trusted as ssh
trusts its keys: created private (0700 folders, 0600 files), and read only from a folder and
files owned by this user and writable by no one else. Every read opens without following a
link and without blocking, and reads only a regular file (a FIFO planted in the folder is
refused, never waited on)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UntrustedFile(OSError):
  """A folder or file that may not hold code this library loads: owned by another user,
  writable by group or others, or not a regular file (folder)."""


def _mode_problem(st: os.stat_result) -> str | None:
  uid = os.geteuid() if hasattr(os, "geteuid") else st.st_uid
  if st.st_uid != uid:
    return f"owned by uid {st.st_uid}, not this user (uid {uid})"
  who = [
    name for bit, name in ((stat.S_IWGRP, "group"), (stat.S_IWOTH, "others")) if st.st_mode & bit
  ]
  if who:
    return f"writable by {' and '.join(who)} (mode {stat.S_IMODE(st.st_mode):04o})"
  return None


def folder_problem(folder: str | os.PathLike) -> str | None:
  """Why ``folder`` may not hold programs this library loads (``None``: it may): it is not a
  folder, is owned by another user or is writable by group or others. A missing folder
  has no problem (it is created private)."""
  try:
    st = os.stat(folder)
  except FileNotFoundError:
    return None
  except OSError as e:
    return f"unreadable ({type(e).__name__}: {e.strerror or e})"
  if not stat.S_ISDIR(st.st_mode):
    return "not a folder"
  return _mode_problem(st)


def make_private_folder(folder: str | os.PathLike) -> Path:
  """``folder``, created with every missing parent as 0700 (whatever the umask)."""
  path = Path(folder)
  missing = []
  for p in (path, *path.parents):
    if p.is_dir():
      break
    missing.append(p)
  for p in reversed(missing):
    try:
      os.mkdir(p, 0o700)
    except FileExistsError:
      if not p.is_dir():
        raise
      continue
    os.chmod(p, 0o700)  # the umask may have taken bits off, never added: 0700 exactly
  return path


def read_private(path: str | os.PathLike) -> bytes:
  """The bytes of ``path``, a regular file owned by this user and writable by no one else
  (else :class:`UntrustedFile`); a link or a FIFO is never followed or waited on."""
  flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
  try:
    fd = os.open(path, flags)
  except OSError as e:
    if os.path.islink(path):
      raise UntrustedFile(f"{os.fspath(path)} is a link, not a regular file") from e
    raise
  try:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
      raise UntrustedFile(f"{os.fspath(path)} is not a regular file")
    problem = _mode_problem(st)
    if problem is not None:
      raise UntrustedFile(f"{os.fspath(path)} is {problem}")
  except BaseException:
    os.close(fd)
    raise
  with os.fdopen(fd, "rb") as f:
    return f.read()


def write_private(path: str | os.PathLike, data: bytes) -> None:
  """Write ``data`` to ``path`` atomically as a 0600 file (a fresh temporary file beside it,
  then renamed over ``path``)."""
  path = Path(path)
  tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
  flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
  try:
    os.unlink(tmp)  # a leftover of a killed process with this pid (or something planted)
  except FileNotFoundError:
    pass
  fd = os.open(tmp, flags | os.O_EXCL, 0o600)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
    os.replace(tmp, path)
  except BaseException:
    try:
      os.unlink(tmp)
    except OSError:
      pass
    raise


def open_lock_file(path: str | os.PathLike) -> int:
  """A descriptor of the lock file ``path`` (created 0600), opened without following a
  link or waiting on a FIFO; :class:`UntrustedFile` if it is not a regular file."""
  flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
  fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
  if not stat.S_ISREG(os.fstat(fd).st_mode):
    os.close(fd)
    raise UntrustedFile(f"{os.fspath(path)} is not a regular file")
  return fd
