r"""Train one GAN from a config file.

  python -m experiments.gan.main --config experiments/gan/configs/smoke.py --workdir runs/smoke
  python -m experiments.gan.main --config experiments/gan/configs/ring8.py --workdir runs/ring8_la \
      --config.lookahead=True --config.seed=1

The same command again resumes an unfinished run (killed, or stopped with Ctrl-C) from its
latest checkpoint and only reports a finished one (nothing is changed); a larger
``--config.num_steps`` continues a finished run. A workdir holding a run of another config
is refused. Compiled programs are cached on disk (``$MINMAXLAB_CACHE_DIR``).
"""

import sys

from absl import app, flags, logging
from ml_collections import config_flags

from experiments import _cli

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (checkpoints, logs, plots).")
_RESUME = flags.DEFINE_bool(
  "resume", False, "Continue from the latest checkpoint (the default whenever there is one)."
)
flags.mark_flags_as_required(["config", "workdir"])

MODULE = "experiments.gan.main"
# Config fields a rerun may change (the loop's length and logging, the dynamics action):
# those of ``train.RESUME_MAY_CHANGE`` (tested).
MAY_CHANGE = (
  "num_steps",
  "dynamics_every",
  "dynamics",
  "eval_every",
  "checkpoint_every",
  "keep_checkpoints",
  "grid_samples",
  "tensorboard",
  "progress",
)


def header(config, workdir, where: str | None = None) -> str:
  """The first line of a run: what it will do and where (``where``: its device and process,
  :func:`minmaxlab.distributed.placement`, in brackets)."""
  scheme = config.scheme
  if config.get("lookahead", False):
    k, alpha = config.sync_period, config.slow_step_size
    scheme = f"Lookahead-minmax (k={k}, alpha={alpha}) over {scheme}"
  where = f" [{where}]" if where else ""
  return (
    f"gan: a {config.architecture} GAN on {config.dataset}, {scheme} with Adam, loss "
    f"{config.loss}, {config.num_steps} steps{where} -> {workdir}"
  )


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint step at INFO
  from minmaxlab import runner

  config, workdir = _CONFIG.value, _WORKDIR.value
  runner.lock_workdir(workdir)  # one process per workdir: a second run stops in one line
  run = runner.start_run(workdir, config, config.num_steps, module=MODULE, may_change=MAY_CHANGE)
  if run.status != "finished":
    from minmaxlab import distributed  # JAX starts here: the device it found is named

    print(header(config, workdir, distributed.placement("single", 1, 1)), flush=True)

  from experiments.gan import train  # after flag parsing: JAX starts here

  try:
    row = train.train(config, workdir, resume=_RESUME.value or run.resume, on_log=run.on_log)
  except train.TrainingDiverged as e:
    print(f"ERROR: {e}", file=sys.stderr)
    sys.exit(2)
  print("final:", " ".join(f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
  try:
    _cli.run(main)  # one-line errors; --debug shows the traceback
  except KeyboardInterrupt:  # Ctrl-C while starting, before the handler is installed
    print("\ninterrupted while starting; nothing was run", file=sys.stderr)
    sys.exit(130)
