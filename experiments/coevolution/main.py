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
its latest checkpoint and only reports a finished one (nothing is changed); a larger
``--config.generations`` continues a finished run. A workdir holding a run of another
config is refused. Compiled programs are cached on disk (``$MINMAXLAB_CACHE_DIR``,
default ``~/.cache/minmaxlab/jax``), so a rerun starts in seconds.
"""

import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from experiments import _cli
from experiments.coevolution.rerun import (
  MAY_CHANGE,
  REPORT,
  check_loop,
  header,
  stored_report,
  write_report,
)

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (checkpoints, logs, plots).")
_RESUME = flags.DEFINE_bool(
  "resume", False, "Continue from the latest checkpoint (the default whenever there is one)."
)
flags.mark_flags_as_required(["config", "workdir"])

MODULE = "experiments.coevolution.main"


def _is_rank_zero() -> bool:
  return all(os.environ.get(v, "0") == "0" for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK"))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint step at INFO
  from minmaxlab import distributed, runner

  config, workdir = _CONFIG.value, _WORKDIR.value
  check_loop(config)
  run = runner.start_run(
    workdir,
    config,
    config.generations,
    module=MODULE,
    unit="generation",
    may_change=MAY_CHANGE,
    quiet=not _is_rank_zero(),
    lock=_is_rank_zero() and not config.get("distributed"),  # (jax.distributed: below)
  )
  report = os.path.join(workdir, REPORT)
  lines = stored_report(report, config) if run.status == "finished" else None
  if lines is not None:
    if _is_rank_zero():
      print("\n".join(lines), flush=True)
    runner.unlock_workdir(workdir)  # its lock file goes with it: nothing changed
    return
  # Multi-process JAX, and the CPU's devices, before any computation (imports below may compute).
  if config.get("backend") == "auto" and not config.get("distributed"):
    # cells over cores (one single-threaded device per core) where the grid fills them
    distributed.split_cpu_cores(grid=(config.rows, config.cols))
  distributed.initialize(config.get("distributed", ""))

  import jax

  from experiments.coevolution import train  # after flag parsing: JAX starts here

  train.check_config(config)  # a bad value, or a grid too large here: before anything is written
  if _is_rank_zero() and jax.process_index() == 0:  # the process that writes the workdir
    runner.lock_workdir(workdir)  # one process per workdir: a second run stops in one line
  if run.status != "finished" and _is_rank_zero():  # a valid config: say what will run, where
    print(header(config, workdir, train.programs(config).backend.where()), flush=True)
  # The main job is finished (runner.finish) after its baseline and comparison, below.
  resume = _RESUME.value or run.resume
  row = train.train(config, workdir, resume=resume, on_log=run.on_log, finish=False)
  summary = os.path.join(workdir, "summary.json")
  writer = _is_rank_zero() if run.status == "finished" else train.is_writer(config)
  if os.path.exists(summary) and writer:
    lines = [train.report(row, summary)]
    print(lines[0])
    from experiments.coevolution import compare  # the grid vs one GAN with its total steps

    runner.fault_point("main:comparison")
    compared = compare.compare(config, _WORKDIR.value, row)
    for line in compared:
      print(line)
    from experiments.coevolution import ensembles  # config.ensembles: post-training ensembles

    after = list(ensembles.after_training(config, workdir))
    for line in after:
      print(line)
    products = train.end_products(config)
    if any(line.startswith("comparison picture:") for line in compared):
      products += ["comparison.png", f"{compare.BASELINE_DIR}/summary.json"]
    lines += [*compared, *after, f"pictures: {workdir}/samples/, curves: {workdir}/metrics.png"]
    if not runner.is_finished(workdir, config.generations, products):
      write_report(report, config, lines)
      runner.finish(workdir, config.generations, products)
    elif stored_report(report, config) is None:  # finished earlier, reported with another config
      write_report(report, config, lines)
    print(lines[-1])


if __name__ == "__main__":
  try:
    _cli.run(main)  # one-line errors; --debug shows the traceback
  except KeyboardInterrupt:  # Ctrl-C while starting, before the handler is installed
    print("\ninterrupted while starting; nothing was run", file=sys.stderr)
    sys.exit(130)
