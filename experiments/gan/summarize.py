"""Mean and spread of final metrics over runs.

  python -m experiments.gan.summarize runs/a_s* -- runs/b_s*
  python -m experiments.gan.summarize --last 3 runs/a_s* -- runs/b_s*

Each argument is a run directory (with ``summary.json`` and ``metrics.jsonl``);
groups are separated by ``--``. Prints a markdown table: one row per group,
mean ± std [min, max] over runs of every numeric evaluation metric at the final
step, or (``--last K``) of each run's average over its last ``K`` evaluations.
"""

import json
import sys
from pathlib import Path

import numpy as np

from minmaxlab.runner import read_jsonl

_SKIP = ("step", "g_loss", "d_loss")


def load(run: str, last: int = 1) -> dict:
  summary = json.loads((Path(run) / "summary.json").read_text())
  rows = read_jsonl(Path(run) / "metrics.jsonl")
  keys = [k for k in summary["final"] if k not in _SKIP and not k.endswith("_std")]
  evals = [r for r in rows if keys and keys[0] in r][-last:]
  out = {k: float(np.mean([r[k] for r in evals])) for k in keys}
  if "classifier_test_accuracy" in summary:
    out["classifier_test_accuracy"] = summary["classifier_test_accuracy"]
  return out


def table(groups: list[list[str]], last: int = 1) -> str:
  finals = [[load(r, last) for r in g] for g in groups]
  keys = list(finals[0][0])
  lines = ["| runs | n | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
  for g, rows in zip(groups, finals):
    cells = []
    for k in keys:
      v = np.array([r[k] for r in rows], float)
      spread = v.std(ddof=1) if len(v) > 1 else 0.0
      cells.append(f"{v.mean():.3g} ± {spread:.2g} [{v.min():.3g}, {v.max():.3g}]")
    name = Path(g[0]).name.rsplit("_s", 1)[0]
    lines.append(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


if __name__ == "__main__":
  args, last = sys.argv[1:], 1
  if args[:1] == ["--last"]:
    last, args = int(args[1]), args[2:]
  groups, cur = [], []
  for a in args:
    if a == "--":
      groups.append(cur)
      cur = []
    else:
      cur.append(a)
  groups.append(cur)
  print(table([g for g in groups if g], last))
