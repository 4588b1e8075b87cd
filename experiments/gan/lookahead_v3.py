"""Versions 3 and 4 of the lookahead study (``protocols/lookahead.v3.json``, ``.v4.json``,
pre-registered): the reference's MNIST-notebook protocol (Adam(1e-3, b1 0.05), batch 50, EMA
0.9999, k = 1000, alpha 0.5, the notebook's optimizer composition), 100k generator steps.
Version 3 ran the library's DCGAN pair with shared latent draws; version 4, which supersedes
it, the notebook's own networks (``make_pair('dcgan_notebook')``) and a fresh latent batch per
player's field (``latent_draws='per_player'``). Each version's README block: while the runs
go, every arm's progress and the CPU-hours left; at the endpoint, the registered verdicts. The
figure is the version's own ``results/v<N>/lookahead.png`` (drawn at every write of the JSON)."""

from __future__ import annotations

import json

from experiments.gan.lookahead_curves import POINT_LABELS, ROOT, at_steps
from experiments.gan.lookahead_v2 import secondary_at_points

# version -> (its protocol, its results JSON)
VERSIONS = {
  3: ("experiments/gan/protocols/lookahead.v3.json", ROOT / "results" / "v3" / "lookahead.json"),
  4: ("experiments/gan/protocols/lookahead.v4.json", ROOT / "results" / "v4" / "lookahead.json"),
}
PROTOCOL_FILE, RESULTS = VERSIONS[3]
# Why a version is not run to its end (None: it runs), its block's first line.
STATUS = {
  3: "superseded by v4 (the notebook's own networks and its per-player latent draws, from the "
  "parity work registered after v3) and not run to the end: its one start reached no evaluation",
  4: None,
}
# the study's settings a result JSON must share with the protocol (its "protocol" record)
SETTINGS = {
  "steps": "num_steps",
  "batch_size": "batch_size",
  "eval_every": "eval_every",
  "eval_samples": "num_eval_samples",
  "ema_horizon_steps": "ema_horizon_steps",
}


def version_runs(
  path=RESULTS, protocol_file: str = PROTOCOL_FILE
) -> tuple[dict, list[dict], dict | None]:
  """The protocol (``protocol_file``, v3's by default), its runs in ``path`` (finished or
  not; none before the study starts) and the JSON's registration record; ``ValueError`` for
  runs of other settings."""
  from experiments import _report

  protocol = _report.load_protocol(_report.REPO / protocol_file)
  if not path.exists():
    return protocol, [], None
  data = json.loads(path.read_text())
  ran = data["protocol"]
  differ = [k for k, v in SETTINGS.items() if ran.get(v) != protocol["settings"][k]]
  differ += [k for k, v in protocol["settings"]["config_fields"].items() if ran.get(k) != v]
  if differ or ran.get("overrides"):
    name = f"lookahead v{protocol['version']}"
    raise ValueError(f"{name}: runs with other settings ({differ or ran['overrides']})")
  runs = [r for r in data["runs"] if r["arm"] in protocol["arms"]]
  _report.one_scorer(runs, lambda r: f"{r['arm']} s{r['seed']}")
  return protocol, runs, data.get("registration")


def cpu_left(protocol: dict, by_arm: dict) -> dict[str, float]:
  """Per arm, the CPU-seconds its seeds still need to reach the horizon: the arm's own
  rate so far (CPU-s per step, every seed together), or, before it has one, the rate
  measured before registration (the protocol's ``cpu_estimate``: per arm, or per scheme)."""
  horizon = protocol["settings"]["steps"]
  measured = protocol["cpu_estimate"]["cpu_s_per_1000_steps_all_seeds"]
  left = {}
  for arm, spec in protocol["arms"].items():
    runs = by_arm.get(arm, [])
    step = min((r["steps"] for r in runs), default=0)
    cpu = max((r["cpu_s_all_seeds"] for r in runs), default=0.0)
    before = measured[arm] if arm in measured else measured[spec["scheme"]]  # v4: per arm
    rate = cpu / step if step else before / 1000
    left[arm] = rate * (horizon - step)
  return left


def progress_lines(protocol: dict, by_arm: dict) -> list[str]:
  """The ``**Incomplete:**`` paragraph and a table of every arm's progress (the step its
  seeds reached, CPU-hours spent and left); ``[]`` when every seed reached the horizon; for a
  superseded version (:data:`STATUS`), one line saying so."""
  horizon, n = protocol["settings"]["steps"], len(protocol["seeds"])
  labels = {a: spec["label"] for a, spec in protocol["arms"].items()}
  left = cpu_left(protocol, by_arm)
  if all(len(by_arm.get(a, [])) == n and not left[a] for a in protocol["arms"]):
    return []
  if STATUS[protocol["version"]] is not None:  # superseded: no run to the end, no CPU left
    return [f"**Incomplete:** {STATUS[protocol['version']]}; it has no verdict.", ""]
  started = "started" if any(by_arm.values()) else "not started"
  status = f"{started} and resumable (one arm at a time, its {n} seeds vmapped)"
  lines = [
    f"**Incomplete:** {status}; no verdict is drawn until every arm's seeds reach step "
    f"{horizon}. CPU-hours left, estimated from each arm's rate so far (before its first "
    "evaluation: the rate measured before registration, compilation and evaluations "
    f"excluded): **{sum(left.values()) / 3600:.0f}**.",
    "",
    "| arm | seeds | step reached (of " + f"{horizon}) | CPU-hours so far | CPU-hours left |",
    "|---|---|---|---|---|",
  ]
  for arm in protocol["arms"]:
    runs = by_arm.get(arm, [])
    step = min((r["steps"] for r in runs), default=0)
    cpu = max((r["cpu_s_all_seeds"] for r in runs), default=0.0)
    seeds = ",".join(str(r["seed"]) for r in runs) or "not started"
    lines.append(
      f"| {labels[arm]} | {seeds} | {step} | {cpu / 3600:.1f} | {left[arm] / 3600:.1f} |"
    )
  return lines + [""]


def _point(spec: dict) -> str:
  return "ema"  # the primary: the notebook's EMA of the iterate, every arm


def _slow_point(spec: dict) -> str:
  return "slow_ema" if spec.get("lookahead") else "ema"


def readme_table(version: int) -> str:
  """The README block ``lookahead_v<version>``: progress while the runs go; every finished
  seed's endpoint FID; the registered verdicts (Mann-Whitney, Holm over the two comparisons)."""
  from experiments import _report, stats

  protocol_file, results = VERSIONS[version]
  protocol, runs, record = version_runs(results, protocol_file)
  steps, prim, arms = protocol["endpoint_steps"], protocol["primary"], protocol["arms"]
  labels = {a: spec["label"] for a, spec in arms.items()}
  all_runs = {a: sorted((r for r in runs if r["arm"] == a), key=lambda r: r["seed"]) for a in arms}
  lines = progress_lines(protocol, all_runs)
  done = {a: [r for r in rs if r["steps"] >= steps[-1]] for a, rs in all_runs.items()}
  lines += _report.incomplete_note(done, labels, len(protocol["seeds"]), " at the endpoint")

  def fid(point_of, key="fid") -> dict:
    return {
      a: [at_steps(r, f"{point_of(arms[a])}/{key}", steps) for r in rs] for a, rs in done.items()
    }

  primary, slow, raw = fid(_point), fid(_slow_point), fid(lambda s: "slow")
  head = f"FID, mean of steps {steps[0]}-{steps[-1]}"
  lines += [
    f"| method | seeds | {head}, EMA of the iterate (every seed) | EMA of the slow weights "
    "(LA) | raw point | IS, EMA | class TVD, EMA |",
    "|---|---|---|---|---|---|---|",
  ]
  is_, tvd = fid(_point, "inception_score"), fid(_point, "class_tvd")
  for a, rs in done.items():
    if not rs:
      lines.append(f"| {labels[a]} | - | - | - | - | - | - |")
      continue
    cells = [
      ",".join(str(r["seed"]) for r in rs),
      stats.fmt_values(primary[a]),
      stats.fmt_values(slow[a]) if arms[a].get("lookahead") else "-",
      stats.fmt_values(raw[a]),
      stats.fmt_mean_sd(is_[a], 2),
      stats.fmt_mean_sd(tvd[a], 3),
    ]
    lines.append(f"| {labels[a]} | " + " | ".join(cells) + " |")
  comps = [tuple(c) for c in prim["comparisons"]]
  kw = dict(test=prim["test"], alpha=prim["alpha"], lower_is_better=True, metric="FID")
  lines += [
    "",
    f"**Primary** (registered: {POINT_LABELS['ema']} of every arm, the notebook's "
    f"EMA; {stats.TEST_LABELS[prim['test']]}, alpha {prim['alpha']}, Holm over {len(comps)}):",
  ]
  lines += _report.family(primary, comps, labels, **kw)
  lines += [
    "",
    "Secondary, the EMA of LA's slow weights (once per sync, 0.9999) vs the base "
    f"method's EMA (Holm over {len(comps)}):",
  ]
  lines += _report.family(slow, comps, labels, **kw)
  lines += ["", f"Secondary, the raw points (slow weights vs iterate; Holm over {len(comps)}):"]
  lines += _report.family(raw, comps, labels, **kw)
  lines += secondary_at_points(protocol, done, labels, point_of=_point)
  lines += ["", "Secondary, spread across seeds at the primary points (two-sided F-test, raw p):"]
  for a, b in _report.tested(primary, comps):
    p = stats.variance_ratio_test(primary[a], primary[b])
    lines.append(f"- {labels[a]} vs {labels[b]}: p = {stats.fmt_p(p)}")
  lines += _report.scorer_lines(_report.one_scorer(runs))
  finished = all(len(rs) == len(protocol["seeds"]) for rs in done.values())
  where = [
    "the **Primary** verdicts above",
    "above (EMA of the slow weights)",
    "above (raw points)",
    "above (FID at the last step; IS analogue, class TVD)",
    "above (spread across seeds)",
    f"the figure `experiments/gan/results/v{version}/lookahead.png`",
  ]
  ends = _report.endpoint_lines(protocol_file, where if finished else [], record)
  if not runs:  # no result JSON yet: nothing predates the registration
    from experiments import registration

    ends[1] = ends[1].replace(registration.describe(None), "No result JSON is committed yet.")
  return "\n".join(lines + ends)


def readme_table_v3() -> str:
  return readme_table(3)


def readme_table_v4() -> str:
  return readme_table(4)
