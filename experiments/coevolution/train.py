"""Run a spatial coevolution: ``train(config, workdir)`` (called by ``main.py`` and the tests).

Everything random is a pure function of ``(config.seed, generation)``: the grid
starts from ``init_key``, generation ``g`` (0-based) is stepped with
``fold_in(generation_key, g)`` and evaluated with ``fold_in(eval_key, g + 1)``.
A run resumed from a checkpoint therefore reproduces the uninterrupted run
exactly.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments.coevolution import plots, rerun
from experiments.coevolution.experiment import (  # noqa: F401  (the experiment's API, here too)
  MIXTURES,
  Experiment,
  ImageData,
  Programs,
  build,
  check_fits,
  checkpoint_target,
  coevolution_config,
  is_writer,
  keys,
  make_backend,
  modes,
  programs,
  restore_checkpoint,
  restore_run,
  sample_best_mixture,
  whole_grid_shapes,
)
from experiments.coevolution.generation_log import (  # noqa: F401  (here too, as before)
  CELL_COUNTS,
  CELL_METRICS,
  cell_modes,
  cell_scalars,
  read_outs,
  summarise,
  weight_distances,
)
from minmaxlab import distributed, runner
from minmaxlab.gan import metrics


def check_config(config) -> None:
  """Raise ``ValueError`` for loop settings that cannot work."""
  for name in ("generations", "eval_every", "checkpoint_every"):
    if not (isinstance(config[name], int) and config[name] >= 1):
      raise ValueError(f"config.{name} must be an integer >= 1, got {config[name]!r}")
  if config.plot_every < 0:
    raise ValueError(f"config.plot_every must be >= 0, got {config.plot_every}")
  try:
    distributed.compiler_options(config.get("compile", "default"))
  except ValueError as e:  # "compile must be one of ..."
    raise ValueError(f"config.{e}") from None
  coevolution_config(config)  # validates the grid fields
  check_fits(config)  # the grid's memory against this machine's, before anything is written


class AllCellsDiverged(RuntimeError):
  """Every cell of the grid diverged for ``config.diverged_patience`` generations in a row."""


def divergence_check(diverged: int, num_cells: int, generation: int, streak: int, patience: int):
  """The divergence rule: ``(streak, warning)`` after a generation in which
  ``diverged`` cells were non-finite (and re-seeded from their best neighbour).

  ``warning`` is one line when any cell diverged (else ``None``); ``streak``
  counts consecutive generations in which EVERY cell diverged, and reaching
  ``patience`` (> 0) raises :class:`AllCellsDiverged`: no cell has a finite
  neighbour left to be re-seeded from, so the run cannot recover.
  """
  streak = streak + 1 if num_cells and diverged >= num_cells else 0
  if patience > 0 and streak >= patience:
    raise AllCellsDiverged(
      f"every cell diverged (non-finite) in {streak} generations in a row, up to generation"
      f" {generation}: stopping (lower the learning rate; config.diverged_patience={patience})"
    )
  warning = None
  if diverged:
    warning = (
      f"warning: generation {generation}: {diverged}/{num_cells} cells diverged (non-finite),"
      " re-seeded from their best neighbours"
    )
  return streak, warning


def evaluate(progs: Programs, config, state, generation: int):
  """Metrics of the best cell's mixture (and, for mixtures, of every cell's
  best generator); returns ``(metrics, mixture_samples, cell, cell_metrics)``."""
  exp = progs.exp
  eval_key = jax.random.fold_in(keys(config)[2], generation)
  score = np.asarray(state.mixture_score).reshape(-1)
  cell = int(np.argmin(np.where(np.isfinite(score), score, np.inf)))  # coev.mixture's default
  gens, weights = progs.mixture(state, cell)
  x = np.asarray(progs.mixture_samples(eval_key, gens, weights))
  out: dict[str, Any] = {}
  if exp.mixture is not None:
    # Eager, as before: under jit XLA divides by the sample count as a multiplication by its
    # reciprocal (high_quality_rate one ulp off the recorded results).
    m = metrics.mixture_metrics(jnp.asarray(x), exp.mixture)
    out = {f"mixture/{k}": v.item() for k, v in jax.device_get(m).items()}
  else:
    out = {f"mixture/{k}": float(v) for k, v in exp.image_evaluator(x).items()}
  out["mixture/weights"] = np.asarray(weights, np.float64).round(4).tolist()
  return out, x, cell


def train(
  config,
  workdir: str | Path,
  *,
  resume: bool = False,
  on_log: Callable[[int, dict], None] | None = None,
  finish: bool = True,
) -> dict:
  """Coevolve the grid of ``config`` in ``workdir``; returns the last metrics row.

  Writes ``config.json``, ``metrics.jsonl`` (one row per generation, with ``lineages`` and
  ``net_weights_dist``, on 2-D mixtures each cell's ``cells/modes_covered``),
  ``tensorboard/`` (grid means, sample pictures) and ``tensorboard/cells/r<i>c<j>`` (every
  cell as a run of its own: its curves overlay the means'),
  ``checkpoints/step_<g>`` (the whole grid state and the run key; atomic
  orbax, generation 0, every ``checkpoint_every`` generations and the end),
  ``samples/cells_gen_<g>.png`` (every cell's best generator),
  ``samples/mixture_gen_<g>.png`` (the best cell's mixture), ``metrics.png``
  and ``summary.json``, then (``finish``) the finish marker (``runner.finish``): a run cut
  short before it completes these when resumed, without training again if its final
  checkpoint is intact (the main job passes ``finish=False`` and finishes after its
  comparison).

  Args:
    config: an ``ml_collections.ConfigDict`` (see ``configs/base.py``).
    workdir: the run directory.
    resume: continue from the latest checkpoint in ``workdir``.
    on_log: called as ``on_log(generation, row)`` after every generation.
  """
  check_config(config)
  workdir = Path(workdir).resolve()
  if resume and (done := runner.finished_run(workdir, config.generations)) is not None:
    return done  # a finished run: report it, change nothing
  t_build = time.perf_counter()
  run = _open_run(config, workdir)
  state = _restore_or_init(run, resume)
  start = run.files.start
  writer = run.files.open_writers(
    resume=resume, tensorboard=config.tensorboard, step_key="generation"
  )
  if start == 0:
    host = run.backend.to_host(state)  # a collective: every process takes part
    run.files.checkpoint(0, {"state": host, "key": run.run_key})
  summary = _summary_head(run)
  bar = _progress_bar(run)
  row = run.files.last_row()
  seconds: list[float] = []
  g = start
  try:
    g, row = _generations(run, state, start, row, writer, bar, on_log, seconds)
  finally:
    run.files.close(lambda rows: [k for k in _CURVES if any(k in r for r in rows)], CURVE_TITLES)
  run.backend.barrier()
  if not run.writes:
    return row
  summary.update(
    final=row,
    generations=g,
    first_generation_seconds=seconds[0] if seconds else None,
    median_generation_seconds=float(np.median(seconds[1:])) if len(seconds) > 1 else None,
    wall_seconds=time.perf_counter() - t_build,
  )
  if not seconds and (saved := runner.saved_summary(workdir, "generations", g)) is not None:
    summary = saved  # a finish cut short after its summary: keep its timings
  run.files.finish(summary, end_products(config), mark=finish)
  return row


class _Run(NamedTuple):
  """What every step of :func:`train` reads (fixed for the run)."""

  config: Any
  workdir: Path
  progs: Programs
  backend: Any
  run_key: np.ndarray  # the seed's key data, saved with every checkpoint
  files: runner.TrainingRun  # the run's files (checkpoints, config, metrics, summary)

  @property
  def exp(self) -> Experiment:
    return self.progs.exp

  @property
  def coev(self):
    return self.progs.exp.coev

  @property
  def writes(self) -> bool:
    """Whether this process writes the run's files (the others only take part in the
    collectives)."""
    return self.backend.writer


def _open_run(config, workdir: Path) -> _Run:
  progs = programs(config)
  run_key = np.asarray(jax.random.key_data(jax.random.key(config.seed)))
  files = runner.TrainingRun(
    workdir,
    config,
    config.generations,
    module=__name__,
    keep_checkpoints=config.keep_checkpoints,
    writes=progs.backend.writer,
  )
  return _Run(config, workdir, progs, progs.backend, run_key, files)


def _restore_or_init(run: _Run, resume: bool):
  """A fresh grid, or the newest intact checkpoint's (``run.files.start``: its generation)."""
  restored_generation = []

  def restore(ckpt, state):
    # Checkpoints hold the whole grid, whatever backend wrote them. The newest intact one (a
    # damaged latest one is named and skipped; every process reads the same files).
    restored = restore_checkpoint(
      ckpt, whole_grid_shapes(state, run.coev), run.run_key, writer=run.backend.writer
    )
    if not np.array_equal(np.asarray(restored["key"]), run.run_key):
      raise ValueError(f"the checkpoint in {ckpt.directory} was written with another seed")
    restored_generation.append(int(restored["state"].generation))
    return run.backend.from_host(restored["state"])  # uncommitted on one device: no recompile

  return run.files.restore_or_init(
    run.progs.init(keys(run.config)[0]),
    resume=resume,
    restore=restore,
    step_of=lambda state: restored_generation[-1],
    before=run.backend.barrier,  # every process has looked before the writer saves anything
    may_change=rerun.MAY_CHANGE,  # a resume with another config is refused in one line
  )


def _summary_head(run: _Run) -> dict[str, Any]:
  c = run.coev.config
  summary: dict[str, Any] = {
    "grid": [c.rows, c.cols],
    "cell_strategy": run.coev.cell_strategy,
    "backend": run.backend.name,
    "processes": run.backend.processes,
  }
  if run.exp.classifier is not None:
    summary["classifier_test_accuracy"] = run.exp.classifier.test_accuracy
  return summary


def _progress_bar(run: _Run):
  if not run.config.progress:
    return None
  c = run.coev.config
  return run.files.open_progress(
    unit="generation",
    rate_unit="cell-steps",
    work_per_unit=c.num_cells * c.steps_per_generation,
    label="one GAN" if c.rows * c.cols == 1 else f"{c.rows}x{c.cols} grid",  # the baseline
  )


def _generations(run: _Run, state, start, row, writer, bar, on_log, seconds):
  """The generations from ``start`` to the end (``seconds`` gets each one's time):
  ``(generations taken, last row)``. On one device a generation is one program and its
  read-outs another (``generation_programs.py``), fetched in one transfer. In one process (no
  donated state) the next generation is dispatched before this one's host work, so the device
  computes while the host writes; across processes the collectives keep one order."""
  config, coev, progs = run.config, run.coev, run.progs
  generation_key, latents = keys(config)[1], jax.random.fold_in(keys(config)[2], 0)
  ahead = run.backend.processes == 1 and not run.backend.donate
  dispatched = []  # when each generation was dispatched

  def dispatch(g, state):
    dispatched.append(time.perf_counter())
    if progs.generation is None:
      return (*progs.step(jax.random.fold_in(generation_key, g), state, run.exp.data), None)
    state, m = progs.generation(generation_key, np.int32(g), np.int32(1), state, run.exp.data)
    return state, m, progs.readouts(latents, state, m)  # the cells' samples: the same latents

  g, streak, ready, unpack = start, 0, 0.0, None  # streak: generations in a row, all diverged
  pending = dispatch(g, state) if g < config.generations else None
  while pending is not None:
    (state, m, reads), pending = pending, None
    if ahead and g + 1 < config.generations:
      pending = dispatch(g + 1, state)
    if reads is None:
      m, small = jax.device_get(run.backend.to_host(m)), None
    else:  # the metrics and the read-outs in one vector: one transfer
      unpack = unpack or progs.readout_layout(latents, state, m)
      m, small = unpack(jax.device_get(reads["packed"]))
    began, ready = max(dispatched[g - start], ready), time.perf_counter()
    seconds.append(ready - began)
    g = generation = g + 1
    row = summarise(m, coev.config.cols)
    row["seconds"] = seconds[-1]
    streak, warning = divergence_check(  # the same on every process: raises everywhere
      row["diverged"], coev.config.num_cells, generation, streak, config.get("diverged_patience", 3)
    )
    if warning and run.writes:
      print(warning, file=sys.stderr, flush=True)
    row = _record(run, state, m, generation, row, writer, None if reads is None else (reads, small))
    if run.writes:
      _shown(row, generation, bar, on_log, seconds[-1])
    if not ahead and g < config.generations:
      pending = dispatch(g, state)
  return g, row


def _shown(row: dict, generation: int, bar, on_log, seconds: float) -> None:
  """The writing process's callback and progress line of one generation."""
  if on_log is not None:  # before the line: Ctrl-C right after it names this generation
    on_log(generation, row)
  if bar is not None:
    shown = {"best_score": row["best_score"], "g_loss": row["g_loss"], "d_loss": row["d_loss"]}
    for k in ("modes_covered", "high_quality_rate", "fid", "class_tvd"):
      if f"mixture/{k}" in row:
        shown[k] = row[f"mixture/{k}"]
    bar.update(generation, shown, seconds=seconds)


def _record(run: _Run, state, m, generation: int, row: dict, writer, reads) -> dict:
  """One generation's read-outs (``reads``: the read-out program's outputs on the device and
  on the host, or ``None``): every process takes part in the host transfers (collectives);
  the writing process evaluates, plots, writes the row and saves the checkpoint. Returns the
  row (as written, on the writing process)."""
  config, exp = run.config, run.exp
  last = generation == config.generations
  do_eval = generation % config.eval_every == 0 or last
  do_plot = (config.plot_every and generation % config.plot_every == 0) or last
  do_ckpt = generation % config.checkpoint_every == 0 or last
  toy = exp.mixture is not None and reads is None  # 2-D data: each cell's modes (cheap)
  host = run.backend.to_host(state) if (do_eval or do_plot or do_ckpt or toy) else None
  # net_weights_dist every generation (to_host is a collective: every process takes part)
  params = host.params if host is not None else None if reads else run.backend.to_host(state.params)
  if not run.writes:
    return row  # the writer process evaluates, plots and saves the whole grid
  samples, per_cell, entries = read_outs(run.progs, config, host, params, reads, do_plot)
  row.update(entries)
  if do_eval:
    _evaluate_and_save(run, host, generation, row, writer)
  if do_plot:
    cells_png = run.workdir / "samples" / f"cells_gen_{generation}.png"
    plots.save_cell_grid(
      cells_png,
      samples,
      modes=None if exp.mixture is None else np.asarray(exp.mixture.modes),
      cell_metrics=per_cell,
      weights=np.asarray(host.mixture_weights),
      best_cell=int(m["best_cell"]),
      title=f"generation {generation}",
    )
    writer.image(generation, "samples/cells", cells_png)
  row = writer.write(generation, row)
  writer.write_runs(generation, cell_scalars(m))
  if do_ckpt:
    run.files.checkpoint(generation, {"state": host, "key": run.run_key})
  return row


def _evaluate_and_save(run: _Run, host, generation: int, row: dict, writer) -> None:
  """The mixture's evaluation into ``row`` and its samples' picture."""
  cols = run.coev.config.cols
  evals, x, cell = evaluate(run.progs, run.config, host, generation)
  row.update(evals)
  title = f"generation {generation}: mixture of cell ({cell // cols}, {cell % cols})"
  png = run.workdir / "samples" / f"mixture_gen_{generation}.png"
  plots.save_mixture(png, x, modes=modes(run.config), title=title)
  writer.image(generation, "samples/mixture", png)


# The curves of metrics.png (those the run logged), each titled in words with its direction.
_NO_DIRECTION = "no better direction in a game"
CURVE_TITLES = {
  "best_score": "best cell's mixture score (lower is better)",
  "mixture_score": "mixture score, mean over cells (lower is better)",
  "g_loss": f"generator loss ({_NO_DIRECTION})",
  "d_loss": f"discriminator loss ({_NO_DIRECTION})",
  "g_fitness": "generator fitness, a loss (lower is better)",
  "d_fitness": "discriminator fitness, a loss (lower is better)",
  "lr_g": "generator learning rate (mutated; no direction)",
  "lr_d": "discriminator learning rate (mutated; no direction)",
  "mixture_accepted": "mixture ES steps accepted (no direction)",
  "mixture/modes_covered": "modes covered by the best mixture, of 8 (higher is better)",
  "mixture/high_quality_rate": "high-quality share of its samples (higher is better)",
  "mixture/mode_kl": "KL of its modes from uniform (lower is better)",
  "mixture/fid": "classifier-FID of the best mixture (lower is better)",
  "mixture/class_tvd": "class TVD of the best mixture (lower is better)",
  "mixture/inception_score": "inception score of the best mixture (higher is better)",
  "grid/modes_covered": "modes covered by all cells pooled (higher is better)",
  "lineages": "distinct generator lineages (more: more diverse)",
  "net_weights_dist/g": "distance between generators' weights (more: more diverse)",
  "seconds": "seconds per generation (lower is faster)",
}
_CURVES = tuple(CURVE_TITLES)


def end_products(config) -> list[str]:
  """What a finished run has (``runner.finish``): the final checkpoint's digest, the metrics,
  their curves and the summary."""
  final = runner.checkpoint_product(config.generations)
  return [final, "metrics.jsonl", "metrics.png", "summary.json"]


def report(row: dict, summary_path) -> str:
  """The final lines printed after a run: the best mixture's quality."""
  s = json.loads(Path(summary_path).read_text())
  g = s["grid"]
  lines = [
    f"grid {g[0]}x{g[1]} ({s['cell_strategy']}), {s['generations']} generations"
    + (
      f", first generation (with compile) {s['first_generation_seconds']:.1f} s"
      if s.get("first_generation_seconds") is not None
      else ""
    )
    + (
      f", then {s['median_generation_seconds']:.2f} s per generation"
      if s.get("median_generation_seconds") is not None
      else ""
    )
  ]
  best = row.get("best_cell")
  if "mixture/modes_covered" in row:
    lines.append(
      f"best mixture (cell {best}, weights {row['mixture/weights']}): "
      f"modes covered {row['mixture/modes_covered']}, "
      f"high-quality rate {row['mixture/high_quality_rate']:.3f}, "
      f"mode KL {row['mixture/mode_kl']:.3f}"
    )
  elif "mixture/fid" in row:
    lines.append(
      f"best mixture (cell {best}, weights {row['mixture/weights']}): "
      f"classifier-FID {row['mixture/fid']:.2f}, class TVD {row['mixture/class_tvd']:.3f}, "
      f"IS {row['mixture/inception_score']:.2f}"
    )
  return "\n".join(lines)
