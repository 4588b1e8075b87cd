"""The one benchmark harness of ``experiments/benchmarks``: interleaved repeats, process CPU
and wall seconds per repeat, the host, and one JSON line per result.

Every script of this folder measures with these pieces and keeps only what it measures:

* :func:`interleave` runs several cases' repeats interleaved (case A, case B, ..., A, B, ...:
  a change of load hits every case alike), after ``warmup`` untimed rounds, and returns every
  repeat of every case (:class:`Repeat`: wall seconds, this process's CPU seconds over all its
  threads, and the 1-minute load average after it);
* :func:`summary` turns a case's repeats into JSON fields: every repeat listed, medians;
* :func:`host` describes the machine (CPU model, the vector-instruction flags that change XLA's
  kernels, cores, load average, JAX and Python versions, ``XLA_FLAGS``);
* :func:`emit` prints one JSON line (and appends it to a file when asked);
* :func:`compile_timed`, :func:`xla_memory`, :func:`tree_bytes`, :func:`peak_rss_bytes`:
  the compile and memory facts a result carries.

A ratio between two cases is taken repeat by repeat (:func:`paired_ratios`): both members of a
pair ran next to each other, under the same load.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# The /proc/cpuinfo flags that change which kernels XLA's CPU backend emits.
VECTOR_FLAGS = (
  "sse4_2",
  "avx",
  "avx2",
  "fma",
  "avx512f",
  "avx512bw",
  "avx512vl",
  "avx512_vnni",
  "avx512_bf16",
  "avx512_fp16",
  "amx_tile",
  "amx_bf16",
)


class Repeat(NamedTuple):
  """One timed call: wall seconds, process CPU seconds (all threads), 1-minute load after."""

  wall_s: float
  cpu_s: float
  load_1min: float


def _cpuinfo() -> tuple[str, list[str]]:
  model, flags = "", []
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name") and not model:
          model = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not flags:
          flags = line.split(":", 1)[1].split()
  except OSError:
    pass
  return model or platform.processor() or platform.machine(), flags


def host() -> dict:
  """The machine a result was measured on (no host name, no user)."""
  import jax
  import jaxlib

  model, flags = _cpuinfo()
  try:
    usable = len(os.sched_getaffinity(0))
  except AttributeError:  # pragma: no cover - not Linux
    usable = os.cpu_count()
  return {
    "cpu_model": model,
    "cpu_vector_flags": [f for f in VECTOR_FLAGS if f in flags],
    "cpus": os.cpu_count(),
    "cpus_usable": usable,
    "load_average": [round(v, 2) for v in os.getloadavg()],
    "backend": jax.default_backend(),
    "devices": jax.device_count(),
    "jax": jax.__version__,
    "jaxlib": jaxlib.__version__,
    "python": platform.python_version(),
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
  }


def commit(checkout: str | Path = ROOT) -> str | None:
  """The short commit a checkout is at (``None`` where git cannot tell)."""
  import subprocess

  git = ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"]
  return subprocess.run(git, capture_output=True, text=True).stdout.strip() or None


def thread_settings() -> dict:
  """What sets the process's compute threads (XLA sizes its pool by the CPU affinity)."""
  names = ("XLA_FLAGS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
  out = {n: os.environ.get(n, "") for n in names}
  out["affinity_cpus"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
  return out


def block(x: Any) -> Any:
  """``x`` once every array in it is computed (``jax.block_until_ready`` when JAX is loaded)."""
  if "jax" in sys.modules:
    import jax

    return jax.block_until_ready(x)
  return x


def timed(fn: Callable[[], Any]) -> tuple[Repeat, Any]:
  """``fn()`` timed until its arrays are ready: ``(Repeat, result)``."""
  t0, c0 = time.perf_counter(), time.process_time()
  out = block(fn())
  wall, cpu = time.perf_counter() - t0, time.process_time() - c0
  return Repeat(wall, cpu, os.getloadavg()[0]), out


def interleave(
  cases: Mapping[str, Callable[[int], Any]],
  repeats: int,
  warmup: int = 1,
  progress: Callable[[str], None] | None = None,
) -> dict[str, list[Repeat]]:
  """Every case's ``repeats`` timed calls, interleaved; each call gets the round number
  (``warmup`` untimed rounds first: round ``r`` of a timed call is ``r >= warmup``).

  Round ``r`` runs the cases in order rotated by ``r`` positions, so no case always follows
  the same one. Returns ``{case: [Repeat, ...]}`` in the order the repeats ran.
  """
  names = list(cases)
  out: dict[str, list[Repeat]] = {n: [] for n in names}
  for r in range(warmup + repeats):
    k = r % len(names) if names else 0
    for name in names[k:] + names[:k]:
      rep, _ = timed(lambda name=name: cases[name](r))
      if r >= warmup:
        out[name].append(rep)
    if progress is not None and r >= warmup:
      progress(f"round {r - warmup}: " + ", ".join(f"{n} {out[n][-1].wall_s:.3f}s" for n in names))
  return out


def summary(repeats: list[Repeat], digits: int = 4) -> dict:
  """JSON fields of one case: every repeat's wall and CPU seconds and load, and the medians."""
  wall = [r.wall_s for r in repeats]
  cpu = [r.cpu_s for r in repeats]
  return {
    "repeats": len(repeats),
    "wall_s": [round(v, digits) for v in wall],
    "cpu_s": [round(v, digits) for v in cpu],
    "load_1min": [round(r.load_1min, 2) for r in repeats],
    "wall_s_median": round(float(np.median(wall)), digits) if wall else None,
    "cpu_s_median": round(float(np.median(cpu)), digits) if cpu else None,
  }


def paired_ratios(a: list[Repeat], b: list[Repeat], digits: int = 4) -> dict:
  """Wall-time ratios ``a / b`` repeat by repeat (both ran in the same round), and their median."""
  r = [x.wall_s / y.wall_s for x, y in zip(a, b, strict=True)]
  return {"ratios": [round(v, digits) for v in r], "median": round(float(np.median(r)), digits)}


def compile_timed(jitted, *args) -> tuple[Any, dict]:
  """``jitted.lower(*args).compile()`` timed: ``(compiled, {"lower_s", "compile_s",
  "compile_cpu_s"})``; ``compile_s`` covers tracing, lowering and XLA."""
  t0, c0 = time.perf_counter(), time.process_time()
  lowered = jitted.lower(*args)
  t1 = time.perf_counter()
  compiled = lowered.compile()
  t2, c2 = time.perf_counter(), time.process_time()
  return compiled, {
    "lower_s": round(t1 - t0, 3),
    "compile_s": round(t2 - t0, 3),
    "compile_cpu_s": round(c2 - c0, 3),
  }


def xla_memory(compiled) -> dict:
  """XLA's buffer sizes of a compiled program (bytes; ``{}`` where XLA does not say)."""
  mem = compiled.memory_analysis()
  if mem is None:
    return {}
  fields = ("temp", "argument", "output", "alias", "generated_code")
  return {f"xla_{f}_bytes": int(getattr(mem, f"{f}_size_in_bytes", 0)) for f in fields}


def tree_bytes(tree: Any) -> int:
  """Bytes of every array leaf of ``tree``."""
  import jax

  return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree) if hasattr(x, "dtype")))


def peak_rss_bytes() -> int:
  """This process's peak resident set size (Linux reports KiB)."""
  return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def emit(record: Mapping, path: str | Path | None = None, stream=None) -> str:
  """``record`` as one JSON line on ``stream`` (stdout), appended to ``path`` too if given."""
  line = json.dumps(record, separators=(", ", ": "))
  print(line, file=stream or sys.stdout, flush=True)
  if path is not None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
      f.write(line + "\n")
  return line


def read_lines(path: str | Path) -> list[dict]:
  """The JSON lines of ``path`` (``[]`` when it does not exist; blank lines skipped)."""
  p = Path(path)
  if not p.exists():
    return []
  return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def runs_block(results: Path, files, render: Callable[[str, dict], list[str]]) -> str:
  """A docs block of every committed run: ``render(file name, record)`` gives each JSON line's
  markdown lines; the runs are separated by a blank line ("No run is committed yet." when the
  files hold none)."""
  lines = []
  for name in files:
    for record in read_lines(Path(results) / name):
      lines += [*render(name, record), ""]
  return "\n".join(lines).rstrip() + "\n" if lines else "No run is committed yet.\n"


def user_error(prog: str, text: str) -> int:
  """A benchmark's bad input: one line ``prog: text`` on stderr; the exit status 2."""
  print(f"{prog}: {text}", file=sys.stderr)
  return 2


def note_load(load_1min: float, cpus: int | None = None) -> str:
  """A sentence on how busy the host was (the 1-minute load against the cores)."""
  cpus = cpus or os.cpu_count() or 1
  if load_1min > 0.75 * cpus:
    return f"loaded host: 1-minute load {load_1min:.1f} on {cpus} cores; wall times may vary 2x"
  return f"quiet host: 1-minute load {load_1min:.1f} on {cpus} cores"


def run_child(
  cmd: list[str], timeout: float, env: Mapping | None = None, cwd: str | Path | None = None
) -> tuple[int, str, str]:
  """Run ``cmd`` in its own process group; on timeout or any exception the whole group
  (e.g. ``mpirun`` and its ranks) is killed. Returns ``(returncode, stdout, stderr)``;
  a timeout returns ``(-9, stdout so far, "timeout after ...")``."""
  import signal
  import subprocess

  proc = subprocess.Popen(
    cmd,
    env=None if env is None else dict(env),
    cwd=cwd,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    stdin=subprocess.DEVNULL,
    text=True,
    start_new_session=True,
  )
  try:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    return -9, out, f"timeout after {timeout:.0f} s"
  except BaseException:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    raise


def timed_child(
  cmd: list[str], timeout: float, env: Mapping | None = None, cwd: str | Path | None = None
) -> tuple[int, str, str, float, float]:
  """:func:`run_child` timed: ``(returncode, stdout, stderr, CPU s, wall s)``, the CPU seconds
  (user + system) of the child and of the processes it waited for (``RUSAGE_CHILDREN``)."""
  import resource

  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  rc, out, err = run_child(cmd, timeout, env=env, cwd=cwd)
  wall = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  return rc, out, err, cpu, wall


def result_line(stdout: str, prefix: str = "RESULT ") -> dict | None:
  """The JSON after the last ``prefix`` line of a child's stdout (``None`` if there is none)."""
  found = None
  for line in stdout.splitlines():
    if line.startswith(prefix):
      found = json.loads(line[len(prefix) :])
  return found
