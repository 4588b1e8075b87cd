r"""The runs behind experiments/coevolution/README.md, in one process (programs compile
once per grid and are reused across seeds), and their tables.

  nice python -m experiments.coevolution.results ring8 [--seeds 0,1] [--out runs/coev_results]
  nice python -m experiments.coevolution.results ring8_per_cell [--seeds 0,1]
  nice python -m experiments.coevolution.results fashion [--generations 8] [--lookahead 1,0]
  nice python -m experiments.coevolution.results fashion3x3 [--generations 8]
  nice python -m experiments.coevolution.results grid25 [--seeds 0,1]
  nice python -m experiments.coevolution.results grid25_per_cell [--seeds 0,1]
  nice python -m experiments.coevolution.results fashion_grids [--grids 1,2,3] [--seeds 0,1]
      [--generations 8] [--steps 100] [--lookahead 1] [--d-every 1]
  python -m experiments.coevolution.results table [--out runs/coev_results]

Each run is the same as the command line printed before it (``main.py`` with overrides).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from absl import logging

from experiments.coevolution import train
from experiments.coevolution.configs import fashion_mnist_3x3, grid25_3x3, ring8_3x3
from minmaxlab import runner


def _flat(overrides, prefix=""):
  out = {}
  for k, v in overrides.items():
    if isinstance(v, dict):
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


def _run(name, module, overrides, out, config_file):
  config = module.get_config()
  config.progress = False
  for k, v in overrides.items():
    config[k] = v
  workdir = Path(out) / name
  flags = " ".join(f"--config.{k}={v}" for k, v in _flat(overrides).items())
  print(
    f"$ python -m experiments.coevolution.main --config {config_file} --workdir {workdir} {flags}",
    flush=True,
  )
  if (workdir / "summary.json").exists():
    print("  (done before; kept)", flush=True)
    return
  t0 = time.perf_counter()
  # An interrupted run (checkpoints, no summary) continues from its latest checkpoint.
  row = train.train(config, workdir, resume=(workdir / "checkpoints").exists())
  keys = [k for k in row if k.startswith(("mixture/", "grid/")) and k != "mixture/weights"]
  print(
    f"  {time.perf_counter() - t0:.0f} s: " + ", ".join(f"{k}={row[k]:.4g}" for k in keys),
    flush=True,
  )


def _grid_vs_single(name, module, args):
  cfg = f"experiments/coevolution/configs/{name}_3x3.py"
  per_cell = module.get_config().steps_per_generation
  for seed in args.seeds:
    _run(f"{name}_3x3_s{seed}", module, {"seed": seed}, args.out, cfg)
  for seed in args.seeds:
    # One GAN with the grid's total number of gradient steps (9 cells x 250 per generation).
    _run(
      f"{name}_1x1_s{seed}",
      module,
      {"seed": seed, "rows": 1, "cols": 1, "steps_per_generation": 9 * per_cell},
      args.out,
      cfg,
    )


def ring8(args):
  _grid_vs_single("ring8", ring8_3x3, args)


def grid25(args):
  _grid_vs_single("grid25", grid25_3x3, args)


def _per_cell(name, module, args):
  # One GAN with the same number of updates per generator as each grid cell (1/9 of the compute).
  cfg = f"experiments/coevolution/configs/{name}_3x3.py"
  for seed in args.seeds:
    _run(f"{name}_1x1_percell_s{seed}", module, {"seed": seed, "rows": 1, "cols": 1}, args.out, cfg)


def ring8_per_cell(args):
  _per_cell("ring8", ring8_3x3, args)


def grid25_per_cell(args):
  _per_cell("grid25", grid25_3x3, args)


def fashion3x3(args):
  cfg = "experiments/coevolution/configs/fashion_mnist_3x3.py"
  g, s = args.generations, args.steps
  common = {"generations": g, "eval_every": g, "plot_every": g, "checkpoint_every": g}
  _run("fm_3x3_la", fashion_mnist_3x3, {**common, "steps_per_generation": s}, args.out, cfg)


def fashion_grids(args):
  # Lipizzaner's comparison: every cell trains the same steps per generation on 1x1, 2x2, 3x3.
  cfg = "experiments/coevolution/configs/fashion_mnist_3x3.py"
  g, s = args.generations, args.steps
  common = {"generations": g, "eval_every": g, "plot_every": g, "checkpoint_every": g}
  common.update(steps_per_generation=s, d_every=args.d_every, lookahead=args.lookahead[0])
  tag = ("la" if args.lookahead[0] else "adam") + (f"_d{args.d_every}" if args.d_every > 1 else "")
  for n in args.grids:
    for seed in args.seeds:
      _run(
        f"fmg_{n}x{n}_{tag}_s{seed}",
        fashion_mnist_3x3,
        {**common, "rows": n, "cols": n, "seed": seed},
        args.out,
        cfg,
      )


def fashion(args):
  cfg = "experiments/coevolution/configs/fashion_mnist_3x3.py"
  g, s = args.generations, args.steps
  common = {"generations": g, "eval_every": g, "plot_every": g, "checkpoint_every": g}
  for la in args.lookahead:
    tag = "la" if la else "adam"
    _run(
      f"fm_2x2_{tag}",
      fashion_mnist_3x3,
      {**common, "rows": 2, "cols": 2, "steps_per_generation": s, "lookahead": la},
      args.out,
      cfg,
    )
    _run(
      f"fm_1x1_{tag}",
      fashion_mnist_3x3,
      {**common, "rows": 1, "cols": 1, "steps_per_generation": 4 * s, "lookahead": la},
      args.out,
      cfg,
    )


# Issue 18: why does the 3x3 grid collapse onto 2-3 modes of the ring? Each variant is a set of
# overrides of configs/ring8_3x3.py; "_1x1" variants are one GAN with the grid's total steps.
LIP2D = {"dataset_kwargs": {"radius": 0.8, "std": 0.025}}  # Lipizzaner's 2-D branch data
RING8_VARIANTS = {
  # selection pressure / takeover (population 1 per cell)
  "t2": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}},  # ring8_3x3 before issue 18
  "t1": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}, "tournament_size": 1},
  "nosel": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}, "selection": False},
  "nosel_own": {
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "selection": False,
    "opponents": "selected",
  },
  "t2_nb": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}, "opponents": "neighbourhood"},
  "pop2": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}, "population_size": 2},
  # steps per generation: 5x longer generations (run with 5x fewer --gens: same total steps)
  "t1_long": {
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "tournament_size": 1,
    "steps_per_generation": 1250,
  },
  "nosel_long": {
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "selection": False,
    "steps_per_generation": 1250,
  },
  "r2_1x1": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}, "rows": 1, "cols": 1},
  # larger tori at the same steps per cell (longer takeover time); "_1x1_cN": one GAN with the
  # total steps of N cells ("compute_cells")
  "t2_4x4": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}, "rows": 4, "cols": 4},
  "t2_5x5": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}, "rows": 5, "cols": 5},
  "t1_5x5": {
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "rows": 5,
    "cols": 5,
    "tournament_size": 1,
  },
  "r2_1x1_c16": {
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "rows": 1,
    "cols": 1,
    "compute_cells": 16,
  },
  "r2_1x1_c25": {
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "rows": 1,
    "cols": 1,
    "compute_cells": 25,
  },
  "r2_1x1_long": {  # one GAN with the total steps of nosel_own_long / t1_long
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "rows": 1,
    "cols": 1,
    "steps_per_generation": 1250,
  },
  # no interaction with 5x longer generations (run with --gens 40: 5x the budget)
  "nosel_own_long": {
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "selection": False,
    "opponents": "selected",
    "steps_per_generation": 1250,
  },
  # Lipizzaner's 2-D settings (ring radius 0.8, std 0.025, latent 32, batch 50, Adam 2e-4)
  "lip_t1": {**LIP2D, "tournament_size": 1},
  "lip_t2": {**LIP2D},
  "lip_nosel": {**LIP2D, "selection": False},
  "lip_1x1": {**LIP2D, "rows": 1, "cols": 1},
  "lipfull_t1": {
    **LIP2D,
    "tournament_size": 1,
    "latent_dim": 32,
    "batch_size": 50,
    "learning_rate": 2e-4,
    "lookahead": False,
  },
  "lipfull_1x1": {
    **LIP2D,
    "rows": 1,
    "cols": 1,
    "latent_dim": 32,
    "batch_size": 50,
    "learning_rate": 2e-4,
    "lookahead": False,
  },
}


def ring8_study(args):
  cfg = "experiments/coevolution/configs/ring8_3x3.py"
  base = ring8_3x3.get_config()
  for name in args.variants or list(RING8_VARIANTS):
    overrides = dict(RING8_VARIANTS[name])
    gens = args.gens or overrides.get("generations", base.generations)
    steps = overrides.get("steps_per_generation", base.steps_per_generation)
    cells = overrides.pop("compute_cells", base.rows * base.cols)
    if overrides.get("rows", base.rows) * overrides.get("cols", base.cols) == 1:
      steps *= cells  # one GAN with the grid's (or compute_cells') total number of steps
    overrides.update(
      generations=gens,
      steps_per_generation=steps,
      eval_every=gens,
      plot_every=0,
      checkpoint_every=gens,
      tensorboard=False,
    )
    for seed in args.seeds:
      _run(f"{name}_g{gens}_s{seed}", ring8_3x3, {**overrides, "seed": seed}, args.out, cfg)


def study_table(args):
  """Per variant of ``ring8_study``: every seed and mean +- std; "ok" counts the seeds where
  the best mixture (or all cells pooled) covers >= 7 of 8 modes with an HQ rate >= 0.8."""
  groups: dict[str, list] = {}
  for d in sorted(Path(args.out).iterdir()):
    if (d / "summary.json").exists() and "_s" in d.name:
      last = runner.read_jsonl(d / "metrics.jsonl")[-1]
      s = json.loads((d / "summary.json").read_text())
      groups.setdefault(d.name.rsplit("_s", 1)[0], []).append((d.name, last, s))
  print(
    "| variant | seeds | mixture modes (per seed) | mixture HQ | pooled modes | pooled HQ |"
    " ok mixture | ok pooled | wall s |"
  )
  print("|---|---|---|---|---|---|---|---|---|")
  for name, runs in groups.items():
    m = np.array([r["mixture/modes_covered"] for _, r, _ in runs], float)
    h = np.array([r["mixture/high_quality_rate"] for _, r, _ in runs], float)
    gm = np.array([r.get("grid/modes_covered", np.nan) for _, r, _ in runs], float)
    gh = np.array([r.get("grid/high_quality_rate", np.nan) for _, r, _ in runs], float)
    ok = int(np.sum((m >= 7) & (h >= 0.8)))
    okp = int(np.sum((gm >= 7) & (gh >= 0.8)))
    wall = np.mean([s["wall_seconds"] for _, _, s in runs])
    each = " ".join(f"{x:.0f}" for x in m)
    print(
      f"| {name} | {len(runs)} | {m.mean():.1f} +- {m.std():.1f} ({each})"
      f" | {h.mean():.2f} +- {h.std():.2f} ({' '.join(f'{x:.2f}' for x in h)})"
      f" | {gm.mean():.1f} +- {gm.std():.1f} ({' '.join(f'{x:.0f}' for x in gm)})"
      f" | {gh.mean():.2f} +- {gh.std():.2f} | {ok}/{len(runs)} | {okp}/{len(runs)} | {wall:.0f} |"
    )


def pairs(args):
  """Per seed: the grid runs ``<--grid>_s<seed>`` beside the single-GAN runs
  ``<--single>_s<seed>`` (both finished, in ``--out``), then mean +- std (README table)."""
  out = Path(args.out)
  print(
    "| seed | grid: best mixture modes / 8 | HQ | grid: all cells pooled modes | HQ |"
    " one GAN: modes / 8 | HQ |"
  )
  print("|---|---|---|---|---|---|---|")
  cols = []
  for seed in args.seeds:
    g = out / f"{args.grid_prefix}_s{seed}"
    o = out / f"{args.single_prefix}_s{seed}"
    if not ((g / "summary.json").exists() and (o / "summary.json").exists()):
      continue
    rg = runner.read_jsonl(g / "metrics.jsonl")[-1]
    ro = runner.read_jsonl(o / "metrics.jsonl")[-1]
    vals = [
      rg["mixture/modes_covered"],
      rg["mixture/high_quality_rate"],
      rg["grid/modes_covered"],
      rg["grid/high_quality_rate"],
      ro["mixture/modes_covered"],
      ro["mixture/high_quality_rate"],
    ]
    cols.append(vals)
    print(
      f"| {seed} | "
      + " | ".join(f"{v:.0f}" if i % 2 == 0 else f"{v:.2f}" for i, v in enumerate(vals))
      + " |"
    )
  if cols:
    a = np.array(cols, float)
    print(
      "| mean +- std | "
      + " | ".join(
        f"{m:.1f} +- {s:.1f}" if i % 2 == 0 else f"{m:.2f} +- {s:.2f}"
        for i, (m, s) in enumerate(zip(a.mean(0), a.std(0)))
      )
      + " |"
    )


def figure(args):
  """The side-by-side picture of a finished grid run (``--grid``) and a finished single-GAN
  run (``--single``), recomputed from their last checkpoints (as the main job draws it)."""
  import ml_collections

  from experiments.coevolution import compare

  grid_dir, single_dir = Path(args.grid), Path(args.single)
  cfg = ml_collections.ConfigDict(json.loads((grid_dir / "config.json").read_text()))
  single = ml_collections.ConfigDict(json.loads((single_dir / "config.json").read_text()))
  row = runner.read_jsonl(grid_dir / "metrics.jsonl")[-1]
  base_row = runner.read_jsonl(single_dir / "metrics.jsonl")[-1]
  lines = compare.picture(cfg, grid_dir, row, single, single_dir, base_row, Path(args.png))
  print("\n".join(lines))


def table(args):
  rows = []
  for d in sorted(Path(args.out).iterdir()):
    if not (d / "summary.json").exists():
      continue
    last = runner.read_jsonl(d / "metrics.jsonl")[-1]
    s = json.loads((d / "summary.json").read_text())
    cfg = json.loads((d / "config.json").read_text())
    steps = cfg["rows"] * cfg["cols"] * cfg["steps_per_generation"] * cfg["generations"]
    keys = [
      "mixture/modes_covered",
      "mixture/high_quality_rate",
      "grid/modes_covered",
      "mixture/fid",
      "mixture/class_tvd",
    ]
    vals = " | ".join(
      f"{last[k]:.3g}" if isinstance(last.get(k), (int, float)) else "-" for k in keys
    )
    rows.append(
      f"| {d.name} | {s['grid'][0]}x{s['grid'][1]} | {steps} | {vals} | "
      f"{s['median_generation_seconds']:.2f} |"
    )
  print(
    "| run | grid | gradient steps (all cells) | mixture modes | mixture HQ rate | "
    "grid modes | mixture FID | mixture class TVD | s/generation |"
  )
  print("|---|---|---|---|---|---|---|---|---|")
  print("\n".join(rows))
  for prefix in (
    "ring8_3x3",
    "ring8_1x1",
    "ring8_1x1_percell",
    "grid25_3x3",
    "grid25_1x1",
    "grid25_1x1_percell",
  ):
    vals = [
      runner.read_jsonl(Path(args.out) / n / "metrics.jsonl")[-1]
      for n in sorted(p.name for p in Path(args.out).glob(prefix + "_s*"))
    ]
    if vals:
      m = np.array([v["mixture/modes_covered"] for v in vals], float)
      h = np.array([v["mixture/high_quality_rate"] for v in vals], float)
      print(
        f"{prefix}: {len(vals)} seeds, modes covered {m.mean():.2f} (min {m.min():.0f}, "
        f"max {m.max():.0f}), HQ rate {h.mean():.3f}"
      )
  for n in (1, 2, 3):
    groups = {}
    for d in sorted(Path(args.out).glob(f"fmg_{n}x{n}_*_s*")):
      if not (d / "summary.json").exists():
        continue
      groups.setdefault(d.name.rsplit("_s", 1)[0], []).append(
        runner.read_jsonl(d / "metrics.jsonl")[-1]
      )
    for prefix, vals in groups.items():
      f = np.array([v["mixture/fid"] for v in vals], float)
      t = np.array([v["mixture/class_tvd"] for v in vals], float)
      print(
        f"{prefix}: {len(vals)} seeds, mixture FID {f.mean():.1f} ({f.min():.1f}-{f.max():.1f}), "
        f"class TVD {t.mean():.3f} ({t.min():.3f}-{t.max():.3f})"
      )


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument(
    "what",
    choices=[
      "ring8",
      "ring8_per_cell",
      "grid25",
      "grid25_per_cell",
      "fashion",
      "fashion3x3",
      "fashion_grids",
      "ring8_study",
      "study_table",
      "figure",
      "pairs",
      "table",
    ],
  )
  ap.add_argument("--grid-prefix", dest="grid_prefix", default="t2_g40", help="pairs: grid runs")
  ap.add_argument(
    "--single-prefix", dest="single_prefix", default="r2_1x1_g40", help="pairs: single-GAN runs"
  )
  ap.add_argument("--grid", default="", help="figure: a finished grid run folder")
  ap.add_argument("--single", default="", help="figure: a finished single-GAN run folder")
  ap.add_argument("--png", default="", help="figure: the picture to write")
  ap.add_argument(
    "--variants",
    default="",
    type=lambda s: [x for x in s.split(",") if x],
    help=f"ring8_study: some of {', '.join(RING8_VARIANTS)} (default all)",
  )
  ap.add_argument("--gens", type=int, default=0, help="ring8_study: generations (0: config's)")
  ap.add_argument("--out", default="runs/coev_results")
  ap.add_argument("--seeds", default="0,1", type=lambda s: [int(x) for x in s.split(",")])
  ap.add_argument("--generations", type=int, default=8)
  ap.add_argument("--steps", type=int, default=100, help="fashion: steps per generation per cell")
  ap.add_argument("--grids", default="1,2,3", type=lambda s: [int(x) for x in s.split(",")])
  ap.add_argument("--d-every", type=int, default=1, help="fashion_grids: discriminator schedule")
  ap.add_argument(
    "--lookahead",
    default="1",
    type=lambda s: [bool(int(x)) for x in s.split(",")],
    help="fashion: 1 (Lookahead-minmax), 0 (Adam) or 1,0",
  )
  args = ap.parse_args()
  logging.set_verbosity(logging.WARNING)
  studies = {
    "ring8": ring8,
    "ring8_per_cell": ring8_per_cell,
    "grid25": grid25,
    "grid25_per_cell": grid25_per_cell,
    "fashion_grids": fashion_grids,
    "fashion": fashion,
    "fashion3x3": fashion3x3,
    "ring8_study": ring8_study,
    "study_table": study_table,
    "figure": figure,
    "pairs": pairs,
    "table": table,
  }
  studies[args.what](args)


if __name__ == "__main__":
  main()
