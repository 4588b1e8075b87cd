"""The exact machinery of ``experiments/stats.py``: bootstrap resampling in batches,
doubled midranks, null distributions counted exactly (subset sums, enumerated
combinations) and their tails, and the regularised incomplete beta function's two tails
(for the exact binomial/F tails)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np


def batches(total: int, width: int, elements: int = 2**22):
  """Sizes of row batches of a ``(total, width)`` array, at most ``elements`` each."""
  step = max(1, elements // max(width, 1))
  for start in range(0, total, step):
    yield min(step, total - start)


def resample(rng: np.random.Generator, x: np.ndarray, stat, n_resamples: int) -> np.ndarray:
  """``stat`` of ``n_resamples`` bootstrap resamples of ``x``."""
  if n_resamples < 1:
    raise ValueError(f"n_resamples must be positive, got {n_resamples}")
  out = []
  for k in batches(n_resamples, x.size):
    samples = x[rng.integers(0, x.size, size=(k, x.size))]
    try:
      values = np.asarray(stat(samples, axis=1), dtype=float)
    except TypeError:
      values = np.array([stat(s) for s in samples], dtype=float)
    out.append(values.reshape(k))
  return np.concatenate(out)


def percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
  lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
  return float(lo), float(hi)


def doubled_midranks(x: np.ndarray) -> np.ndarray:
  """Twice the midranks (1-based) of ``x``: integers, ties sharing their mean rank."""
  order = np.argsort(x, kind="stable")
  s = x[order]
  starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
  ends = np.r_[starts[1:], s.size]  # group i: sorted positions starts[i]..ends[i]-1
  ranks2 = np.empty(x.size, dtype=np.int64)
  ranks2[order] = np.repeat(starts + 1 + ends, ends - starts)  # (start+1) + end
  return ranks2


def count_dtype(total: int):
  """int64 while every count stays below ``total`` < 2**62 (exact), else float64."""
  return np.int64 if total < 2**62 else np.float64


def subset_sum_counts(weights: np.ndarray, k: int) -> np.ndarray:
  """``counts[s]``: the number of ``k``-subsets of ``weights`` (integers) summing to ``s``."""
  n, top = weights.size, int(weights.sum())
  dtype = count_dtype(math.comb(n, n // 2))  # bounds every count below
  dp = np.zeros((k + 1, top + 1), dtype=dtype)  # dp[j, s]: j-subsets with sum s
  dp[0, 0] = 1
  for w in weights:
    dp[1:, w:] += dp[:-1, : top + 1 - w].copy()
  return dp[k]


def integer_pvalue(counts: np.ndarray, observed: int, alternative: str) -> float:
  """P-value of an integer statistic with null ``counts`` (``counts[s]`` outcomes equal to
  ``s``); two-sided: twice the smaller one-sided p-value, capped at 1."""
  total = int(counts.sum())
  less = Fraction(int(counts[: observed + 1].sum()), total)
  greater = Fraction(int(counts[observed:].sum()), total)
  p = {"less": less, "greater": greater, "two-sided": 2 * min(less, greater)}[alternative]
  return min(1.0, float(p))


def float_tail_count(null: np.ndarray, observed: float, tol: float, alternative: str) -> int:
  """How many null values are at least as extreme as ``observed`` (ties within ``tol``)."""
  if alternative == "less":
    return int(np.count_nonzero(null <= observed + tol))
  if alternative == "greater":
    return int(np.count_nonzero(null >= observed - tol))
  return int(np.count_nonzero(np.abs(null) >= abs(observed) - tol))


@lru_cache(maxsize=4)
def combinations(n: int, k: int) -> np.ndarray:
  """Every ``k``-subset of ``range(n)`` as rows, in lexicographic order (read-only)."""
  dtype = np.uint8 if n < 256 else np.intp
  count = math.comb(n, k)
  flat = np.fromiter(
    itertools.chain.from_iterable(itertools.combinations(range(n), k)), dtype, count * k
  )
  out = flat.reshape(count, k)
  out.flags.writeable = False
  return out


def beta_tails(a: float, b: float, x: float, y: float) -> tuple[float, float]:
  """``(I_x(a, b), I_y(b, a))`` for ``y = 1 - x`` (given separately, for accuracy): the
  lower and upper tails of Beta(a, b) at ``x``. The tail whose continued fraction
  converges fast is evaluated and the other is its complement."""
  if x <= 0:
    return 0.0, 1.0
  if y <= 0:
    return 1.0, 0.0
  if x < (a + 1) / (a + b + 2):
    lower = _beta_cf_tail(a, b, x, y)
    return lower, 1.0 - lower
  upper = _beta_cf_tail(b, a, y, x)
  return 1.0 - upper, upper


def _beta_cf_tail(a: float, b: float, x: float, y: float) -> float:
  """``I_x(a, b)`` by its continued fraction ``x^a y^b / (a B(a, b)) / (1 + d1 / (1 + d2 /
  ...))`` with ``d_{2m+1} = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1))`` and ``d_{2m} = m(b-m) x /
  ((a+2m-1)(a+2m))``, evaluated by the modified Lentz method (fast for ``x < (a+1)/(a+b+2)``)."""
  tiny = 1e-300
  log_front = a * math.log(x) + b * math.log(y) - math.log(a) - _log_beta(a, b)

  def clamp(v: float) -> float:
    return v if abs(v) > tiny else tiny

  # 1 / (1 + d1 / (1 + ...)) as b0 + a1 / (b1 + a2 / (b2 + ...)) with b0 = 0, a1 = 1,
  # a_{i+1} = d_i and every b_i = 1
  f, c, d = tiny, tiny, 0.0
  for i in range(2000):
    if i == 0:
      coef = 1.0
    elif i % 2:
      m = (i - 1) // 2
      coef = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
    else:
      m = i // 2
      coef = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
    d = 1.0 / clamp(1.0 + coef * d)
    c = clamp(1.0 + coef / c)
    f *= c * d
    if i > 0 and abs(c * d - 1.0) < 1e-16:
      break
  return min(1.0, math.exp(log_front) * f)


def _log_beta(a: float, b: float) -> float:
  return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
