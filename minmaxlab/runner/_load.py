"""Open a finished (or interrupted) run: its config, restored state, metrics and summary."""

from __future__ import annotations

import importlib
import json
import os
import sys
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


def _import_trainer(name: str, workdir: Path, record: dict):
  """Import the trainer ``name``; if its top-level package is not importable from here (a
  working directory other than the project's: ``experiments`` is not installed), from the
  folder the run recorded (``run.module_root``) or the nearest folder above the workdir that
  holds the package, appended to ``sys.path``."""
  top = name.split(".")[0]
  try:
    return importlib.import_module(name)
  except ModuleNotFoundError as e:
    if e.name != top:
      raise
    roots = [Path(record["module_root"])] if record.get("module_root") else []
    roots += Path(workdir).resolve().parents
    for root in roots:
      if (root / top / "__init__.py").is_file() or (root / f"{top}.py").is_file():
        if str(root) not in sys.path:
          sys.path.append(str(root))
        return importlib.import_module(name)
    raise ModuleNotFoundError(
      f"{workdir}: its trainer {name} cannot be imported from here (no {top} package on "
      f"sys.path, in the run's recorded folder or above the workdir): run from the folder "
      f"that holds {top}/ or add it to PYTHONPATH",
      name=top,
    ) from None


def load_run(workdir: str | os.PathLike, step: int | None = None, module: str | None = None) -> Run:
  """Restore the run in ``workdir``: its config and its checkpoint ``step`` (default: the
  latest), typed as the trainer wrote it.

  The trainer module is the one recorded in ``config.json`` (``run.module``, written by
  :func:`write_config`) or ``module``; it must define ``checkpoint_target(config)``, the
  abstract pytree of its checkpoints (shapes and dtypes only: nothing is compiled), and may
  define ``restore_run(manager, target, step) -> (tree, metadata)``, how it restores them
  (e.g. an older layout, as it does when it resumes); default ``manager.restore``. It is
  imported from any working directory: when its package is not importable from there, from
  the folder ``config.json`` recorded (``run.module_root``) or the nearest one above
  ``workdir`` that holds it.

  Example (the main job, then its best mixture to a PNG)::

    run = runner.load_run("runs/coevolution_ring8")
    x = run.module.sample_best_mixture(run, 2000)
    runner.save_scatter(run.workdir / "best_mixture.png", x, run.module.modes(run.config))
  """
  import ml_collections

  from minmaxlab.runner._checkpoint import CheckpointManager
  from minmaxlab.runner._lifecycle import read_config_json
  from minmaxlab.runner._metrics_log import read_jsonl

  workdir = Path(workdir)
  path = workdir / "config.json"
  if not path.exists():
    where = "" if workdir.is_absolute() else f" ({workdir.resolve()})"
    raise FileNotFoundError(f"{workdir}{where} holds no run (no config.json)")
  saved = read_config_json(path)
  record = saved.pop("run", {}) or {}
  name = module or record.get("module")
  if not name:
    raise ValueError(f"{path} does not name the trainer that wrote it: pass module=")
  trainer = _import_trainer(name, workdir, record)
  if not callable(getattr(trainer, "checkpoint_target", None)):
    raise ValueError(
      f"{workdir}: its trainer {name} defines no checkpoint_target(config), so load_run cannot"
      " restore its checkpoints (read config.json, metrics.jsonl and summary.json instead)"
    )
  config = ml_collections.ConfigDict(saved)
  target = trainer.checkpoint_target(config)
  manager = CheckpointManager(workdir / "checkpoints")
  restore = getattr(trainer, "restore_run", None)
  state, meta = restore(manager, target, step) if restore else manager.restore(target, step)
  summary_path = workdir / "summary.json"
  summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
  return Run(
    workdir=workdir,
    config=config,
    record=record,
    step=int(meta.get("step", -1)),
    state=state,
    rows=read_jsonl(workdir / "metrics.jsonl"),
    summary=summary,
    module=trainer,
  )
