r"""Result studies of ``experiments/gan`` (issue 12), one resumable command each.

  python -m experiments.gan.results lookahead --seeds 0,1,2,3,4   # run (or resume) the study
  python -m experiments.gan.results lookahead --table             # table of the committed JSON

``lookahead``: Lookahead-minmax against its base method on Fashion-MNIST with the
Lipizzaner MLP pair (``configs/fashion_mnist_mlp.py``): AltGAN vs LA-AltGAN and
ExtraGrad vs LA-ExtraGrad, LA with the paper's MNIST sync period k = 1000 and its
CIFAR k = 5, alpha = 0.5. Every run is evaluated (classifier-FID, IS analogue, class
TVD) at the point the paper evaluates, the slow weights (for the base methods: the
iterate), and at an EMA of the fast weights and (LA only) an EMA of the slow weights
updated at syncs (``minmaxlab.transforms.slow_ema``). Evaluation steps are multiples
of k, where the fast weights equal the slow ones (they are reset at each sync), so the
fast weights need no evaluation of their own.

Each (arm, seed) trains in its own folder ``<runs>/<study>/<arm>_s<seed>`` with an
orbax checkpoint at every evaluation; a finished run (``result.json``) is skipped and
an interrupted one resumes from its checkpoint with identical numbers (every draw is
a function of ``(seed, step)``, as in ``train.py``). The study writes
``<out>/<study>.json`` (every run's curves) and ``<out>/<study>.png``. The arms and
the training of one arm are in ``lookahead_study.py``; this file runs the study and
reports it (JSON, figure, table); version 2 (pre-registered) is ``lookahead_v2.py``, versions 3
and 4 ``lookahead_v3.py``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from experiments.gan.lookahead_curves import (
  POINT_LABELS,
  ROOT,
  V0_LONG,
  V0_SHORT,
  at_steps,
  plot,
  runs_by_arm,
)
from experiments.gan.lookahead_study import ARMS, LABELS, POINTS, run_arm, study_config

# Version 0's settings (issue 12, not pre-registered); a protocol file replaces them.
DEFAULTS = {
  "seeds": "0,1,2,3,4",
  "arms": "alt,la_alt_k5,eg,la_eg_k5",
  "steps": 4000,
  "eval_every": 1000,
  "eval_samples": 2000,
  "batch_size": 50,
  "lr": 1e-3,
  "b1": 0.05,
  "ema_horizon": 1000.0,
}


def resolve(args):
  """Fill the study settings of ``args`` that the command line left unset: from the
  protocol file (``--protocol``: its arms, seeds and settings) or from the version-0
  defaults. Returns ``(args, arms, protocol)``: ``arms`` maps each arm to run to its
  settings; ``protocol`` is the protocol's dict (``None`` without one). A setting given
  on the command line overrides the protocol's and is recorded as an override (tests)."""
  protocol = None
  values = dict(DEFAULTS)
  arm_table = {a: dict(v) for a, v in ARMS.items()}
  args.registration = None
  args.config_fields = {}
  if args.protocol:
    from experiments import _report, registration

    args.registration = registration.start(args.protocol, trial=args.trial)
    protocol = _report.load_protocol(args.protocol)
    s = protocol["settings"]
    values.update(
      seeds=",".join(map(str, protocol["seeds"])),
      arms=",".join(protocol["arms"]),
      steps=s["steps"],
      eval_every=s["eval_every"],
      eval_samples=s["eval_samples"],
      batch_size=s["batch_size"],
      lr=s["lr"],
      b1=s["b1"],
      ema_horizon=float(s["ema_horizon_steps"]),
    )
    args.config_fields = dict(s.get("config_fields", {}))  # e.g. the networks, the optimizer
    arm_table = {
      a: {k: v for k, v in spec.items() if k != "label"} for a, spec in protocol["arms"].items()
    }
  overrides = sorted(k for k in values if k != "arms" and getattr(args, k) is not None)
  for k, v in values.items():
    if getattr(args, k) is None:
      setattr(args, k, v)
  args.overrides = overrides if protocol else []
  arms = args.arms.split(",")
  unknown = [a for a in arms if a not in arm_table]
  if unknown:
    raise SystemExit(f"--arms: {', '.join(unknown)} not in {', '.join(arm_table)}")
  return args, {a: arm_table[a] for a in arms}, protocol


def run_study(args, log=print) -> dict:
  """Run every arm (all seeds of an arm at once; finished arms are skipped), then
  write ``<out>/<study>.json`` and the figure."""
  args, arms, registered = resolve(args)
  seeds = [int(s) for s in args.seeds.split(",")]
  out_dir = Path(args.out)
  out_dir.mkdir(parents=True, exist_ok=True)
  path = out_dir / f"{args.study}.json"
  runs: list[dict] = []
  protocol = None
  for arm, spec in arms.items():
    config = study_config(arm, seeds[0], args, spec)
    if protocol is None:
      protocol = {
        k: v
        for k, v in config.to_dict().items()
        if k not in ("seed", "scheme", "lookahead", "sync_period", "classifier")
      }
      protocol.update(ema_horizon_steps=args.ema_horizon, classifier_steps=config.classifier.steps)
      if registered:
        protocol.update(registered=registered, overrides=args.overrides)
    folder = Path(args.runs) / args.study / f"{arm}_s{'-'.join(map(str, seeds))}"
    label = (registered or {}).get("arms", {}).get(arm, {}).get("label", LABELS.get(arm, arm))

    def progress(partial, arm=arm, label=label, spec=spec):  # runs so far, this arm's partial
      mine = [{"arm": arm, "label": label, **spec, **r} for r in partial]
      write_results(out_dir, args.study, protocol, runs + mine, args.registration)

    for r in run_arm(config, seeds, folder, args.ema_horizon, log, progress):
      runs.append({"arm": arm, "label": label, **spec, **r})
    write_results(out_dir, args.study, protocol, runs, args.registration)
  return json.loads(path.read_text())


def write_results(out_dir: Path, study: str, protocol: dict, runs: list[dict], reg=None) -> None:
  """Merge ``runs`` into ``<out>/<study>.json`` (runs of other arms or seeds already there
  are kept, so several processes can run different arms) and redraw the figure; ``reg``: the
  registration record of a protocol's study (``experiments.registration.start``)."""
  from experiments import _report, registration

  path = Path(out_dir) / f"{study}.json"
  with _report.results_lock(path):
    mine = {(r["arm"], r["seed"]) for r in runs}
    before = json.loads(path.read_text()) if path.exists() else {}
    old = before.get("runs", [])
    merged = [r for r in old if (r["arm"], r["seed"]) not in mine] + runs
    arm_names = list(protocol.get("registered", {}).get("arms", ARMS))
    order = {arm: i for i, arm in enumerate(arm_names)}
    merged.sort(key=lambda r: (order.get(r["arm"], 99), r["seed"]))
    data = {"study": study, "protocol": protocol, "runs": merged}
    if reg is not None:
      data["registration"] = registration.merge(before.get("registration"), reg)
    _report.write_json(path, data)
    plot(data, Path(out_dir) / f"{study}.png")


def table(data: dict, last: int = 1) -> str:
  """Markdown table: per arm, final classifier-FID at each evaluation point, mean ±
  sample std over seeds with every seed's value (``last > 1``: each run's mean over its
  last ``last`` evaluations), the IS analogue and class TVD at the slow weights."""
  from experiments import stats

  head = ["method", "seeds", "steps", "FID slow", "FID EMA", "FID slow-EMA", "IS slow", "TVD slow"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for arm, runs in runs_by_arm(data).items():
    runs = [r for r in runs if r["curves"]]
    if not runs:
      continue
    cells = [LABELS.get(arm, arm), ",".join(str(r["seed"]) for r in runs)]
    steps = sorted({r["curves"][-1]["step"] for r in runs})
    div = [r["seed"] for r in runs if r.get("diverged_at") is not None]
    cells.append("/".join(map(str, steps)) + (f" (diverged: seeds {div})" if div else ""))
    for point, metric in [
      ("slow", "fid"),
      ("ema", "fid"),
      ("slow_ema", "fid"),
      ("slow", "inception_score"),
      ("slow", "class_tvd"),
    ]:
      key = f"{point}/{metric}"
      if key not in runs[0]["curves"][-1]:
        cells.append("-")
        continue
      v = np.array([np.mean([row[key] for row in r["curves"][-last:]]) for r in runs])
      cells.append(
        stats.fmt_values(v)
        if metric == "fid"
        else f"{v.mean():.3g} ± {(v.std(ddof=1) if len(v) > 1 else 0.0):.2g}"
      )
    lines.append("| " + " | ".join(cells) + " |")
  from experiments import _classifier_cache

  note = _classifier_cache.scorers_note(data["runs"], lambda r: f"{r['arm']} s{r['seed']}")
  return "\n".join(lines + ([f"\n{note}"] if note else []))


# -- generated README blocks (experiments/_report.py) -------------------------------------


def readme_table_v0(path: Path = V0_LONG, step: int = 20000) -> str:
  """A README block of version 0 (exploratory, not pre-registered): every seed's FID at
  each evaluation point at ``step``, and exploratory Mann-Whitney p-values of each LA arm
  against its base at the slow weights (no correction; not a verdict)."""
  from experiments import _report, stats

  data = json.loads(Path(path).read_text())
  runs = [r for r in data["runs"] if any(row["step"] == step for row in r["curves"])]
  _report.one_scorer(runs, lambda r: f"{r['arm']} s{r['seed']}")
  by_arm = runs_by_arm({"runs": runs})
  cols = [p for p in POINTS]
  lines = [
    f"| method (step {step}) | seeds | "
    + " | ".join(f"FID {POINT_LABELS[p]}" for p in cols)
    + " | IS, slow | class TVD, slow |",
    "|---|---|" + "---|" * (len(cols) + 2),
  ]
  slow = {}
  for arm, rs in by_arm.items():
    cells = [LABELS.get(arm, arm), ",".join(str(r["seed"]) for r in rs)]
    for p in cols:
      key = f"{p}/fid"
      if key not in rs[0]["curves"][0]:
        cells.append("-")
        continue
      v = [at_steps(r, key, [step]) for r in rs]
      cells.append(stats.fmt_values(v))
      if p == "slow":
        slow[arm] = v
    cells.append(stats.fmt_mean_sd([at_steps(r, "slow/inception_score", [step]) for r in rs], 2))
    cells.append(stats.fmt_mean_sd([at_steps(r, "slow/class_tvd", [step]) for r in rs], 3))
    lines.append("| " + " | ".join(cells) + " |")
  base = {"alternating": "alt", "extragradient": "eg"}
  tests = []
  for arm, rs in by_arm.items():
    b = base.get(rs[0]["scheme"])
    if rs[0]["lookahead"] and b in slow:
      p = stats.mann_whitney(slow[arm], slow[b])
      tests.append(f"{LABELS[arm]} vs {LABELS[b]} p = {stats.fmt_p(p)}")
  if tests:
    lines += [
      "",
      "Exploratory Mann-Whitney at the slow weights (uncorrected, not a verdict): "
      + "; ".join(tests)
      + ".",
    ]
  return "\n".join(lines)


def readme_table_v0_3k() -> str:
  return readme_table_v0(V0_SHORT, 3000)


def readme_table_v0_10k() -> str:
  return readme_table_v0(V0_LONG, 10000)


def _register() -> None:
  from experiments import _report

  readme = "experiments/gan/README.md"
  _report.register("lookahead_v4", readme, "experiments.gan.lookahead_v3:readme_table_v4")
  _report.register("lookahead_v3", readme, "experiments.gan.lookahead_v3:readme_table_v3")
  _report.register("lookahead_v2", readme, "experiments.gan.lookahead_v2:readme_table_v2")
  _report.register("lookahead_v0_3k", readme, f"{__name__}:readme_table_v0_3k")
  _report.register("lookahead_v0_10k", readme, f"{__name__}:readme_table_v0_10k")
  _report.register("lookahead_v0_20k", readme, f"{__name__}:readme_table_v0")


_register()


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("study", choices=["lookahead"])
  p.add_argument("--table", action="store_true", help="only print the table of <out>/<study>.json")
  p.add_argument(
    "--report",
    action="store_true",
    help="only draw results/v2/lookahead_all_seeds.png (protocol v2: all ten seeds) and print "
    "its README block",
  )
  p.add_argument("--last", type=int, default=1, help="table: mean of each run's last evaluations")
  p.add_argument(
    "--protocol",
    help="a protocol file (protocols/<study>.v<N>.json): its arms, seeds and settings",
  )
  p.add_argument("--trial", action="store_true", help="a smoke run: registration not checked")
  p.add_argument("--seeds", help=f"default: the protocol's, else {DEFAULTS['seeds']}")
  p.add_argument("--arms", help="a subset of the protocol's arms (default: all of them)")
  p.add_argument("--steps", type=int, help="generator steps per run")
  p.add_argument("--eval-every", type=int, help="a multiple of every k")
  p.add_argument("--eval-samples", type=int)
  p.add_argument("--batch-size", type=int, help="the paper's MNIST batch: 50")
  p.add_argument("--lr", type=float, help="Adam lr of both players (paper, MNIST: 1e-3)")
  p.add_argument("--b1", type=float, help="Adam b1 (the paper's MNIST: 0.05)")
  p.add_argument(
    "--ema-horizon",
    type=float,
    help="EMA decay 1 - 1/H per step (slow EMA: (1 - 1/H)^k per sync)",
  )
  p.add_argument("--set", action="append", help="any config field: --set dataset=digits8")
  p.add_argument("--runs", default="runs/gan_results")
  p.add_argument("--out", default=str(ROOT / "results"))
  return p.parse_args(argv)


def main(argv=None) -> None:
  args = parse_args(argv)
  if args.report:
    from experiments.gan.lookahead_v2 import plot_v2, readme_table_v2

    plot_v2()
    print(readme_table_v2())
    return
  if args.table:
    data = json.loads((Path(args.out) / f"{args.study}.json").read_text())
    print(table(data, args.last))
    return
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  data = run_study(args, log=lambda s: print(s, flush=True))
  print(table(data))


if __name__ == "__main__":
  main()
