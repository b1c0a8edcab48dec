"""Statistics of timing samples: medians, their confidence intervals, ratios of medians.

Two CI methods, each used where it fits:
- while sampling, a distribution-free order-statistic CI of the median (cheap, exact coverage);
- in the analysis, a seeded percentile bootstrap, which also gives the CI of a ratio of
  two medians from both sample sets (the speedup).
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist
from typing import Sequence

import numpy as np

_EXACT_BINOMIAL_UP_TO = 400


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the sorted samples that bound the median with `confidence`.

    Uses the Binomial(n, 1/2) distribution of the count of samples below the median, exact
    up to a few hundred samples and normal-approximated beyond. None when n is too small
    for any interval to reach the confidence (n < 6 at 95%).
    """
    alpha = 1.0 - confidence
    if n < 2 or 2 * 0.5**n > alpha:
        return None
    if n <= _EXACT_BINOMIAL_UP_TO:
        total = 2**n
        cumulative = 0
        # B counts samples below the median; [x_(j), x_(n+1-j)] (1-based) covers it with
        # probability 1 - 2 P(B <= j - 1). Take the largest j that keeps this >= confidence.
        for k in range(n):
            cumulative += math.comb(n, k)
            if cumulative / total > alpha / 2:
                lo = k - 1  # 0-based rank of x_(j) with j = k
                return lo, n - 1 - lo
    z = NormalDist().inv_cdf(1 - alpha / 2)
    half = z * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)) - 1)
    return lo, n - 1 - lo


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Order-statistic CI of the median; (nan, nan) when there are too few samples."""
    ranks = median_ci_ranks(len(samples), confidence)
    if ranks is None:
        return math.nan, math.nan
    ordered = sorted(samples)
    return ordered[ranks[0]], ordered[ranks[1]]


def median_ci_rel_halfwidth(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half the width of the median's CI, relative to the median (inf when undefined)."""
    lo, hi = median_ci(samples, confidence)
    if math.isnan(lo):
        return math.inf
    med = float(np.median(samples))
    if med <= 0:
        return math.inf
    return (hi - lo) / 2 / med


def _bootstrap_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, samples.size, size=(resamples, samples.size))
    return np.median(samples[idx], axis=1)


def bootstrap_median_ci(
    samples: Sequence[float], resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the median."""
    data = np.asarray(samples, dtype=float)
    if data.size < 2:
        return math.nan, math.nan
    medians = _bootstrap_medians(data, resamples, np.random.default_rng(seed))
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(medians, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_ratio_ci(
    numerator: Sequence[float],
    denominator: Sequence[float],
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Ratio of medians with a percentile-bootstrap CI drawn from both sample sets.

    Returns (ratio, lo, hi). Each resample draws both sets independently, so the noise of
    the baseline and of the contender both widen the interval.
    """
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    if num.size == 0 or den.size == 0:
        return math.nan, math.nan, math.nan
    ratio = float(np.median(num) / np.median(den))
    if num.size < 2 or den.size < 2:
        return ratio, math.nan, math.nan
    rng = np.random.default_rng(seed)
    ratios = _bootstrap_medians(num, resamples, rng) / _bootstrap_medians(den, resamples, rng)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return ratio, float(lo), float(hi)
