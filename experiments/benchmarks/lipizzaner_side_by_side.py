"""Lipizzaner itself and minmaxlab's equal-work generation, on this host, one run (one JSON line).

The project ships no Lipizzaner code: point ``--lipizzaner`` at your own checkout of
``ALFA-group/lipizzaner-gan`` and ``--python`` at an interpreter that has its requirements
(PyTorch and torchvision on the CPU, flask, deap, netaddr, netifaces, pymongo, losswise,
pyyaml, scipy, matplotlib). This script then runs the protocol of
``experiments/coevolution/README.md`` ("Lipizzaner itself, side by side"):

1. copies the checkout's ``src/`` into ``--workdir`` (your checkout is not touched) and makes
   the two changes today's torchvision needs: one-value ``Normalize`` mean and std in
   ``data/data_loader.py`` and ``training/mixture/score_factory.py`` (the old torchvision used
   only the first of the three 0.5s for 1-channel images);
2. writes a config from its ``configuration/lipizzaner-gan/mnist.yml``: ``--iterations``
   iterations, ``cuda: False``, no final master score, the output under ``--workdir``, and
   the 2x2 grid of local clients of ``configuration/general.yml`` (ports 5000-5003, which
   Lipizzaner's clients take in order; they must be free);
3. puts MNIST-format IDX files (``--idx``; default Debian's Fashion-MNIST, the same format
   and shapes as MNIST, which is all the timing depends on) where torchvision's ``MNIST``
   looks (``<output>/data/MNIST/raw/``), since nothing can be downloaded;
4. starts the four clients one after another (each once its port listens), then the master,
   every process in its own process group with ``OMP_NUM_THREADS=1`` and
   ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (Lipizzaner pickles whole objects between clients),
   samples each client's CPU seconds from ``/proc/<pid>/stat`` four times a second, and stops
   every process group once each client has logged the last batch of the last iteration
   (or on any failure, timeout or signal);
5. reads each client's log lines ``Iteration k, Batch b/N`` (``b`` from 0): an iteration's
   seconds are from the first batch of iteration ``k`` to that of ``k + 1`` (``iterations - 1``
   intervals per client), its CPU seconds the four clients' CPU over the same span;
6. runs ``coevolution_throughput.py --floor`` right after on the same host (or reads a
   JSON line of it from ``--floor_json``) and divides: Lipizzaner's median seconds per
   iteration by the library's median seconds per generation of the same schedule and
   fitness work, and the CPU seconds likewise.

Lipizzaner's MNIST mixture score (FID through its bundled classifier) stays on, seconds of
each client's iteration that the floor generation leaves out: the JSON gives them (from its
``Calculating FID`` log line to the next) and the ratio without them.

  python experiments/benchmarks/lipizzaner_side_by_side.py --lipizzaner ~/lipizzaner-gan \\
      --python ~/lipizzaner-venv/bin/python [--iterations 4] [--idx DIR] [--workdir DIR]
      [--floor_generations 9] [--floor_json FILE] [--timeout_s 3600]

Without ``--lipizzaner`` it prints a JSON line that says it skipped (``dev.py bench`` runs
every script here). Errors in the input (a missing checkout, an interpreter without torch, a
busy port, source that cannot be patched) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minmaxlab import runner

HERE = Path(__file__).resolve().parent
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
IDX_FILES = (
  "train-images-idx3-ubyte",
  "train-labels-idx1-ubyte",
  "t10k-images-idx3-ubyte",
  "t10k-labels-idx1-ubyte",
)
PORTS = range(5000, 5004)  # Lipizzaner's DEFAULT_CLIENT_PORT onwards, one per client
NORMALIZE = re.compile(
  r"Normalize\(\s*mean=\(0\.5,\s*0\.5,\s*0\.5\),\s*std=\(0\.5,\s*0\.5,\s*0\.5\)\s*\)"
)
PATCHED = ("data/data_loader.py", "training/mixture/score_factory.py")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")  # Lipizzaner's log lines
LOG_LINE = re.compile(STAMP.pattern + r".*Iteration (\d+), Batch (\d+)/(\d+)\s*$")


def _unix(stamp: str) -> float:
  """Seconds since the epoch of a log timestamp (Python logging's local ``asctime``)."""
  return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class InputError(Exception):
  """A problem with the user's input: one line, exit status 2."""


# ---------------------------------------------------------------- preparation
def source_dir(checkout: Path) -> Path:
  """The checkout's ``src/`` (or the checkout itself when it is that folder)."""
  for src in (checkout / "src", checkout):
    if (src / "main.py").is_file() and (src / "configuration/lipizzaner-gan/mnist.yml").is_file():
      return src
  raise InputError(
    f"--lipizzaner {checkout}: no Lipizzaner checkout there (want src/main.py and"
    " src/configuration/lipizzaner-gan/mnist.yml of ALFA-group/lipizzaner-gan)"
  )


def copy_and_patch(src: Path, dest: Path) -> None:
  ignore = shutil.ignore_patterns("lipizzaner-dashboard", "mnist-generators", "*.pt", ".git")
  shutil.copytree(src, dest, ignore=ignore)
  for rel in PATCHED:
    path = dest / rel
    text = path.read_text() if path.is_file() else ""
    new, n = NORMALIZE.subn("Normalize(mean=(0.5,), std=(0.5,))", text)
    if n == 0:
      raise InputError(
        f"--lipizzaner: cannot patch {rel} (no three-value Normalize(mean=..., std=...) in it):"
        " its source differs from the one this protocol was written for (commit f411cb5)"
      )
    path.write_text(new)


def _sub_all(pattern: str, repl: str, text: str, what: str) -> str:
  new, n = re.subn(pattern, repl, text, flags=re.MULTILINE)
  if n == 0:
    raise InputError(f"--lipizzaner: mnist.yml/general.yml has no {what}; cannot write the config")
  return new


def write_config(src: Path, output_dir: Path, iterations: int) -> Path:
  """``configuration/lipizzaner-gan/side_by_side.yml`` (and its ``general`` include)."""
  conf = src / "configuration"
  general = (conf / "general.yml").read_text() if (conf / "general.yml").is_file() else ""
  general = _sub_all(r"^output_dir:.*$", f"output_dir: {output_dir}", general, "output_dir")
  ports = f"port: {PORTS[0]}-{PORTS[-1]}"
  general = _sub_all(r"^(\s*)port:.*$", rf"\g<1>{ports}", general, "client port range")
  (conf / "general_side_by_side.yml").write_text(general)
  mnist = (conf / "lipizzaner-gan/mnist.yml").read_text()
  mnist = _sub_all(
    r"^(\s*)n_iterations:.*$", rf"\g<1>n_iterations: {iterations}", mnist, "n_iterations"
  )
  mnist = _sub_all(r"^(\s*)n_batches:.*$", r"\g<1>n_batches: 0", mnist, "n_batches")
  mnist = _sub_all(r"^(\s*)cuda:.*$", r"\g<1>cuda: False", mnist, "cuda")
  mnist = _sub_all(
    r"^(\s*)calculate_score:.*$", r"\g<1>calculate_score: False", mnist, "master calculate_score"
  )
  mnist = _sub_all(
    r"!include \.\./general\.yml", "!include ../general_side_by_side.yml", mnist, "general include"
  )
  path = conf / "lipizzaner-gan/side_by_side.yml"
  path.write_text(mnist)
  return path


def place_idx(idx: Path, output_dir: Path) -> None:
  raw = output_dir / "data/MNIST/raw"
  raw.mkdir(parents=True, exist_ok=True)
  for name in IDX_FILES:
    plain, packed = idx / name, idx / f"{name}.gz"
    if plain.is_file():
      shutil.copyfile(plain, raw / name)
    elif packed.is_file():
      with gzip.open(packed, "rb") as f_in, open(raw / name, "wb") as f_out:
        shutil.copyfileobj(f_in, f_out)
    else:
      raise InputError(f"--idx {idx}: no {name} (or {name}.gz) there")


def check_interpreter(python: str, modules: str) -> None:
  try:
    out = subprocess.run(
      [python, "-c", f"import {modules}"],
      capture_output=True,
      text=True,
      timeout=300,
    )
  except (OSError, subprocess.TimeoutExpired) as e:
    raise InputError(f"--python {python}: cannot run it ({e})") from None
  if out.returncode != 0:
    last = (out.stderr.strip().splitlines() or ["?"])[-1]
    raise InputError(f"--python {python}: Lipizzaner's requirements are missing there ({last})")


def check_ports_free() -> None:
  for port in PORTS:
    with socket.socket() as s:
      s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not in use
      try:
        s.bind(("127.0.0.1", port))
      except OSError:
        raise InputError(
          f"port {port} is in use: Lipizzaner's clients take ports {PORTS[0]}-{PORTS[-1]}"
        ) from None


# ---------------------------------------------------------------- the run
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


def floor_result(args) -> dict:
  if args.floor_json:
    try:
      lines = Path(args.floor_json).read_text().strip().splitlines()
      return json.loads(lines[-1])
    except (OSError, ValueError, IndexError) as e:
      raise InputError(
        f"--floor_json {args.floor_json}: not a JSON line of --floor ({e})"
      ) from None
  cmd = [sys.executable, str(HERE / "coevolution_throughput.py"), "--floor", "--strategies", "map"]
  cmd += ["--generations", str(args.floor_generations)]
  group = Group()
  log = Path(args.workdir) / "floor.out"
  try:
    p = group.start(cmd, Path.cwd(), dict(os.environ), log)
    if p.wait() != 0:
      tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
      raise RuntimeError(f"the floor benchmark failed ({p.returncode}): {tail[0]}")
  finally:
    group.stop()
  return json.loads(log.read_text().strip().splitlines()[-1])


def library_figures(floor: dict) -> dict:
  try:
    prog = floor["programs"]["map_s600_d2"]
    return {
      "source": "coevolution_throughput.py --floor (map cells, schedule=lipizzaner, d_every=2)",
      "median_s": prog["median_s"],
      "cpu_s_median": prog["cpu_s_median"],
      "matmul_gflop_per_generation": prog["matmul_gflop_per_generation"],
      "ratio_to_floor_median": prog.get("ratio_to_floor_median"),
      "cpu_model": floor.get("machine", {}).get("cpu_model"),
    }
  except (KeyError, TypeError):
    raise InputError(
      "--floor_json: no programs.map_s600_d2 in it (run --floor --strategies map)"
    ) from None


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--lipizzaner", default=None, help="your checkout of ALFA-group/lipizzaner-gan")
  ap.add_argument(
    "--python", default="python3", help="an interpreter with Lipizzaner's requirements"
  )
  ap.add_argument("--iterations", type=int, default=4)
  ap.add_argument("--idx", default=str(DEBIAN_FASHION_MNIST), help="MNIST-format IDX files")
  ap.add_argument("--workdir", default=None, help="scratch folder (default: a new temporary one)")
  ap.add_argument("--floor_generations", type=int, default=9)
  ap.add_argument("--floor_json", default=None, help="a JSON line of --floor instead of a new run")
  ap.add_argument("--timeout_s", type=float, default=3600.0)
  ap.add_argument(
    "--check_imports",
    default="torch, torchvision, flask, yaml",
    help="what --python must import before anything starts",
  )
  args = ap.parse_args(argv)
  if args.lipizzaner is None:  # e.g. under `dev.py bench`, which runs every script here
    skipped = "no --lipizzaner checkout given (the project ships no Lipizzaner code)"
    print(json.dumps({"benchmark": "lipizzaner_side_by_side", "skipped": skipped}))
    return 0
  if args.iterations < 2:
    raise InputError(f"--iterations {args.iterations}: need at least 2 (one interval per client)")
  checkout = Path(args.lipizzaner).expanduser()
  src = source_dir(checkout)
  check_interpreter(args.python, args.check_imports)
  check_ports_free()
  args.workdir = args.workdir or tempfile.mkdtemp(prefix="lipizzaner_side_by_side_")
  work = Path(args.workdir).resolve()
  work.mkdir(parents=True, exist_ok=True)
  run_src = work / "src"
  if run_src.exists():
    raise InputError(f"--workdir {work}: already holds a src/ (give a new folder)")
  copy_and_patch(src, run_src)
  output_dir = work / "output"
  config = write_config(run_src, output_dir, args.iterations)
  place_idx(Path(args.idx), output_dir)
  commit = subprocess.run(
    ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
  ).stdout.strip()
  load_before = list(os.getloadavg())
  t0 = datetime.datetime.now(datetime.UTC)
  progress, samples, wall = run_lipizzaner(
    args.python, run_src, config, work, args.iterations, args.timeout_s
  )
  fids = [fid_seconds(work / f"client{i}.log") for i in range(len(PORTS))]
  lip = summarise(progress, samples, args.iterations, fids)
  lip.update(commit=commit or None, run_wall_s=round(wall, 1))
  t1 = datetime.datetime.now(datetime.UTC)
  lib = library_figures(floor_result(args))
  print(
    json.dumps(
      {
        "benchmark": "lipizzaner_side_by_side",
        "machine": {
          "cpu_model": runner.cpu_model(),
          "cpus": os.cpu_count(),
          "python": platform.python_version(),
        },
        "lipizzaner_utc": [t0.isoformat(timespec="seconds"), t1.isoformat(timespec="seconds")],
        "load_average_before": load_before,
        "work": "2x2 grid, MNIST MLP GANs, a full epoch per iteration; Lipizzaner's mixture FID on"
        " (lipizzaner.fid_s_median of each client's iteration), the floor generation without it",
        "lipizzaner": lip,
        "minmaxlab": lib,
        "wall_ratio": round(lip["median_s"] / lib["median_s"], 2),
        "cpu_ratio": round(lip["client_cpu_s_per_generation"] / lib["cpu_s_median"], 2),
        "wall_ratio_without_fid": (
          round(lip["median_s_without_fid"] / lib["median_s"], 2)
          if lip["median_s_without_fid"]
          else None
        ),
      }
    )
  )
  return 0


def _terminate(signum, frame):
  raise SystemExit(128 + signum)  # runs the finally blocks that stop the process groups


if __name__ == "__main__":
  signal.signal(signal.SIGTERM, _terminate)
  try:
    sys.exit(main())
  except KeyboardInterrupt:
    print(
      "lipizzaner_side_by_side: interrupted; every process it started was stopped", file=sys.stderr
    )
    sys.exit(130)
  except InputError as e:
    print(f"lipizzaner_side_by_side: {e}", file=sys.stderr)
    sys.exit(2)
  except RuntimeError as e:
    print(f"lipizzaner_side_by_side: {e}", file=sys.stderr)
    sys.exit(1)
