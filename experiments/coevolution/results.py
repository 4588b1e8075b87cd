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


def _run(name, module, overrides, out, config_file):
  config = module.get_config()
  config.progress = False
  for k, v in overrides.items():
    config[k] = v
  workdir = Path(out) / name
  flags = " ".join(f"--config.{k}={v}" for k, v in overrides.items())
  print(
    f"$ python -m experiments.coevolution.main --config {config_file} --workdir {workdir} {flags}",
    flush=True,
  )
  if (workdir / "summary.json").exists():
    print("  (done before; kept)", flush=True)
    return
  t0 = time.perf_counter()
  row = train.train(config, workdir)
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
      "table",
    ],
  )
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
    "table": table,
  }
  studies[args.what](args)


if __name__ == "__main__":
  main()
