"""The main demo: a 3x3 torus of small MLP GANs on the 8-Gaussian ring (no download, minutes on CPU).

Lookahead-minmax over Adam in every cell; the best cell's generator mixture is the output.
Single-GAN baseline with the same number of gradient steps per generator:
``--config.rows=1 --config.cols=1`` (each cell takes ``steps_per_generation`` steps per
generation, so a 1x1 run with ``--config.steps_per_generation=9x`` matches the grid's total).
"""

from experiments.coevolution.configs import base


def get_config():
  c = base.get_config()
  c.dataset = "ring8"
  c.hidden = (64, 64)
  c.latent_dim = 16
  c.rows = c.cols = 3
  c.learning_rate = 1e-3
  c.batch_size = 128
  c.steps_per_generation = 100
  c.fitness_samples = 500
  c.mixture_samples = 500
  c.generations = 30
  c.checkpoint_every = 10
  c.plot_every = 5
  c.num_eval_samples = 2500
  c.cell_samples = 500
  return c
