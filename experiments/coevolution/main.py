r"""Coevolve a grid of GANs (Lipizzaner in JAX) from a config file.

  python -m experiments.coevolution.main --config experiments/coevolution/configs/ring8_3x3.py \
      --workdir runs/g
  python -m experiments.coevolution.main --config ... --workdir runs/g1 --config.rows=1 \
      --config.cols=1                                  # the single-GAN baseline
  python -m experiments.coevolution.main --config ... --workdir runs/g --config.backend=mesh
                                              # cells sharded over every local device
  mpirun -n 4 python -m experiments.coevolution.main --config ... --workdir runs/g \
      --config.backend=mpi                    # one block of grid rows per MPI rank

The same command again resumes an unfinished run (killed, or stopped with Ctrl-C) from
its latest checkpoint and only reports a finished one (nothing is changed);
``--config.generations`` larger than before continues a finished run. A workdir holding
a run of another config is refused. Compiled programs are cached on disk
(``$MINMAXLAB_CACHE_DIR``, default ``~/.cache/minmaxlab/jax``), so a rerun starts in seconds.
"""

import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (checkpoints, logs, plots).")
_RESUME = flags.DEFINE_bool(
  "resume", False, "Continue from the latest checkpoint (the default whenever there is one)."
)
flags.mark_flags_as_required(["config", "workdir"])

MODULE = "experiments.coevolution.main"
# Config fields a rerun may change: the loop's length and logging, and where the grid runs
# (checkpoints always hold the whole grid).
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
)


def _is_rank_zero() -> bool:
  return all(os.environ.get(v, "0") == "0" for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK"))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint step at INFO
  from minmaxlab import distributed, runner

  config, workdir = _CONFIG.value, _WORKDIR.value
  reached = {"generation": None}

  def interrupted():
    saved = runner.checkpoint_steps(workdir)
    at = reached["generation"] if reached["generation"] is not None else max(saved, default=0)
    line = runner.interrupted_line(
      "generation",
      at,
      config.generations,
      saved[-1] if saved else None,
      runner.rerun_command(MODULE),
    )
    return line if _is_rank_zero() else ""

  runner.exit_on_interrupt(interrupted)
  steps = runner.checkpoint_steps(workdir)
  status = runner.run_status(steps[-1] if steps else None, config.generations)
  if status != "new":
    changed = runner.config_changes(workdir, config, MAY_CHANGE)
    if changed:
      diff = ", ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in ((k, *v) for k, v in changed.items()))
      raise SystemExit(
        f"ERROR: {workdir} holds a run of another config ({diff}); use a fresh --workdir"
      )
  say = print if _is_rank_zero() else (lambda *a, **k: None)
  if status == "finished":
    say(
      f"{workdir}: finished earlier ({steps[-1]}/{config.generations} generations); nothing"
      " changed (a larger --config.generations continues it)"
    )
  elif status == "unfinished":
    say(f"{workdir}: resuming from generation {steps[-1]}/{config.generations}", flush=True)
  if status != "finished":
    runner.enable_compilation_cache()
    runner.report_compilation()
  # Multi-process JAX must start before any computation (imports below may compute).
  distributed.initialize(config.get("distributed", ""))

  from experiments.coevolution import train  # after flag parsing: JAX starts here

  def on_log(generation, row):
    reached["generation"] = generation

  row = train.train(config, workdir, resume=_RESUME.value or status != "new", on_log=on_log)
  summary = os.path.join(workdir, "summary.json")
  writer = _is_rank_zero() if status == "finished" else train.is_writer(config)
  if os.path.exists(summary) and writer:
    print(train.report(row, summary))
    from experiments.coevolution import compare  # the grid vs one GAN with its total steps

    for line in compare.compare(config, _WORKDIR.value, row):
      print(line)
    print(f"pictures: {workdir}/samples/, curves: {workdir}/metrics.png")


if __name__ == "__main__":
  try:
    app.run(main)
  except KeyboardInterrupt:  # Ctrl-C before the handler was installed (while importing)
    print("\ninterrupted while starting; nothing was run", file=sys.stderr)
    sys.exit(130)
