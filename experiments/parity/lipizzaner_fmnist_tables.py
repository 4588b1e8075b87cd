"""The outcome-parity block ``lipizzaner_fmnist_outcome`` of ``docs/parity.md``, from committed
JSON only: the reference's own clients and the library on Fashion-MNIST, 2x2
(``lipizzaner_fmnist_outcome.py``). Per primary metric: the means, the difference with its
95% (Welch) interval, the two one-sided tests at the protocol's margin, the two-sided
Mann-Whitney p and the verdict ("equivalent at margin m", "different", "inconclusive at n"),
by the rule of ``lipizzaner_ring_tables`` (the same registered rule); per seed every value.

    python -m experiments.parity.lipizzaner_fmnist_outcome report   # or experiments._report
"""

from __future__ import annotations

import json
from pathlib import Path

from experiments import _classifier_cache, _report
from experiments.parity.lipizzaner_ring_tables import (
  head_line,
  load_runs,
  relative,
  table_lines,
  verdict_lines,
)

REPO = Path(_report.REPO)
PROTOCOL = REPO / "experiments/parity/protocols/lipizzaner_fmnist_outcome.v1.json"
RESULTS = REPO / "experiments/parity/results/lipizzaner_fmnist_outcome"
DOC = "docs/parity.md"
BLOCK = "lipizzaner_fmnist_outcome"


def seed_lines(protocol: dict, runs: dict) -> list[str]:
  """Per arm and seed: the endpoints, the picked cell and each side's own pick, the CPU."""
  lines = [
    "| arm | seed | class TVD | FID | picked cell (own pick) | mixture weights | CPU-s |",
    "|---|---|---|---|---|---|---|",
  ]
  for arm, spec in protocol["arms"].items():
    for r in runs[arm]:
      w = ", ".join(f"{x:.3f}" for x in r.get("mixture/weights", [])) or "–"
      lines.append(
        f"| {spec['label']} | {r['seed']} | {r['mixture/class_tvd']:.3f} | "
        f"{r['mixture/fid']:.2f} | {r['picked_cell']} ({r['own_pick']}) | {w} | "
        f"{r['cpu_seconds']:.0f} |"
      )
    if not runs[arm]:
      lines.append(f"| {spec['label']} | – | – | – | – | – | – |")
  return lines


def cpu_left(protocol: dict, runs: dict) -> str | None:
  """One line on the CPU-hours the unfinished runs need (the protocol's estimate per run),
  or ``None`` when every registered run is done."""
  per_run = protocol["cpu_per_run_s"]
  left = {
    a: len(protocol["seeds"]) - len(runs[a])
    for a in protocol["arms"]
    if len(runs[a]) < len(protocol["seeds"])
  }
  if not left:
    return None
  hours = sum(n * per_run[a] for a, n in left.items()) / 3600
  parts = ", ".join(f"{protocol['arms'][a]['label']} {n}" for a, n in left.items())
  return f"Runs left: {parts}; about {hours:.1f} CPU-hours at the protocol's estimate per run."


def block(protocol_path: Path = PROTOCOL, results: Path = RESULTS) -> str:
  """The block's text."""
  rel = relative(protocol_path)
  if not Path(protocol_path).exists():
    return f"No protocol yet (`{rel}`)."
  protocol = json.loads(Path(protocol_path).read_text())
  runs = load_runs(protocol, results)
  head = head_line(protocol, rel, results)
  pick = f"The final mixture, on both sides (the protocol's words): {protocol['final_mixture']}."
  body = [
    head,
    "",
    pick,
    "",
    *table_lines(protocol, runs, digits=lambda metric: 3),
    "",
    *verdict_lines(protocol, runs),
  ]
  everyone = [r for arm in protocol["arms"] for r in runs[arm]]
  note = _classifier_cache.scorers_note(everyone, lambda r: f"{r['arm']} seed {r['seed']}")
  extra = [x for x in (cpu_left(protocol, runs), note) if x]
  return "\n".join([*body, *(["", *extra] if extra else []), "", *seed_lines(protocol, runs)])


_report.register(BLOCK, DOC, f"{__name__}:block")
