"""CIFAR-10, the Lookahead-minmax paper's protocol (a GPU run): LA-AltGAN on the SN-ResNet.

Chavdarova et al. 2021 (https://arxiv.org/abs/2006.14567), CIFAR-10 column, from the official
code's defaults and README: the SVRE SN-ResNet pair (G 256 channels with batch norm, D 4 residual
blocks of 128 channels with spectral norm), hinge loss, 5 discriminator steps per generator
step (AltGAN), Adam lr 2e-4 for both players with betas (0.0, 0.9), batch 128, latent 128,
Lookahead-minmax over both players with k = 5 and alpha = 0.5, 500k generator updates, and the
generator evaluated as an EMA (0.9999) of the slow weights, updated at syncs ("G_ema_slow").

  python -m experiments.gan.main --config experiments/gan/configs/cifar10_lagan.py \
      --config.data_dir=/path/to/cifar-10-batches-py --workdir runs/cifar10_lagan

Variants (``--config=experiments/gan/configs/cifar10_lagan.py:<variant>``): ``lagan`` (the
default), ``altgan`` (the same without lookahead; EMA of the fast weights) and ``unrolled``
(the Unrolled-GAN baseline of the paper's tables: one discriminator step per generator step, the
generator differentiating through 5 simulated ones; Metz et al. 2017).

Cost: one LA-AltGAN step is 6 minibatches of 128 through the SN-ResNet (5 D steps, 1 G step);
500k steps is days of one GPU and far beyond a CPU. Evaluation here is the project's
classifier-FID/IS on CIFAR-10 (a small CNN trained on the training split), not the TF-Inception
FID the paper reports, so numbers are not comparable with its FID 12.19.
"""

from experiments.gan.configs import base

VARIANTS = ("lagan", "altgan", "unrolled")


def get_config(variant: str = "lagan"):
  if variant not in VARIANTS:
    raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
  c = base.get_config()
  c.dataset = "cifar10"
  c.data_dir = ""  # give the cifar-10-batches-py folder: --config.data_dir=...
  c.architecture = "sn_resnet"
  c.latent_dim = 128
  c.width = 128  # discriminator channels; the generator has 2 * width = 256
  c.spectral_norm = True
  c.loss = "hinge"
  c.scheme = "alternating"
  c.max_steps = 5  # n_dis
  c.lookahead = variant == "lagan"
  c.sync_period = 5
  c.slow_step_size = 0.5
  c.ema_decay = 0.9999
  c.ema_slow = variant == "lagan"
  if variant == "unrolled":
    c.scheme = "unrolled"
    c.max_steps = 1
    c.unroll_steps = 5
  c.lr_min = c.lr_max = 2e-4
  c.b1 = 0.0
  c.b2 = 0.9
  c.batch_size = 128
  c.num_steps = 500_000
  c.log_every = 100
  c.eval_every = 10_000
  c.checkpoint_every = 10_000
  c.num_eval_samples = 10_000
  c.classifier.steps = 3000
  return c
