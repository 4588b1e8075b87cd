"""The evaluation classifier: a small CNN trained on a data set's real training split."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax


class _CNN(nn.Module):
  num_classes: int
  width: int = 32
  feature_dim: int = 128

  @nn.compact
  def __call__(self, x):
    x = nn.relu(nn.Conv(self.width, (3, 3), strides=2)(x))
    x = nn.relu(nn.Conv(2 * self.width, (3, 3), strides=2)(x))
    x = x.reshape(x.shape[0], -1)
    features = nn.Dense(self.feature_dim)(x)
    return features, nn.Dense(self.num_classes)(nn.relu(features))


class ClassifierNet(NamedTuple):
  """Pure functions of the CNN: ``init(key) -> params``, ``apply(params, x) -> (features, logits)``.

  ``x`` is ``[B, H, W, C]`` in ``[-1, 1]``; ``features`` are the penultimate
  layer's ``[B, feature_dim]`` activations (before the ReLU, as the
  Lookahead-minmax MNIST "FID" uses its classifier's ``fc2``).
  """

  init: Any
  apply: Any
  image_shape: tuple[int, ...]
  num_classes: int
  width: int
  feature_dim: int


def cnn_classifier(
  image_shape, num_classes: int, width: int = 32, feature_dim: int = 128
) -> ClassifierNet:
  """Two strided 3x3 convolutions (``width``, ``2 width``), a ``feature_dim`` layer, logits."""
  image_shape = tuple(int(s) for s in image_shape)
  if len(image_shape) == 2:
    image_shape += (1,)
  module = _CNN(num_classes=int(num_classes), width=int(width), feature_dim=int(feature_dim))

  def init(key):
    return module.init(key, jnp.zeros((1, *image_shape), jnp.float32))["params"]

  def apply(params, x):
    x = jnp.asarray(x, jnp.float32)
    if x.ndim == 3:
      x = x[..., None]
    return module.apply({"params": params}, x)

  return ClassifierNet(
    init=init,
    apply=apply,
    image_shape=image_shape,
    num_classes=int(num_classes),
    width=int(width),
    feature_dim=int(feature_dim),
  )


def _batched(fn, x, batch_size):
  """``fn`` over ``x`` in fixed-size batches (the last one padded: one compilation)."""
  x = np.asarray(x, np.float32)
  n = x.shape[0]
  outs = []
  for i in range(0, n, batch_size):
    chunk = x[i : i + batch_size]
    m = chunk.shape[0]
    if m < batch_size:
      chunk = np.concatenate([chunk, np.zeros((batch_size - m, *chunk.shape[1:]), chunk.dtype)])
    outs.append(jax.tree.map(lambda y, m=m: np.asarray(y)[:m], fn(chunk)))
  return jax.tree.map(lambda *ys: np.concatenate(ys), *outs)


class EvalClassifier:
  """A trained evaluation classifier; a :class:`FeatureExtractor`.

  Attributes:
    net: the :class:`ClassifierNet`.
    params: its parameters.
    test_accuracy: accuracy on the held-out split (``nan`` if none was given).
    name: the data set it was trained on.
  """

  def __init__(
    self,
    net: ClassifierNet,
    params,
    test_accuracy: float = float("nan"),
    name: str = "",
    batch_size: int = 500,
  ):
    self.net, self.params, self.test_accuracy, self.name = net, params, float(test_accuracy), name
    self.batch_size = batch_size
    self._apply = jax.jit(net.apply)

  @property
  def num_classes(self) -> int:
    return self.net.num_classes

  def features_and_logits(self, x) -> tuple[np.ndarray, np.ndarray]:
    return _batched(partial(self._apply, self.params), x, self.batch_size)

  def features(self, x) -> np.ndarray:
    return self.features_and_logits(x)[0]

  def logits(self, x) -> np.ndarray:
    return self.features_and_logits(x)[1]

  def accuracy(self, images, labels) -> float:
    return float(np.mean(self.logits(images).argmax(axis=1) == np.asarray(labels)))


def train_classifier(
  key,
  images,
  labels,
  num_classes: int,
  *,
  test_images=None,
  test_labels=None,
  steps: int = 1500,
  batch_size: int = 128,
  learning_rate: float = 1e-3,
  width: int = 32,
  feature_dim: int = 128,
  name: str = "",
) -> EvalClassifier:
  """Train the evaluation CNN with Adam on ``images [N, H, W, C]`` in ``[-1, 1]``.

  Minibatches are drawn with replacement inside one jitted ``lax.scan`` (the
  whole training split lives on the device), so training is a pure function
  of ``key`` and the data.

  Args:
    key: PRNG key (initialisation and minibatches).
    images, labels: the real training split (labels int in ``[0, num_classes)``).
    num_classes: number of classes.
    test_images, test_labels: optional held-out split for ``test_accuracy``.
    steps, batch_size, learning_rate: Adam training budget.
    width, feature_dim: CNN size (see :func:`cnn_classifier`).
    name: recorded on the result.

  Returns:
    An :class:`EvalClassifier`.
  """
  images = jnp.asarray(images, jnp.float32)
  if images.ndim == 3:
    images = images[..., None]
  labels = jnp.asarray(labels, jnp.int32)
  net = cnn_classifier(images.shape[1:], num_classes, width, feature_dim)
  k_init, k_data = jax.random.split(key)
  params = net.init(k_init)
  tx = optax.adam(learning_rate)
  opt_state = tx.init(params)

  def loss_fn(p, x, y):
    _, logits = net.apply(p, x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

  @jax.jit
  def run(params, opt_state):
    def step(carry, k):
      p, s = carry
      idx = jax.random.randint(k, (batch_size,), 0, images.shape[0])
      g = jax.grad(loss_fn)(p, images[idx], labels[idx])
      u, s = tx.update(g, s, p)
      return (optax.apply_updates(p, u), s), None

    (p, s), _ = jax.lax.scan(step, (params, opt_state), jax.random.split(k_data, steps))
    return p, s

  params, _ = run(params, opt_state)
  clf = EvalClassifier(net, params, name=name)
  if test_images is not None:
    clf.test_accuracy = clf.accuracy(test_images, test_labels)
  return clf
