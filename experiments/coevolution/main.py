r"""Coevolve a grid of GANs (Lipizzaner in JAX) from a config file.

  python -m experiments.coevolution.main --config experiments/coevolution/configs/ring8_3x3.py \
      --workdir runs/g
  python -m experiments.coevolution.main --config ... --workdir runs/g1 --config.rows=1 \
      --config.cols=1                                  # the single-GAN baseline
  python -m experiments.coevolution.main --config ... --workdir runs/g --resume   # continue
  python -m experiments.coevolution.main --config ... --workdir runs/g --config.backend=mesh
                                              # cells sharded over every local device
  mpirun -n 4 python -m experiments.coevolution.main --config ... --workdir runs/g \
      --config.backend=mpi                    # one block of grid rows per MPI rank
"""

from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (checkpoints, logs, plots).")
_RESUME = flags.DEFINE_bool("resume", False, "Continue from the latest checkpoint in --workdir.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint step at INFO
  import os

  from minmaxlab import distributed

  config = _CONFIG.value
  # Multi-process JAX must start before any computation (imports below may compute).
  distributed.initialize(config.get("distributed", ""))

  from experiments.coevolution import train  # after flag parsing: JAX starts here

  row = train.train(config, _WORKDIR.value, resume=_RESUME.value)
  summary = os.path.join(_WORKDIR.value, "summary.json")
  if os.path.exists(summary) and train.is_writer(config):
    print(train.report(row, summary))
    print(f"pictures: {_WORKDIR.value}/samples/, curves: {_WORKDIR.value}/metrics.png")


if __name__ == "__main__":
  app.run(main)
