"""Fashion-MNIST, the Lipizzaner MNIST MLP pair (latent 64, hidden 256-256, tanh)."""

from experiments.gan.configs import base


def get_config():
  c = base.get_config()
  c.dataset = "fashion_mnist"
  c.architecture = "mlp"
  c.latent_dim = 64
  c.hidden = (256, 256)
  c.batch_size = 100
  c.num_steps = 10000
  c.log_every = 100
  c.eval_every = 2000
  c.checkpoint_every = 2000
  c.num_eval_samples = 5000
  c.ema_decay = 0.999
  return c
