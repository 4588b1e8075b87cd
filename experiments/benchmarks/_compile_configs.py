"""The configs ``compile_time.py`` compiles, built as ``train.py`` builds them (image configs
with random data of the real shapes: compile and generation time depend on shapes only)."""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp

from experiments.coevolution import experiment, train
from minmaxlab import coevolution as co
from minmaxlab.gan import metrics


def _image_experiment(config):
  """The image config's ``Coevolution`` (as ``train.build`` makes it) and random data of
  the real shapes: images uniform in [-1, 1], an untrained evaluation CNN, identity
  feature covariance (the data set and the trained classifier are not loaded)."""
  shape = (28, 28, 1)
  clf = metrics.cnn_classifier(shape, 10)
  k_img, k_clf = jax.random.split(jax.random.key(1))
  feature = clf.feature_dim
  data = train.ImageData(
    jax.random.uniform(k_img, (60000,) + shape, jnp.float32, -1.0, 1.0),
    clf.init(k_clf),
    jnp.zeros((feature,), jnp.float32),
    jnp.eye(feature, dtype=jnp.float32),
  )
  pair = experiment.pair_from_config(config, shape)
  from minmaxlab.gan import data as gan_data

  coev = co.Coevolution(
    train.coevolution_config(config),
    pair,
    sample_real=lambda d, k, n: gan_data.sample_batch(k, d.images, n),
    score_fn=metrics.fid_score(lambda d, x: clf.apply(d.classifier_params, x)[0]),
    scheme=experiment.scheme_from_config(config),
  )
  return coev, data


def load_config(name: str, overrides: dict):
  config = importlib.import_module(f"experiments.coevolution.configs.{name}").get_config()
  for k, v in overrides.items():
    config[k] = _parse(config[k], v)
  return config


def _parse(current, text: str):
  """``text`` (a ``--set`` value) as the type of the config field's ``current`` value: a
  bool from ``1``/``True``, a tuple (e.g. ``hidden``) from comma-separated values of its
  first entry's type (``""``: empty), else ``type(current)(text)``."""
  if isinstance(current, bool):
    return text in ("1", "True")
  if isinstance(current, tuple):
    kind = type(current[0]) if current else int
    return tuple(kind(x) for x in text.split(",") if x)
  return type(current)(text)


def build(name: str, overrides: dict):
  """``(config, coev, data)`` of a config as ``train.py`` builds it (random image data)."""
  config = load_config(name, overrides)
  if config.dataset in train.MIXTURES:
    exp = train.build(config)
    return config, exp.coev, exp.data
  return (config, *_image_experiment(config))
