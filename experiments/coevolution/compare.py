"""The main job's comparison: the grid against one GAN with the grid's total number of
gradient steps (``config.baseline``, or a cached baseline run in ``<workdir>/baseline_1x1``),
as two lines and one side-by-side picture."""

from __future__ import annotations

import json
from pathlib import Path

BASELINE_DIR = "baseline_1x1"  # under --workdir: the lone GAN with the grid's total steps
# Fields that do not change what a baseline run computes (a cached one is reused across them).
_NOT_COMPARED = ("progress", "tensorboard", "baseline", "plot_every", "keep_checkpoints", "run")


def baseline_config(config):
  """The plain-GAN baseline of ``config``: one GAN (a 1x1 grid) taking the whole grid's
  number of gradient steps every generation (same generations, data, model, optimizer and
  seed) with every evolutionary operator off: no selection, no replacement test, no
  learning-rate mutation (issue 33: a 1x1 grid that kept them was not a plain GAN)."""
  import ml_collections

  b = ml_collections.ConfigDict(config.to_dict())
  b.steps_per_generation = config.steps_per_generation * config.rows * config.cols
  b.rows = b.cols = 1
  b.selection = False
  b.n_replacements = 0
  b.mutation_probability = 0.0
  b.backend = "single"
  b.mesh_shape = ()
  b.mpi_blocks = ()
  b.distributed = ""
  if "baseline" in b:
    b.baseline = False
  return b


def _comparable(cfg: dict) -> dict:
  return {k: v for k, v in cfg.items() if k not in _NOT_COMPARED}


def cached_baseline(config, workdir) -> dict | None:
  """The last metrics row of a finished baseline run of ``config`` under ``workdir``, if its
  recorded config is the baseline of this one; else ``None``."""
  from minmaxlab import runner

  d = Path(workdir) / BASELINE_DIR
  if not (runner.is_finished(d, config.generations) and (d / "config.json").exists()):
    return None
  want = json.loads(baseline_config(config).to_json())
  if _comparable(json.loads((d / "config.json").read_text())) != _comparable(want):
    return None
  return runner.read_jsonl(d / "metrics.jsonl")[-1]


def final_samples(config, workdir):
  """Samples of a finished run, recomputed from its last checkpoint exactly as its final
  evaluation drew them: ``(best mixture [num_eval_samples, ...], every cell's best generator
  pooled [cells * cell_samples, ...])``."""
  import jax
  import numpy as np

  from experiments.coevolution import train
  from minmaxlab import runner

  progs = train.programs(config)
  ckpt = runner.CheckpointManager(Path(workdir) / "checkpoints")
  state = progs.init(train.keys(config)[0])
  run_key = np.asarray(jax.random.key_data(jax.random.key(config.seed)))
  whole = train.whole_grid_shapes(state, progs.exp.coev)
  # the last checkpoint (of a run from before lineage ids too: no lineage is read here)
  host = train.restore_checkpoint(ckpt, whole, run_key, ckpt.latest_step(), writer=False)["state"]
  _, mixture, _ = train.evaluate(progs, config, host, int(host.generation))
  pooled = np.asarray(progs.cell_samples(jax.random.fold_in(train.keys(config)[2], 0), host))
  return np.asarray(mixture), pooled.reshape((-1,) + pooled.shape[3:])


def _quality(row: dict, pooled: bool = False) -> str:
  if "mixture/modes_covered" in row:
    k = "grid" if pooled else "mixture"
    return f"{row[f'{k}/modes_covered']}/8 modes, high-quality {row[f'{k}/high_quality_rate']:.0%}"
  if "mixture/fid" in row:
    return f"classifier-FID {row['mixture/fid']:.1f}, class TVD {row['mixture/class_tvd']:.3f}"
  return "not evaluated"


# (metric, label, higher is better, format, threshold, threshold in words) of the verdict line,
# per kind of data. One seed names a difference only from its threshold up: twice the
# seed-to-seed standard deviation of the plain GAN (the main job's baseline) in the
# pre-registered study of that data, rounded up (tests/experiments/test_verdict.py recomputes
# them from the committed JSON): the ring's plain_gan arm (ring_v1: modes 1.32, HQ 0.098) and the
# Lipizzaner-grids plain GAN (v2, Fashion-MNIST: classifier-FID 6.9, class TVD 0.023).
_VERDICT_METRICS = {
  "mixture/modes_covered": [
    ("mixture/modes_covered", "modes", True, "{:d}/8", 3, "3 modes"),
    ("mixture/high_quality_rate", "high-quality rate", True, "{:.0%}", 0.20, "20 points"),
  ],
  "mixture/fid": [
    ("mixture/fid", "classifier-FID", False, "{:.1f}", 14.0, "14"),
    ("mixture/class_tvd", "class TVD", False, "{:.3f}", 0.05, "0.05"),
  ],
}
# Where each kind's study over seeds is (its generated table).
_STUDY = {
  "mixture/modes_covered": "the ring study, 10 seeds per arm: table ring_v1 of"
  " experiments/coevolution/README.md, docs/results.md",
  "mixture/fid": "the Lipizzaner-grids study, 6 seeds per arm: table lipizzaner_grids_v2 of"
  " experiments/coevolution/README.md, docs/results.md",
}


def coupling(config) -> str:
  """What couples the grid's cells, in words (the comparison names the configuration)."""
  if not config.get("selection", True):
    return "the reference's coupling: no selection, each cell trains its own pair in place"
  if config.get("generator_selection", "tournament") == "lineage":
    return "lineage selection (each cell keeps its generators; not Lipizzaner's)"
  return f"Lipizzaner's tournament selection of {config.get('tournament_size', 2)}"


def verdict(grid_row: dict, single_row: dict) -> str:
  """One line on this run's grid against its one GAN: a side is named ahead on a metric only
  when the difference reaches the threshold stated beside it (one seed says little: see
  ``_VERDICT_METRICS``), else "no meaningful difference on one seed"; both numbers, and where
  the study over seeds is."""
  kind = next((k for k in _VERDICT_METRICS if k in grid_row and k in single_row), None)
  if kind is None:
    return "verdict: not evaluated"
  ahead, within = [], []
  for key, label, higher, fmt, threshold, words in _VERDICT_METRICS[kind]:
    g, s = grid_row[key], single_row[key]
    both = f"grid {fmt.format(g)} vs one GAN {fmt.format(s)}, a difference counts from {words}"
    if abs(g - s) >= threshold - 1e-9:
      winner = "grid" if (g > s) == higher else "one GAN"
      ahead.append(f"{winner} ahead on {label} ({both})")
    else:
      within.append(f"{label} ({both})")
  if not ahead:
    return (
      f"verdict: no meaningful difference on one seed; see the study ({_STUDY[kind]}):"
      f" {'; '.join(within)}"
    )
  parts = ahead + [f"no meaningful difference in {w}" for w in within]
  return f"verdict (one seed): {'; '.join(parts)}; over seeds see {_STUDY[kind]}"


def compare(config, workdir, row: dict, run_baseline: bool | None = None) -> list[str]:
  """After a grid run: the single-GAN baseline (run now if ``config.baseline`` is set, or
  read from a cached finished run in ``<workdir>/baseline_1x1``), two comparison lines and
  ``<workdir>/comparison.png`` (the grid's mixture and pooled samples beside the lone
  GAN's). Returns the lines (one line with a hint when there is no baseline)."""

  from experiments.coevolution import train

  workdir = Path(workdir)
  if run_baseline is None:
    run_baseline = bool(config.get("baseline", False))
  cells = config.rows * config.cols
  if cells == 1:
    return []
  b = baseline_config(config)
  base_row = cached_baseline(config, workdir)
  if base_row is None:
    if not run_baseline:
      if "baseline" not in config:  # no such field in this config file: nothing to suggest
        return [f"(no single-GAN baseline in {workdir / BASELINE_DIR})"]
      return [
        f"(no single-GAN baseline in {workdir / BASELINE_DIR}: add --config.baseline=True "
        "to run it and compare)"
      ]
    if config.get("backend", "single") not in ("single", "auto"):
      return ["(the single-GAN baseline runs only with backend=single or auto)"]
    bdir = workdir / BASELINE_DIR
    resume = (bdir / "checkpoints").exists()
    print(
      f"single-GAN baseline: 1x1 grid, {b.steps_per_generation} steps per generation "
      f"(the grid's total), in {bdir}",
      flush=True,
    )
    base_row = train.train(b, bdir, resume=resume)
  bdir = workdir / BASELINE_DIR
  return picture(config, workdir, row, b, bdir, base_row, workdir / "comparison.png")


def lineage_curve(config, workdir):
  """``(generations, lineages, cells)`` of the grid run's ``metrics.jsonl`` (its
  generators' distinct lineage ids each generation), or ``None`` for a run without them."""
  import numpy as np

  from minmaxlab import runner

  rows = [r for r in runner.read_jsonl(Path(workdir) / "metrics.jsonl") if "lineages" in r]
  if not rows:
    return None
  start = config.rows * config.cols  # one lineage per cell at the start
  gens = np.array([0] + [r["generation"] for r in rows])
  return gens, np.array([start] + [r["lineages"] for r in rows]), start


def picture(config, workdir, row, single_config, single_dir, single_row, png) -> list[str]:
  """The two comparison lines and the side-by-side PNG ``png`` of a finished grid run and a
  finished single-GAN run (samples recomputed from their last checkpoints)."""
  import numpy as np

  from experiments.coevolution import plots, train

  cells = config.rows * config.cols
  steps = config.steps_per_generation
  lines = [
    f"grid {config.rows}x{config.cols} ({cells} GANs x {steps} steps per generation): "
    f"best mixture {_quality(row)}; all cells pooled {_quality(row, pooled=True)}"
    f" [{coupling(config)}]",
    f"one GAN with the same total steps ({single_config.steps_per_generation} per generation): "
    f"{_quality(single_row)}",
    verdict(row, single_row),
  ]
  mix, pooled = final_samples(config, workdir)
  lone, _ = final_samples(single_config, single_dir)
  exp = train.programs(config).exp
  modes = None if exp.mixture is None else np.asarray(exp.mixture.modes)
  if modes is not None:
    n = len(lone)
    panels = [
      (mix[:n], f"{config.rows}x{config.cols} grid, best mixture\n{_quality(row)}"),
      (pooled, f"{config.rows}x{config.cols} grid, all cells pooled\n{_quality(row, True)}"),
      (lone, f"one GAN, same total steps\n{_quality(single_row)}"),
    ]
  else:
    panels = [
      (mix, f"{config.rows}x{config.cols} grid, best mixture\n{_quality(row)}"),
      (lone, f"one GAN, same total steps\n{_quality(single_row)}"),
    ]
  plots.save_comparison(
    png,
    panels,
    modes=modes,
    lineages=lineage_curve(config, workdir),
    title=f"{config.generations} generations, {cells * steps * config.generations} "
    "gradient steps on each side",
  )
  lines.append(f"comparison picture: {png}")
  return lines
