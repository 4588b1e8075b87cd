r"""Train one GAN from a config file.

  python -m experiments.gan.main --config experiments/gan/configs/smoke.py --workdir runs/smoke
  python -m experiments.gan.main --config experiments/gan/configs/ring8.py --workdir runs/ring8_la \
      --config.lookahead=True --config.seed=1
  python -m experiments.gan.main --config ... --workdir runs/x --resume    # continue a killed run
"""

import sys

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
  from experiments.gan import train  # after flag parsing: JAX starts here

  try:
    row = train.train(_CONFIG.value, _WORKDIR.value, resume=_RESUME.value)
  except train.TrainingDiverged as e:
    print(f"ERROR: {e}", file=sys.stderr)
    sys.exit(2)
  print("final:", " ".join(f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
  app.run(main)
