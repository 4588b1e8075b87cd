"""What the test session's compile options cost: pytest on a few test files under each arm's
``XLA_FLAGS`` and compilation-cache threshold, side by side.

  python experiments/benchmarks/session_codegen.py [--files F,F,...] [--arms A,A,...]
      [--workers N] [--rounds 3] [--out FILE]

XLA's compile is most of the suite's CPU time, so ``tests/_xla.py`` picks the options a test
session compiles with, and tests/conftest.py which programs its compilation cache keeps.
Each round runs ``pytest -n WORKERS`` (default 0: one process) on ``--files`` once per arm,
the arms' order rotated each round, each run in a fresh process with a fresh compilation
cache folder, ``MINMAXLAB_TEST_CODEGEN=default`` (so that only the arm's flags apply) and the
arm's ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``. It records the run's CPU seconds (user
+ system of the children, ``resource.getrusage``) and wall seconds, and each arm's medians
and per-round CPU ratio to the first arm. The arms (``ARMS``; ``--arms`` picks some, the
first is the reference; default ``DEFAULT_ARMS``):

* ``fastest``: the library's ``compile="fastest"`` options (the suite's before
  ``SERIAL_CODEGEN``), programs cached when their compile takes 0.1 s or more (the
  library's threshold);
* ``fastest_serial``: those and ``--xla_cpu_parallel_codegen_split_count=1`` (the session's,
  ``tests/_xla.py``: each program's machine code generated on one thread);
* ``fastest_serial_store_all``: those, every program cached (the session's threshold, 0);
* ``session_low_effort``: those and ``JAX_DISABLE_MOST_OPTIMIZATIONS=1`` (JAX compiles each
  program at LLVM -O0 with LLVM's expensive passes off): the session's code in every file
  not marked ``optimized_code`` (tests/_xla.py).

``pytest -n 0`` runs the files in one process, so the wall seconds show the parallel split's
use on an idle host; the suite runs two workers on two cores (``--workers 2``), where the
CPU seconds count. One JSON line (``--out`` appends it to a file) with the host.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments import _report  # noqa: E402
from experiments.benchmarks import _harness  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
README = "docs/running.md"
RESULT_FILES = ("2026-12-06_session_codegen_amd_epyc_zen5.jsonl",)
TIMEOUT_S = 1800  # one pytest run; the whole process group is killed past it
FASTEST = ["--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false"]
SERIAL = [*FASTEST, "--xla_cpu_parallel_codegen_split_count=1"]  # tests/_xla.py's SESSION
ARMS = {
  "fastest": FASTEST,
  "fastest_serial": SERIAL,
  "fastest_serial_store_all": SERIAL,
  "session_low_effort": SERIAL,
}
MIN_COMPILE = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"  # runner.enable_compilation_cache
LOW_EFFORT = "JAX_DISABLE_MOST_OPTIMIZATIONS"  # tests/_xla.py's LOW_EFFORT
# the smallest compile time a program needs to be cached: the library's 0.1 s, or 0 (every
# program: the session's, tests/conftest.py)
ARM_ENV = {
  "fastest": {MIN_COMPILE: "0.1"},
  "fastest_serial": {MIN_COMPILE: "0.1"},
  "fastest_serial_store_all": {MIN_COMPILE: "0"},
  "session_low_effort": {MIN_COMPILE: "0", LOW_EFFORT: "1"},
}
DEFAULT_ARMS = ("fastest", "fastest_serial")
FILES = (
  "tests/coevolution/test_coevolution.py",
  "tests/gan/test_gan_models.py",
  "tests/analysis/test_analysis.py",
)


def run_pytest(files: list[str], flags: list[str], extra_env=None, workers: int = 0) -> dict:
  """One ``pytest -n workers`` run of ``files`` under ``flags`` and ``extra_env`` (a fresh
  cache folder): its CPU and wall seconds; it must pass."""
  with tempfile.TemporaryDirectory(prefix="minmaxlab-codegen-") as cache:
    env = dict(os.environ, XLA_FLAGS=" ".join(flags), MINMAXLAB_CACHE_DIR=cache)
    env.update(extra_env or {})
    env["MINMAXLAB_TEST_CODEGEN"] = "default"  # tests/_xla.py adds nothing: the arm's flags
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), "-p", "no:cacheprovider"]
    cmd += ["--dist", "loadfile", *files] if workers else files
    rc, out, _, cpu, wall = _harness.timed_child(cmd, TIMEOUT_S, env=env, cwd=ROOT)
  if rc != 0:
    raise RuntimeError(f"pytest failed under {flags}: {out[-1500:]}")
  return {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}


def measure(
  files: list[str], rounds: int, log=lambda s: None, arms=DEFAULT_ARMS, workers: int = 0
) -> dict:
  names = list(arms)
  runs = {a: [] for a in names}
  for r in range(rounds):
    order = names[r % len(names) :] + names[: r % len(names)]
    for a in order:
      runs[a].append(run_pytest(files, ARMS[a], ARM_ENV[a], workers))
    log(f"# round {r}: " + ", ".join(f"{a} {runs[a][-1]['cpu_s']} CPU-s" for a in names))
  first = names[0]
  out = {}
  for a in names:
    cpu = [x["cpu_s"] for x in runs[a]]
    ratios = [round(x["cpu_s"] / y["cpu_s"], 3) for x, y in zip(runs[a], runs[first])]
    out[a] = {
      "flags": ARMS[a],
      "env": ARM_ENV[a],
      "cpu_s": cpu,
      "wall_s": [x["wall_s"] for x in runs[a]],
      "cpu_s_median": round(statistics.median(cpu), 2),
      "wall_s_median": round(statistics.median(x["wall_s"] for x in runs[a]), 2),
      "cpu_over_first_same_round": ratios,
      "cpu_over_first_median": round(statistics.median(ratios), 3),
    }
  return out


def _run_lines(name: str, r: dict) -> list[str]:
  m = r["machine"]
  lines = [
    f"[JSON](../experiments/benchmarks/results/{name}): {r['started']}, {m['cpu_model']}"
    f" (family {m.get('cpu_family')}, model {m.get('model')}), {m['cpus']} cores;"
    f" {_harness.note_load(m['load_average'][0], m['cpus'])}; pytest -n {r.get('workers', 0)} on"
    f" {', '.join(f'`{f}`' for f in r['files'])}, {r['rounds']} rounds interleaved.",
    "",
    "| arm | XLA_FLAGS | LLVM -O0 (`JAX_DISABLE_MOST_OPTIMIZATIONS`) | stored programs:"
    " compile time at least | CPU s (median; every round) | CPU / first arm, same round"
    " (median) | wall s (median) |",
    "|---|---|---|---|---|---|---|",
  ]
  for arm, e in r["arms"].items():
    every = ", ".join(f"{x:.1f}" for x in e["cpu_s"])
    env = e.get("env", {})
    lines.append(
      f"| `{arm}` | `{' '.join(e['flags'])}` | {'yes' if env.get(LOW_EFFORT) == '1' else 'no'} |"
      f" {env.get(MIN_COMPILE, '0.1')} s |"
      f" {e['cpu_s_median']:.1f} ({every}) |"
      f" {e['cpu_over_first_median']:.3f} | {e['wall_s_median']:.1f} |"
    )
  return lines


def results_table() -> str:
  """Every committed run: its host, then each arm's CPU and wall seconds (docs/running.md)."""
  return _harness.runs_block(RESULTS, RESULT_FILES, _run_lines)


_report.register("session_codegen", README, "experiments.benchmarks.session_codegen:results_table")


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--files", default=",".join(FILES), help="test files, comma-separated")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--arms", default=",".join(DEFAULT_ARMS), help=f"of {', '.join(ARMS)}")
  ap.add_argument("--workers", type=int, default=0, help="pytest-xdist workers (0: none)")
  ap.add_argument("--out", default=None)
  args = ap.parse_args(argv)
  files = [f for f in args.files.split(",") if f]
  arms = [a for a in args.arms.split(",") if a]
  for a in arms:
    if a not in ARMS:
      return _harness.user_error("session_codegen", f"--arms {a}: not one of {', '.join(ARMS)}")
  if args.workers < 0:
    return _harness.user_error("session_codegen", f"--workers must be >= 0, got {args.workers}")
  if args.rounds < 1:
    return _harness.user_error("session_codegen", f"--rounds must be >= 1, got {args.rounds}")
  for f in files:
    if not (ROOT / f).is_file():
      return _harness.user_error("session_codegen", f"--files {f}: no such test file")
  from experiments.benchmarks.speed_claims import cpu_identity

  record = {"benchmark": "session_codegen", "machine": {**_harness.host(), **cpu_identity()}}
  record.update(started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
  record.update(files=files, rounds=args.rounds, workers=args.workers)
  record["arms"] = measure(
    files, args.rounds, lambda s: print(s, file=sys.stderr), arms, args.workers
  )
  _harness.emit(record, args.out)
  return 0


if __name__ == "__main__":
  sys.exit(main())
