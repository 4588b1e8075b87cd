"""Black-box PBT of LA-AltGAN on Fashion-MNIST by classifier-FID (``fashion.FashionLAGANTask``).

Explored: ``lr_G``, ``lr_D`` (Adam, b1 0.5), the lookahead ``slow_step_size`` and
its ``sync_period`` (from ``sync_period_choices``). Lipizzaner's MNIST MLP pair
(latent 64, hidden 256-256), batch 100, ns-BCE. Fitness = -FID in the features of
the project's evaluation CNN on ``eval_samples`` generated images. The Debian
``dataset-fashion-mnist`` IDX files are read from ``data_dir``
(default ``/usr/share/datasets/fashion-mnist``). CPU-sized: 8 members, 48 trials
of 200 steps (9600 GAN steps in all).
"""

import ml_collections

from experiments.pbt.configs import base


def get_config():
  c = base.get_config()
  c.task = "fashion_mnist"
  # the ring task's fixed/explored settings do not apply (they are explored here)
  for name in (
    "sync_period",
    "slow_step_size",
    "lr_min_bounds",
    "lr_max_bounds",
    "lr_decay_bounds",
  ):
    del c[name]
  c.data_dir = ""  # "" = /usr/share/datasets/fashion-mnist
  c.train_examples = 0  # 0 = the whole training split; > 0: its first n images (quick runs)
  c.hidden = (256, 256)
  c.latent_dim = 64
  c.loss = "ns_bce"
  c.batch_size = 100
  c.b1 = 0.5
  c.lr_G_bounds = (1e-5, 2e-3)
  c.lr_D_bounds = (1e-5, 2e-3)
  c.slow_step_size_bounds = (0.1, 1.0)
  c.sync_period_choices = (1, 2, 3, 5, 8, 12, 20)
  c.population_size = 8
  c.num_trials = 48
  c.steps_per_trial = 200
  c.eval_samples = 1000
  c.top_k = 2
  # Evaluation classifier (trained once on the real training split, cached; the same
  # cache as experiments/gan and experiments/coevolution when train_examples == 0).
  c.classifier = ml_collections.ConfigDict()
  c.classifier.steps = 1500
  c.classifier.cache_dir = ""  # "" = ~/.cache/minmaxlab/classifiers (or $MINMAXLAB_CACHE)
  return c
