"""The evaluation classifier's on-disk cache (experiments/_classifier_cache.py)."""

import jax
import numpy as np
import pytest

from experiments import _classifier_cache
from minmaxlab.gan import metrics

# the programs run long (the evaluation classifier's training):
# compiled at -O1, not the session's -O0 (tests/_xla.py)
pytestmark = pytest.mark.optimized_code


def _digits():
  from sklearn.datasets import load_digits

  d = load_digits()
  x = (d.images / 16.0 * 2 - 1).astype(np.float32)[..., None]
  perm = np.random.default_rng(0).permutation(len(x))
  tr, te = perm[:1400], perm[1400:]
  return x[tr], d.target[tr], x[te], d.target[te]


def test_classifier_on_digits_and_cache(tmp_path):
  xtr, ytr, xte, yte = _digits()
  kw = dict(steps=300, batch_size=64, width=16, feature_dim=64)
  clf = _classifier_cache.load_or_train_classifier(
    "digits", xtr, ytr, 10, test_images=xte, test_labels=yte, cache_dir=tmp_path, **kw
  )
  assert clf.test_accuracy > 0.85, clf.test_accuracy
  assert clf.accuracy(xte, yte) == pytest.approx(clf.test_accuracy)
  assert isinstance(clf, metrics.FeatureExtractor)
  f, logits = clf.features(xte[:7]), clf.logits(xte[:7])
  assert f.shape == (7, 64) and logits.shape == (7, 10)
  assert (tmp_path / "digits" / "step_0").is_dir()
  # Second call restores the checkpoint instead of training: identical predictions.
  again = _classifier_cache.load_or_train_classifier(
    "digits", xtr, ytr, 10, test_images=xte, test_labels=yte, cache_dir=tmp_path, **kw
  )
  assert again.test_accuracy == clf.test_accuracy
  np.testing.assert_array_equal(again.logits(xte), clf.logits(xte))
  # Classifier-FID: real vs itself ~ 0, real test split small, noise large; TVD of real data small.
  ev = metrics.ImageEvaluator.from_real(clf, xtr, cache_file=tmp_path / "stats.npz")
  assert (tmp_path / "stats.npz").exists()
  same = ev(xtr)
  assert abs(same["fid"]) < 1e-6
  real = ev(xte)
  noise = ev(np.random.default_rng(0).uniform(-1, 1, xte.shape).astype(np.float32))
  assert real["fid"] < 0.2 * noise["fid"]
  assert real["class_tvd"] < 0.15 and noise["class_tvd"] > real["class_tvd"]
  assert real["inception_score"] > 5 and noise["inception_score"] < real["inception_score"]
  cached = metrics.ImageEvaluator.from_real(clf, xte[:10], cache_file=tmp_path / "stats.npz")
  np.testing.assert_array_equal(cached.real_mu, ev.real_mu)  # read back, not recomputed
  # The experiments' statistics file is stamped with the classifier's parameters: read back for
  # the same classifier, recomputed (and rewritten) for another one.
  stamped = tmp_path / "digits" / "real_stats.npz"
  first = _classifier_cache.cached_evaluator(clf, xtr, stamped)
  np.testing.assert_allclose(first.real_mu, ev.real_mu, rtol=1e-12)
  again = _classifier_cache.cached_evaluator(again, xte[:10], stamped)
  np.testing.assert_array_equal(again.real_mu, first.real_mu)
  other = metrics.EvalClassifier(clf.net, jax.tree.map(lambda p: 1.5 * p, clf.params))
  fresh = _classifier_cache.cached_evaluator(other, xtr, stamped)
  np.testing.assert_allclose(fresh.real_mu, metrics.real_statistics(other, xtr)[0], rtol=1e-12)
  assert not np.allclose(fresh.real_mu, first.real_mu)
  reread = _classifier_cache.cached_evaluator(other, xte[:10], stamped)
  np.testing.assert_array_equal(reread.real_mu, fresh.real_mu)
