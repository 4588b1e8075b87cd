"""The tables and figures of experiments/coevolution/README.md, read back from the
run folders that ``results.py`` writes (``--out``): ``table`` (every run),
``study_table`` (the issue-18 variants, per seed and mean +- std), ``pairs`` (grid
beside one GAN, per seed) and ``figure`` (a grid run beside a single-GAN run)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from minmaxlab import runner


def _sd(x, axis=None):
  """Sample standard deviation (ddof 1; 0 for one value), as experiments.stats."""
  x = np.asarray(x, float)
  n = x.size if axis is None else x.shape[axis]
  return np.std(x, axis=axis, ddof=1) if n > 1 else np.zeros_like(np.mean(x, axis=axis))


def study_table(args):
  """Per variant of ``ring8_study``: every seed and mean +- sample std; "ok" counts the seeds where
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
      f"| {name} | {len(runs)} | {m.mean():.1f} +- {_sd(m):.1f} ({each})"
      f" | {h.mean():.2f} +- {_sd(h):.2f} ({' '.join(f'{x:.2f}' for x in h)})"
      f" | {gm.mean():.1f} +- {_sd(gm):.1f} ({' '.join(f'{x:.0f}' for x in gm)})"
      f" | {gh.mean():.2f} +- {_sd(gh):.2f} | {ok}/{len(runs)} | {okp}/{len(runs)} | {wall:.0f} |"
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
        for i, (m, s) in enumerate(zip(a.mean(0), _sd(a, 0)))
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
