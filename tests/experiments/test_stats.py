"""experiments/stats.py against scipy (and closed values) on small hand cases: exact tests
for 3 to 10 values per arm, tie-free and tied, every alternative; the hand-counted nulls of
experiments/_exact_nulls.py against a brute-force enumeration."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats as st

from experiments import _exact_nulls, stats

ALTS = ("two-sided", "less", "greater")

# tie-free pairs of arms (3 vs 3, 4 vs 6, 5 vs 5 separated and interleaved, 10 vs 10)
_RNG = np.random.default_rng(7)
TIE_FREE = [
  ([1.2, 3.4, 2.2], [2.9, 4.1, 5.0]),
  ([1.0, 2.0, 3.0, 5.0], [2.5, 4.0, 6.0, 7.0, 8.0, 9.0]),
  ([1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]),
  ([21.3, 24.8, 22.0, 26.1, 23.5], [22.4, 25.9, 27.2, 24.1, 28.3]),
  (list(_RNG.normal(30, 2, 10)), list(_RNG.normal(32, 2, 10))),
]
# arms with ties, within and across arms
TIED = [
  ([1.0, 2.0, 2.0, 3.0, 3.0], [2.0, 3.0, 3.0, 4.0, 5.0]),
  ([30.5, 31.0, 31.0], [31.0, 32.5, 30.5]),
  ([1.0, 1.0, 2.0, 2.0, 2.0, 4.0], [2.0, 3.0, 3.0, 4.0]),
]


def _mean_diff(x, y, axis=-1):
  return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _paired_mean_diff(x, y, axis=-1):
  return np.mean(x - y, axis=axis)


def _rank_sum(x, y, axis=-1):
  r = st.rankdata(np.concatenate([x, y], axis=axis), axis=axis)
  return np.sum(r[..., : x.shape[axis]], axis=axis)


def _signed_rank(d, axis=-1):  # positive-rank sum, zero differences dropped
  d = np.moveaxis(np.asarray(d, dtype=float), axis, -1)
  d = np.where(d == 0, np.nan, d)
  r = st.rankdata(np.abs(d), axis=-1, nan_policy="omit")
  return np.nansum(np.where(d > 0, r, 0.0), axis=-1)


def _scipy_perm(data, statistic, kind, alternative):
  return st.permutation_test(
    data,
    statistic,
    permutation_type=kind,
    alternative=alternative,
    n_resamples=np.inf,
    vectorized=True,
  ).pvalue


# -- descriptive ------------------------------------------------------------------------


def test_mean_sd_is_the_sample_sd():
  assert stats.mean_sd([1, 2, 3, 6]) == pytest.approx((3.0, np.std([1, 2, 3, 6], ddof=1)))
  assert stats.mean_sd([1.0, 2.0, 3.0]) == (2.0, 1.0)
  assert stats.mean_sd([4.5]) == (4.5, 0.0)
  with pytest.raises(ValueError):
    stats.mean_sd([])


def test_formats():
  assert stats.fmt_mean_sd([1.0, 2.0, 3.0]) == "2.0 ± 1.0"
  assert stats.fmt_mean_sd([20.0, 21.0], digits=2) == "20.50 ± 0.71"
  assert stats.fmt_values([3.0, 1.0, 2.0]) == "2.0 ± 1.0 (3.0, 1.0, 2.0)"
  assert stats.fmt_values([7.25]) == "7.2 ± 0.0 (7.2)"
  assert [stats.fmt_p(p) for p in (2 / 252, 0.3174, 0.5, 1.0, 3.2e-5)] == [
    "0.0079",
    "0.32",
    "0.50",
    "1.0",
    "3.2e-05",
  ]


# -- bootstrap --------------------------------------------------------------------------


def test_bootstrap_ci_is_the_percentile_bootstrap():
  x = np.array([21.3, 24.8, 22.0, 26.1, 23.5, 25.0])
  lo, hi = stats.bootstrap_ci(x, seed=3)
  rng = np.random.default_rng(3)  # the documented algorithm, by hand
  means = x[rng.integers(0, x.size, size=(10000, x.size))].mean(axis=1)
  # the same resamples (another stream would move the ends by ~1e-2); scipy's percentile
  # of 2.5000000000000022 interpolates within an ulp of np.quantile's
  assert (lo, hi) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])), rel=1e-14)
  assert lo < x.mean() < hi
  # close to scipy's percentile bootstrap (a different random stream)
  ref = st.bootstrap((x,), np.mean, method="percentile", n_resamples=10000, rng=0)
  assert lo == pytest.approx(ref.confidence_interval.low, abs=0.15)
  assert hi == pytest.approx(ref.confidence_interval.high, abs=0.15)
  # a statistic without an axis argument sees the same resamples
  assert stats.bootstrap_ci(x, lambda s: float(np.mean(s)), seed=3) == (lo, hi)
  assert stats.bootstrap_ci(x, seed=3) == (lo, hi)  # reproducible
  assert stats.bootstrap_ci(x, seed=4) != (lo, hi)
  # narrower at a lower level; a median interval lies within the data
  lo80, hi80 = stats.bootstrap_ci(x, level=0.8, seed=3)
  assert lo < lo80 < hi80 < hi
  mlo, mhi = stats.bootstrap_ci(x, np.median)
  assert x.min() <= mlo <= np.median(x) <= mhi <= x.max()
  assert stats.bootstrap_ci([5.0]) == (5.0, 5.0)
  with pytest.raises(ValueError):
    stats.bootstrap_ci(x, level=95)


def test_diff_ci_unpaired_and_paired():
  a = np.array([21.3, 24.8, 22.0, 26.1, 23.5])
  b = np.array([27.4, 29.9, 28.2, 30.1])
  lo, hi = stats.diff_ci(a, b, seed=1)
  rng = np.random.default_rng(1)  # each arm resampled on its own, a first
  da = a[rng.integers(0, 5, size=(10000, 5))].mean(axis=1)
  db = b[rng.integers(0, 4, size=(10000, 4))].mean(axis=1)
  assert (lo, hi) == pytest.approx(tuple(np.quantile(da - db, [0.025, 0.975])), rel=1e-14)
  assert lo < a.mean() - b.mean() < hi < 0
  # paired: the bootstrap interval of the mean difference
  b5 = np.array([22.0, 25.0, 23.1, 26.0, 24.9])
  assert stats.diff_ci(a, b5, paired=True, seed=2) == stats.bootstrap_ci(a - b5, seed=2)
  assert stats.diff_ci(a, b5, paired=True, seed=2) != stats.diff_ci(a, b5, seed=2)
  with pytest.raises(ValueError, match="equal lengths"):
    stats.diff_ci(a, b, paired=True)


def test_diff_ci_with_a_one_value_arm():
  b = np.array([27.4, 29.9, 28.2, 30.1])
  rng = np.random.default_rng(0)  # the one-value arm draws nothing from the stream
  db = b[rng.integers(0, 4, size=(10000, 4))].mean(axis=1)
  ref = np.quantile(5.0 - db, [0.025, 0.975])
  assert stats.diff_ci([5.0], b) == pytest.approx(tuple(ref), rel=1e-14)
  lo, hi = stats.diff_ci(b, [5.0])
  assert (lo, hi) == pytest.approx(tuple(np.quantile(db - 5.0, [0.025, 0.975])), rel=1e-14)
  assert stats.diff_ci([5.0], [2.0]) == (3.0, 3.0)


# -- Mann-Whitney -----------------------------------------------------------------------


def test_mann_whitney_closed_values():
  a, b = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]
  assert stats.mann_whitney(a, b) == pytest.approx(2 / 252, rel=1e-15)
  assert stats.mann_whitney(a, b) == pytest.approx(0.0079365, abs=1e-7)
  assert stats.mann_whitney(a, b, "less") == pytest.approx(1 / 252, rel=1e-15)
  assert stats.mann_whitney(a, b, "greater") == 1.0
  assert stats.mann_whitney(b, a, "greater") == pytest.approx(1 / 252, rel=1e-15)
  assert stats.mann_whitney([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)  # 2 / C(6, 3)
  assert stats.mann_whitney([3, 3, 3], [3, 3, 3]) == 1.0  # all tied
  with pytest.raises(ValueError):
    stats.mann_whitney(a, b, "smaller")


@pytest.mark.parametrize("alternative", ALTS)
@pytest.mark.parametrize("case", range(len(TIE_FREE)))
def test_mann_whitney_matches_scipy_exact_without_ties(case, alternative):
  a, b = TIE_FREE[case]
  ref = st.mannwhitneyu(a, b, method="exact", alternative=alternative).pvalue
  assert stats.mann_whitney(a, b, alternative) == pytest.approx(ref, rel=1e-12)
  ref = st.mannwhitneyu(b, a, method="exact", alternative=alternative).pvalue
  assert stats.mann_whitney(b, a, alternative) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("alternative", ALTS)
@pytest.mark.parametrize("case", range(len(TIED)))
def test_mann_whitney_with_ties_is_the_midrank_permutation_test(case, alternative):
  a, b = TIED[case]
  ref = _scipy_perm((a, b), _rank_sum, "independent", alternative)
  assert stats.mann_whitney(a, b, alternative) == pytest.approx(ref, rel=1e-12)


def test_mann_whitney_with_ties_differs_from_the_untied_distribution():
  a, b = TIED[0]  # scipy's method="exact" ignores ties: not what is computed here
  assert stats.mann_whitney(a, b) == pytest.approx(12 / 63, rel=1e-12)
  assert stats.mann_whitney(a, b) != pytest.approx(st.mannwhitneyu(a, b, method="exact").pvalue)


# -- permutation test -------------------------------------------------------------------


@pytest.mark.parametrize("alternative", ALTS)
@pytest.mark.parametrize("case", [0, 2, 3, 4])  # equal sizes: scipy's two-sided agrees
def test_permutation_test_matches_scipy_equal_sizes(case, alternative):
  a, b = TIE_FREE[case]
  ref = _scipy_perm((a, b), _mean_diff, "independent", alternative)
  assert stats.permutation_test(a, b, alternative=alternative) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("alternative", ALTS)
def test_permutation_test_matches_scipy_with_ties(alternative):
  for a, b in TIED[:2]:
    ref = _scipy_perm((a, b), _mean_diff, "independent", alternative)
    assert stats.permutation_test(a, b, alternative=alternative) == pytest.approx(ref, rel=1e-12)


def _brute_force_permutation(a, b, alternative):
  pooled, n_a = np.concatenate([a, b]), len(a)
  obs = np.mean(a) - np.mean(b)
  hits = total = 0
  for idx in itertools.combinations(range(pooled.size), n_a):
    mask = np.zeros(pooled.size, bool)
    mask[list(idx)] = True
    d = pooled[mask].mean() - pooled[~mask].mean()
    ok = {
      "less": d <= obs + 1e-9,
      "greater": d >= obs - 1e-9,
      "two-sided": abs(d) >= abs(obs) - 1e-9,
    }[alternative]
    hits, total = hits + ok, total + 1
  return hits / total


@pytest.mark.parametrize("a, b", [TIE_FREE[1], TIED[2]])
def test_permutation_test_unequal_sizes(a, b):
  for alternative in ("less", "greater"):  # one-sided: scipy
    ref = _scipy_perm((a, b), _mean_diff, "independent", alternative)
    assert stats.permutation_test(a, b, alternative=alternative) == pytest.approx(ref, rel=1e-12)
  for alternative in ALTS:  # two-sided is |diff| >= |observed|: by hand
    ref = _brute_force_permutation(a, b, alternative)
    assert stats.permutation_test(a, b, alternative=alternative) == pytest.approx(ref, rel=1e-12)
  # ... which differs from scipy's doubled one-sided p-value on this skewed null
  a, b = TIE_FREE[1]
  doubled = _scipy_perm((a, b), _mean_diff, "independent", "two-sided")
  assert stats.permutation_test(a, b) == pytest.approx(13 / 210, rel=1e-12)
  assert doubled == pytest.approx(12 / 210, rel=1e-12)


def test_permutation_test_closed_values_and_float_ties():
  a, b = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]
  assert stats.permutation_test(a, b) == pytest.approx(2 / 252, rel=1e-15)
  assert stats.permutation_test(a, b, alternative="less") == pytest.approx(1 / 252, rel=1e-15)
  # 0.1 + 0.2 != 0.3 in floats: equal differences must still count as ties
  x, y = [0.1, 0.2, 0.7], [0.3, 0.4, 0.5]
  ref = _brute_force_permutation(x, y, "two-sided")
  assert stats.permutation_test(x, y) == pytest.approx(ref, rel=1e-12)
  assert stats.permutation_test([2.0, 2.0], [2.0, 2.0]) == 1.0
  with pytest.raises(ValueError):
    stats.permutation_test(a, b, stat="median")


def test_permutation_test_monte_carlo_beyond_the_exact_limit():
  rng = np.random.default_rng(0)
  a, b = rng.normal(0, 1, 12), rng.normal(0, 1, 12)  # C(24, 12) = 2704156 splits
  p = stats.permutation_test(a, b, n_resamples=4000, seed=1)
  assert p == stats.permutation_test(a, b, n_resamples=4000, seed=1)
  assert p != stats.permutation_test(a, b, n_resamples=4000, seed=2)
  assert p * 4001 == pytest.approx(round(p * 4001))  # (count + 1) / (n + 1)
  ref = st.permutation_test((a, b), _mean_diff, n_resamples=20000, rng=0, vectorized=True)
  assert p == pytest.approx(ref.pvalue, abs=0.03)
  # completely separated: no random split is as extreme (exact p = 2 / C(24, 12))
  sep = stats.permutation_test(np.arange(12.0), np.arange(12.0) + 20, n_resamples=999)
  assert sep == pytest.approx(1 / 1000)


# -- paired tests -----------------------------------------------------------------------

PAIRED = [
  ([1.2, 3.4, 2.2], [2.9, 4.1, 5.0]),
  ([21.3, 24.8, 22.0, 26.1, 23.5], [22.4, 25.9, 27.2, 24.1, 28.3]),
  (list(_RNG.normal(30, 2, 10)), list(_RNG.normal(31, 2, 10))),
]
PAIRED_TIED = [  # zero and tied absolute differences
  ([3.0, 5.0, 4.0, 6.0, 7.0, 2.0], [1.0, 5.0, 6.0, 4.0, 6.0, 1.0]),
  ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [0.0, 3.0, 3.0, 1.0, 4.0, 7.0, 5.0, 8.0]),
]


@pytest.mark.parametrize("alternative", ALTS)
def test_sign_flip_matches_scipy(alternative):
  for a, b in PAIRED + PAIRED_TIED:
    ref = _scipy_perm((a, b), _paired_mean_diff, "samples", alternative)
    assert stats.sign_flip_test(a, b, alternative) == pytest.approx(ref, rel=1e-12)


def test_sign_flip_closed_values():
  a, b = [3.0, 4.0, 5.0, 6.0, 7.0], [1.0, 1.5, 2.0, 2.5, 3.0]  # every difference positive
  assert stats.sign_flip_test(a, b) == pytest.approx(2 / 32)
  assert stats.sign_flip_test(a, b, "greater") == pytest.approx(1 / 32)
  assert stats.sign_flip_test(a, b, "less") == 1.0
  assert stats.sign_flip_test([1.0, 2.0], [1.0, 2.0]) == 1.0
  with pytest.raises(ValueError, match="equal lengths"):
    stats.sign_flip_test([1.0, 2.0, 3.0], [1.0, 2.0])
  with pytest.raises(ValueError, match="2\\*\\*n"):
    stats.sign_flip_test(np.arange(21.0), np.zeros(21))


@pytest.mark.parametrize("alternative", ALTS)
def test_wilcoxon_matches_scipy_exact_without_ties(alternative):
  for a, b in PAIRED:
    ref = st.wilcoxon(a, b, method="exact", alternative=alternative).pvalue
    assert stats.wilcoxon(a, b, alternative) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("alternative", ALTS)
def test_wilcoxon_with_zeros_and_ties(alternative):
  for a, b in PAIRED_TIED:
    d = np.subtract(a, b)
    ref = st.permutation_test(
      (d,), _signed_rank, permutation_type="samples", alternative=alternative, n_resamples=np.inf
    ).pvalue
    assert stats.wilcoxon(a, b, alternative) == pytest.approx(ref, rel=1e-12)
    ref = st.wilcoxon(a, b, alternative=alternative).pvalue  # scipy's own for n <= 13
    assert stats.wilcoxon(a, b, alternative) == pytest.approx(ref, rel=1e-12)


def test_wilcoxon_closed_values():
  a, b = [3.0, 4.0, 5.0, 6.0, 7.0], [1.0, 1.5, 2.0, 2.5, 3.0]
  assert stats.wilcoxon(a, b) == pytest.approx(2 / 32)
  assert stats.wilcoxon(a, b, "greater") == pytest.approx(1 / 32)
  # zeros dropped: the same as the 5 nonzero pairs alone
  assert stats.wilcoxon(a + [9.0], b + [9.0]) == pytest.approx(2 / 32)
  assert stats.wilcoxon([1.0, 2.0], [1.0, 2.0]) == 1.0
  with pytest.raises(ValueError, match="equal lengths"):
    stats.wilcoxon([1.0, 2.0, 3.0], [1.0, 2.0])


# -- the hand-counted nulls against a brute-force enumeration -----------------------------

TINY = [
  ([1.0, 2.0, 2.0], [2.0, 3.0, 3.0, 5.0]),
  ([0.1, 0.2, 0.7], [0.3, 0.4, 0.5]),
  ([4.0, 1.0], [3.0, 3.0, 2.0]),
  ([1.0, 1.0, 3.0, 4.0], [1.0, 2.0, 2.0]),
]
TINY_PAIRED = [[2.0, -2.0, 1.0, 3.0, -1.0], [0.1, 0.2, -0.3, 0.4], [1.0, 1.0, -1.0, 2.0, -2.0, 2.0]]


def _tail(null, observed, alternative, doubled):
  """Exact p-value from every null value: two-sided doubles the smaller tail (rank tests)
  or counts ``|T| >= |t|`` (mean statistics)."""
  null, tol = np.asarray(null), 1e-9
  less = Fraction(int(np.sum(null <= observed + tol)), null.size)
  greater = Fraction(int(np.sum(null >= observed - tol)), null.size)
  if alternative != "two-sided":
    return float(less if alternative == "less" else greater)
  if doubled:
    return float(min(1, 2 * min(less, greater)))
  return float(Fraction(int(np.sum(np.abs(null) >= abs(observed) - tol)), null.size))


def _every_split(a, b, statistic):
  pooled, n_a = np.concatenate([a, b]), len(a)
  for idx in itertools.combinations(range(pooled.size), n_a):
    mask = np.zeros(pooled.size, bool)
    mask[list(idx)] = True
    yield statistic(pooled, mask)


@pytest.mark.parametrize("alternative", ALTS)
@pytest.mark.parametrize("case", range(len(TINY)))
def test_two_sample_nulls_match_brute_force(case, alternative):
  a, b = (np.array(v) for v in TINY[case])
  ranks = lambda pooled, mask: st.rankdata(pooled)[mask].sum()
  mean_diff = lambda pooled, mask: pooled[mask].mean() - pooled[~mask].mean()
  for statistic, null_p, doubled in (
    (ranks, _exact_nulls.rank_sum_pvalue, True),
    (mean_diff, _exact_nulls.mean_diff_pvalue, False),
  ):
    null = list(_every_split(a, b, statistic))
    ref = _tail(null, null[0], alternative, doubled)  # the first split is the observed one
    assert null_p(a, b, alternative) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("alternative", ALTS)
@pytest.mark.parametrize("case", range(len(TINY_PAIRED)))
def test_paired_nulls_match_brute_force(case, alternative):
  d = np.array(TINY_PAIRED[case])
  ranks = st.rankdata(np.abs(d))
  signs = [np.array(s) for s in itertools.product([1.0, -1.0], repeat=d.size)]
  sums = [float(np.sum(s * d)) for s in signs]  # signs[0] is the observed one
  ref = _tail(sums, sums[0], alternative, doubled=False)
  assert _exact_nulls.sign_flip_pvalue(d, alternative) == pytest.approx(ref, rel=1e-12)
  rank_sums = [float(ranks[s * d > 0].sum()) for s in signs]
  ref = _tail(rank_sums, rank_sums[0], alternative, doubled=True)
  assert _exact_nulls.signed_rank_pvalue(d, alternative) == pytest.approx(ref, rel=1e-12)


def test_doubled_midranks():
  x = np.array([3.0, 1.0, 3.0, 2.0, 3.0])
  assert _exact_nulls.doubled_midranks(x).tolist() == (2 * st.rankdata(x)).astype(int).tolist()


# -- Fisher, variance ratio, Holm ---------------------------------------------------------


@pytest.mark.parametrize(
  "table",
  [
    [[8, 2], [1, 5]],
    [[3, 1], [1, 3]],
    [[0, 5], [5, 0]],
    [[10, 2], [3, 15]],
    [[2, 7], [8, 2]],
    [[1, 9], [11, 3]],
    [[5, 5], [5, 5]],
    [[0, 0], [3, 4]],
  ],
)
def test_fisher_exact_matches_scipy(table):
  for alternative in ALTS:
    ref = st.fisher_exact(table, alternative=alternative).pvalue
    assert stats.fisher_exact(table, alternative) == pytest.approx(ref, rel=1e-9)


def test_fisher_exact_closed_values():
  assert stats.fisher_exact([[5, 0], [0, 5]]) == pytest.approx(2 / 252)
  assert stats.fisher_exact([[5, 0], [0, 5]], "greater") == pytest.approx(1 / 252)
  with pytest.raises(ValueError):
    stats.fisher_exact([[1, 2, 3], [4, 5, 6]])
  with pytest.raises(ValueError):
    stats.fisher_exact([[1, -2], [3, 4]])


def _f_test(a, b):
  f = np.var(a, ddof=1) / np.var(b, ddof=1)
  d1, d2 = len(a) - 1, len(b) - 1
  return min(1.0, 2 * min(st.f.cdf(f, d1, d2), st.f.sf(f, d1, d2)))


def test_variance_ratio_test_matches_scipy_f():
  rng = np.random.default_rng(3)
  cases = [
    ([1.2, 3.4, 2.2], [2.9, 4.1, 5.0]),
    (TIE_FREE[3][0], TIE_FREE[3][1]),
    (rng.normal(0, 1, 6), rng.normal(0, 3, 8)),
    (rng.normal(0, 1, 10), rng.normal(0, 1, 10)),
    (rng.normal(0, 0.1, 4), rng.normal(0, 30, 9)),  # tiny p
    (rng.normal(0, 1, 40), rng.normal(0, 1.5, 25)),
  ]
  for a, b in cases:
    for x, y in ((a, b), (b, a)):
      assert stats.variance_ratio_test(x, y) == pytest.approx(_f_test(x, y), rel=1e-9)
  assert stats.variance_ratio_test(*cases[4]) < 1e-4
  # equal sample variances: F = 1 with equal degrees of freedom, p = 1
  assert stats.variance_ratio_test([1.0, 2.0, 3.0], [5.0, 6.0, 7.0]) == pytest.approx(1.0)
  assert stats.variance_ratio_test([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]) == 0.0
  assert math.isnan(stats.variance_ratio_test([1.0, 1.0], [2.0, 2.0]))
  with pytest.raises(ValueError):
    stats.variance_ratio_test([1.0], [1.0, 2.0])


def test_holm_hand_cases():
  # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.06
  assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
  assert stats.holm([0.5, 0.6]) == [1.0, 1.0]  # capped
  assert stats.holm([0.2, 0.01, 0.3]) == pytest.approx([0.4, 0.03, 0.4])
  assert stats.holm([0.04]) == [0.04]
  assert stats.holm([]) == []
  with pytest.raises(ValueError):
    stats.holm([0.1, 1.5])


# -- compare and verdict ----------------------------------------------------------------

LA = [20.1, 21.3, 20.8, 21.9, 20.5]
BASE = [24.9, 25.6, 24.2, 26.0, 25.3]


def test_compare_fields():
  r = stats.compare(LA, BASE)
  assert set(r) == {
    "test",
    "alternative",
    "paired",
    "level",
    "n_a",
    "n_b",
    "mean_a",
    "sd_a",
    "mean_b",
    "sd_b",
    "effect",
    "ci",
    "p",
  }
  assert (r["test"], r["alternative"], r["paired"], r["level"]) == (
    "mann_whitney",
    "two-sided",
    False,
    0.95,
  )
  assert (r["n_a"], r["n_b"]) == (5, 5)
  assert r["mean_a"] == pytest.approx(20.92) and r["mean_b"] == pytest.approx(25.2)
  assert r["sd_a"] == pytest.approx(np.std(LA, ddof=1))
  assert r["effect"] == pytest.approx(20.92 - 25.2)
  assert r["ci"] == list(stats.diff_ci(LA, BASE))
  assert r["p"] == pytest.approx(2 / 252)
  r = stats.compare(LA, BASE, test="permutation", alternative="less", level=0.9, seed=5)
  assert r["p"] == pytest.approx(1 / 252) and r["level"] == 0.9
  assert r["ci"] == list(stats.diff_ci(LA, BASE, level=0.9, seed=5))
  r = stats.compare(LA, BASE, test="wilcoxon")
  assert r["paired"] and r["p"] == pytest.approx(2 / 32)
  assert r["ci"] == list(stats.diff_ci(LA, BASE, paired=True))
  r = stats.compare(LA, BASE, test="sign_flip", paired=True)
  assert r["p"] == pytest.approx(2 / 32)


def test_compare_rejects_bad_pairings():
  for test in ("sign_flip", "wilcoxon"):
    with pytest.raises(ValueError, match="equal lengths"):
      stats.compare(LA, BASE[:4], test=test)
  with pytest.raises(ValueError, match="paired"):
    stats.compare(LA, BASE, paired=True)  # Mann-Whitney is unpaired
  with pytest.raises(ValueError):
    stats.compare(LA, BASE, test="t_test")


def test_verdict_beats_wording():
  r = stats.compare(LA, BASE)
  lo, hi = r["ci"]
  text = stats.verdict(r, alpha=0.05, name_a="LA-AltGAN", name_b="AltGAN")
  assert text == (
    f"LA-AltGAN beats AltGAN on FID: 20.9 vs 25.2 (difference -4.3, 95% CI [{lo:.1f}, "
    f"{hi:.1f}], Mann-Whitney p = 0.0079, n = 5/5)."
  )
  # written from the winner's side when b wins
  r = stats.compare(BASE, LA[:4], test="permutation")
  lo, hi = r["ci"]
  text = stats.verdict(r, alpha=0.05, name_a="AltGAN", name_b="LA-AltGAN")
  assert text.startswith("LA-AltGAN beats AltGAN on FID: 21.0 vs 25.2 (difference -4.2, ")
  assert f"95% CI [{-hi:.1f}, {-lo:.1f}], permutation p = 0.0079, n = 4/5)." in text
  # higher is better (an Inception score): the larger mean wins
  r = stats.compare(LA, BASE)
  text = stats.verdict(r, alpha=0.05, name_a="A", name_b="B", lower_is_better=False, metric="IS")
  assert text.startswith("B beats A on IS: 25.2 vs 20.9 (difference 4.3, ")


def test_verdict_no_difference_wording():
  a, b = [21.3, 24.8, 22.0, 26.1, 23.5], [22.4, 25.9, 27.2, 24.1, 28.3]
  r = stats.compare(a, b)
  assert r["p"] == pytest.approx(st.mannwhitneyu(a, b, method="exact").pvalue)
  lo, hi = r["ci"]
  text = stats.verdict(r, alpha=0.05, name_a="LA", name_b="base")
  assert text == (
    f"No difference detected at n = 5/5: LA 23.5 vs base 25.6 (difference -2.0, 95% CI "
    f"[{lo:.1f}, {hi:.1f}], Mann-Whitney p = 0.22)."
  )
  # the same numbers beat a looser alpha; the level comes from the result
  r = stats.compare(a, b, level=0.9)
  assert "LA beats base" in stats.verdict(r, alpha=0.25, name_a="LA", name_b="base")
  assert "90% CI" in stats.verdict(r, alpha=0.25, name_a="LA", name_b="base")


def test_tost_matches_the_closed_form_of_student_t_with_two_degrees_of_freedom():
  # a = [1, 3], b = [0, 2]: d = 1, se = sqrt(2), Welch df = 2, where the t CDF is
  # F(x) = 1/2 + x / (2 sqrt(x^2 + 2)); margin 3: p = max(1 - F(4/se), F(-2/se)).
  r = stats.tost([1.0, 3.0], [0.0, 2.0], margin=3.0)
  cdf = lambda x: 0.5 + x / (2 * math.sqrt(x * x + 2))  # noqa: E731
  assert r["df"] == pytest.approx(2.0, rel=1e-12) and r["diff"] == 1.0
  assert r["p"] == pytest.approx(max(1 - cdf(4 / math.sqrt(2)), cdf(-2 / math.sqrt(2))), rel=1e-12)
  assert r["p"] == pytest.approx(0.5 - math.sqrt(2) / 4, rel=1e-12)  # the upper test binds
  # equivalence iff the 90% interval lies inside (-m, m): a wider margin passes
  lo, hi = stats.tost([1.0, 3.0], [0.0, 2.0], margin=20.0)["ci"]
  assert stats.tost([1.0, 3.0], [0.0, 2.0], margin=20.0)["p"] < 0.05 and -20 < lo < hi < 20
  with pytest.raises(ValueError, match="margin"):
    stats.tost([1.0, 3.0], [0.0, 2.0], margin=0.0)
