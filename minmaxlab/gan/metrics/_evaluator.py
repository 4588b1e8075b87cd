"""FID / Inception score / class TVD through any feature extractor."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.gan.metrics._frechet import frechet_distance, gaussian_statistics
from minmaxlab.gan.metrics._scores import class_tvd, inception_score


@runtime_checkable
class FeatureExtractor(Protocol):
  """What the image metrics need from a network.

  ``features(x) -> [B, F]`` (for FID) and ``logits(x) -> [B, C]`` (for the
  Inception score and the class TVD), with ``x`` a batch ``[B, H, W, C]`` of
  images in ``[-1, 1]`` (the generator's range). Both return numpy or JAX
  arrays. :class:`EvalClassifier` is one; :class:`FunctionExtractor` wraps
  any pair of functions (e.g. an Inception network with weights you supply).
  """

  def features(self, x) -> Any: ...

  def logits(self, x) -> Any: ...


class FunctionExtractor:
  """A :class:`FeatureExtractor` from plain functions, with input resizing/rescaling.

  Use it to plug in Inception-v3 (or any other network) for FID/IS on
  32x32x3 data: nothing is downloaded; you bring the weights and the
  forward functions. For example, with a flax port of Inception whose
  ``apply(params, x) -> (pool3 [B, 2048], logits [B, 1008])`` expects
  299x299 RGB in ``[-1, 1]``::

    params = load_my_inception_weights("/data/inception.npz")  # yours
    ext = FunctionExtractor(
        features_fn=lambda x: inception.apply(params, x)[0],
        logits_fn=lambda x: inception.apply(params, x)[1],
        input_size=(299, 299))
    evaluator = ImageEvaluator.from_real(ext, cifar_train_images, cache_file="cifar_stats.npz")
    evaluator(generated_images)   # {"fid": ..., "inception_score": ..., ...}

  Args:
    features_fn: ``x -> [B, F]`` (jit-able JAX, or ``jit=False`` for any callable).
    logits_fn: ``x -> [B, C]``, or ``None`` (then only FID is available).
    input_size: ``(H, W)`` to resize inputs to (bilinear), or ``None``.
    input_range: the value range the network expects; inputs in ``[-1, 1]``
      are mapped linearly onto it (e.g. ``(0, 255)``).
    batch_size: images per call.
    jit: wrap the functions in ``jax.jit``.
  """

  def __init__(
    self,
    features_fn: Callable,
    logits_fn: Callable | None = None,
    input_size: tuple[int, int] | None = None,
    input_range: tuple[float, float] = (-1.0, 1.0),
    batch_size: int = 200,
    jit: bool = True,
  ):
    lo, hi = input_range

    def prep(x):
      x = jnp.asarray(x, jnp.float32)
      if input_size is not None and tuple(x.shape[1:3]) != tuple(input_size):
        x = jax.image.resize(x, (x.shape[0], *input_size, x.shape[3]), "bilinear")
      return lo + (x + 1.0) * (hi - lo) / 2.0

    wrap = jax.jit if jit else (lambda f: f)
    self._features = wrap(lambda x: features_fn(prep(x)))
    self._logits = wrap(lambda x: logits_fn(prep(x))) if logits_fn is not None else None
    self.batch_size = batch_size

  def _run(self, fn, x):
    from minmaxlab.gan.metrics._classifier import _batched

    return _batched(fn, x, self.batch_size)

  def features(self, x):
    return self._run(self._features, x)

  def logits(self, x):
    if self._logits is None:
      raise ValueError("this FunctionExtractor has no logits_fn (Inception score/TVD unavailable)")
    return self._run(self._logits, x)


def real_statistics(
  extractor: FeatureExtractor, images, cache_file: str | os.PathLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
  """Mean and covariance of ``extractor.features`` on real images, cached in an ``.npz``.

  The cache is written atomically (temp file + rename) and trusted as is:
  delete it when the extractor or the data change.
  """
  if cache_file is not None and Path(cache_file).exists():
    with np.load(cache_file) as z:
      return z["mu"], z["cov"]
  mu, cov = gaussian_statistics(extractor.features(images))
  if cache_file is not None:
    path = Path(cache_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez(tmp, mu=mu, cov=cov)
    os.replace(tmp, path)
  return mu, cov


class ImageEvaluator:
  """Classifier-FID, Inception-score analogue and class TVD of generated images.

  Args:
    extractor: a :class:`FeatureExtractor`.
    real_mu, real_cov: feature statistics of the real data.
    splits: splits for the Inception score.
  """

  def __init__(self, extractor: FeatureExtractor, real_mu, real_cov, splits: int = 10):
    self.extractor, self.real_mu, self.real_cov, self.splits = extractor, real_mu, real_cov, splits

  @classmethod
  def from_real(cls, extractor: FeatureExtractor, real_images, cache_file=None, **kw):
    mu, cov = real_statistics(extractor, real_images, cache_file)
    return cls(extractor, mu, cov, **kw)

  def __call__(self, images) -> dict[str, float]:
    """``fid``, ``inception_score`` (and ``_std``), ``class_tvd`` of ``images`` in [-1, 1]."""
    if hasattr(self.extractor, "features_and_logits"):
      feats, logits = self.extractor.features_and_logits(images)
    else:
      feats, logits = self.extractor.features(images), None
      try:
        logits = self.extractor.logits(images)
      except ValueError:
        pass
    mu, cov = gaussian_statistics(feats)
    out = {"fid": frechet_distance(mu, cov, self.real_mu, self.real_cov)}
    if logits is not None:
      is_mean, is_std = inception_score(logits, splits=self.splits)
      out.update(inception_score=is_mean, inception_score_std=is_std, class_tvd=class_tvd(logits))
    return out
