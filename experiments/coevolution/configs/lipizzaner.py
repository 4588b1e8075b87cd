"""A Lipizzaner YAML configuration as this experiment's config (``lipizzaner_config.read``).

  python -m experiments.coevolution.main \
      --config experiments/coevolution/configs/lipizzaner.py:path/to/mnist-2x2.yml --workdir ...

The file's fields override ``base.py`` (the table of what maps where is ``FIELDS`` in
``experiments/coevolution/lipizzaner_config.py`` and the parity table of
experiments/coevolution/README.md); every other field can still be set by flag. The
reference's learning-rate mutation maps to ``lr_mutation="reference_as_run"`` (what its code
runs: the mutation before every update, each update at the learning rate its optimizer state
restores) with the file's ``alpha`` and ``mutation_probability``. ``...:file.yml,reference``
also takes the reference's coupling (``lipizzaner_config.REFERENCE_COUPLING``: its training
phase, transposed neighbourhoods, one seed for every client), as the ring outcome study's
library arms run.
"""

from experiments.coevolution import lipizzaner_config
from experiments.coevolution.configs import base


def get_config(arg: str | None = None):
  yaml_path, _, coupling = (arg or "").partition(",")
  if not yaml_path:
    raise ValueError("give the Lipizzaner file: --config .../configs/lipizzaner.py:<file.yml>")
  c = base.get_config()
  for k, v in lipizzaner_config.read(yaml_path, coupling or "library").items():
    c[k] = v
  c.lipizzaner_yaml = str(yaml_path)
  c.eval_every = c.checkpoint_every = max(1, min(10, c.generations))
  return c
