"""Seconds on a CPU: a small MLP GAN on the 8-Gaussian ring (CI)."""

from experiments.gan.configs import base


def get_config():
  c = base.get_config()
  c.dataset = "ring8"
  c.hidden = (32, 32)
  c.latent_dim = 8
  c.lr_min = c.lr_max = 1e-3
  c.batch_size = 32
  c.num_steps = 40
  c.log_every = 10
  c.eval_every = 20
  c.checkpoint_every = 20
  c.num_eval_samples = 256
  c.ema_decay = 0.9
  return c
