"""The files, the figure and the generated README block of the game-dynamics study
(``dynamics_study.py``, protocol ``protocols/dynamics.v2.json``), made from the committed
per-seed JSON only; the verdicts come from ``experiments.stats``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
PROTOCOL = ROOT / "protocols" / "dynamics.v2.json"
RESULTS = ROOT / "results" / "dynamics"
FIGURE = RESULTS / "dynamics.png"


def load_runs(out=RESULTS) -> list[dict]:
  """Every per-seed result file of ``out``, sorted by (arm, seed)."""
  runs = [json.loads(p.read_text()) for p in sorted(Path(out).glob("*_s*.json"))]
  return sorted(runs, key=lambda r: (r["arm"], r["seed"]))


# metrics.jsonl key -> (label, digits in the table)
METRICS = {
  "dynamics/rotation_share": ("rotational share", 3),
  "dynamics/max_imag": ("top |Im λ|", 2),
  "fid": ("FID", 1),
  "dynamics/spectral_radius_per_step": ("update-operator radius per step", 5),
  "dynamics/top_abs": ("|λ_0|", 1),
}
PANELS = (
  "dynamics/rotation_share",
  "dynamics/max_imag",
  "fid",
  "dynamics/spectral_radius_per_step",
)


def endpoint(run: dict, key: str, steps) -> float:
  """The mean of ``run``'s ``key`` over its evaluations at ``steps`` (``nan`` if it has
  none of that key; ``ValueError`` naming the run if a step is missing)."""
  by_step = {row["step"]: row for row in run["curves"]}
  missing = [s for s in steps if s not in by_step]
  if missing:
    raise ValueError(f"{run['arm']} seed {run['seed']} has no evaluation at steps {missing}")
  values = [by_step[s].get(key, np.nan) for s in steps]
  return float(np.mean(values))


def plot(runs: list[dict], path: Path = FIGURE) -> Path:
  """Rotational share, top |Im λ|, FID and the update operator's radius per step against
  generator steps: every seed faint, the median over seeds bold, one colour per arm."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, len(PANELS), figsize=(3.6 * len(PANELS), 3.2))
  colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  arms = list(dict.fromkeys(r["arm"] for r in runs))
  for ax, key in zip(axes, PANELS):
    for color, arm in zip(colors, arms):
      mine = [r for r in runs if r["arm"] == arm]
      curves = [[(row["step"], row[key]) for row in r["curves"] if key in row] for r in mine]
      curves = [c for c in curves if c]
      for c in curves:
        ax.plot(*zip(*c), color=color, alpha=0.25, lw=0.8)
      if curves:
        n = min(len(c) for c in curves)
        steps = [s for s, _ in curves[0][:n]]
        median = np.median([[v for _, v in c[:n]] for c in curves], axis=0)
        ax.plot(steps, median, color=color, lw=2, label=f"{mine[0]['label']} ({len(curves)})")
    ax.set_title(METRICS[key][0], fontsize=9)
    ax.set_xlabel("generator steps")
  axes[2].set_yscale("log")
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=70)
  plt.close(fig)
  return path


def _verdict(stats, values, a, b, labels, key, alpha, test, p=None) -> str:
  r = stats.compare(values[a], values[b], test=test)
  raw = r["p"]
  text = stats.verdict(
    dict(r, p=raw if p is None else p),
    alpha=alpha,
    name_a=labels[a],
    name_b=labels[b],
    lower_is_better=True,
    metric=METRICS[key][0],
    digits=METRICS[key][1],
  )
  if p is not None:
    from experiments import _report

    text = _report.holm_note(text, test, p, raw, "2")
  metric = METRICS[key][0]
  if key != "fid":  # a dynamics metric is lower or higher, not better: say so
    for win, lose in ((a, b), (b, a)):
      head = f"{labels[win]} beats {labels[lose]} on {metric}:"
      if text.startswith(head):
        text = f"lower under {labels[win]} than under {labels[lose]}:" + text[len(head) :]
  return f"- {metric}: {text}"


def readme_table(protocol_path=PROTOCOL, out=RESULTS) -> str:
  """The README block ``dynamics_v2``: every seed's endpoint means, the co-primary
  verdicts (Holm over the two metrics), the secondary ones (raw p), the CPU seconds."""
  from experiments import _report, stats

  protocol = _report.load_protocol(protocol_path)
  prim, steps = protocol["primary"], protocol["endpoint_steps"]
  labels = {a: spec["label"] for a, spec in protocol["arms"].items()}
  runs = [r for r in load_runs(out) if r["arm"] in labels and r["seed"] in protocol["seeds"]]
  by_arm = {a: [r for r in runs if r["arm"] == a] for a in labels}
  lines = _report.incomplete_note(by_arm, labels, len(protocol["seeds"]))
  lines += [
    f"Endpoint: the mean of each run's evaluations at steps {steps[0]}-{steps[-1]}.",
    "",
    "| method | seed | steps | "
    + " | ".join(label.replace("|", "\\|") for label, _ in METRICS.values())
    + " |",
    "|---|---|---|" + "---|" * len(METRICS),
  ]
  values: dict[str, dict[str, list[float]]] = {k: {a: [] for a in labels} for k in METRICS}
  for a, rs in by_arm.items():
    for r in rs:
      cells = [
        labels[a],
        str(r["seed"]),
        str(r["steps"]) + (" (diverged)" if r["diverged"] else ""),
      ]
      for key, (_, digits) in METRICS.items():
        v = endpoint(r, key, steps) if not r["diverged"] else np.nan
        if np.isfinite(v):
          values[key][a].append(v)
        cells.append(f"{v:.{digits}f}" if np.isfinite(v) else "-")
      lines.append("| " + " | ".join(cells) + " |")
  (a, b), test, alpha = prim["comparisons"][0], prim["test"], prim["alpha"]
  ran = {k: len(values[k][a]) > 1 and len(values[k][b]) > 1 for k in METRICS}
  lines += [
    "",
    f"**Primary** (registered: {labels[a]} vs {labels[b]}, endpoint means; "
    f"{stats.TEST_LABELS[test]}, alpha {alpha}, Holm over the two co-primary metrics):",
  ]
  raw = [
    stats.compare(values[k][a], values[k][b], test=test)["p"] if ran[k] else 1.0
    for k in prim["metrics"]
  ]
  for key, p in zip(prim["metrics"], stats.holm(raw)):
    if not ran[key]:
      lines.append(f"- {METRICS[key][0]}: not tested, an arm has fewer than two runs.")
      continue
    lines.append(_verdict(stats, values[key], a, b, labels, key, alpha, test, p))
  lines += ["", "Secondary (same test, raw p):"]
  for key in ("fid", "dynamics/spectral_radius_per_step"):
    if ran[key]:
      lines.append(_verdict(stats, values[key], a, b, labels, key, alpha, test))
  lines += _spectral_periods(runs, protocol)
  timed = [r["cpu_s_last_process"] for r in runs if r.get("cpu_s_last_process") is not None]
  reused = [f"{labels[r['arm']]} s{r['seed']}" for r in runs if r.get("trained_to", 0) > r["steps"]]
  lines += [
    "",
    f"CPU time of the {len(timed)} runs trained by this version: {sum(timed) / 60:.1f}"
    " CPU-minutes (each run's last process: a resumed run counts only the process that"
    " finished it)."
    + (
      f" Rows up to the endpoint from an earlier version's longer runs: {', '.join(reused)}."
      if reused
      else ""
    ),
  ]
  lines += _report.scorer_lines(_report.one_scorer(runs, lambda r: f"{r['arm']} s{r['seed']}"))
  return "\n".join(lines)


def _spectral_periods(runs, protocol, max_period: int = 1000) -> list[str]:
  """Exploratory (not registered): per base-scheme run (no lookahead), the sync period that
  ``transforms.spectral_sync_period`` would choose (rule ``smallest``) from the update
  operator's outer eigenvalues at the last endpoint step, or that none contracts."""
  from minmaxlab.transforms import spectral_sync_period

  step, out = protocol["endpoint_steps"][-1], []
  for r in runs:
    if protocol["arms"][r["arm"]].get("lookahead"):
      continue  # a lookahead run's operator is the cycle's, not its base scheme's
    row = next((c for c in r["curves"] if c["step"] == step), {})
    if "dynamics/operator_eigenvalues_re" not in row:
      continue
    lam = np.array(row["dynamics/operator_eigenvalues_re"])
    lam = lam + 1j * np.array(row["dynamics/operator_eigenvalues_im"])
    try:
      k = spectral_sync_period(lam, 0.5, max_period).sync_period
      out.append(f"s{r['seed']}: k = {k}")
    except ValueError:
      real = np.max(np.abs(lam[np.abs(lam.imag) < 1e-12].real), initial=0.0)
      out.append(f"s{r['seed']}: none (largest real eigenvalue {real:.5f})")
  if not out:
    return []
  return [
    "",
    f"Exploratory (not registered): the sync period `transforms.spectral_sync_period` (rule"
    f" `smallest`, alpha 0.5, k <= {max_period}) chooses from the update operator's outer"
    f" eigenvalues at step {step} of each run without Lookahead: " + "; ".join(out) + ".",
  ]


def readme_block() -> str:
  """The README block ``dynamics_v2``: :func:`readme_table` of the committed protocol and
  JSON, and its registered endpoints."""
  from experiments import _report

  runs = load_runs(RESULTS)
  records = {json.dumps(r.get("registration"), sort_keys=True) for r in runs}
  record = json.loads(records.pop()) if len(records) == 1 else None
  found = ["the **Primary** verdicts above", "above (**Secondary**: FID)"]
  found += ["above (**Secondary**: update-operator radius)", "above (the table: |λ_0|)"]
  found.append(f"the figure `{FIGURE.relative_to(ROOT.parent.parent)}`")
  protocol = PROTOCOL.relative_to(ROOT.parent.parent).as_posix()
  return "\n".join([readme_table(), *_report.endpoint_lines(protocol, found, record)])


def _register() -> None:
  from experiments import _report

  _report.register("dynamics_v2", "experiments/gan/README.md", f"{__name__}:readme_block")


_register()
