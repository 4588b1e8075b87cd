"""Evaluation metrics for GANs.

- 2-D mixtures: :func:`mixture_metrics` (modes covered, high-quality-sample
  rate, KL of the mode histogram from uniform), jit-able; :func:`mode_tvd_score`
  of a weighted generator mixture (the coevolution's mixture score).
- Images: an evaluation CNN trained on the real training split
  (:func:`train_classifier`; the experiments cache it on disk, see
  ``experiments/_classifier_cache.py``), and through
  any :class:`FeatureExtractor` (the classifier, or Inception weights you
  supply via :class:`FunctionExtractor`): :func:`frechet_distance` (FID),
  :func:`inception_score`, :func:`class_tvd`, bundled in :class:`ImageEvaluator`;
  :func:`fid_score` of a weighted generator mixture inside ``jit``.
"""

from minmaxlab.gan.metrics._classifier import (
  ClassifierNet,
  EvalClassifier,
  cnn_classifier,
  train_classifier,
)
from minmaxlab.gan.metrics._evaluator import (
  FeatureExtractor,
  FunctionExtractor,
  ImageEvaluator,
  real_statistics,
)
from minmaxlab.gan.metrics._frechet import (
  fid_score,
  frechet_distance,
  gaussian_statistics,
  weighted_statistics,
)
from minmaxlab.gan.metrics._mixture import (
  mixture_metrics,
  mode_assignments,
  mode_histogram,
  mode_tvd_score,
)
from minmaxlab.gan.metrics._scores import class_tvd, class_tvd_score, inception_score

__all__ = [
  "ClassifierNet",
  "EvalClassifier",
  "FeatureExtractor",
  "FunctionExtractor",
  "ImageEvaluator",
  "class_tvd",
  "class_tvd_score",
  "cnn_classifier",
  "fid_score",
  "frechet_distance",
  "gaussian_statistics",
  "inception_score",
  "mixture_metrics",
  "mode_assignments",
  "mode_histogram",
  "mode_tvd_score",
  "real_statistics",
  "train_classifier",
  "weighted_statistics",
]
