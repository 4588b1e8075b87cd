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
The tables and figures read back from the run folders are in ``results_tables.py``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from absl import logging

from experiments.coevolution import train
from experiments.coevolution.configs import fashion_mnist_3x3, grid25_3x3, ring8_3x3
from experiments.coevolution.results_tables import figure, pairs, study_table, table


def flat_overrides(overrides, prefix=""):
  """Nested config overrides as one level of dotted names (``{"a": {"b": 1}}`` ->
  ``{"a.b": 1}``), as ``--config.a.b=1`` flags name them."""
  out = {}
  for k, v in overrides.items():
    if isinstance(v, dict):
      out.update(flat_overrides(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


def _run(name, module, overrides, out, config_file):
  config = module.get_config()
  config.progress = False
  for k, v in overrides.items():
    config[k] = v
  workdir = Path(out) / name
  flags = " ".join(f"--config.{k}={v}" for k, v in flat_overrides(overrides).items())
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
  # diversity-preserving selection: each cell keeps its own generator lineage (tournament 2
  # over the neighbourhood for the discriminators)
  "lin_t2": {"dataset_kwargs": {"radius": 2.0, "std": 0.02}, "generator_selection": "lineage"},
  "lin_long": {  # the same with 5x longer generations (run with --gens 40: 5x the budget)
    "dataset_kwargs": {"radius": 2.0, "std": 0.02},
    "generator_selection": "lineage",
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
