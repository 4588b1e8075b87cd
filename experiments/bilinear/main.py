"""The bilinear comparison of every game optimizer.

python -m experiments.bilinear.main [--config path.py] [--workdir runs/bilinear] [--config.x=y]
"""

import os

from absl import app, flags, logging
from ml_collections import config_flags

from experiments import _cli
from experiments.bilinear import train

_CONFIG = config_flags.DEFINE_config_file(
  "config",
  os.path.join(os.path.dirname(__file__), "configs", "default.py"),
  "Experiment configuration file.",
)
_WORKDIR = flags.DEFINE_string("workdir", "runs/bilinear", "Directory for results and plots.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  logging.set_verbosity(logging.WARNING)
  train.train(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
  _cli.run(main)  # one-line errors; --debug shows the traceback
