r"""Population based training of a GAN with stateless worker processes.

  python -m experiments.pbt.main --config experiments/pbt/configs/smoke.py --workdir runs/p \
      --workers 2
  # killed? the same command resumes from runs/p/pbt.sqlite
"""

from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (store, checkpoints, logs).")
_WORKERS = flags.DEFINE_integer("workers", 2, "Local worker processes (0: trials run inline).")
_TIMEOUT = flags.DEFINE_float("timeout", None, "Give up after this many seconds.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint at INFO
  from experiments.pbt import train  # after flag parsing: JAX starts here

  s = train.train(_CONFIG.value, _WORKDIR.value, workers=_WORKERS.value, timeout=_TIMEOUT.value)
  best = s["best_lineage"][-1]
  print(
    f"{s['done']} trials in {s['wall_seconds']:.1f} s; best fitness {s['best_fitness']:.3f} "
    f"(trial {s['best_trial']}, step {best['start_step']}, lr_min {best['lr_min']:.2e}, "
    f"lr_max {best['lr_max']:.2e}, lr_decay {best['lr_decay']:.2f}); at most "
    f"{s['max_checkpoints']} checkpoints on disk"
  )
  print(f"lineage log: {_WORKDIR.value}/lineage.jsonl, plot: {_WORKDIR.value}/lineages.png")


if __name__ == "__main__":
  app.run(main)
