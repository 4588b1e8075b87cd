"""Time from starting the main job to its first finished generation, cold and warm.

  python experiments/benchmarks/first_generation.py [--config <config file>]

Runs the main job's command (``python -m experiments.coevolution.main``) three times in
subprocesses, each with one generation more than the last, all sharing a fresh
compilation cache folder (``MINMAXLAB_CACHE_DIR``); default config: the main job's
``experiments/coevolution/configs/ring8_3x3.py``.

* ``cold``: an empty cache, a new workdir (what the very first ``python3 dev.py main`` does);
* ``warm_new``: the cache filled, another new workdir (a rerun with e.g. another seed);
* ``warm_resume``: the cache filled, resuming the ``cold`` run's workdir (a rerun after Ctrl-C).

For each it reports the seconds from starting the process to the line of its first
generation (``to_first_generation_s``: imports, building, compiling or loading, the
generation itself), the first generation's own time from ``summary.json``, the process's
CPU seconds (``process_cpu_s``, all threads: meaningful on a loaded machine) and the
compile/cache lines printed. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cpu_seconds(pid: int) -> float | None:
  """User + system CPU seconds of a live process so far (Linux /proc), else None."""
  try:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)
  except (OSError, IndexError, ValueError):
    return None


def run_once(config: str, workdir: Path, cache: Path, generations: int) -> dict:
  cmd = [
    sys.executable,
    "-m",
    "experiments.coevolution.main",
    "--config",
    config,
    "--workdir",
    str(workdir),
    f"--config.generations={generations}",
    "--config.plot_every=0",
  ]
  env = dict(os.environ, MINMAXLAB_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
  env.pop("MINMAXLAB_RERUN", None)
  cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
  t0 = time.perf_counter()
  proc = subprocess.Popen(
    cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
  )
  first, first_cpu, lines = None, None, []
  for line in proc.stdout:
    lines.append(line.rstrip())
    if first is None and re.match(r"generation \d+/\d+", line):
      first = time.perf_counter() - t0
      first_cpu = _cpu_seconds(proc.pid)
  proc.wait()
  cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
  if proc.returncode:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n" + "\n".join(lines[-20:]))
  summary = json.loads((workdir / "summary.json").read_text())
  return {
    "to_first_generation_s": round(first, 2),
    # CPU seconds the process had used when its first generation line came (all threads;
    # None where /proc is missing): about the wall time an idle machine would take.
    "to_first_generation_cpu_s": first_cpu,
    "first_generation_own_s": round(summary["first_generation_seconds"], 2),
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
      "cold": run_once(config, tmp / "a", cache, 1),
      "warm_new": run_once(config, tmp / "b", cache, 1),
      "warm_resume": run_once(config, tmp / "a", cache, 2),
      "cache_mb": round(sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 1e6, 1),
    }
  return out


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--config", default="experiments/coevolution/configs/ring8_3x3.py")
  args = p.parse_args()
  out = measure(args.config)
  out["host"] = {
    "cpu": platform.processor() or platform.machine(),
    "cores": os.cpu_count(),
    "load_1min": round(os.getloadavg()[0], 2),
  }
  print(json.dumps(out))


if __name__ == "__main__":
  main()
