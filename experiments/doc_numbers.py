"""Generated blocks of the guides: the measured numbers ``docs/running.md`` and
``docs/coevolution.md`` quote, made from the committed benchmark JSON
(``experiments/benchmarks/results``) so that no such number is typed into a page.

- ``first_generation`` (``docs/running.md``): the main job's time to its first generation line,
  cold and warm, from every ``*speed_claims*first_generation.json``
  (``experiments/benchmarks/first_generation.py`` run by ``speed_claims.py``).
- ``lipizzaner_side_by_side`` (``docs/coevolution.md``): Lipizzaner's own code and minmaxlab on
  the same 2x2 full-epoch MNIST-MLP work on one host, from every
  ``*lipizzaner_side_by_side*.json`` (two record layouts: the first run's and
  ``experiments/benchmarks/lipizzaner_side_by_side.py``'s).
"""

from __future__ import annotations

import json
from pathlib import Path

from experiments import _report

RESULTS = Path(_report.REPO) / "experiments" / "benchmarks" / "results"


def _rel(path: Path) -> str:
  return path.relative_to(_report.REPO).as_posix()


def first_generation() -> str:
  """The block ``first_generation``: per committed run, seconds from the start of the main
  job to its first generation line (cold cache, warm with a new workdir, warm resuming), the
  step's compile or load line, and the size of the cache."""
  lines = [
    "| run (JSON) | cold | warm, new workdir | warm, resuming | compile / load lines | cache |",
    "|---|---|---|---|---|---|",
  ]
  for path in sorted(RESULTS.glob("*speed_claims*first_generation.json")):
    d = json.loads(path.read_text())
    cells = [f"{d[k]['to_first_generation_s']:.1f} s" for k in ("cold", "warm_new", "warm_resume")]
    said = "; ".join(x for k in ("cold", "warm_new", "warm_resume") for x in d[k]["compile_lines"])
    lines.append(
      f"| `{_rel(path)}` | {' | '.join(cells)} | {said or '-'} | {d['cache_mb']:.1f} MB |"
    )
  return "\n".join(lines)


def _side_by_side(d: dict) -> dict:
  """One side-by-side record in the later layout's terms."""
  if "lipizzaner" in d:
    lip, mml = d["lipizzaner"], d["minmaxlab"]
    return {
      "date": d["lipizzaner_utc"][0][:10],
      "cpu": d["machine"]["cpu_model"],
      "lip_s": lip["median_s"],
      "lip_cpu": lip["client_cpu_s_per_generation"],
      "mml_s": mml["median_s"],
      "mml_cpu": mml["cpu_s_median"],
      "wall": d["wall_ratio"],
      "cpu_ratio": d["cpu_ratio"],
    }
  return {
    "date": d["date"],
    "cpu": d["cpu_model"],
    "lip_s": d["lipizzaner_s_per_iteration_median"],
    "lip_cpu": d["lipizzaner_grid_cpu_s_per_generation"],
    "mml_s": d["minmaxlab_s_per_generation_median"],
    "mml_cpu": d["minmaxlab_cpu_s_per_generation_median"],
    "wall": d["wall_ratio"],
    "cpu_ratio": d["cpu_ratio"],
  }


def lipizzaner_side_by_side() -> str:
  """The block ``lipizzaner_side_by_side``: per committed run, Lipizzaner's and minmaxlab's
  median seconds and CPU seconds per generation and the ratios."""
  lines = [
    "| run (JSON) | host | Lipizzaner: s / CPU s per generation | minmaxlab: s / CPU s |"
    " Lipizzaner / minmaxlab: wall, CPU |",
    "|---|---|---|---|---|",
  ]
  for path in sorted(RESULTS.glob("*lipizzaner_side_by_side*.json")):
    r = _side_by_side(json.loads(path.read_text()))
    lines.append(
      f"| `{_rel(path)}` | {r['cpu']}, {r['date']} | {r['lip_s']:.1f} / {r['lip_cpu']:.1f} | "
      f"{r['mml_s']:.2f} / {r['mml_cpu']:.2f} | {r['wall']:.2f}x, {r['cpu_ratio']:.2f}x |"
    )
  return "\n".join(lines)


_report.register("first_generation", "docs/running.md", f"{__name__}:first_generation")
_report.register(
  "lipizzaner_side_by_side", "docs/coevolution.md", f"{__name__}:lipizzaner_side_by_side"
)
