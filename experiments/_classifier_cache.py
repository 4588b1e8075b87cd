"""The evaluation classifier's on-disk cache, shared by every experiment.

``minmaxlab.gan.metrics`` trains the evaluation CNN (:func:`train_classifier`)
and computes scores; the files live here, at the experiment edge:

- ``<cache_dir>/<name>/``: the classifier, an atomic orbax checkpoint
  (:class:`minmaxlab.runner.CheckpointManager`) whose JSON metadata records the
  training settings, a fingerprint of the data and the test accuracy; a cache
  whose settings or data differ is retrained and overwritten.
- ``<cache_dir>/<name>/real_stats.npz``: the real training split's feature
  statistics, stamped with a digest of the classifier's parameters, so
  statistics of an older classifier are recomputed rather than trusted.

Default ``cache_dir``: ``$MINMAXLAB_CACHE/classifiers`` or
``~/.cache/minmaxlab/classifiers``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np

from minmaxlab.gan import data
from minmaxlab.gan.metrics import (
  EvalClassifier,
  ImageEvaluator,
  cnn_classifier,
  real_statistics,
  train_classifier,
)
from minmaxlab.runner import CheckpointManager, cpu_has_avx512, cpu_model

DEFAULTS = {
  "steps": 1500,
  "batch_size": 128,
  "learning_rate": 1e-3,
  "width": 32,
  "feature_dim": 128,
}


def default_cache_dir() -> Path:
  """``$MINMAXLAB_CACHE/classifiers`` or ``~/.cache/minmaxlab/classifiers``."""
  root = os.environ.get("MINMAXLAB_CACHE")
  return (Path(root) if root else Path.home() / ".cache" / "minmaxlab") / "classifiers"


def _folder(cache_dir, name: str) -> Path:
  root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
  return root / name.replace(":", "_").replace("/", "_")


def _fingerprint(images, labels) -> str:
  h = hashlib.sha1()
  h.update(str(np.shape(images)).encode())
  h.update(
    np.ascontiguousarray(np.asarray(images, np.float32)[:: max(1, len(images) // 64)]).tobytes()
  )
  h.update(np.ascontiguousarray(np.asarray(labels, np.int64)).tobytes())
  return h.hexdigest()[:16]


def params_digest(params) -> str:
  """A short digest (16 hex digits of SHA-1) of every leaf's bytes: which classifier a result
  was scored with."""
  h = hashlib.sha1()
  for leaf in jax.tree.leaves(params):
    h.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
  return h.hexdigest()[:16]


def load_or_train_classifier(
  name: str,
  images,
  labels,
  num_classes: int,
  *,
  test_images=None,
  test_labels=None,
  cache_dir: str | os.PathLike | None = None,
  seed: int = 0,
  **train_kwargs,
) -> EvalClassifier:
  """The cached classifier for data set ``name``, training (and caching) it if needed.

  Args:
    name: data set name (a directory name; ``:``/``/`` are replaced).
    images, labels, num_classes, test_images, test_labels: as in
      :func:`minmaxlab.gan.metrics.train_classifier`.
    cache_dir: cache root (default :func:`default_cache_dir`).
    seed: training seed.
    **train_kwargs: ``steps``, ``batch_size``, ``learning_rate``, ``width``, ``feature_dim``.
  """
  settings = {**DEFAULTS, **train_kwargs}
  wanted = {
    "seed": int(seed),
    "num_classes": int(num_classes),
    "settings": settings,
    "data": _fingerprint(images, labels),
  }
  ckpt = CheckpointManager(_folder(cache_dir, name), max_to_keep=1)
  shape = tuple(np.shape(images)[1:]) + ((1,) if np.ndim(images) == 3 else ())
  net = cnn_classifier(shape, num_classes, settings["width"], settings["feature_dim"])
  if ckpt.latest_step() is not None:
    meta = ckpt.metadata()
    if {k: meta.get(k) for k in wanted} == wanted:
      target = jax.eval_shape(net.init, jax.random.key(0))
      params, meta = ckpt.restore(target)
      return EvalClassifier(net, params, meta["test_accuracy"], name)
  clf = train_classifier(
    jax.random.key(seed),
    images,
    labels,
    num_classes,
    test_images=test_images,
    test_labels=test_labels,
    name=name,
    **settings,
  )
  host = cpu_model() + (" (AVX-512)" if cpu_has_avx512() else "")
  ckpt.save(
    0, clf.params, metadata={**wanted, "test_accuracy": clf.test_accuracy, "trained_on": host}
  )
  return clf


def cached_identity(name: str, cache_dir: str | os.PathLike | None = None) -> dict | None:
  """Which cached classifier of data set ``name`` scores a run: the digest of its
  parameters (the one stamped on ``real_stats.npz``), its held-out accuracy and the
  CPU it was trained on; ``None`` when nothing is cached yet.

  Classifier-FID and class TVD are only comparable between runs scored by the same
  classifier. Its training is deterministic on one platform, but XLA's CPU kernels round
  differently on another CPU kind (AVX-512 vs AVX2), so a classifier retrained on another
  host has other weights and FIDs on a (slightly) other scale: result files record this.
  """
  folder = _folder(cache_dir, name)
  stats = folder / "real_stats.npz"
  if not stats.exists():
    return None
  with np.load(stats) as z:
    digest = str(z["classifier"]) if "classifier" in z.files else None
  ckpt = CheckpointManager(folder, max_to_keep=None)
  meta = ckpt.metadata() if ckpt.latest_step() is not None else {}
  return {
    "params_digest": digest,
    "test_accuracy": meta.get("test_accuracy"),
    "trained_on": meta.get("trained_on"),
  }


def scorers_note(runs: list[dict], label) -> str:
  """One line naming which classifier scored which runs (``label(run)``), when the
  ``runs`` (result-file rows with a ``"classifier"`` entry of :func:`cached_identity`,
  or none: unrecorded) were not all scored by the same one; else ``""``."""
  groups: dict = {}
  for r in runs:
    c = r.get("classifier") or {}
    groups.setdefault(c.get("params_digest") or "unrecorded", (c, []))[1].append(label(r))
  if len(groups) <= 1:
    return ""
  parts = []
  for digest, (c, who) in groups.items():
    if digest != "unrecorded":
      digest = (
        f"{digest} (test accuracy {c.get('test_accuracy')}, trained on"
        f" {c.get('trained_on') or 'an unrecorded host'})"
      )
    parts.append(f"{digest}: {', '.join(who)}")
  return (
    "Scored by different evaluation classifiers (FIDs are on one scale only under one"
    " classifier): " + "; ".join(parts)
  )


def cached_evaluator(
  clf: EvalClassifier, real_images, stats_file: str | os.PathLike
) -> ImageEvaluator:
  """The :class:`ImageEvaluator` of ``clf`` against ``real_images``, its statistics
  read from ``stats_file`` when they were computed with these classifier
  parameters, else computed and written there (atomically)."""
  path, digest = Path(stats_file), params_digest(clf.params)
  if path.exists():
    with np.load(path) as z:
      if "classifier" in z.files and str(z["classifier"]) == digest:
        return ImageEvaluator(clf, z["mu"], z["cov"])
  mu, cov = real_statistics(clf, real_images)
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
  np.savez(tmp, mu=mu, cov=cov, classifier=np.asarray(digest))
  os.replace(tmp, path)
  return ImageEvaluator(clf, mu, cov)


def classifier_evaluator(
  dataset: str, *, cache_dir=None, data_dir=None, seed: int = 0, **train_kwargs
) -> tuple[ImageEvaluator, Any]:
  """The evaluator of data set ``dataset`` through its (cached) evaluation classifier.

  Loads the train/test splits with ``minmaxlab.gan.data.load``, trains or
  restores the classifier (:func:`load_or_train_classifier`) and computes or
  restores the real training-split feature statistics
  (:func:`cached_evaluator`, ``real_stats.npz`` next to the classifier).

  Returns:
    ``(evaluator, classifier)``; ``classifier.test_accuracy`` is its held-out accuracy.
  """
  train = data.load(dataset, "train", data_dir=data_dir)
  try:
    test = data.load(dataset, "test", data_dir=data_dir)
  except (ValueError, FileNotFoundError, KeyError):
    test = None
  clf = load_or_train_classifier(
    dataset,
    train.images,
    train.labels,
    train.num_classes,
    test_images=None if test is None else test.images,
    test_labels=None if test is None else test.labels,
    cache_dir=cache_dir,
    seed=seed,
    **train_kwargs,
  )
  stats = _folder(cache_dir, dataset) / "real_stats.npz"
  return cached_evaluator(clf, train.images, stats), clf
