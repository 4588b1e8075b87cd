"""Seconds on a CPU: 4 members, 8 trials of 20 steps of a tiny ring GAN (CI)."""

from experiments.pbt.configs import base


def get_config():
  c = base.get_config()
  c.hidden = (16, 16)
  c.latent_dim = 4
  c.batch_size = 32
  c.population_size = 4
  c.num_trials = 8
  c.steps_per_trial = 20
  c.eval_samples = 256
  c.top_k = 1
  return c
