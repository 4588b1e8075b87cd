r"""Population based training of a GAN with stateless workers.

  python -m experiments.pbt.main --config experiments/pbt/configs/smoke.py --workdir runs/p \
      --workers 2
  mpirun -n 3 python -m experiments.pbt.main --config experiments/pbt/configs/smoke.py \
      --workdir runs/p --workers mpi          # rank 0 the controller, ranks 1..2 workers
  # killed? the same command resumes from runs/p/pbt.sqlite
"""

import math
import os

from absl import app, flags, logging
from ml_collections import config_flags

from experiments import _cli

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (store, checkpoints, logs).")
_WORKERS = flags.DEFINE_string(
  "workers",
  "2",
  "Local worker processes (0: trials inline), or 'mpi': the ranks of `mpirun -n P` (P >= 2;"
  " rank 0 runs the controller, ranks 1..P-1 are workers).",
)
_TIMEOUT = flags.DEFINE_float("timeout", None, "Give up after this many seconds (exit 1).")
_BUDGET = flags.DEFINE_float(
  "budget_s",
  None,
  "Wall-clock budget in seconds: then no new trial starts, the running ones finish, the"
  " summary is written and the run exits 0 (the same command continues the campaign).",
)
flags.mark_flags_as_required(["config", "workdir"])


def parse_workers(value: str) -> int | str:
  if value == "mpi":
    return value
  if value.isdigit():
    return int(value)
  raise app.UsageError(f"--workers must be an integer >= 0 or 'mpi', got {value!r}")


def header(config, workdir, workers, ranks: int | None = None) -> str:
  """The first line of a campaign: what it will do and where (the processes or MPI ``ranks``
  and the device each trial runs on, in brackets; JAX has started)."""
  from minmaxlab import distributed

  if workers == "mpi":
    who = "workers on the MPI ranks 1..P-1"
    where = distributed.placement("mpi", 1, ranks or 1, "rank")
  else:
    n = min(workers, config.population_size, len(os.sched_getaffinity(0)))  # as the controller
    who = f"{n} worker processes" if workers else "trials inline"
    where = distributed.placement("processes" if n else "inline", 1, 1 + n)
  return (
    f"pbt: {config.num_trials} trials of {config.steps_per_trial} steps, task {config.task}, "
    f"a population of {config.population_size} ({config.exploit} exploit), {who} [{where}]"
    f" -> {workdir}"
  )


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  workers = parse_workers(_WORKERS.value)
  if _TIMEOUT.value is not None and not (_TIMEOUT.value > 0 and math.isfinite(_TIMEOUT.value)):
    raise app.UsageError(f"--timeout must be > 0, got {_TIMEOUT.value!r}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint at INFO
  import re

  from minmaxlab import runner

  done = {"trials": 0}

  def interrupted():
    return (
      f"interrupted after {done['trials']}/{_CONFIG.value.num_trials} trials; continue with:"
      f" {runner.rerun_command('experiments.pbt.main')}"
    )

  if workers != "mpi" or os.environ.get("PMI_RANK", "0") == "0":
    runner.exit_on_interrupt(interrupted)
  runner.enable_compilation_cache()

  def log(text: str) -> None:
    m = re.match(r"trials done (\d+)/", text)
    if m:
      done["trials"] = int(m.group(1))
    _log(text)

  from experiments.pbt import population_report, train  # after flag parsing: JAX starts here

  ranks = None
  if workers == "mpi":
    from minmaxlab import pbt

    try:
      ranks = pbt.mpi_world().Get_size()  # fewer than 2 ranks: a clear error before any work
    except ValueError as e:
      raise SystemExit(f"ERROR: {e}") from None
  if _BUDGET.value is not None and not _BUDGET.value > 0:
    raise app.UsageError(f"--budget_s must be > 0, got {_BUDGET.value!r}")
  controller_rank = workers != "mpi" or os.environ.get("PMI_RANK", "0") == "0"
  if controller_rank:  # before the header: a busy workdir, or a file, is all that is said
    runner.lock_workdir(_WORKDIR.value)
  if controller_rank and not runner.is_finished(_WORKDIR.value, _CONFIG.value.num_trials):
    print(header(_CONFIG.value, _WORKDIR.value, workers, ranks), flush=True)
  s = train.train(
    _CONFIG.value,
    _WORKDIR.value,
    workers=workers,
    timeout=_TIMEOUT.value,
    log=log,
    budget_s=_BUDGET.value,
  )
  if s is None:
    return  # an MPI worker rank
  if not s["best_lineage"]:  # the budget ended the campaign before any trial finished
    print(f"the budget of {_BUDGET.value:g} s ended the campaign before a trial finished")
    return
  best = s["best_lineage"][-1]
  hparams = ", ".join(
    f"{k} {population_report.format_value(v)}"
    for k, v in best.items()
    if k not in ("trial", "start_step", "fitness", "sync_period_index")
  )
  print(
    f"{s['done']} trials in {s['wall_seconds']:.1f} s; best fitness {s['best_fitness']:.3f} "
    f"(trial {s['best_trial']}, step {best['start_step']}, {hparams}); at most "
    f"{s['max_checkpoints']} checkpoints on disk"
  )
  print(f"lineage log: {_WORKDIR.value}/lineage.jsonl, plot: {_WORKDIR.value}/lineages.png")
  if s.get("budget_ended"):
    print(
      f"the budget of {_BUDGET.value:g} s ended the campaign after {s['done']}/"
      f"{_CONFIG.value.num_trials} trials; continue with:"
      f" {runner.rerun_command('experiments.pbt.main')}"
    )


def _log(text: str) -> None:
  print(text, flush=True)


if __name__ == "__main__":
  _cli.run(main)  # one-line errors; --debug shows the traceback
