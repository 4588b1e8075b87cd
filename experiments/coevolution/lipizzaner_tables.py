"""The Lipizzaner-grids study's tables: the version-0 (exploratory) table of every run at its last
evaluation, and the README blocks ``lipizzaner_grids_v<N>`` of the registered versions (every
seed at the endpoint, the registered verdicts), generated from the committed JSON (see
:mod:`lipizzaner_grids` for the runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
METRICS = ("fid", "class_tvd", "inception_score")


def groups(data: dict) -> dict[str, list]:
  """The runs of ``data`` by grid (arm), in the order of their first run."""
  out: dict[str, list] = {}
  for r in data["runs"]:
    out.setdefault(r["grid"], []).append(r)
  return out


def table(data: dict) -> str:
  """Every grid's runs at their last evaluation: class TVD, FID and IS as mean ± sd (every
  seed), and which classifier scored which run when more than one did."""
  lines = [
    "| grid | seeds | generations | class TVD | classifier-FID | IS |",
    "|---|---|---|---|---|---|",
  ]
  for grid, runs in groups(data).items():
    runs = [r for r in runs if r["curves"]]
    cells = [
      grid,
      ",".join(str(r["seed"]) for r in runs),
      "/".join(sorted({str(r["curves"][-1]["generation"]) for r in runs})),
    ]
    for key in ("class_tvd", "fid", "inception_score"):
      v = np.array([r["curves"][-1][key] for r in runs], float)
      sd = v.std(ddof=1) if len(v) > 1 else 0.0
      cells.append(f"{v.mean():.3g} ± {sd:.2g} ({', '.join(f'{x:.3g}' for x in v)})")
    lines.append("| " + " | ".join(cells) + " |")
  from experiments import _classifier_cache

  note = _classifier_cache.scorers_note(data["runs"], lambda r: f"{r['grid']} s{r['seed']}")
  return "\n".join(lines + ([f"\n{note}"] if note else []))


# -- generated README blocks (experiments/_report.py) -------------------------------------

COLLAPSE_TVD = 0.5  # the protocol's collapse threshold on the final class TVD


def _final(run: dict, generation: int, key: str) -> float:
  rows = [c for c in run["curves"] if c["generation"] == generation]
  if not rows:
    raise ValueError(
      f"{run['grid']} seed {run['seed']} has no evaluation at generation {generation}"
    )
  return float(rows[0][key])


def readme_table(version: int) -> str:
  """The README block ``lipizzaner_grids_v<version>``: every seed's best-mixture class TVD,
  FID and IS at the registered generation, and the registered verdicts (Mann-Whitney, Holm)."""
  from experiments import _report, stats

  protocol = _report.load_protocol(ROOT / "protocols" / f"lipizzaner_grids.v{version}.json")
  path = ROOT / "results" / f"v{version}" / "lipizzaner_grids.json"
  data = json.loads(path.read_text()) if path.exists() else {"runs": []}
  if data["runs"] and data["protocol"].get("overrides"):
    raise ValueError(f"{path}: runs with overridden settings {data['protocol']['overrides']}")
  gen, prim, arms = protocol["endpoint_generation"], protocol["primary"], protocol["arms"]
  labels = {a: spec["label"] for a, spec in arms.items()}
  runs = [r for r in data["runs"] if any(c["generation"] == gen for c in r["curves"])]
  scorer = _report.one_scorer(runs, lambda r: f"{r['grid']} s{r['seed']}")
  by_arm = {a: sorted((r for r in runs if r["grid"] == a), key=lambda r: r["seed"]) for a in arms}
  values = {k: {a: [_final(r, gen, k) for r in rs] for a, rs in by_arm.items()} for k in METRICS}
  lines = _report.incomplete_note(
    by_arm, labels, len(protocol["seeds"]), f" reached generation {gen}"
  )
  lines += [
    f"| arm | seeds | class TVD, generation {gen} (every seed) | classifier-FID | IS |"
    f" collapsed (TVD > {COLLAPSE_TVD}) |",
    "|---|---|---|---|---|---|",
  ]
  for a, rs in by_arm.items():
    if not rs:
      lines.append(f"| {labels[a]} | - | not run | - | - | - |")
      continue
    tvd = values["class_tvd"][a]
    lines.append(
      f"| {labels[a]} | {','.join(str(r['seed']) for r in rs)} | {stats.fmt_values(tvd, 3)} | "
      f"{stats.fmt_values(values['fid'][a])} | {stats.fmt_mean_sd(values['inception_score'][a], 2)}"
      f" | {sum(t > COLLAPSE_TVD for t in tvd)} of {len(tvd)} |"
    )
  comps = [tuple(c) for c in prim["comparisons"]]
  kw = dict(test=prim["test"], alpha=prim["alpha"], lower_is_better=True)
  lines += [
    "",
    f"**Primary** (registered: class TVD of the best mixture at the endpoint, generation {gen}; "
    f"{stats.TEST_LABELS[prim['test']]}, alpha {prim['alpha']}, Holm over {len(comps)}):",
  ]
  tvd = values["class_tvd"]
  lines += _report.family(tvd, comps, labels, metric="class TVD", digits=3, **kw)
  lines += ["", "Secondary, classifier-FID (Holm over the same comparisons):"]
  lines += _report.family(values["fid"], comps, labels, metric="FID", **kw)
  lines += ["", "Secondary, IS analogue (higher is better; Holm over the same comparisons):"]
  is_ = values["inception_score"]
  lines += _report.family(
    is_, comps, labels, **dict(kw, lower_is_better=False), metric="IS", digits=2
  )
  lines += ["", f"Secondary, collapse (class TVD > {COLLAPSE_TVD}), Fisher's exact test:"]
  for a, b in _report.tested(tvd, comps):
    ca = sum(t > COLLAPSE_TVD for t in tvd[a])
    cb = sum(t > COLLAPSE_TVD for t in tvd[b])
    na, nb = len(by_arm[a]), len(by_arm[b])
    p = stats.fisher_exact([[ca, na - ca], [cb, nb - cb]])
    lines.append(f"- {labels[a]} {ca} of {na} vs {labels[b]} {cb} of {nb}: p = {stats.fmt_p(p)}")
  lines += _report.scorer_lines(scorer)
  lines += _report.endpoint_lines(
    f"experiments/coevolution/protocols/lipizzaner_grids.v{version}.json",
    [
      "the **Primary** verdicts above",
      "above (classifier-FID and IS analogue)",
      "above (collapse)",
      f"the figure `{path.with_suffix('.png').relative_to(ROOT.parent.parent)}`",
    ],
    data.get("registration"),
  )
  return "\n".join(lines)


def readme_table_v1() -> str:
  return readme_table(1)


def readme_table_v2() -> str:
  return readme_table(2)


def readme_table_v0() -> str:
  """Version 0 (exploratory): every run of ``results/lipizzaner_grids.json`` at its last
  evaluation, and which classifier scored which run."""
  return table(json.loads((ROOT / "results" / "lipizzaner_grids.json").read_text()))


def _register() -> None:
  from experiments import _report

  readme = "experiments/coevolution/README.md"
  for v in (0, 1, 2):
    _report.register(f"lipizzaner_grids_v{v}", readme, f"{__name__}:readme_table_v{v}")


_register()
