"""Defaults shared by every ``experiments.gan`` config (override in a config file or by flag)."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  # Data: "ring8", "grid25", "digits", "fashion_mnist", "idx:<dir>", "tfds:<name>".
  c.dataset = "ring8"
  c.data_dir = ""  # "" = the data set's default location
  # Model: make_pair(architecture, data_shape, latent_dim, spectral_norm, ...).
  c.architecture = "mlp"  # "mlp" | "dcgan"
  c.latent_dim = 0  # 0 = the architecture's default (mlp 64, dcgan 128)
  c.hidden = (256, 256)  # mlp only
  c.width = 64  # dcgan only
  c.spectral_norm = False
  # Loss: ns_bce, minimax_bce, lsgan, hinge, wgan_gp, heuristic.
  c.loss = "ns_bce"
  c.gp_weight = 10.0
  # Game scheme: gda | alternating | extragradient | optimistic; optional lookahead and EMA.
  c.scheme = "alternating"
  c.max_steps = 1  # discriminator steps per generator step (alternating)
  c.unroll_steps = 5  # simulated discriminator steps the generator differentiates (unrolled)
  c.lookahead = False
  c.sync_period = 5
  c.slow_step_size = 0.5
  c.ema_decay = 0.0  # > 0: also evaluate an EMA of the generator ("ema/" metrics)
  c.ema_slow = False  # True: the EMA averages the lookahead slow weights at syncs instead
  # Adam of each player (min = generator, max = discriminator).
  c.lr_min = 2e-4
  c.lr_max = 2e-4
  c.b1 = 0.5
  c.b2 = 0.999
  # Loop.
  c.batch_size = 64
  c.data_parallel = 1  # > 1: split every minibatch over this many local devices (replicas)
  c.num_steps = 1000
  c.log_every = 50  # steps per jitted lax.scan chunk; the others must be multiples of it
  c.eval_every = 500
  c.checkpoint_every = 500
  c.keep_checkpoints = 3
  c.num_eval_samples = 2000
  c.grid_samples = 64
  # Evaluation classifier (image data sets): trained once, cached.
  c.classifier = ml_collections.ConfigDict()
  c.classifier.steps = 1500
  c.classifier.cache_dir = ""  # "" = ~/.cache/minmaxlab/classifiers (or $MINMAXLAB_CACHE)
  # Game dynamics (minmaxlab.analysis.game_dynamics) at every dynamics_every-th evaluation
  # (steps that are multiples of eval_every * dynamics_every, and the last step); 0 = off.
  c.dynamics_every = 0
  c.dynamics = ml_collections.ConfigDict()
  c.dynamics.batch_size = 64  # the fixed batch's size; 0 = batch_size
  c.dynamics.num_eigenvalues = 4
  c.dynamics.eigen_iterations = 20  # Arnoldi steps on the game Jacobian
  c.dynamics.num_probes = 8  # Hutchinson probes of the rotational share
  c.dynamics.radius_iterations = 10  # Arnoldi steps on the update operator
  c.tensorboard = True
  c.progress = True
  return c
