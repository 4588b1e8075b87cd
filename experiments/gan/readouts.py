"""What a GAN run reads out at an evaluation: the generators to evaluate, their samples and
metrics (:class:`Evaluator`), the pictures of the samples, and the game's dynamics
(:func:`make_dynamics`). ``train.py`` builds them once per config."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import minmaxlab
from experiments import _classifier_cache
from minmaxlab import runner
from minmaxlab.gan import metrics

# The dynamics' fixed batch and probes: fold_in(key(seed), DYNAMICS_KEY), apart from the
# training and evaluation keys (split from the same key), so enabling it changes no other draw.
DYNAMICS_KEY = 39
# The linearised schemes of analysis.game_dynamics (optimistic and unrolled: no radius).
_DYNAMICS_SCHEMES = {"gda": "gda", "alternating": "alternating", "extragradient": "extragradient"}


def make_dynamics(exp, config):
  """A ``params -> metrics row`` of :func:`minmaxlab.analysis.game_dynamics` (jitted) for the
  experiment ``exp`` (``train.Experiment``).

  At a fixed batch (``config.dynamics.batch_size`` real samples and latents, the same at
  every evaluation, so the curves change only with the parameters) and fixed probes: the
  outer eigenvalues of the game Jacobian, the rotational share, and the spectral radius of
  ``config.scheme``'s update operator (with ``config.lookahead``, the cycle's) at the two
  players' learning rates ``lr_min``/``lr_max``. That operator is the linearised SGD step:
  Adam's per-coordinate scaling and momentum are not in it. Keys: ``dynamics/...``
  (:meth:`~minmaxlab.analysis.GameDynamics.row`).
  """
  from minmaxlab import analysis  # noqa: PLC0415

  d = config.dynamics
  key = jax.random.fold_in(jax.random.key(config.seed), DYNAMICS_KEY)
  k_real, k_z, k_loss, k_probe = jax.random.split(key, 4)
  b = d.batch_size or config.batch_size
  batch = (exp.sample_real(k_real, b), jax.random.normal(k_z, (b, exp.pair.latent_dim)), k_loss)
  scheme = _DYNAMICS_SCHEMES.get(config.scheme)
  fn = functools.partial(
    analysis.game_dynamics,
    minmaxlab.vector_field(exp.loss_fn),
    num_eigenvalues=d.num_eigenvalues,
    eigen_iterations=d.eigen_iterations,
    num_probes=d.num_probes,
    scheme=scheme,
    step_size=minmaxlab.Players(config.lr_min, config.lr_max),
    max_steps=config.max_steps,
    sync_period=config.sync_period if config.lookahead and scheme else None,
    slow_step_size=config.slow_step_size,
    radius_iterations=d.radius_iterations,
  )
  compiled = jax.jit(lambda params, batch, key: fn(params, *batch, key=key))
  return lambda params: compiled(params, batch, k_probe).row()


def curve_keys(rows: list[dict]) -> list[str]:
  """The numeric metrics of ``rows`` that ``metrics.png`` plots (not the ``dynamics/`` ones)."""
  return sorted(
    {
      k
      for r in rows
      for k, v in r.items()
      if k != "step"
      and not k.startswith("dynamics/")
      and isinstance(v, (int, float))
      and not isinstance(v, bool)
    }
  )


def generator_params(config, state) -> dict[str, Any]:
  """The generators of ``state`` (``train.TrainState``) to evaluate: the current one and,
  with ``ema_decay``, its EMA."""
  out = {"": state.params.min}
  if config.ema_decay > 0:
    out["ema/"] = minmaxlab.transforms.averaged_params(state.opt_state).min
  return out


class Evaluator:
  """Metrics of a generator at a step (mixture metrics, or classifier FID/IS/TVD); the
  samples of step ``t`` are drawn with ``fold_in(eval_key, t)``."""

  def __init__(self, exp, config, eval_key):
    self.exp, self.config = exp, config
    self.eval_key = eval_key
    self.image_evaluator, self.classifier = None, None
    if exp.mixture is None:
      self.image_evaluator, self.classifier = _classifier_cache.classifier_evaluator(
        config.dataset,
        cache_dir=config.classifier.cache_dir or None,
        data_dir=config.data_dir or None,
        steps=config.classifier.steps,
      )
    gen = exp.pair.generator.apply
    self._generate = jax.jit(gen)
    if exp.mixture is not None:
      mixture = exp.mixture
      self._mixture_metrics = jax.jit(lambda s: metrics.mixture_metrics(s, mixture))

  def samples(self, g_params, step: int, n: int) -> np.ndarray:
    key = jax.random.fold_in(self.eval_key, step)
    z = jax.random.normal(key, (n, self.exp.pair.latent_dim))
    bs = 500
    out = [np.asarray(self._generate(g_params, z[i : i + bs])) for i in range(0, n, bs)]
    return np.concatenate(out)

  def __call__(self, g_params, step: int) -> tuple[dict[str, float], np.ndarray]:
    x = self.samples(g_params, step, self.config.num_eval_samples)
    if self.exp.mixture is not None:
      m = {k: v.item() for k, v in jax.device_get(self._mixture_metrics(jnp.asarray(x))).items()}
    else:
      m = self.image_evaluator(x)
    return m, x


def save_samples(path: Path, x: np.ndarray, exp, n: int, title: str) -> None:
  """A picture of samples ``x``: a scatter over the mixture's modes, or a grid of ``n`` images."""
  path.parent.mkdir(parents=True, exist_ok=True)
  if exp.mixture is not None:
    runner.save_scatter(path, x, np.asarray(exp.mixture.modes), title=title)
  else:
    runner.save_image_grid(path, x[:n])
