"""Open a finished (or interrupted) run: its config, restored state, metrics and summary."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any, NamedTuple


class Run(NamedTuple):
  """A run read back from its workdir (see :func:`load_run`)."""

  workdir: Path
  config: Any  # ml_collections.ConfigDict of config.json (without its "run" record)
  record: dict  # config.json's "run": versions, git commit, command, module
  step: int  # the restored checkpoint's step (generation)
  state: Any  # the checkpoint's pytree, in the trainer's own types
  rows: list[dict]  # metrics.jsonl
  summary: dict  # summary.json ({} for an unfinished run)
  module: Any  # the trainer module that wrote the run


def load_run(workdir: str | os.PathLike, step: int | None = None, module: str | None = None) -> Run:
  """Restore the run in ``workdir``: its config and its checkpoint ``step`` (default: the
  latest), typed as the trainer wrote it.

  The trainer module is the one recorded in ``config.json`` (``run.module``, written by
  :func:`write_config`) or ``module``; it must define ``checkpoint_target(config)``, the
  abstract pytree of its checkpoints (shapes and dtypes only: nothing is compiled).

  Example (the main job, then its best mixture to a PNG)::

    run = runner.load_run("runs/coevolution_ring8")
    x = run.module.sample_best_mixture(run, 2000)
  """
  import ml_collections

  from minmaxlab.runner._checkpoint import CheckpointManager
  from minmaxlab.runner._metrics_log import read_jsonl

  workdir = Path(workdir)
  path = workdir / "config.json"
  if not path.exists():
    raise FileNotFoundError(f"{workdir} holds no run (no config.json)")
  saved = json.loads(path.read_text())
  record = saved.pop("run", {}) or {}
  name = module or record.get("module")
  if not name:
    raise ValueError(f"{path} does not name the trainer that wrote it: pass module=")
  trainer = importlib.import_module(name)
  config = ml_collections.ConfigDict(saved)
  target = trainer.checkpoint_target(config)
  state, meta = CheckpointManager(workdir / "checkpoints").restore(target, step)
  summary_path = workdir / "summary.json"
  summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
  return Run(
    workdir,
    config,
    record,
    int(meta.get("step", -1)),
    state,
    read_jsonl(workdir / "metrics.jsonl"),
    summary,
    trainer,
  )
