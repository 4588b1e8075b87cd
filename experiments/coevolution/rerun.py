"""The main job's first line and its stored report (``experiments.coevolution.main``), without
absl flags so that tests and tools can import them."""

from __future__ import annotations

import json
import os

# Config fields a rerun (or a resumed ``train.train``) may change: the loop's length and
# logging, and where the grid runs (checkpoints always hold the whole grid).
MAY_CHANGE = (
  "generations",
  "eval_every",
  "plot_every",
  "checkpoint_every",
  "keep_checkpoints",
  "tensorboard",
  "progress",
  "backend",
  "mesh_shape",
  "mesh_exchange",
  "mpi_blocks",
  "distributed",
  "cell_strategy",
  "baseline",
  "ensembles",
)

# The lines a finished run printed (report, comparison, pictures) and its config: a rerun with
# the same config prints them again without importing the trainer or touching a file.
REPORT = "report.json"


def check_loop(config) -> None:
  """The loop's settings, before a finished run is reported (``train.check_config`` checks
  every field, after JAX has started)."""
  for name in ("generations", "eval_every", "checkpoint_every"):
    if not (isinstance(config[name], int) and config[name] >= 1):
      raise ValueError(f"config.{name} must be an integer >= 1, got {config[name]!r}")


def header(config, workdir, where: str | None = None) -> str:
  """The first line of a run: what it will do and where (``where``: the backend's devices and
  processes, :meth:`minmaxlab.distributed.Backend.where`, in brackets)."""
  cells = config.rows * config.cols
  scheme = "Lookahead-minmax over Adam" if config.get("lookahead", False) else "Adam"
  text = (
    f"coevolution: a {config.rows}x{config.cols} grid of {config.architecture} GANs on "
    f"{config.dataset} ({scheme}), {config.generations} generations of "
    f"{config.steps_per_generation} steps per cell"
  )
  if config.get("baseline", False) and cells > 1:
    text += ", then one GAN with the grid's total steps to compare"
  if where:
    text += f" [{where}]"
  return f"{text} -> {workdir}"


def stored_report(path: str, config) -> list[str] | None:
  """The lines of ``path`` if it was written for this very config (a changed baseline or
  ensembles field needs the full report), else ``None``."""
  try:
    with open(path) as f:
      stored = json.load(f)
  except (OSError, ValueError):
    return None
  if stored.get("config") != json.loads(config.to_json()):
    return None
  return stored.get("lines")


def write_report(path: str, config, lines: list[str]) -> None:
  """``lines`` and the config into ``path`` atomically (what a rerun prints)."""
  tmp = f"{path}.tmp"
  with open(tmp, "w") as f:
    json.dump({"config": json.loads(config.to_json()), "lines": lines}, f, indent=1)
  os.replace(tmp, path)
