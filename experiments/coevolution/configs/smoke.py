"""Seconds on a CPU: a 2x2 grid of tiny MLP pairs on the 8-Gaussian ring (CI)."""

from experiments.coevolution.configs import base


def get_config():
  c = base.get_config()
  c.dataset = "ring8"
  c.hidden = (16, 16)
  c.latent_dim = 8
  c.rows = c.cols = 2
  c.learning_rate = 1e-3
  c.batch_size = 32
  c.steps_per_generation = 5
  c.fitness_samples = 64
  c.mixture_samples = 64
  c.generations = 4
  c.checkpoint_every = 2
  c.num_eval_samples = 256
  c.cell_samples = 64
  # Each network one vector: 31 state leaves instead of 71, a third less to compile, and a
  # generation no slower for networks this small (README: "Flat parameters").
  c.flat_params = True
  c.compile = "fastest"  # seconds of compile dominate a 5-step generation (compile_time.py)
  return c
