"""The curves of a Lookahead study's runs (``results.py``, ``lookahead_v2.py``): a run's
metric at given steps, the FID figure per evaluation point, the committed version-0 files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.gan.lookahead_study import ARMS, LABELS, POINTS

ROOT = Path(__file__).resolve().parent
V0_SHORT, V0_LONG = (
  ROOT / "results" / "lookahead.json",
  ROOT / "results" / "long" / "lookahead.json",
)
POINT_LABELS = {"slow": "slow weights / iterate", "ema": "EMA (fast)", "slow_ema": "EMA (slow)"}


def at_steps(run: dict, key: str, steps) -> float:
  """The mean of ``run``'s ``key`` over its evaluations at ``steps``."""
  by_step = {row["step"]: row for row in run["curves"]}
  missing = [s for s in steps if s not in by_step]
  if missing:
    raise ValueError(f"{run['arm']} seed {run['seed']} has no evaluation at steps {missing}")
  return float(np.mean([by_step[s][key] for s in steps]))


def runs_by_arm(data: dict) -> dict[str, list[dict]]:
  """The runs of ``data`` per arm, in their order."""
  out: dict[str, list[dict]] = {}
  for r in data["runs"]:
    out.setdefault(r["arm"], []).append(r)
  return out


def plot(data: dict, path: Path) -> None:
  """FID against generator steps per arm (mean over seeds, band = min..max), one panel
  per evaluation point."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, len(POINTS), figsize=(4.2 * len(POINTS), 3.4), sharey=True)
  colors = dict(zip(ARMS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
  for ax, point in zip(axes, POINTS):
    for arm, runs in runs_by_arm(data).items():
      key = f"{point}/fid"
      curves = [r["curves"] for r in runs if r["curves"] and key in r["curves"][0]]
      if not curves:
        continue
      n = min(len(c) for c in curves)
      steps = np.array([row["step"] for row in curves[0][:n]])
      y = np.array([[row[key] for row in c[:n]] for c in curves], float)
      ax.plot(steps, y.mean(0), color=colors[arm], label=f"{LABELS[arm]} ({len(curves)})")
      ax.fill_between(steps, y.min(0), y.max(0), color=colors[arm], alpha=0.15)
    ax.set_title(
      {
        "slow": "slow weights (base: iterate)",
        "ema": "EMA of fast weights",
        "slow_ema": "EMA of slow weights",
      }[point],
      fontsize=9,
    )
    ax.set_xlabel("generator steps")
    ax.set_yscale("log")
  axes[0].set_ylabel("classifier-FID (mean, band min..max)")
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=70)
  plt.close(fig)
