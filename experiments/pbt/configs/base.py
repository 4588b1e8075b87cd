"""Defaults of ``experiments.pbt``: black-box PBT of an MLP GAN on the 8-Gaussian ring."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.task = "ring8"  # "ring8" (train.RingGANTask) or "fashion_mnist" (fashion.FashionLAGANTask)
  # The GAN trained by every trial (minmaxlab.gan): ring8 mixture, MLP pair, ns-BCE loss,
  # LA-AltGAN (lookahead_minmax over alternating over per-player Adam).
  c.hidden = (64, 64)
  c.latent_dim = 16
  c.loss = "ns_bce"
  c.batch_size = 64
  c.b1 = 0.5
  c.sync_period = 5
  c.slow_step_size = 0.5
  # Explored hyperparameters: both players' learning rates and the decay of their
  # exponential schedule lr(t) = lr * lr_decay^(t / 1000) (a mutable schedule parameter).
  c.lr_min_bounds = (1e-5, 1e-2)
  c.lr_max_bounds = (1e-5, 1e-2)
  c.lr_decay_bounds = (0.1, 1.0)
  # PBT (minmaxlab.pbt.Controller).
  c.population_size = 8
  c.num_trials = 64
  c.steps_per_trial = 500
  c.exploit = "tournament"
  c.truncation_fraction = 0.25
  c.resample_probability = 0.25
  c.top_k = 2
  c.lease_s = 60.0  # a worker silent this long loses its trial (re-queued)
  c.max_attempts = 3  # a trial failing this often is marked failed (its member stops)
  c.max_failed_trials = 1  # the campaign stops (exit 1) once this many trials failed
  # A trial running longer than this (seconds) is stopped and counts a failed attempt, so a
  # task that hangs cannot hold the campaign forever (ControllerConfig(trial_timeout_s));
  # 0: no limit.
  c.trial_timeout_s = 0.0
  # Early stopping (pbt.EarlyStop): once a member has trained early_stop_min_steps steps, it
  # stops when its fitness is below this quantile of the population's (0.5: median rule; 0: off).
  c.early_stop_quantile = 0.0
  c.early_stop_min_steps = 1000
  # Fitness (non-differentiable): modes covered + high-quality rate - mode KL / log 8.
  c.eval_samples = 2000
  return c
