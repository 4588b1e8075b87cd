r"""The tables of the PBT vs random-search studies of ``experiments/pbt`` (issue 12):
PBT vs random search at equal budget on LA-AltGAN Fashion-MNIST tuned by classifier-FID, then a
replay from scratch, generated from the committed JSON.

Version 0 (exploratory, not pre-registered; ``results/pbt_vs_rs.json``) ran this file's
``pbt_vs_rs`` command before the study runner (commits up to ``d8cb216``): per seed, the
``fashion_mnist_lagan`` task tuned twice with the same controller, population, trials and
steps, ``exploit="tournament"`` (PBT) and ``exploit="none"`` (random search), trials scored at
the lookahead slow weights; the best PBT lineage's schedule and the best random-search
trial's static hyperparameters re-trained from scratch with fresh seeds. Version 1 (issue 34,
pre-registered) is ``pbt_vs_rs_v1.py``, run by the study runner
(``python -m experiments.pbt.pbt_vs_rs_v1 run``).
"""

from __future__ import annotations

import json

import numpy as np

from experiments.pbt.search import ROOT
from experiments.pbt.search import trial_keys as trial_keys  # named by protocols/pbt_vs_rs.v1.json

METHODS = {"pbt": "tournament", "random_search": "none"}


def _best_so_far(run: dict) -> np.ndarray:
  return np.minimum.accumulate(np.array([t["fid"] for t in run["trials"]], float))


def table(data: dict) -> str:
  """Markdown: best FID per method (mean ± std over seeds, every seed), best so far at
  quarters of the budget, and the replay comparison."""
  from experiments import stats

  lines = [
    "| method | seeds | best FID | best so far at 25% / 50% / 75% of the trials | CPU s |",
    "|---|---|---|---|---|",
  ]
  for method in METHODS:
    runs = [r for r in data["runs"] if r["method"] == method]
    if not runs:
      continue
    curves = [_best_so_far(r) for r in runs]
    q = [
      stats.fmt_mean_sd([c[max(0, int(len(c) * f) - 1)] for c in curves], 1)
      for f in (0.25, 0.5, 0.75)
    ]
    lines.append(
      f"| {method} | {','.join(str(r['seed']) for r in runs)} | "
      f"{stats.fmt_values([r['best_fid'] for r in runs])} | {' / '.join(q)} | "
      f"{sum(r['cpu_s'] for r in runs):.0f} |"
    )
  reps = data.get("replays", [])
  if reps:
    lines += [
      "",
      "| replay from scratch | study seeds | final FID (every replay) | "
      "best FID along the replay |",
      "|---|---|---|---|",
    ]
    for name in ("pbt_schedule", "rs_static"):
      finals, bests = [], []
      for rep in reps:
        for key, val in rep.items():
          if key.startswith(name + "/"):
            finals.append(val["fids"][-1])
            bests.append(min(val["fids"]))
      lines.append(
        f"| {name} | {','.join(str(r['seed']) for r in reps)} | "
        f"{stats.fmt_values(finals)} | {stats.fmt_values(bests)} |"
      )
  return "\n".join(lines)


def readme_table_v0() -> str:
  """The README block ``pbt_vs_rs_v0``: the earlier exploratory study's tables."""
  return table(json.loads((ROOT / "results" / "pbt_vs_rs.json").read_text()))


def readme_table_v0_trials100() -> str:
  """The README block ``pbt_vs_rs_v0_trials100``: its 100-step-trial run (seed 0)."""
  return table(json.loads((ROOT / "results" / "trials100" / "pbt_vs_rs.json").read_text()))


def readme_table_v1() -> str:
  """The README block ``pbt_vs_rs_v1``: the study's table and its registered endpoints."""
  from experiments import _report
  from experiments.pbt import pbt_vs_rs_v1 as v1

  found = ["the **Verdict** above", *["above (**Secondary**)"] * 3]
  found.append("the figure `experiments/pbt/results/pbt_vs_rs_v1.png`")
  record = json.loads(v1.RESULTS_V1.read_text()).get("registration")
  protocol = v1.PROTOCOL_V1.relative_to(ROOT.parent.parent).as_posix()
  return "\n".join([v1.readme_table_v1(), *_report.endpoint_lines(protocol, found, record)])


def _register() -> None:
  from experiments import _report

  _report.register("pbt_vs_rs_v0", "experiments/pbt/README.md", f"{__name__}:readme_table_v0")
  _report.register(
    "pbt_vs_rs_v0_trials100", "experiments/pbt/README.md", f"{__name__}:readme_table_v0_trials100"
  )
  _report.register("pbt_vs_rs_v1", "experiments/pbt/README.md", f"{__name__}:readme_table_v1")


_register()
