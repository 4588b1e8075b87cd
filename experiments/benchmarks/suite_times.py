"""The test suite's time on each host kind: the table of ``results/suite_times.jsonl``.

A line is one whole ``python3 dev.py test`` session, recorded with the suite profile plugin
(``tests/_suite_profile.py``) and appended by its ``--record``:

  MINMAXLAB_SUITE_PROFILE=profile.jsonl python3 dev.py test -p tests._suite_profile
  .venv/bin/python -m tests._suite_profile profile.jsonl \\
      --record experiments/benchmarks/results/suite_times.jsonl

The block in docs/running.md lists every recorded session with its host (the CPU's family and
model: a VM's model name can be as bare as "AMD EPYC"), pytest's own seconds against the target,
and where the CPU seconds went.
"""

from __future__ import annotations

from pathlib import Path

from experiments import _report
from experiments.benchmarks import _harness

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "benchmarks" / "results"
RESULT_FILE = "suite_times.jsonl"
README = "docs/running.md"
TARGET_S = 720.0  # pytest of `dev.py test` on a quiet 2-core host of any kind


def _row(r: dict) -> str:
  h = r["host"]
  wide = any(f.startswith("avx512") for f in h.get("cpu_vector_flags", []))
  vector = "AVX-512" if wide else "AVX2"
  wall = r["pytest_wall_s"]
  verdict = "met" if wall <= TARGET_S and r["failed"] == 0 else "**not met**"
  costliest = ", ".join(f"`{Path(f).name}` {s:.0f}" for f, s in r["costliest_files"][:3])
  return (
    f"| {r['recorded']} | {r['commit']} | {h['cpu_model']} (family {h.get('cpu_family')}, model"
    f" {h.get('model')}; {vector}) | {h.get('cpus_usable', h.get('cpus'))} |"
    f" {h['load_average'][0]:g} | {r['collected']} ({r['failed']} failed) | {wall:.1f} |"
    f" {verdict} | {r['tests_cpu_s']:.1f} | {r['waited_s']:.1f} | {costliest} |"
  )


def results_table() -> str:
  """docs/running.md's block: one row per recorded session, oldest first."""
  runs = _harness.read_lines(RESULTS / RESULT_FILE)
  if not runs:
    return "No session is recorded yet.\n"
  head = [
    f"[JSON](../experiments/benchmarks/results/{RESULT_FILE}), one line per session. Target:"
    f" pytest's own time at most {TARGET_S:.0f} s on a quiet 2-core host, no test failed.",
    "",
    "| recorded | commit | CPU | cores | 1-minute load at the end | tests | pytest s | target |"
    " CPU s in tests (and their children) | s waited idle | costliest files (CPU s) |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  return "\n".join(head + [_row(r) for r in runs]) + "\n"


_report.register("suite_times", README, "experiments.benchmarks.suite_times:results_table")
