r"""Small-sample statistics shared by the result studies: ``scipy.stats`` where it counts
the null quickly, ``experiments/_exact_nulls.py`` where scipy's exact enumeration is a
Python loop (seconds per call at 10 vs 10).

A study compares arms over a handful of seeds (3 to 10 runs per arm), so every test
here is exact: its null distribution is enumerated (or counted exactly), never
approximated by a normal, except ``permutation_test`` beyond 200000 splits (scipy's
Monte Carlo). Intervals are percentile bootstraps (``scipy.stats.bootstrap``) with a
fixed seed, so a study's report is a function of its numbers.

  r = compare(fid_la, fid_base, test="mann_whitney")   # means, sds, difference, CI, p
  verdict(r, alpha=0.05, name_a="LA-AltGAN", name_b="AltGAN")
  # 'LA-AltGAN beats AltGAN on FID: 21.3 vs 25.0 (difference -3.7, 95% CI [-4.9, -2.6],
  #  Mann-Whitney p = 0.0079, n = 5/5).'

Conventions: ``alternative`` is one of ``"two-sided"``, ``"less"`` (``a`` tends to be
smaller than ``b``) and ``"greater"``. The rank tests use midranks for ties (scipy's
``method="exact"`` ignores ties, so tied samples take the exact midrank null of
``_exact_nulls``) and, as scipy, take twice the smaller one-sided p-value (capped at 1)
as the two-sided one. The permutation and sign-flip tests (real-valued statistics) count
the null values with ``|T| >= |t|`` for a two-sided p-value, null values within a
relative 1e-12 of the observed one counting as ties. Where the null distribution is
symmetric (Wilcoxon, sign-flip, and both two-sample tests at equal sizes) the two
two-sided conventions agree.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.stats as st

from experiments import _exact_nulls as exact

ALTERNATIVES = ("two-sided", "less", "greater")
TESTS = ("mann_whitney", "permutation", "sign_flip", "wilcoxon")
PAIRED_TESTS = ("sign_flip", "wilcoxon")
TEST_LABELS = {
  "mann_whitney": "Mann-Whitney",
  "permutation": "permutation",
  "sign_flip": "sign-flip",
  "wilcoxon": "Wilcoxon",
}
MAX_EXACT_SPLITS = 200_000  # the permutation nulls enumerate up to this many splits
MAX_SIGN_FLIP_N = 20  # the sign-flip nulls enumerate 2**n sign vectors


# -- descriptive ------------------------------------------------------------------------


def mean_sd(x) -> tuple[float, float]:
  """Mean and sample standard deviation (``ddof=1``; 0.0 for a single value)."""
  x = _sample(x, "x", finite=False)
  sd = float(np.std(x, ddof=1)) if x.size > 1 else 0.0
  return float(np.mean(x)), sd


def fmt_mean_sd(x, digits: int = 1) -> str:
  """``"mean ± sd"`` (sample standard deviation) with ``digits`` decimals."""
  m, s = mean_sd(x)
  return f"{m:.{digits}f} ± {s:.{digits}f}"


def fmt_values(x, digits: int = 1) -> str:
  """``"mean ± sd (v1, v2, ...)"``: ``fmt_mean_sd`` followed by every value, in order."""
  values = ", ".join(f"{v:.{digits}f}" for v in _sample(x, "x", finite=False))
  return f"{fmt_mean_sd(x, digits)} ({values})"


# -- bootstrap intervals ----------------------------------------------------------------


def bootstrap_ci(
  x, stat=np.mean, *, level: float = 0.95, n_resamples: int = 10000, seed: int = 0
) -> tuple[float, float]:
  """Percentile bootstrap interval of ``stat`` of one sample:
  ``scipy.stats.bootstrap(..., method="percentile", rng=np.random.default_rng(seed))``.

  ``stat`` is called as ``stat(samples, axis=-1)`` on a ``(n_resamples, n)`` array of
  resamples when it takes an ``axis`` argument (``np.mean``, ``np.median``), else once per
  resample. The interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of
  the resampled statistics. A single value gives ``(stat(x), stat(x))``.
  """
  x = _sample(x, "x")
  _check_level(level)
  _check_resamples(n_resamples)
  if x.size == 1:
    v = float(np.asarray(stat(x)))
    return v, v
  return _percentile_bootstrap((x,), stat, level, n_resamples, seed)


def diff_ci(
  a,
  b,
  *,
  paired: bool = False,
  level: float = 0.95,
  n_resamples: int = 10000,
  seed: int = 0,
) -> tuple[float, float]:
  """Percentile bootstrap interval of ``mean(a) - mean(b)`` (``scipy.stats.bootstrap``).

  Unpaired: each arm is resampled independently (with its own size, ``a`` first; an arm
  of one value stays that value). Paired: ``a`` and ``b`` must have equal lengths and the
  differences ``a - b`` are resampled (the bootstrap interval of their mean).
  """
  a, b = _sample(a, "a"), _sample(b, "b")
  _check_level(level)
  _check_resamples(n_resamples)
  if paired:
    _check_paired(a, b)
    return bootstrap_ci(a - b, level=level, n_resamples=n_resamples, seed=seed)
  arms = [x for x in (a, b) if x.size > 1]
  if len(arms) < 2:  # a one-value arm has a constant bootstrap mean
    shift = (a[0] if a.size == 1 else 0.0) - (b[0] if b.size == 1 else 0.0)
    sign = 1.0 if a.size > 1 else -1.0
    if not arms:
      return float(shift), float(shift)
    return _percentile_bootstrap(
      arms, lambda x, axis: shift + sign * np.mean(x, axis=axis), level, n_resamples, seed
    )
  diff = lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis)
  return _percentile_bootstrap((a, b), diff, level, n_resamples, seed)


# -- two-sample tests -------------------------------------------------------------------


def mann_whitney(a, b, alternative: str = "two-sided") -> float:
  """Exact p-value of the Mann-Whitney U (Wilcoxon rank-sum) test.

  Without ties: ``scipy.stats.mannwhitneyu(a, b, method="exact")``. With ties (scipy's
  ``method="exact"`` ignores them) the statistic uses midranks and its null is the exact
  permutation distribution over all ``C(n_a + n_b, n_a)`` splits, counted by
  ``_exact_nulls.rank_sum_pvalue`` (what ``mannwhitneyu`` with
  ``PermutationMethod(n_resamples=inf)`` enumerates). Two-sided: twice the smaller
  one-sided p-value, capped at 1. ``"less"``: ``a`` tends to be smaller than ``b``.
  """
  a, b = _sample(a, "a"), _sample(b, "b")
  _check_alternative(alternative)
  pooled = np.concatenate([a, b])
  if np.unique(pooled).size < pooled.size:
    return exact.rank_sum_pvalue(a, b, alternative)
  return float(st.mannwhitneyu(a, b, alternative=alternative, method="exact").pvalue)


def permutation_test(
  a,
  b,
  *,
  stat: str = "mean",
  alternative: str = "two-sided",
  n_resamples: int | None = None,
  seed: int = 0,
) -> float:
  """Permutation test of the difference in means ``mean(a) - mean(b)``.

  Exact (every split of the pooled sample into arms of sizes ``n_a`` and ``n_b``,
  ``_exact_nulls.mean_diff_pvalue``) when there are at most 200000 splits (10 vs 10:
  184756); else ``scipy.stats.permutation_test`` over ``n_resamples`` random splits (100000
  when None, ``np.random.default_rng(seed)``), with ``p = (count + 1) / (n_resamples +
  1)``. Two-sided: the fraction of splits with
  ``|diff| >= |observed|``, the usual two-sided permutation p-value (scipy's own two-sided
  doubles the smaller one-sided p-value, which agrees when ``n_a == n_b``: the null
  distribution is then symmetric). ``stat`` must be ``"mean"``.
  """
  a, b = _sample(a, "a"), _sample(b, "b")
  _check_alternative(alternative)
  if stat != "mean":
    raise ValueError(f"stat must be 'mean', got {stat!r}")
  if n_resamples is not None:
    _check_resamples(n_resamples)
  if math.comb(a.size + b.size, a.size) <= MAX_EXACT_SPLITS:
    return exact.mean_diff_pvalue(a, b, alternative)
  fold = np.abs if alternative == "two-sided" else (lambda v: v)
  diff = lambda x, y, axis: fold(np.mean(x, axis=axis) - np.mean(y, axis=axis))
  res = st.permutation_test(
    (a, b),
    diff,
    vectorized=True,
    n_resamples=n_resamples or 100_000,
    alternative="greater" if alternative == "two-sided" else alternative,
    rng=np.random.default_rng(seed),
  )
  return float(res.pvalue)


# -- paired tests -----------------------------------------------------------------------


def sign_flip_test(a, b, alternative: str = "two-sided") -> float:
  """Exact paired randomisation (sign-flip) test of the mean difference ``mean(a - b)``.

  The null distribution flips the sign of each difference ``a_i - b_i`` independently:
  all ``2**n`` sign vectors are enumerated (``n <= 20``; a larger ``n`` raises
  ``ValueError``) by ``_exact_nulls.sign_flip_pvalue``: the null of
  ``scipy.stats.permutation_test(..., permutation_type="samples")`` on the mean difference.
  """
  a, b = _sample(a, "a"), _sample(b, "b")
  _check_alternative(alternative)
  _check_paired(a, b)
  d = a - b
  if d.size > MAX_SIGN_FLIP_N:
    raise ValueError(f"sign_flip_test enumerates 2**n flips: n = {d.size} > {MAX_SIGN_FLIP_N}")
  return exact.sign_flip_pvalue(d, alternative)


def wilcoxon(a, b, alternative: str = "two-sided") -> float:
  """Exact paired Wilcoxon signed-rank p-value of ``a - b``.

  Zero differences are dropped (scipy's ``zero_method="wilcox"``); the absolute
  differences left are ranked with midranks for ties. Without ties:
  ``scipy.stats.wilcoxon(d, method="exact")`` on the nonzero differences ``d``; with
  ties, the positive-rank sum's exact null over all ``2**n`` signs
  (``_exact_nulls.signed_rank_pvalue``; what scipy's ``method=PermutationMethod()``
  enumerates). All differences zero: 1.0.
  """
  a, b = _sample(a, "a"), _sample(b, "b")
  _check_alternative(alternative)
  _check_paired(a, b)
  d = a - b
  d = d[d != 0]
  if d.size == 0:
    return 1.0
  if np.unique(np.abs(d)).size < d.size:
    return exact.signed_rank_pvalue(d, alternative)
  return float(st.wilcoxon(d, alternative=alternative, method="exact").pvalue)


# -- other tests ------------------------------------------------------------------------


def fisher_exact(table, alternative: str = "two-sided") -> float:
  """Fisher's exact test of a 2x2 table ``[[a, b], [c, d]]`` of counts:
  ``scipy.stats.fisher_exact``. Under the null, ``a`` is hypergeometric given the margins.
  ``"less"``: ``P(X <= a)`` (odds ratio below 1), ``"greater"``: ``P(X >= a)``; two-sided:
  the total probability of the tables no more probable than the observed one."""
  _check_alternative(alternative)
  t = np.asarray(table)
  if t.shape != (2, 2) or np.any(t < 0) or np.any(t != np.round(t)):
    raise ValueError(f"table must be a 2x2 table of non-negative counts, got {table!r}")
  return float(st.fisher_exact(t.astype(np.int64), alternative=alternative).pvalue)


def variance_ratio_test(a, b) -> float:
  """Two-sided F-test of equal variances: ``F = var(a) / var(b)`` (sample variances)
  against ``scipy.stats.f`` with ``(n_a - 1, n_b - 1)`` degrees of freedom, ``p = 2 *
  min(P(F' <= F), P(F' >= F))`` capped at 1 (assumes normal samples). Both variances
  zero: nan."""
  a, b = _sample(a, "a"), _sample(b, "b")
  if a.size < 2 or b.size < 2:
    raise ValueError("variance_ratio_test needs at least 2 values per arm")
  va, vb = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
  if va == 0 and vb == 0:
    return math.nan
  if vb == 0:
    return 0.0
  f, d1, d2 = va / vb, a.size - 1, b.size - 1
  return min(1.0, 2 * min(float(st.f.cdf(f, d1, d2)), float(st.f.sf(f, d1, d2))))


def tost(a, b, margin: float, alpha: float = 0.05) -> dict:
  """Two one-sided Welch t-tests of equivalence, ``|mean(a) - mean(b)| < margin``:
  ``p = max(P(T >= (d + m) / se), P(T <= (d - m) / se))``, ``T`` Student's t with Welch's
  degrees of freedom; equivalent at ``alpha`` iff ``p < alpha``, i.e. iff the
  ``1 - 2 alpha`` interval ``ci`` lies inside ``(-m, m)``. ``ci95``: the two-sided 95%
  Welch interval of the difference (assumes normal samples)."""
  a, b = _sample(a, "a"), _sample(b, "b")
  if a.size < 2 or b.size < 2 or not margin > 0:
    raise ValueError(f"tost needs 2 values per arm and a margin > 0, got margin {margin!r}")
  va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
  d, se = float(a.mean() - b.mean()), float(math.sqrt(va + vb))
  if se == 0:
    raise ValueError("tost: both samples are constant")
  df = float((va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)))
  p = max(float(st.t.sf((d + margin) / se, df)), float(st.t.cdf((d - margin) / se, df)))
  ci = lambda level: (d - st.t.ppf(level, df) * se, d + st.t.ppf(level, df) * se)  # noqa: E731
  return dict(p=p, diff=d, se=se, df=df, ci=ci(1 - alpha), ci95=ci(0.975), margin=margin)


def holm(pvalues) -> list[float]:
  """Holm-Bonferroni adjusted p-values, in the order given: the i-th smallest of m is
  multiplied by ``m - i`` (i from 0), made non-decreasing in that order and capped at 1."""
  p = np.asarray(pvalues, dtype=float).ravel()
  if np.any(~(p >= 0) | (p > 1)):
    raise ValueError(f"p-values must lie in [0, 1], got {pvalues!r}")
  order = np.argsort(p, kind="stable")
  adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (p.size - np.arange(p.size))))
  out = np.empty_like(p)
  out[order] = adjusted
  return [float(v) for v in out]


# -- a comparison and its sentence ------------------------------------------------------


def compare(
  a,
  b,
  *,
  test: str = "mann_whitney",
  paired: bool = False,
  alternative: str = "two-sided",
  level: float = 0.95,
  seed: int = 0,
) -> dict:
  """One A-vs-B comparison: both arms' mean and sd, the difference of means, its
  bootstrap interval (``diff_ci``) and the p-value of ``test``.

  ``test`` is one of ``"mann_whitney"``, ``"permutation"`` (unpaired) and
  ``"sign_flip"``, ``"wilcoxon"`` (paired; these imply ``paired=True``). A paired
  comparison needs arms of equal lengths (``ValueError`` otherwise), and ``paired=True``
  with an unpaired test is a ``ValueError``. Returns a JSON-ready dict with keys
  ``test, alternative, paired, level, n_a, n_b, mean_a, sd_a, mean_b, sd_b, effect``
  (``mean_a - mean_b``), ``ci`` (``[low, high]``) and ``p``.
  """
  if test not in TESTS:
    raise ValueError(f"test must be one of {TESTS}, got {test!r}")
  if paired and test not in PAIRED_TESTS:
    raise ValueError(f"paired=True needs a paired test {PAIRED_TESTS}, got {test!r}")
  a, b = _sample(a, "a"), _sample(b, "b")
  paired = test in PAIRED_TESTS
  if paired:
    _check_paired(a, b)
  if test == "permutation":
    p = permutation_test(a, b, alternative=alternative, seed=seed)
  else:
    p = {"mann_whitney": mann_whitney, "sign_flip": sign_flip_test, "wilcoxon": wilcoxon}[test](
      a, b, alternative=alternative
    )
  (mean_a, sd_a), (mean_b, sd_b) = mean_sd(a), mean_sd(b)
  ci = diff_ci(a, b, paired=paired, level=level, seed=seed)
  return {
    "test": test,
    "alternative": alternative,
    "paired": paired,
    "level": level,
    "n_a": int(a.size),
    "n_b": int(b.size),
    "mean_a": mean_a,
    "sd_a": sd_a,
    "mean_b": mean_b,
    "sd_b": sd_b,
    "effect": mean_a - mean_b,
    "ci": [float(ci[0]), float(ci[1])],
    "p": float(p),
  }


def verdict(
  result: dict,
  *,
  alpha: float,
  name_a: str,
  name_b: str,
  lower_is_better: bool = True,
  metric: str = "FID",
  digits: int = 1,
) -> str:
  """One sentence reporting a ``compare`` result.

  ``p < alpha`` and a non-zero difference: ``"<winner> beats <loser> on <metric>: <mean>
  vs <mean> (difference <d>, 95% CI [lo, hi], <test> p = <p>, n = <n>/<n>)."``, written
  from the winner's side (its mean first; difference and interval winner minus loser),
  the winner being the arm with the lower mean if ``lower_is_better``. Else ``"No
  difference detected at n = <n_a>/<n_b>: <name_a> <mean_a> vs <name_b> <mean_b>
  (difference <d>, 95% CI [lo, hi], <test> p = <p>)."`` with ``d = mean_a - mean_b``.
  Numbers have ``digits`` decimals, p two significant digits.
  """
  r = result
  f = lambda v: f"{v:.{digits}f}"
  head = f"{r['level'] * 100:g}% CI"
  test = TEST_LABELS.get(r["test"], r["test"])
  effect, (lo, hi) = r["effect"], r["ci"]
  if r["p"] < alpha and effect != 0:
    a_wins = (effect < 0) == lower_is_better
    if a_wins:
      win, lose, m_w, m_l, n_w, n_l = name_a, name_b, r["mean_a"], r["mean_b"], r["n_a"], r["n_b"]
    else:
      win, lose, m_w, m_l, n_w, n_l = name_b, name_a, r["mean_b"], r["mean_a"], r["n_b"], r["n_a"]
      effect, lo, hi = -effect, -hi, -lo
    return (
      f"{win} beats {lose} on {metric}: {f(m_w)} vs {f(m_l)} (difference {f(effect)}, "
      f"{head} [{f(lo)}, {f(hi)}], {test} p = {fmt_p(r['p'])}, n = {n_w}/{n_l})."
    )
  return (
    f"No difference detected at n = {r['n_a']}/{r['n_b']}: {name_a} {f(r['mean_a'])} vs "
    f"{name_b} {f(r['mean_b'])} (difference {f(effect)}, {head} [{f(lo)}, {f(hi)}], "
    f"{test} p = {fmt_p(r['p'])})."
  )


def fmt_p(p: float) -> str:
  """A p-value with two significant digits (``0.0079``, ``0.32``, ``1.0``); below 1e-4 in
  exponent form (``7.9e-05``)."""
  return f"{p:.1e}" if p < 1e-4 else f"{p:#.2g}"


# -- helpers ----------------------------------------------------------------------------


def _sample(x, name: str, finite: bool = True) -> np.ndarray:
  x = np.asarray(x, dtype=float).ravel()
  if x.size == 0:
    raise ValueError(f"{name} is empty")
  if finite and not np.all(np.isfinite(x)):
    raise ValueError(f"{name} has non-finite values: {x}")
  return x


def _check_alternative(alternative: str) -> None:
  if alternative not in ALTERNATIVES:
    raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")


def _check_resamples(n_resamples) -> None:
  if n_resamples < 1:
    raise ValueError(f"n_resamples must be positive, got {n_resamples}")


def _percentile_bootstrap(data, stat, level, n_resamples, seed) -> tuple[float, float]:
  res = st.bootstrap(
    data,
    stat,
    confidence_level=level,
    n_resamples=n_resamples,
    method="percentile",
    rng=np.random.default_rng(seed),
  )
  return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _check_level(level: float) -> None:
  if not 0 < level < 1:
    raise ValueError(f"level must lie in (0, 1), got {level}")


def _check_paired(a: np.ndarray, b: np.ndarray) -> None:
  if a.size != b.size:
    raise ValueError(f"paired samples need equal lengths, got {a.size} and {b.size}")
