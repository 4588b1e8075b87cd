"""Mean and spread of final metrics over runs.

  python -m experiments.gan.summarize runs/a_s* -- runs/b_s*


Each argument is a run directory (with ``summary.json``); groups are separated
by ``--``. Prints a markdown table: one row per group, mean ± std (and min/max)
of every numeric final metric.
"""

import json
import sys
from pathlib import Path

import numpy as np


def load(run: str) -> dict:
  s = json.loads((Path(run) / "summary.json").read_text())
  return {
    **s["final"],
    **(
      {"classifier_test_accuracy": s["classifier_test_accuracy"]}
      if "classifier_test_accuracy" in s
      else {}
    ),
  }


def table(groups: list[list[str]], keys: list[str] | None = None) -> str:
  finals = [[load(r) for r in g] for g in groups]
  if keys is None:
    keys = [
      k
      for k, v in finals[0][0].items()
      if k != "step" and isinstance(v, (int, float)) and not k.endswith("_std")
    ]
  lines = ["| runs | n | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
  for g, rows in zip(groups, finals):
    cells = []
    for k in keys:
      v = np.array([r[k] for r in rows], float)
      cells.append(
        f"{v.mean():.3g} ± {v.std(ddof=1) if len(v) > 1 else 0:.2g} [{v.min():.3g}, {v.max():.3g}]"
      )
    name = Path(g[0]).name.rsplit("_s", 1)[0]
    lines.append(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


if __name__ == "__main__":
  groups, cur = [], []
  for a in sys.argv[1:]:
    if a == "--":
      groups.append(cur)
      cur = []
    else:
      cur.append(a)
  groups.append(cur)
  print(table([g for g in groups if g]))
