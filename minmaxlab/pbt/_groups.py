"""Process groups of local workers: each runs in a session of its own, so that it ends with
every process its task started (a trial past its time limit, a worker that died or is
stopped)."""

from __future__ import annotations

import os
import signal


def kill_group(pgid: int) -> None:
  """SIGKILL what is left of the process group ``pgid`` (an ended worker's: its task's
  children)."""
  try:
    os.killpg(pgid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


def end_own_group() -> None:
  """SIGKILL every other process of this process's group when it leads one (a local worker:
  ``Supervisor`` starts each in a session of its own); nothing otherwise (an external
  worker shares its group with the shell or job that started it)."""
  me = os.getpid()
  if os.getpgrp() != me or not os.path.isdir("/proc"):
    return
  for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) != me:
      try:
        if os.getpgid(int(entry)) == me:
          os.kill(int(entry), signal.SIGKILL)
      except OSError:  # ended meanwhile, or not ours to see
        pass
