"""Minutes on a 2-core CPU: 8 members, 64 trials of 250 steps (16k GAN steps in all)."""

from experiments.pbt.configs import base


def get_config():
  c = base.get_config()
  c.hidden = (32, 32)
  c.latent_dim = 8
  c.batch_size = 64
  c.population_size = 8
  c.num_trials = 64
  c.steps_per_trial = 250
  c.eval_samples = 1000
  return c
