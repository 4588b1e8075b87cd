"""A 3x3 torus on the 5x5 grid of Gaussians (25 modes; harder than the ring)."""

import ml_collections

from experiments.coevolution.configs import ring8_3x3


def get_config():
  c = ring8_3x3.get_config()
  c.dataset = "grid25"
  c.dataset_kwargs = ml_collections.ConfigDict()  # data.grid25's defaults
  c.hidden = (128, 128)
  c.baseline = False  # results.py grid25 runs the single-GAN side itself
  return c
