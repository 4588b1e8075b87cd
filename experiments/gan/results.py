r"""The Lookahead study of ``experiments/gan`` (issue 12; pre-registered from version 1), on the
study runner (``experiments.study``: :data:`STUDY`).

  python -m experiments.gan.results run                 # protocols/lookahead.v4.json, resumable
  python -m experiments.gan.results run --protocol experiments/gan/protocols/lookahead.v2.json
  python -m experiments.gan.results report              # the README blocks, from the JSON
  python -m experiments.gan.results table               # the table of results/v<N>/lookahead.json

Lookahead-minmax against its base method on Fashion-MNIST: AltGAN vs LA-AltGAN and ExtraGrad
vs LA-ExtraGrad with the protocol's networks, optimizer and sync periods. Every run is
evaluated (classifier-FID, IS analogue, class TVD) at the point the paper evaluates, the slow
weights (for the base methods: the iterate), and at an EMA of the fast weights and (LA only)
an EMA of the slow weights updated at syncs (``minmaxlab.transforms.slow_ema``). Evaluation
steps are multiples of k, where the fast weights equal the slow ones (they are reset at each
sync), so the fast weights need no evaluation of their own.

One arm at a time (:func:`run_arm`), its seeds vmapped in ``<runs>/lookahead/<arm>_s<seeds>``
with an orbax checkpoint at every evaluation; every evaluation's progress is saved to
``results/v<N>/lookahead.json`` (and its figure), a finished arm is skipped and an interrupted
one resumes from its checkpoint with identical numbers (every draw is a function of
``(seed, step)``, as in ``train.py``). The arms and the training of one arm are in
``lookahead_study.py``; the blocks of version 2 are made by ``lookahead_v2.py``, of versions 3
and 4 by ``lookahead_v3.py``, of version 0 (exploratory, not pre-registered: its JSON was
written by this file's command before the runner, with its defaults) here.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from experiments import study
from experiments.gan.lookahead_curves import (
  POINT_LABELS,
  ROOT,
  V0_LONG,
  V0_SHORT,
  at_steps,
  plot,
  runs_by_arm,
)
from experiments.gan.lookahead_study import LABELS, POINTS, study_config
from experiments.gan.lookahead_study import run_arm as run_arm_seeds

# The study's settings (``protocols/lookahead.v<N>.json``'s ``settings``); a value given on
# the command line replaces the protocol's and is recorded as an override (tests, smoke runs).
SETTINGS = {
  "steps": "steps",
  "eval_every": "eval_every",
  "eval_samples": "eval_samples",
  "batch_size": "batch_size",
  "lr": "lr",
  "b1": "b1",
  "ema_horizon": "ema_horizon_steps",
}


def settings(ctx) -> SimpleNamespace:
  """The settings of the command line ``ctx.options`` over the protocol's: what
  ``lookahead_study.study_config`` reads (``args``), with the ``overrides``."""
  s, o = ctx.protocol["settings"], ctx.options
  given = {k: getattr(o, k) for k in SETTINGS if getattr(o, k) is not None}
  values = {k: given.get(k, s[v]) for k, v in SETTINGS.items()}
  values["ema_horizon"] = float(values["ema_horizon"])
  overrides = sorted([*given, *(["seeds"] if o.seeds else [])])
  fields = dict(s.get("config_fields", {}))  # e.g. the networks, the optimizer
  return SimpleNamespace(**values, set=o.set, config_fields=fields, overrides=overrides)


def arm_spec(protocol: dict, arm: str) -> dict:
  return {k: v for k, v in protocol["arms"][arm].items() if k != "label"}


def run_arm(ctx, arm: str, seeds: list[int]) -> list[dict]:
  """Every seed of ``arm`` at once (``lookahead_study.run_arm``: one vmapped program, its
  checkpoint at every evaluation), each evaluation's progress saved; one record per seed."""
  args, spec = settings(ctx), arm_spec(ctx.protocol, arm)
  config = study_config(arm, seeds[0], args, spec)
  label = ctx.protocol["arms"][arm].get("label", LABELS.get(arm, arm))
  tag = lambda rs: [{"arm": arm, "label": label, **spec, **r} for r in rs]  # noqa: E731
  folder = ctx.runs / "lookahead" / f"{arm}_s{'-'.join(map(str, seeds))}"
  made = run_arm_seeds(config, seeds, folder, args.ema_horizon, ctx.log, lambda p: ctx.save(tag(p)))
  return tag(made)


def _header(ctx, runs: list) -> dict:
  """The JSON's ``protocol`` record: the config every arm shares, the protocol, overrides."""
  args, arm = settings(ctx), next(iter(ctx.protocol["arms"]))
  config = study_config(arm, ctx.protocol["seeds"][0], args, arm_spec(ctx.protocol, arm))
  drop = ("seed", "scheme", "lookahead", "sync_period", "classifier")
  protocol = {k: v for k, v in config.to_dict().items() if k not in drop}
  protocol.update(ema_horizon_steps=args.ema_horizon, classifier_steps=config.classifier.steps)
  protocol.update(registered=ctx.protocol, overrides=args.overrides)
  return {"study": "lookahead", "protocol": protocol}


def _options(p) -> None:
  p.add_argument("--steps", type=int, help="generator steps per run")
  p.add_argument("--eval-every", type=int, help="a multiple of every k")
  p.add_argument("--eval-samples", type=int)
  p.add_argument("--batch-size", type=int)
  p.add_argument("--lr", type=float, help="Adam lr of both players")
  p.add_argument("--b1", type=float, help="Adam b1")
  p.add_argument("--ema-horizon", type=float, help="EMA decay 1 - 1/H per step")
  p.add_argument("--set", action="append", help="any config field: --set dataset=digits8")
  p.add_argument("--last", type=int, default=1, help="table: mean of each run's last evaluations")


def _print_table(o) -> None:
  """``table``: the table of the results JSON (``--out``)."""
  from experiments import _report

  out, _ = study.where(STUDY, o, _report.load_protocol(o.protocol))
  print(table(json.loads(out.read_text()), o.last))


def _figure_v2(o) -> None:
  """``figure_v2``: ``results/v2/lookahead_all_seeds.png`` (protocol v2: all ten seeds)."""
  from experiments.gan.lookahead_v2 import plot_v2

  print(plot_v2())


# One arm at a time, its seeds vmapped, into ``results/v<N>/lookahead.json`` (and its figure).
STUDY = study.Study(
  protocol=ROOT / "protocols" / "lookahead.v4.json",
  results=ROOT / "results" / "v{version}" / "lookahead.json",
  run_one=run_arm,
  runs="runs/lookahead_v{version}",
  blocks=tuple(f"lookahead_v{v}" for v in ("4", "3", "2", "0_3k", "0_10k", "0_20k")),
  batch=True,
  done=lambda ctx, r: r["steps"] >= settings(ctx).steps,
  header=_header,
  sort_key=lambda p, r: (list(p["arms"]).index(r["arm"]), r["seed"]),
  saved=lambda ctx, out: plot(json.loads(out.read_text()), out.with_suffix(".png")),
  options=_options,
  commands=(("table", _print_table), ("figure_v2", _figure_v2)),
)


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


def main(argv=None) -> int:
  return study.main(STUDY, argv)


if __name__ == "__main__":
  raise SystemExit(main())
