"""Tests of minmaxlab.gan.metrics against closed forms and scipy/numpy references."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from minmaxlab.gan import metrics


def _scipy_frechet(mu1, c1, mu2, c2):
  covmean = scipy.linalg.sqrtm(c1 @ c2)
  covmean = np.real(covmean)
  d = mu1 - mu2
  return d @ d + np.trace(c1) + np.trace(c2) - 2 * np.trace(covmean)


@pytest.mark.parametrize("seed,n,f", [(0, 400, 8), (1, 300, 32), (2, 1000, 64)])
def test_frechet_matches_scipy_sqrtm(seed, n, f):
  rng = np.random.default_rng(seed)
  a = rng.normal(size=(n, f)) @ rng.normal(size=(f, f)) + rng.normal(size=f)
  b = rng.standard_t(5, size=(n, f)) * rng.uniform(0.5, 2, size=f) + 0.3
  mu1, c1 = metrics.gaussian_statistics(a)
  mu2, c2 = metrics.gaussian_statistics(b)
  np.testing.assert_allclose(mu1, a.mean(0))
  np.testing.assert_allclose(c1, np.cov(a.T))
  ours = metrics.frechet_distance(mu1, c1, mu2, c2)
  ref = _scipy_frechet(mu1, c1, mu2, c2)
  assert ours > 0
  assert abs(ours - ref) <= 1e-6 * max(1.0, abs(ref)), (ours, ref)
  # Symmetric in its two arguments.
  assert abs(metrics.frechet_distance(mu2, c2, mu1, c1) - ours) <= 1e-6 * max(1.0, abs(ref))


def test_frechet_closed_forms():
  rng = np.random.default_rng(3)
  x = rng.normal(size=(500, 10))
  mu, c = metrics.gaussian_statistics(x)
  assert abs(metrics.frechet_distance(mu, c, mu, c)) < 1e-9
  # Same covariance, shifted mean: d = |shift|^2.
  shift = rng.normal(size=10)
  assert metrics.frechet_distance(mu, c, mu + shift, c) == pytest.approx(shift @ shift, rel=1e-9)
  # 1-D Gaussians: d = (m1-m2)^2 + (s1-s2)^2.
  assert metrics.frechet_distance([1.0], [[4.0]], [0.0], [[9.0]]) == pytest.approx(1 + 1)
  with pytest.raises(ValueError, match="shape mismatch"):
    metrics.frechet_distance(mu, c, mu[:3], c)


def test_inception_score_and_tvd_on_hand_made_predictions():
  c = 10
  onehot = np.eye(c)[np.arange(1000) % c]  # confident, balanced
  mean, std = metrics.inception_score(probs=onehot, splits=10)
  assert mean == pytest.approx(c) and std == pytest.approx(0, abs=1e-9)
  assert metrics.class_tvd(probs=onehot) == pytest.approx(0)
  collapsed = np.eye(c)[np.zeros(100, int)]
  assert metrics.inception_score(probs=collapsed, splits=2)[0] == pytest.approx(1)
  assert metrics.class_tvd(probs=collapsed) == pytest.approx(1 - 1 / c)
  uncertain = np.full((50, c), 1 / c)
  assert metrics.inception_score(probs=uncertain, splits=1)[0] == pytest.approx(1)
  # Two classes used equally, confidently: IS = 2; half the mass on 2 of 4 classes: TVD = 0.5.
  two = np.eye(4)[np.arange(40) % 2]
  assert metrics.inception_score(probs=two, splits=1)[0] == pytest.approx(2)
  assert metrics.class_tvd(probs=two) == pytest.approx(0.5)
  # Logits go through a softmax; the arg-max histogram is what TVD uses.
  logits = np.log(onehot * 0.9 + 0.01)
  p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
  kl = np.sum(p * (np.log(p) - np.log(p.mean(0))), axis=1).mean()
  assert metrics.inception_score(logits, splits=1)[0] == pytest.approx(np.exp(kl))
  assert metrics.class_tvd(logits) == pytest.approx(0)


class _Mix(NamedTuple):
  modes: jax.Array
  std: float


def test_mixture_metrics_on_hand_made_samples():
  angles = 2 * np.pi * np.arange(8) / 8
  mix = _Mix(jnp.asarray(np.stack([np.cos(angles), np.sin(angles)], 1) * 2.0, jnp.float32), 0.02)
  on_modes = np.repeat(np.asarray(mix.modes)[:4], 10, axis=0)
  on_modes = on_modes + np.array([0.05, 0.0], np.float32)  # 2.5 std: still high quality
  far = np.array([[0.0, 0.0]] * 4 + [[2.0 + 0.07, 0.0]], np.float32)  # 0 and 3.5 std: not
  x = jnp.asarray(np.concatenate([on_modes, far]))
  mm = jax.jit(metrics.mixture_metrics, static_argnames=("threshold", "min_count"))
  m = mm(x, mix)  # the mixture is a pytree argument
  assert int(m["modes_covered"]) == 4
  assert float(m["high_quality_rate"]) == pytest.approx(40 / 45)
  assert float(m["mode_kl"]) == pytest.approx(np.log(2), rel=1e-5)  # uniform over 4 of 8 modes
  nearest, hq = metrics.mode_assignments(x, mix)
  np.testing.assert_array_equal(np.asarray(nearest[:40]), np.repeat(np.arange(4), 10))
  assert not bool(hq[40:].any())
  counts = metrics.mode_histogram(x, mix)
  np.testing.assert_array_equal(np.asarray(counts), [10, 10, 10, 10, 0, 0, 0, 0])
  # All modes equally: KL 0; only one mode: log 8; none high quality: log 8 and nothing covered.
  full = jnp.asarray(np.repeat(np.asarray(mix.modes), 3, axis=0))
  assert float(mm(full, mix)["mode_kl"]) == pytest.approx(0, abs=1e-6)
  assert int(mm(full, mix)["modes_covered"]) == 8
  one = jnp.asarray(np.repeat(np.asarray(mix.modes)[:1], 5, axis=0))
  assert float(mm(one, mix)["mode_kl"]) == pytest.approx(np.log(8), rel=1e-5)
  none = mm(jnp.zeros((6, 2)), mix)
  assert int(none["modes_covered"]) == 0 and float(none["high_quality_rate"]) == 0
  assert float(none["mode_kl"]) == pytest.approx(np.log(8), rel=1e-5)
  # A mode needs min_count samples to count.
  assert int(mm(x, mix, min_count=11)["modes_covered"]) == 0


def test_function_extractor_fid_on_32x32x3_closed_form():
  """A user-supplied network (here a fixed linear map) through the same interface."""
  rng = np.random.default_rng(0)
  w = jnp.asarray(rng.normal(size=(16 * 16 * 3, 12)) / 30, jnp.float32)
  feats = lambda x: x.reshape(x.shape[0], -1) @ w  # noqa: E731
  ext = metrics.FunctionExtractor(
    feats, lambda x: feats(x)[:, :10], input_size=(16, 16), input_range=(0.0, 255.0), batch_size=64
  )
  assert isinstance(ext, metrics.FeatureExtractor)
  real = rng.uniform(-1, 1, (300, 32, 32, 3)).astype(np.float32)
  ev = metrics.ImageEvaluator.from_real(ext, real)
  assert abs(ev(real)["fid"]) < 1e-3
  # Shifting the images by a constant shifts every feature by a constant: FID = |shift|^2.
  delta = 0.1
  shifted = ev(real + delta)
  img = jax.image.resize(jnp.full((1, 32, 32, 3), delta), (1, 16, 16, 3), "bilinear")
  fshift = np.asarray(feats(img * 127.5), np.float64)[0]
  assert shifted["fid"] == pytest.approx(fshift @ fshift, rel=1e-3)
  assert set(shifted) == {"fid", "inception_score", "inception_score_std", "class_tvd"}
  only_fid = metrics.ImageEvaluator.from_real(
    metrics.FunctionExtractor(feats, input_size=(16, 16)), real
  )
  assert set(only_fid(real[:50])) == {"fid"}


def test_mixture_metrics_on_real_mixture_samples():
  """The mixture's own samples: all modes covered, P(|x - m| <= 3 std) = 1 - e^{-9/2} (2-D)."""
  from minmaxlab.gan import data

  for mixture in (data.ring8(), data.grid25()):
    x = mixture.sample(jax.random.key(1), 4000)
    m = jax.jit(metrics.mixture_metrics)(x, mixture)
    k = mixture.modes.shape[0]
    assert int(m["modes_covered"]) == k
    assert float(m["high_quality_rate"]) == pytest.approx(1 - np.exp(-4.5), abs=0.01)
    assert float(m["mode_kl"]) < 0.02


def test_frechet_distance_is_one_implementation_for_numpy_and_jit(x64):
  """numpy arguments: float64 numpy, a Python float; JAX arguments (or tracers): jax.numpy,
  usable in jit (the coevolution's in-step FID). Same formula, so the same number."""
  rng = np.random.default_rng(4)
  a, b = rng.normal(size=(300, 6)), rng.normal(size=(200, 6)) * 1.5 + 0.2
  (mu1, c1), (mu2, c2) = metrics.gaussian_statistics(a), metrics.gaussian_statistics(b)
  host = metrics.frechet_distance(mu1, c1, mu2, c2)
  assert isinstance(host, float) and host == pytest.approx(_scipy_frechet(mu1, c1, mu2, c2))
  args = [jnp.asarray(v) for v in (mu1, c1, mu2, c2)]
  eager = metrics.frechet_distance(*args)
  jitted = jax.jit(metrics.frechet_distance)(*args)
  assert isinstance(eager, jax.Array) and eager.dtype == jnp.float64
  assert float(eager) == pytest.approx(host, rel=1e-10)
  assert float(jitted) == pytest.approx(host, rel=1e-10)
  # One JAX argument is enough to take the JAX path (numpy real statistics, traced fakes).
  assert float(jax.jit(lambda m: metrics.frechet_distance(m, c1, mu2, c2))(args[0])) == (
    pytest.approx(host, rel=1e-10)
  )
  with pytest.raises(ValueError, match="shape mismatch"):
    metrics.frechet_distance(args[0][:3], c1, mu2, c2)


def test_mode_tvd_score_hand_computed():
  """Two generators of 4 samples: G0 all on mode 0, G1 two on mode 1 and two far off."""
  angles = 2 * np.pi * np.arange(8) / 8
  modes = np.stack([np.cos(angles), np.sin(angles)], 1) * 2.0
  mix = _Mix(jnp.asarray(modes, jnp.float32), 0.02)
  g0 = np.repeat(modes[:1], 4, axis=0)
  g1 = np.concatenate([np.repeat(modes[1:2], 2, axis=0), np.zeros((2, 2))])
  samples = jnp.asarray(np.stack([g0, g1]), jnp.float32)
  score = jax.jit(lambda s, w: metrics.mode_tvd_score(mix, s, w))
  # weights (1/2, 1/2): h = (1/2, 1/4, 0, ...), misses 1/4:
  # (|1/2 - 1/8| + |1/4 - 1/8| + 6/8 + 1/4) / 2 = 3/4.
  assert float(score(samples, jnp.array([0.5, 0.5]))) == pytest.approx(0.75, abs=1e-6)
  # all weight on G0: (7/8 + 7/8) / 2 = 7/8; on G1: h_1 = 1/2, misses 1/2:
  # (3/8 + 7/8 + 1/2) / 2 = 7/8.
  assert float(score(samples, jnp.array([1.0, 0.0]))) == pytest.approx(0.875, abs=1e-6)
  assert float(score(samples, jnp.array([0.0, 1.0]))) == pytest.approx(0.875, abs=1e-6)
  # 3/4 on G0, 1/4 on G1: h = (3/4, 1/8, 0, ...), misses 1/8: (5/8 + 0 + 6/8 + 1/8) / 2 = 3/4.
  assert float(score(samples, jnp.array([0.75, 0.25]))) == pytest.approx(0.75, abs=1e-6)
  # Eight generators, one per mode, equal weights: the ideal histogram, score 0.
  perfect = jnp.asarray(np.repeat(modes[:, None], 3, axis=1), jnp.float32)
  assert float(score(perfect, jnp.full(8, 1 / 8))) == pytest.approx(0.0, abs=1e-6)


def test_weighted_statistics_and_fid_score(x64):
  rng = np.random.default_rng(5)
  feats = rng.normal(size=(3, 40, 4)) + np.arange(3)[:, None, None]
  w = np.array([0.5, 0.3, 0.2])
  mean, cov = metrics.weighted_statistics(jnp.asarray(feats), jnp.asarray(w))
  aw = np.repeat(w / 40, 40)
  np.testing.assert_allclose(mean, np.average(feats.reshape(-1, 4), axis=0, weights=aw))
  np.testing.assert_allclose(cov, np.cov(feats.reshape(-1, 4).T, aweights=aw, bias=True))

  class Real(NamedTuple):
    real_mean: np.ndarray
    real_cov: np.ndarray

  score = jax.jit(metrics.fid_score(lambda d, x: 2.0 * x))  # features: a fixed linear map
  real = Real(*metrics.gaussian_statistics(rng.normal(size=(500, 4))))
  got = float(score(real, jnp.asarray(feats), jnp.asarray(w)))
  m2, c2 = metrics.weighted_statistics(jnp.asarray(2.0 * feats), jnp.asarray(w))
  assert got == pytest.approx(metrics.frechet_distance(np.asarray(m2), np.asarray(c2), *real))
  # The mixture's own statistics as the real ones: distance 0.
  own = Real(np.asarray(m2), np.asarray(c2))
  assert float(score(own, jnp.asarray(feats), jnp.asarray(w))) == pytest.approx(0.0, abs=1e-9)
