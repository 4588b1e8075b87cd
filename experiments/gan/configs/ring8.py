"""8-Gaussian ring, MLP pair (Lipizzaner's 2-D sizes reduced), AltGAN; add lookahead by flag."""

from experiments.gan.configs import base


def get_config():
  c = base.get_config()
  c.dataset = "ring8"
  c.hidden = (128, 128)
  c.latent_dim = 16
  c.lr_min = c.lr_max = 1e-3
  c.batch_size = 128
  c.num_steps = 5000
  c.log_every = 100
  c.eval_every = 1000
  c.checkpoint_every = 1000
  c.num_eval_samples = 2500
  return c
