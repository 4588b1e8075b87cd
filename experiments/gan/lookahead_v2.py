"""Version 2 of the lookahead study (``protocols/lookahead.v2.json``, pre-registered): its
runs (seeds 0-4 from version 0's 20k-step JSON, seeds 5-9 from ``results/v2``, checked to
share the settings and the classifier), the README block with the registered verdicts and
the figure of every seed's curves."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.gan.lookahead_curves import POINT_LABELS, ROOT, V0_LONG, at_steps, plot

PROTOCOLS = ROOT / "protocols"
V2_NEW = ROOT / "results" / "v2" / "lookahead.json"
# settings that make runs of the same study comparable (the JSON's protocol record)
SAME_SETTINGS = (
  "architecture",
  "b1",
  "b2",
  "batch_size",
  "dataset",
  "eval_every",
  "hidden",
  "latent_dim",
  "loss",
  "lr_max",
  "lr_min",
  "num_eval_samples",
  "num_steps",
  "slow_step_size",
  "ema_horizon_steps",
  "classifier_steps",
)


def v2_runs() -> tuple[dict, list[dict]]:
  """Protocol v2 and its runs: seeds 0-4 from version 0's 20k-step JSON, seeds 5-9 from
  ``results/v2`` (checked: the same settings, one classifier)."""
  from experiments import _report

  protocol = _report.load_protocol(PROTOCOLS / "lookahead.v2.json")
  old = json.loads(V0_LONG.read_text())
  parts = [(old, range(0, 5))]
  if V2_NEW.exists():
    parts.append((json.loads(V2_NEW.read_text()), range(5, 10)))
  ref = old["protocol"]
  runs = []
  for data, seeds in parts:
    differ = [k for k in SAME_SETTINGS if data["protocol"].get(k) != ref.get(k)]
    if differ:
      raise ValueError(f"lookahead v2: runs with other settings ({', '.join(differ)})")
    overrides = set(data["protocol"].get("overrides", [])) - {"seeds"}
    if overrides:
      raise ValueError(f"lookahead v2: runs with overridden settings {sorted(overrides)}")
    runs += [r for r in data["runs"] if r["arm"] in protocol["arms"] and r["seed"] in seeds]
  _report.one_scorer(runs, lambda r: f"{r['arm']} s{r['seed']}")
  return protocol, runs


def _primary_point(arm_spec: dict) -> str:
  return "slow_ema" if arm_spec.get("lookahead") else "ema"


def readme_table_v2() -> str:
  """The README block ``lookahead_v2``: every seed's endpoint FID at the primary (EMA) and
  raw points, and the registered verdicts (Mann-Whitney, Holm over the three comparisons)."""
  from experiments import _report, stats

  protocol, runs = v2_runs()
  steps, prim = protocol["endpoint_steps"], protocol["primary"]
  arms = protocol["arms"]
  labels = {a: spec["label"] for a, spec in arms.items()}
  by_arm = {a: sorted((r for r in runs if r["arm"] == a), key=lambda r: r["seed"]) for a in arms}
  primary = {
    a: [at_steps(r, f"{_primary_point(arms[a])}/fid", steps) for r in rs]
    for a, rs in by_arm.items()
  }
  raw = {a: [at_steps(r, "slow/fid", steps) for r in rs] for a, rs in by_arm.items()}
  lines = _report.incomplete_note(by_arm, labels, len(protocol["seeds"]))
  head = f"FID, mean of steps {steps[0]}-{steps[-1]}"
  lines += [
    f"| method | seeds | primary point | {head} (every seed, 0 first) | raw point: {head} |"
    " IS, primary | class TVD, primary |",
    "|---|---|---|---|---|---|---|",
  ]
  for a, rs in by_arm.items():
    if not rs:
      lines.append(f"| {labels[a]} | - | - | - | - | - | - |")
      continue
    point = _primary_point(arms[a])
    is_ = [at_steps(r, f"{point}/inception_score", steps) for r in rs]
    tvd = [at_steps(r, f"{point}/class_tvd", steps) for r in rs]
    lines.append(
      f"| {labels[a]} | {','.join(str(r['seed']) for r in rs)} | {POINT_LABELS[point]} | "
      f"{stats.fmt_values(primary[a])} | {stats.fmt_values(raw[a])} | "
      f"{stats.fmt_mean_sd(is_, 2)} | {stats.fmt_mean_sd(tvd, 3)} |"
    )
  comps = [tuple(c) for c in prim["comparisons"]]
  kw = dict(test=prim["test"], alpha=prim["alpha"], lower_is_better=True, metric="FID")
  lines += [
    "",
    f"**Primary** (registered: EMA of the slow weights vs EMA of the iterate, the endpoint "
    f"mean of steps {steps[0]}-{steps[-1]}; {stats.TEST_LABELS[prim['test']]}, alpha "
    f"{prim['alpha']}, Holm over {len(comps)}):",
  ]
  lines += _report.family(primary, comps, labels, **kw)
  lines += ["", "Secondary, the raw points (slow weights vs iterate; Holm over the same three):"]
  lines += _report.family(raw, comps, labels, **kw)
  lines += ["", "Secondary, spread across seeds at the primary points (two-sided F-test, raw p):"]
  for a, b in _report.tested(primary, comps):
    p = stats.variance_ratio_test(primary[a], primary[b])
    sa, sb = stats.mean_sd(primary[a])[1], stats.mean_sd(primary[b])[1]
    lines.append(
      f"- {labels[a]} sd {sa:.1f} vs {labels[b]} sd {sb:.1f}: p = {stats.fmt_p(p)}"
      f" (n = {len(primary[a])}/{len(primary[b])})"
    )
  lines += secondary_at_points(protocol, by_arm, labels)
  lines += _report.scorer_lines(_report.one_scorer(runs))
  lines += _report.endpoint_lines(
    "experiments/gan/protocols/lookahead.v2.json",
    [
      "the **Primary** verdicts above",
      "above (the raw points)",
      "above (FID at step 20000 alone; IS analogue and class TVD at the primary points)",
      "above (spread across seeds)",
      "the figure `experiments/gan/results/v2/lookahead_all_seeds.png`",
    ],
    _registration(),
  )
  return "\n".join(lines)


def _registration() -> dict | None:
  """The registration record of the v2 runs' JSON (none: they predate issue 46)."""
  return json.loads(V2_NEW.read_text()).get("registration") if V2_NEW.exists() else None


def secondary_at_points(
  protocol: dict, by_arm: dict, labels: dict, point_of=_primary_point
) -> list[str]:
  """The registered secondary "FID at the last step alone; IS analogue and class TVD at the
  primary points" (``point_of(arm spec)``), each with the primary's test, Holm over the same
  comparisons."""
  from experiments import _report

  steps, prim, arms = protocol["endpoint_steps"], protocol["primary"], protocol["arms"]
  comps = [tuple(c) for c in prim["comparisons"]]
  kw = dict(test=prim["test"], alpha=prim["alpha"])

  def at(metric: str, at_steps_: list) -> dict:
    key = lambda a: f"{point_of(arms[a])}/{metric}"  # noqa: E731
    return {a: [at_steps(r, key(a), at_steps_) for r in rs] for a, rs in by_arm.items()}

  n = len(comps)
  lines = ["", f"Secondary, FID at step {steps[-1]} alone at the primary points (Holm over {n}):"]
  lines += _report.family(
    at("fid", steps[-1:]), comps, labels, metric="FID", **kw, lower_is_better=True
  )
  lines += ["", f"Secondary, IS analogue at the primary points (higher is better; Holm over {n}):"]
  lines += _report.family(
    at("inception_score", steps), comps, labels, metric="IS", digits=2, lower_is_better=False, **kw
  )
  lines += ["", f"Secondary, class TVD at the primary points (Holm over {n}):"]
  lines += _report.family(
    at("class_tvd", steps), comps, labels, metric="class TVD", digits=3, lower_is_better=True, **kw
  )
  return lines


def plot_v2(path: Path = ROOT / "results" / "v2" / "lookahead_all_seeds.png") -> Path:
  """The figure of protocol v2: every arm's FID curves over its ten seeds (seeds 0-4 from
  version 0's JSON, 5-9 from ``results/v2``), one panel per evaluation point."""
  _, runs = v2_runs()
  path.parent.mkdir(parents=True, exist_ok=True)
  plot({"runs": runs}, path)
  return path
