"""Fashion-MNIST, the Lookahead-minmax MNIST DCGAN (NS-BCE, AltGAN); lookahead by flag.

The paper's MNIST setting is width 64, batch 50, Adam(1e-3, b1=0.05), k=1000,
100k steps; the defaults here are narrower and shorter to run on a CPU (see
experiments/gan/README.md for the exact budget used for the results).
"""

from experiments.gan.configs import base


def get_config():
  c = base.get_config()
  c.dataset = "fashion_mnist"
  c.architecture = "dcgan"
  c.latent_dim = 128
  c.width = 64
  c.loss = "ns_bce"
  c.scheme = "alternating"
  c.lr_min = c.lr_max = 1e-3
  c.b1 = 0.05
  c.b2 = 0.999
  c.batch_size = 50
  c.num_steps = 20000
  c.log_every = 100
  c.eval_every = 2000
  c.checkpoint_every = 2000
  c.num_eval_samples = 5000
  c.sync_period = 5
  c.slow_step_size = 0.5
  c.ema_decay = 0.999
  return c
