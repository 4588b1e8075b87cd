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
  return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _cmdline(pid: int) -> list[str]:
  try:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
  except OSError:
    return []
  return raw.decode(errors="replace").split("\0")


def pids_with_args(*needles: str) -> list[int]:
  """Live processes (Linux ``/proc``) whose command line contains every needle."""
  out = []
  for p in Path("/proc").iterdir():
    if p.name.isdigit() and int(p.name) != os.getpid():
      args = _cmdline(int(p.name))
      if all(any(n in a for a in args) for n in needles) and _state(int(p.name)) != "Z":
        out.append(int(p.name))
  return sorted(out)


def _state(pid: int) -> str:
  try:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
  except (OSError, IndexError):
    return "Z"


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
