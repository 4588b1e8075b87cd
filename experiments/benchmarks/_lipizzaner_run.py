"""Running Lipizzaner's clients and master (``lipizzaner_side_by_side.py``): process groups,
per-client CPU samples from ``/proc``, and the seconds per iteration read off the clients' logs."""

from __future__ import annotations

import datetime
import os
import re
import signal
import socket
import statistics
import subprocess
import time
from pathlib import Path

PORTS = range(5000, 5004)  # Lipizzaner's DEFAULT_CLIENT_PORT onwards, one per client
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")  # Lipizzaner's log lines
LOG_LINE = re.compile(STAMP.pattern + r".*Iteration (\d+), Batch (\d+)/(\d+)\s*$")


def _unix(stamp: str) -> float:
  """Seconds since the epoch of a log timestamp (Python logging's local ``asctime``)."""
  return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class Group:
  """Child processes, each in its own process group; :meth:`stop` ends them all."""

  def __init__(self):
    self.procs: list[subprocess.Popen] = []

  def start(self, cmd, cwd, env, log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:
      p = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=f,
        stderr=subprocess.STDOUT,
        start_new_session=True,
      )
    self.procs.append(p)
    return p

  def stop(self) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
      for p in self.procs:
        try:
          os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
          pass
      deadline = time.monotonic() + 5
      for p in self.procs:
        try:
          p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
          pass


def cpu_seconds(pid: int) -> float | None:
  try:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
  except (OSError, IndexError):
    return None
  return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_listening(port: int, proc: subprocess.Popen, timeout: float, log: Path) -> None:
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if proc.poll() is not None:
      tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
      raise RuntimeError(f"client for port {port} exited ({proc.returncode}): {tail[0]}")
    with socket.socket() as s:
      if s.connect_ex(("127.0.0.1", port)) == 0:
        return
    time.sleep(0.2)
  raise RuntimeError(f"no client listened on port {port} within {timeout:.0f} s")


def batches(log: Path) -> list[tuple[float, int, int, int]]:
  """``(unix time, iteration, batch, batches per iteration)`` of each progress line."""
  out = []
  for line in log.read_text(errors="replace").splitlines():
    m = LOG_LINE.match(line)
    if m:
      t = _unix(m[1])
      out.append((t, int(m[2]), int(m[3]), int(m[4])))
  return out


def fid_seconds(log: Path) -> dict[int, float]:
  """Seconds of each iteration's mixture score: from Lipizzaner's ``Calculating FID/inception
  score.`` line to the next timestamped line (``Iteration=k, ...``), by the iteration before."""
  out, start, it = {}, None, 0
  for line in log.read_text(errors="replace").splitlines():
    m = STAMP.match(line)
    if not m:
      continue
    t = _unix(m[1])
    progress = LOG_LINE.match(line)
    if progress:
      it = int(progress[2])
    if start is not None:
      out[it], start = t - start, None
    elif "Calculating FID" in line:
      start = t
  return out


def run_lipizzaner(
  python: str, src: Path, config: Path, work: Path, iterations: int, timeout: float
):
  env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
  env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
  env["PYTHONUNBUFFERED"] = "1"
  group = Group()
  logs = [work / f"client{i}.log" for i in range(len(PORTS))]
  samples: list[tuple[float, list[float | None]]] = []
  t_start = time.time()
  try:
    clients = []
    for port, log in zip(PORTS, logs, strict=True):
      cmd = [python, "main.py", "train", "--distributed", "--client"]
      clients.append(group.start(cmd, src, env, log))
      wait_listening(port, clients[-1], min(300.0, timeout), log)
    master_cmd = [python, "main.py", "train", "--distributed", "--master", "-f", str(config)]
    master = group.start(master_cmd, src, env, work / "master.log")
    deadline = time.monotonic() + timeout
    while True:
      samples.append((time.time(), [cpu_seconds(p.pid) for p in clients]))
      progress = [batches(log) for log in logs]
      # Lipizzaner numbers the batches of an iteration 0 .. N - 1
      done = all(any(it == iterations and b >= n - 1 for _, it, b, n in rows) for rows in progress)
      if done or master.poll() == 0:  # a master that ends well has all it asked for
        break
      for p, name in [(master, "master")] + [(c, f"client {i}") for i, c in enumerate(clients)]:
        if p.poll() is not None:
          raise RuntimeError(f"Lipizzaner's {name} exited ({p.returncode}) before the last batch")
      if time.monotonic() > deadline:
        raise RuntimeError(f"Lipizzaner did not finish {iterations} iterations in {timeout:.0f} s")
      time.sleep(0.25)
  finally:
    group.stop()
  return progress, samples, time.time() - t_start


def _cpu_at(samples, client: int, t: float) -> float:
  """A client's CPU seconds at time ``t``, interpolated between the samples."""
  pts = [(ts, cpus[client]) for ts, cpus in samples if cpus[client] is not None]
  if not pts:
    raise RuntimeError(f"no CPU sample of client {client}")
  if t <= pts[0][0]:
    return pts[0][1]
  for (t0, c0), (t1, c1) in zip(pts, pts[1:], strict=False):
    if t0 <= t <= t1:
      return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1e-9)
  return pts[-1][1]


def summarise(progress, samples, iterations: int, fids=None) -> dict:
  intervals, starts, per_iteration, without_fid, fid = [], [], None, [], []
  for c, rows in enumerate(progress):
    first = {}  # the first progress line of each iteration
    for t, it, _, n in rows:
      per_iteration = n
      first.setdefault(it, t)
    missing = [k for k in range(1, iterations + 1) if k not in first]
    if missing:
      raise RuntimeError(f"a client logged no batch of iteration(s) {missing}")
    intervals += [first[k + 1] - first[k] for k in range(1, iterations)]
    if fids is not None:  # the score between iteration k's batches and k + 1's
      scored = [k for k in range(1, iterations) if k in fids[c]]
      fid += [fids[c][k] for k in scored]
      without_fid += [first[k + 1] - first[k] - fids[c][k] for k in scored]
    starts.append((first[1], first[iterations]))
  cpu = 0.0
  for i, (t0, t1) in enumerate(starts):
    cpu += (_cpu_at(samples, i, t1) - _cpu_at(samples, i, t0)) / (iterations - 1)
  return {
    "iterations": iterations,
    "batches_per_iteration": per_iteration,
    "seconds_per_iteration": [round(x, 2) for x in intervals],
    "median_s": round(statistics.median(intervals), 2),
    "min_s": round(min(intervals), 2),
    "max_s": round(max(intervals), 2),
    "client_cpu_s_per_generation": round(cpu, 2),
    "fid_s_median": round(statistics.median(fid), 2) if fid else None,
    "median_s_without_fid": round(statistics.median(without_fid), 2) if without_fid else None,
  }
