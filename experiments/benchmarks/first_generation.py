"""Time from starting the main job to its first finished generation, cold and warm.

  python experiments/benchmarks/first_generation.py [--config <config file>]

Runs the main job's command (``python -m experiments.coevolution.main``) three times in
subprocesses, all sharing a fresh compilation cache folder (``MINMAXLAB_CACHE_DIR``, with
the stored programs of :func:`minmaxlab.runner.stored_program` in it); default config: the
main job's ``experiments/coevolution/configs/ring8_3x3.py``, as configured (its generation
count, evaluation and plot periods). Each run is stopped with Ctrl-C (SIGINT) once its first
generation line is printed, as a person who has seen it would.

* ``cold``: an empty cache, a new workdir (what the very first ``python3 dev.py main`` does);
* ``warm_new``: the cache filled, another new workdir (a rerun with e.g. another seed);
* ``warm_resume``: the cache filled, resuming the ``cold`` run's workdir (a rerun after Ctrl-C).

For each it reports the seconds from starting the process to the line of its first
generation (``to_first_generation_s``: imports, building, compiling or loading, the
generation itself and its evaluation), the first generation's own time (from that line),
the process's CPU seconds (``to_first_generation_cpu_s``, ``process_cpu_s``, all threads:
meaningful on a loaded machine) and the compile/load lines printed. Prints one JSON line;
``--out`` also writes it to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.benchmarks import _harness as h  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _cpu_seconds(pid: int) -> float | None:
  """User + system CPU seconds of a live process so far (Linux /proc), else None."""
  try:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)
  except (OSError, IndexError, ValueError):
    return None


def run_once(config: str, workdir: Path, cache: Path) -> dict:
  cmd = [
    sys.executable,
    "-m",
    "experiments.coevolution.main",
    "--config",
    config,
    "--workdir",
    str(workdir),
  ]
  env = dict(os.environ, MINMAXLAB_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
  env.pop("MINMAXLAB_RERUN", None)
  cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
  t0 = time.perf_counter()
  proc = subprocess.Popen(
    cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
  )
  first, first_cpu, own, lines = None, None, None, []
  try:
    for line in proc.stdout:
      lines.append(line.rstrip())
      m = re.search(r"generation \d+/\d+ \| ([0-9.]+) s", line)  # after the bar's label
      if first is None and m:
        first = time.perf_counter() - t0
        first_cpu = _cpu_seconds(proc.pid)
        own = float(m.group(1))
        proc.send_signal(signal.SIGINT)  # seen: stop, as a person would
    proc.wait(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
  if first is None:
    raise RuntimeError(f"{' '.join(cmd)} printed no generation line:\n" + "\n".join(lines[-20:]))
  return {
    "to_first_generation_s": round(first, 2),
    # CPU seconds the process had used when its first generation line came (all threads;
    # None where /proc is missing): about the wall time an idle machine would take.
    "to_first_generation_cpu_s": first_cpu,
    "first_generation_own_s": own,
    "process_s": round(time.perf_counter() - t0, 2),
    # CPU seconds of the whole process (all threads): what the wall times above cost on a
    # machine shared with other jobs.
    "process_cpu_s": round((cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime), 2),
    "compile_lines": [x for x in lines if x.startswith(("compiled ", "loaded "))],
  }


def measure(config: str) -> dict:
  """Cold, warm (new workdir) and warm (resumed) runs of ``config`` sharing a fresh cache."""
  with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    cache = tmp / "jax-cache"
    out = {
      "benchmark": "first_generation",
      "config": config,
      "cold": run_once(config, tmp / "a", cache),
      "warm_new": run_once(config, tmp / "b", cache),
      "warm_resume": run_once(config, tmp / "a", cache),  # resumes a's checkpoint
      "cache_mb": round(sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 1e6, 1),
    }
  return out


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--config", default="experiments/coevolution/configs/ring8_3x3.py")
  p.add_argument("--out", default=None, help="also write the JSON here")
  args = p.parse_args()
  load_start = os.getloadavg()[0]
  out = measure(args.config)
  out["host"] = {
    **h.host(),
    "cpu": platform.processor() or platform.machine(),
    "cores": os.cpu_count(),
    "load_1min_start": round(load_start, 2),
    "load_1min": round(os.getloadavg()[0], 2),
  }
  h.emit(out)
  if args.out:
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
  main()
