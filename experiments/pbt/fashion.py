"""Black-box PBT task: LA-AltGAN on Fashion-MNIST, fitness = -(classifier-FID).

A trial trains the MLP GAN pair (``minmaxlab.gan.models``, Lipizzaner's MNIST
sizes by default) ``steps_per_trial`` steps of LA-AltGAN,
``lookahead_minmax(alternating(per_player(adam, adam)), sync_period, slow_step_size)``,
from its parent's checkpoint, then scores the generator by the Frechet
distance in the feature space of the project's evaluation classifier
(``experiments/_classifier_cache.py``: trained once on the real
training split and cached). Explored: ``lr_G`` (generator, the min player),
``lr_D`` (discriminator), ``slow_step_size`` and the sync period (a categorical
index into ``config.sync_period_choices``, stored as ``sync_period_index`` and
shown as ``sync_period``). All four enter the compiled step as arrays, so no
trial recompiles.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import minmaxlab
from experiments import _classifier_cache
from minmaxlab import pbt, runner
from minmaxlab.gan import data, losses, metrics, models

TARGETS = {"lr_G": ("min", "learning_rate"), "lr_D": ("max", "learning_rate")}


def _evaluator(cfg: dict):
  """``(images [N, 28, 28, 1] in [-1, 1], ImageEvaluator)`` of the config.

  ``train_examples == 0``: the full training split and the shared cached
  classifier (``_classifier_cache.classifier_evaluator``, the one experiments/gan and
  experiments/coevolution use). Otherwise the first ``train_examples`` images
  for the GAN, the classifier (cached under its own name) and the real
  statistics (recomputed, cheap at that size): for quick runs and tests.
  """
  cache_dir = cfg["classifier_cache_dir"] or None
  data_dir = cfg["data_dir"] or None
  n = int(cfg["train_examples"])
  if n == 0:
    evaluator, _ = _classifier_cache.classifier_evaluator(
      "fashion_mnist", cache_dir=cache_dir, data_dir=data_dir, steps=cfg["classifier_steps"]
    )
    return data.load("fashion_mnist", "train", data_dir=data_dir).images, evaluator
  train = data.load("fashion_mnist", "train", data_dir=data_dir)
  test = data.load("fashion_mnist", "test", data_dir=data_dir)
  images, labels = train.images[:n], train.labels[:n]
  clf = _classifier_cache.load_or_train_classifier(
    f"fashion_mnist_first{n}",
    images,
    labels,
    train.num_classes,
    test_images=test.images[:2000],
    test_labels=test.labels[:2000],
    cache_dir=cache_dir,
    steps=cfg["classifier_steps"],
  )
  return images, metrics.ImageEvaluator.from_real(clf, images)


def _build(cfg: dict):
  images, evaluator = _evaluator(cfg)
  shape = tuple(int(s) for s in images.shape[1:])
  pair = models.make_pair("mlp", shape, cfg["latent_dim"], hidden=tuple(cfg["hidden"]))
  adam = optax.inject_hyperparams(optax.adam)

  def scheme(sync_period, slow_step_size):
    inner = minmaxlab.alternating(
      minmaxlab.per_player(min=adam(1e-4, b1=cfg["b1"]), max=adam(1e-4, b1=cfg["b1"]))
    )
    return minmaxlab.lookahead_minmax(inner, sync_period, slow_step_size)

  vaf = minmaxlab.value_and_vector_field(losses.game_loss(pair, cfg["loss"]))
  B, L, steps = cfg["batch_size"], pair.latent_dim, cfg["steps_per_trial"]
  choices = jnp.asarray(cfg["sync_period_choices"], jnp.int32)

  @jax.jit
  def init(key):
    k1, k2 = jax.random.split(key)
    params = minmaxlab.Players(pair.generator.init(k1), pair.discriminator.init(k2))
    # the state's structure does not depend on the lookahead hyperparameters
    return {"params": params, "opt_state": scheme(5, 0.5).init(params), "step": jnp.int32(0)}

  @jax.jit
  def chunk(key, state, hparams, real_images):
    # sync period and slow step size are traced arrays: mutating them never recompiles
    tx = scheme(choices[hparams["sync_period_index"]], hparams["slow_step_size"])
    lrs = {"lr_G": hparams["lr_G"], "lr_D": hparams["lr_D"]}

    def step(carry, k):
      params, opt_state = carry
      opt_state = pbt.set_hyperparams(opt_state, TARGETS, lrs)
      k_real, k_z = jax.random.split(k)
      real = jax.vmap(lambda kk: data.sample_batch(kk, real_images, B))(jax.random.split(k_real))
      z = jax.random.normal(k_z, (2, B, L))
      losses_, v = vaf(params, real[0], z[0])
      u, opt_state = tx.update(
        v, opt_state, params, vector_field=lambda p, i: vaf(p, real[i], z[i])[1]
      )
      return (optax.apply_updates(params, u), opt_state), losses_

    carry = (state["params"], state["opt_state"])
    (params, opt_state), _ = jax.lax.scan(step, carry, jax.random.split(key, steps))
    return {"params": params, "opt_state": opt_state, "step": state["step"] + steps}

  @jax.jit
  def generate(key, g_params):
    return pair.generator.apply(g_params, jax.random.normal(key, (cfg["eval_samples"], L)))

  return init, chunk, generate, jnp.asarray(images), evaluator


# Per process: data, evaluator and compiled programs, built once per run-defining config.
_programs = runner.program_cache(_build, maxsize=None)


class FashionLAGANTask:
  """``init(trial)`` / ``train(hparams, state, trial)`` for :class:`minmaxlab.pbt.Controller`
  (built by the named task ``experiments.pbt.train:task_from_config`` from the config's JSON in
  every worker process and MPI rank, which compile the programs themselves)."""

  KEYS = (
    "data_dir",
    "train_examples",
    "hidden",
    "latent_dim",
    "loss",
    "batch_size",
    "b1",
    "steps_per_trial",
    "eval_samples",
    "sync_period_choices",
  )

  def __init__(self, config):
    cfg = {k: config[k] for k in self.KEYS}
    cfg["classifier_steps"] = config.classifier.steps
    cfg["classifier_cache_dir"] = config.classifier.cache_dir
    self.cfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}
    self.space = {
      "lr_G": pbt.Continuous(low=config.lr_G_bounds[0], high=config.lr_G_bounds[1]),
      "lr_D": pbt.Continuous(low=config.lr_D_bounds[0], high=config.lr_D_bounds[1]),
      "slow_step_size": pbt.Continuous(
        low=config.slow_step_size_bounds[0], high=config.slow_step_size_bounds[1], log=False
      ),
      "sync_period_index": pbt.Categorical(len(config.sync_period_choices)),
    }

  def programs(self):
    """``(init, chunk, generate, images, evaluator)``: this config's jitted programs, data
    and evaluator (built once per process)."""
    return _programs(self.cfg)

  def prepare(self) -> None:
    """Train/cache the evaluation classifier once, before any worker starts."""
    self.programs()

  def describe(self, hparams) -> dict[str, Any]:
    """The hyperparameters as used (the sync period itself instead of its index)."""
    out = {k: v for k, v in hparams.items() if k != "sync_period_index"}
    out["sync_period"] = int(self.cfg["sync_period_choices"][int(hparams["sync_period_index"])])
    return out

  def schedules(self, hparams, steps) -> dict[str, np.ndarray]:
    """The learning rates along ``steps`` (constant within a trial here)."""
    return {k: np.full(len(steps), float(hparams[k])) for k in ("lr_G", "lr_D")}

  def init(self, trial: pbt.Trial):
    return self.programs()[0](jax.random.key(trial.seed))

  def train(self, hparams, state, trial: pbt.Trial):
    if int(state["step"]) != trial.start_step:
      raise ValueError(f"trial {trial.id}: checkpoint at step {int(state['step'])}")
    _, chunk, generate, images, evaluator = self.programs()
    k_train, k_eval = jax.random.split(jax.random.key(trial.seed))
    h = {k: jnp.float32(v) for k, v in hparams.items() if k != "sync_period_index"}
    h["sync_period_index"] = jnp.int32(hparams["sync_period_index"])
    state = chunk(k_train, state, h, images)
    fake = np.asarray(generate(k_eval, state["params"].min))
    fid = float(evaluator(fake)["fid"]) if np.all(np.isfinite(fake)) else math.inf
    return (-fid if math.isfinite(fid) else -1e9), state
