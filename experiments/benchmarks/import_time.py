"""What starting a process costs: the CPU seconds of ``import numpy; import ml_dtypes`` and of
``import jax`` in fresh interpreters, side by side.

  python experiments/benchmarks/import_time.py [--python A,B,...] [--repeats 9] [--out FILE]

Every process the tests, the PBT workers and ``mpirun`` ranks start imports JAX before it does
anything, and JAX imports ml_dtypes, which registers its NumPy ufunc loops at import. Each
``--python`` interpreter (default: this one) runs each import in a fresh process, the
interpreters interleaved round by round (order rotated), and reports the process CPU seconds
(user + system, from ``resource.getrusage`` of the children) of each import as the median of
``--repeats``; ``import jax`` is measured where the interpreter has JAX. Each entry names the
interpreter's NumPy and ml_dtypes versions, so two venvs that differ in one package compare
that package. One JSON line (``--out`` appends it to a file) with the host.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments import _report  # noqa: E402
from experiments.benchmarks import _harness  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = "docs/benchmarks.md"
RESULT_FILES = ("2026-12-06_import_time_amd_epyc_zen5.jsonl",)

TIMEOUT_S = 300  # one import; the process group is killed past it
CASES = {
  "numpy": "import numpy",
  "numpy_ml_dtypes": "import numpy; import ml_dtypes",
  "jax": "import jax",
}
VERSIONS = (
  "import json, importlib.metadata as m\n"
  "def v(n):\n"
  "  try:\n    return m.version(n)\n  except m.PackageNotFoundError:\n    return None\n"
  "print(json.dumps({n: v(n) for n in ('numpy', 'ml_dtypes', 'jax')}))"
)


def child_cpu_s(python: str, code: str) -> float:
  """Process CPU seconds of ``python -c code`` in a fresh process (it must exit 0)."""
  rc, _, err, cpu, _ = _harness.timed_child([python, "-c", code], TIMEOUT_S)
  if rc != 0:
    raise RuntimeError(f"{python} -c {code!r} failed: {err[-1000:]}")
  return cpu


def measure(pythons: list[str], repeats: int) -> dict:
  versions = {
    p: json.loads(subprocess.run([p, "-c", VERSIONS], check=True, capture_output=True).stdout)
    for p in pythons
  }
  cases = {p: [c for c in CASES if c != "jax" or versions[p]["jax"]] for p in pythons}
  cpu = {p: {c: [] for c in cases[p]} for p in pythons}
  for r in range(repeats):
    order = pythons[r % len(pythons) :] + pythons[: r % len(pythons)]
    for p in order:
      for c in cases[p]:
        cpu[p][c].append(round(child_cpu_s(p, CASES[c]), 3))
  out = {}
  for p in pythons:
    entry = {"versions": versions[p]}
    for c in cases[p]:
      entry[c] = {"cpu_s": cpu[p][c], "cpu_s_median": round(statistics.median(cpu[p][c]), 3)}
    if "numpy_ml_dtypes" in entry:  # what ml_dtypes adds to an import of NumPy
      entry["ml_dtypes_cpu_s_median"] = round(
        entry["numpy_ml_dtypes"]["cpu_s_median"] - entry["numpy"]["cpu_s_median"], 3
      )
    out[p] = entry
  return out


def _run_lines(name: str, r: dict) -> list[str]:
  m = r["machine"]
  repeats = len(next(iter(r["interpreters"].values()))["numpy"]["cpu_s"])
  lines = [
    f"[JSON](../experiments/benchmarks/results/{name}): {m['cpu_model']}"
    f" (family {m.get('cpu_family')}, model {m.get('model')}), {m['cpus']} cores,"
    f" Python {m['python']}; {_harness.note_load(m['load_average'][0], m['cpus'])};"
    f" {repeats} fresh processes per import and interpreter, interleaved.",
    "",
    "| NumPy | ml_dtypes | JAX | `import numpy` CPU s | `import numpy; import ml_dtypes`"
    " CPU s | ml_dtypes' share | `import jax` CPU s |",
    "|---|---|---|---|---|---|---|",
  ]
  for e in r["interpreters"].values():
    v = e["versions"]
    jax_s = f"{e['jax']['cpu_s_median']:.3f}" if "jax" in e else "-"
    lines.append(
      f"| {v['numpy']} | {v['ml_dtypes']} | {v['jax'] or '-'} |"
      f" {e['numpy']['cpu_s_median']:.3f} | {e['numpy_ml_dtypes']['cpu_s_median']:.3f} |"
      f" {e['ml_dtypes_cpu_s_median']:.3f} | {jax_s} |"
    )
  return lines


def results_table() -> str:
  """Every committed run: its host, then each interpreter's versions and median import CPU
  seconds (docs/benchmarks.md's block)."""
  return _harness.runs_block(RESULTS, RESULT_FILES, _run_lines)


_report.register("import_time", README, "experiments.benchmarks.import_time:results_table")


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--python", default=sys.executable, help="interpreters, comma-separated")
  ap.add_argument("--repeats", type=int, default=9)
  ap.add_argument("--out", default=None)
  args = ap.parse_args(argv)
  pythons = [p for p in args.python.split(",") if p]
  if args.repeats < 1:
    return _harness.user_error("import_time", f"--repeats must be >= 1, got {args.repeats}")
  for p in pythons:
    if not Path(p).is_file():
      return _harness.user_error("import_time", f"--python {p}: no such interpreter")
  from experiments.benchmarks.speed_claims import cpu_identity

  record = {"benchmark": "import_time", "machine": {**_harness.host(), **cpu_identity()}}
  record["interpreters"] = measure(pythons, args.repeats)
  _harness.emit(record, args.out)
  return 0


if __name__ == "__main__":
  sys.exit(main())
