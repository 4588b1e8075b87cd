"""The earlier exploratory ring study of issue 18 (not pre-registered): the README blocks
``ring_issue18*``, generated from ``results/issue18_ring8_study.json``."""

from __future__ import annotations

import json

from experiments import _report
from experiments.coevolution.ring_tables import BAR, HERE, README, REPO, decimals

ISSUE18 = HERE / "results" / "issue18_ring8_study.json"

ISSUE18_NOTE = (
  "Earlier exploratory study (issue 18), not pre-registered: 1-5 seeds per variant, no test; "
  f"generated from `{ISSUE18.relative_to(REPO)}`; ± is the sample standard deviation."
)


def _issue18_groups() -> dict[str, list[dict]]:
  groups: dict[str, list[dict]] = {}
  for r in json.loads(ISSUE18.read_text()):
    groups.setdefault(r["run"].rsplit("_s", 1)[0], []).append(r)
  return groups


def _ints(values) -> str:
  return " ".join(f"{v:.0f}" for v in values)


def issue18_table() -> str:
  """The README block ``ring_issue18``: every variant of the issue-18 study, every seed."""
  from experiments import stats

  lines = [
    ISSUE18_NOTE,
    "",
    "| variant | seeds | mixture modes (per seed) | mixture HQ (per seed) | pooled modes (per seed)"
    " | pooled HQ (per seed) | ok mixture | ok pooled | wall s (mean) |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for name, runs in _issue18_groups().items():
    m = [float(r["mixture/modes_covered"]) for r in runs]
    h = [float(r["mixture/high_quality_rate"]) for r in runs]
    gm = [float(r["grid/modes_covered"]) for r in runs]
    gh = [float(r["grid/high_quality_rate"]) for r in runs]
    ok = sum(a >= BAR[0] and b >= BAR[1] for a, b in zip(m, h))
    okp = sum(a >= BAR[0] and b >= BAR[1] for a, b in zip(gm, gh))
    wall = sum(r["wall_seconds"] for r in runs) / len(runs)
    lines.append(
      f"| {name} | {len(runs)} | {stats.fmt_mean_sd(m, 1)} ({_ints(m)}) | "
      f"{stats.fmt_mean_sd(h, 2)} ({decimals(h)}) | {stats.fmt_mean_sd(gm, 1)} ({_ints(gm)}) | "
      f"{stats.fmt_mean_sd(gh, 2)} ({decimals(gh)}) | {ok}/{len(runs)} | {okp}/{len(runs)} | "
      f"{wall:.0f} |"
    )
  return "\n".join(lines)


def _issue18_pairs(grid: str, single: str, grid_label: str, single_label: str) -> str:
  from experiments import stats

  groups = _issue18_groups()
  g = {int(r["run"].rsplit("_s", 1)[1]): r for r in groups[grid]}
  o = {int(r["run"].rsplit("_s", 1)[1]): r for r in groups[single]}
  seeds = sorted(set(g) & set(o))
  head = (
    f"| seed | {grid_label}: best mixture modes / 8 | HQ | all cells pooled modes | HQ | "
    f"{single_label}: modes / 8 | HQ |"
  )
  lines = [
    f"(Earlier exploratory study, not pre-registered: `{grid}` beside `{single}`, generated "
    f"from `{ISSUE18.relative_to(REPO)}`; ± is the sample standard deviation.)",
    "",
    head,
    "|---|---|---|---|---|---|---|",
  ]
  cols = [
    (g, "mixture/modes_covered"),
    (g, "mixture/high_quality_rate"),
    (g, "grid/modes_covered"),
    (g, "grid/high_quality_rate"),
    (o, "mixture/modes_covered"),
    (o, "mixture/high_quality_rate"),
  ]
  for s in seeds:
    vals = [src[s][k] for src, k in cols]
    lines.append(
      f"| {s} | "
      + " | ".join(f"{v:.0f}" if i % 2 == 0 else f"{v:.2f}" for i, v in enumerate(vals))
      + " |"
    )
  means = [
    stats.fmt_mean_sd([src[s][k] for s in seeds], 1 if i % 2 == 0 else 2)
    for i, (src, k) in enumerate(cols)
  ]
  lines.append("| mean ± sd | " + " | ".join(means) + " |")
  return "\n".join(lines)


def issue18_main_pairs() -> str:
  """Block ``ring_issue18_main``: the main job's grid (``t2``) beside one GAN."""
  return _issue18_pairs("t2_g40", "r2_1x1_g40", "grid", "one GAN")


def issue18_nosel_own_pairs() -> str:
  """Block ``ring_issue18_nosel_own``: no interaction beside the same lone GAN."""
  return _issue18_pairs("nosel_own_g40", "r2_1x1_g40", "no interaction", "one GAN")


def issue18_nosel_own_long_pairs() -> str:
  """Block ``ring_issue18_nosel_own_long``: no interaction at 5x the budget beside one GAN
  with the same 450 000 steps."""
  return _issue18_pairs(
    "nosel_own_long_g40", "r2_1x1_long_g40", "no interaction, 5x budget", "one GAN, same steps"
  )


BLOCKS = {
  "ring_issue18": "issue18_table",
  "ring_issue18_main": "issue18_main_pairs",
  "ring_issue18_nosel_own": "issue18_nosel_own_pairs",
  "ring_issue18_nosel_own_long": "issue18_nosel_own_long_pairs",
}
for _block, _func in BLOCKS.items():
  _report.register(_block, README, f"{__name__}:{_func}")
