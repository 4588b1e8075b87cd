"""Child processes in tests: their own process group, killed whole on timeout or failure.

Every helper starts the child with ``start_new_session=True`` (a new process
group), so ``os.killpg`` ends it with everything it started (``mpirun`` ranks,
PBT workers, ``jax.distributed`` peers), and a timeout or an exception in the
test never leaves a process behind. Timeouts are scaled by
``MINMAXLAB_TEST_TIMEOUT_SCALE`` (default 1; raise it on a loaded machine).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scaled(seconds: float) -> float:
  return seconds * float(os.environ.get("MINMAXLAB_TEST_TIMEOUT_SCALE", "1"))


def start(cmd, cwd=ROOT, env=None, **kw) -> subprocess.Popen:
  """``Popen`` in a new process group (see :func:`kill_group`)."""
  return subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=True, **kw)


def kill_group(proc: subprocess.Popen) -> None:
  """SIGKILL the child's whole process group and reap the child."""
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass
  try:
    proc.wait(timeout=30)
  except subprocess.TimeoutExpired:
    pass
  wait_gone(group_members(proc.pid))
  for stream in (proc.stdout, proc.stderr, proc.stdin):
    if stream is not None:
      stream.close()


def run(cmd, timeout: float, cwd=ROOT, env=None, input=None) -> subprocess.CompletedProcess:
  """``subprocess.run(capture_output=True, text=True)`` whose timeout (scaled) or
  any exception kills the whole process group before raising."""
  proc = start(
    cmd,
    cwd=cwd,
    env=env,
    stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    out, err = proc.communicate(input=input, timeout=scaled(timeout))
  except BaseException:
    kill_group(proc)
    raise
  try:  # the child is done; anything it left in its group goes too
    os.killpg(proc.pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass
  wait_gone(group_members(proc.pid))
  return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _stat_fields(pid: int) -> list[str]:
  """``/proc/PID/stat`` after the command name: state, ppid, pgrp, ... (``[]``: gone)."""
  try:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
  except (OSError, IndexError):
    return []


def group_members(pgid: int) -> list[int]:
  """Live processes (Linux ``/proc``) of process group ``pgid``, zombies left out (none
  where there is no ``/proc``)."""
  out = []
  if not Path("/proc").is_dir():
    return out
  for p in Path("/proc").iterdir():
    if p.name.isdigit():
      fields = _stat_fields(int(p.name))
      if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in "ZX":
        out.append(int(p.name))
  return sorted(out)


def wait_gone(pids, timeout: float = 10.0) -> list[int]:
  """Wait until every process of ``pids`` has ended (or is a zombie): a SIGKILLed process
  still runs its exit (freeing a JAX process's memory takes a while on a loaded host), and a
  check for processes left behind must not catch it dying. Returns those still alive after
  ``timeout`` seconds."""
  deadline = time.monotonic() + timeout
  alive = list(pids)
  while True:
    alive = [pid for pid in alive if _state(pid) not in "ZX"]
    if not alive or time.monotonic() >= deadline:
      return alive
    time.sleep(0.02)


def kill_and_wait(pids, timeout: float = 10.0) -> list[int]:
  """SIGKILL ``pids`` and :func:`wait_gone` for them."""
  for pid in pids:
    try:
      os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass
  return wait_gone(pids, timeout)


def _cmdline(pid: int) -> list[str]:
  try:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
  except OSError:
    return []
  return raw.decode(errors="replace").split("\0")


def pids_with_args(*needles: str, outermost: bool = False) -> list[int]:
  """Live processes (Linux ``/proc``) whose command line contains every needle.

  ``outermost``: leave out a process whose parent matches too. A process that forks a helper
  (``ctypes.util.find_library`` runs ``ldconfig -p``) has a child with its own command line
  until the child's ``exec``, so counting processes needs this."""
  out = {}
  for p in Path("/proc").iterdir():
    if p.name.isdigit() and int(p.name) != os.getpid():
      args = _cmdline(int(p.name))
      fields = _stat_fields(int(p.name))
      if all(any(n in a for a in args) for n in needles) and fields and fields[0] != "Z":
        out[int(p.name)] = int(fields[1])
  return sorted(pid for pid, ppid in out.items() if not (outermost and ppid in out))


def _state(pid: int) -> str:
  fields = _stat_fields(pid)
  return fields[0] if fields else "Z"


def pids_with_env(name: str, value: str) -> list[int]:
  """Live processes (Linux ``/proc``, this user's) whose environment has ``name=value``."""
  want = f"{name}={value}".encode()
  out = []
  for p in Path("/proc").iterdir():
    if not p.name.isdigit() or int(p.name) == os.getpid():
      continue
    try:
      env = (p / "environ").read_bytes().split(b"\0")
    except OSError:
      continue
    if want in env and _state(int(p.name)) != "Z":
      out.append(int(p.name))
  return sorted(out)
