"""The cifar10_lagan protocol at a CPU test size: 2 steps of a narrow SN-ResNet on a tiny folder.

Everything but the sizes is cifar10_lagan's (pass ``:altgan`` or ``:unrolled`` for its
variants), except that the discriminator takes 1 step per generator step instead of 5 (the
compiled step of 6 SN-ResNet evaluations takes minutes to compile on a loaded 2-core CPU) and
the sync period is 2, so that the 2 steps include one lookahead sync and one update of the
slow-weight EMA. ``data_dir`` must point at a cifar-10-batches-py folder (the tests write a
tiny one).
"""

from experiments.gan.configs import cifar10_lagan


def get_config(variant: str = "lagan"):
  c = cifar10_lagan.get_config(variant)
  c.latent_dim = 16
  c.width = 4
  c.unroll_steps = 2
  c.max_steps = 1
  c.sync_period = 2
  c.ema_decay = 0.5
  c.batch_size = 8
  c.num_steps = 2
  c.log_every = 2
  c.eval_every = 2
  c.checkpoint_every = 2
  c.num_eval_samples = 16
  c.grid_samples = 4
  c.classifier.steps = 5
  c.tensorboard = False
  c.progress = False
  return c
