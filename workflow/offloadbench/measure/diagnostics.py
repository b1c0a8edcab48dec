"""Noise diagnostics: flags that say a cell's samples should not be trusted as they are.

Each check takes the raw samples and returns a typed flag (records.Flag: kind, region,
size, words), or None. The flags travel in the record, `timings.csv` (`unstable`), the
report and the figures (hollow markers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..records.types import WHOLE_CELL, Flag
from ..stats import median_ci

# Two groups whose split explains this share of the log-time variance are two modes: a
# single Gaussian tops out near 2/pi (0.64) and a uniform spread at 0.75.
BIMODAL_EXPLAINED_VARIANCE = 0.85
MIN_GROUP_SHARE = 0.2
MIN_BIMODAL_SAMPLES = 20
CLOCK_CHANGE_REL = 0.10


def not_converged(stop_reason: str, rel_ci: float, target: float, region: str = "compute") -> Flag | None:
    if stop_reason == "ci":
        return None
    shown = "undefined" if math.isinf(rel_ci) else f"±{rel_ci:.1%}"
    return _found("not_converged", region, rel_ci, f"CI not reached ({shown} > ±{target:.1%}, stopped on {stop_reason})")


def _found(kind: str, region: str, size: float, words: str) -> Flag:
    """A flag of a timed region, its words led by the region's name where it is not the
    compute region ("end_to_end: drift: ...")."""
    return Flag(kind, region, size, words if region in ("compute", WHOLE_CELL) else f"{region}: {words}")


def bimodality(samples: Sequence[float], min_separation: float, region: str = "compute") -> Flag | None:
    """Flag two well-separated modes, e.g. a frequency step or two code paths."""
    data = np.sort(np.log(np.asarray(samples, dtype=float)))
    n = data.size
    if n < MIN_BIMODAL_SAMPLES or not np.all(np.isfinite(data)):
        return None
    total = data.var() * n
    if total <= 0:
        return None
    # Between-group sum of squares for every split point k, from prefix sums.
    k = np.arange(1, n)
    left_mean = np.cumsum(data)[:-1] / k
    right_mean = (data.sum() - np.cumsum(data)[:-1]) / (n - k)
    between = k * (n - k) / n * (left_mean - right_mean) ** 2
    allowed = (k >= max(2, math.ceil(n * MIN_GROUP_SHARE))) & (n - k >= max(2, math.ceil(n * MIN_GROUP_SHARE)))
    if not allowed.any():
        return None
    shares = np.where(allowed, between / total, 0.0)
    best_k = int(k[np.argmax(shares)])
    best_share = float(shares.max())
    if best_share < BIMODAL_EXPLAINED_VARIANCE:
        return None
    gap = math.exp(np.median(data[best_k:]) - np.median(data[:best_k])) - 1
    if gap < min_separation:
        return None
    return _found("bimodal", region, gap, f"bimodal samples (two modes {gap:.0%} apart, {best_k}/{n} in the faster)")


def drift(samples: Sequence[float], min_shift: float, region: str = "compute") -> Flag | None:
    """Flag a shift between the first and second half whose median 95% CIs do not overlap."""
    n = len(samples)
    if n < 12:
        return None
    first, second = list(samples[: n // 2]), list(samples[n // 2 :])
    lo1, hi1 = median_ci(first, 0.95)
    lo2, hi2 = median_ci(second, 0.95)
    if math.isnan(lo1) or math.isnan(lo2):
        return None
    m1, m2 = float(np.median(first)), float(np.median(second))
    shift = m2 / m1 - 1
    overlap = lo2 <= hi1 and lo1 <= hi2
    if overlap or abs(shift) < min_shift:
        return None
    direction = "slower" if shift > 0 else "faster"
    return _found("drift", region, abs(shift), f"drift: second half {abs(shift):.1%} {direction} than the first")


def clock_change(before: dict | None, after: dict | None, what: str) -> Flag | None:
    """Flag a clock that moved by more than 10% between the start and the end of sampling."""
    if not before or not after:
        return None
    for key, start in before.items():
        end = after.get(key)
        if not start or not end:
            continue
        change = end / start - 1
        if abs(change) > CLOCK_CHANGE_REL:
            return Flag(f"{what.lower()}_clock", WHOLE_CELL, abs(change),
                        f"{what} clock changed {change:+.0%} during sampling ({key})")
    return None


def clock_spread(readings: Sequence[dict], what: str) -> Flag | None:
    """Flag a clock whose readings under load differ by more than 10% (the highest over the
    lowest): a GPU read only where it has just worked, so that its idle clock between turns
    (a fifth of its loaded one on an H100) is never read, and a drop during a turn is."""
    for key in dict.fromkeys(k for reading in readings for k in reading):
        values = [r[key] for r in readings if isinstance(r.get(key), int | float) and r[key] > 0]
        if len(values) >= 2 and max(values) / min(values) - 1 > CLOCK_CHANGE_REL:
            return Flag(f"{what.lower()}_clock", WHOLE_CELL, max(values) / min(values) - 1,
                        f"{what} clock ranged {min(values):g} to {max(values):g} MHz under load during sampling ({key})")
    return None


def flags_for_samples(
    samples: Sequence[float], stop_reason: str, rel_ci: float, target: float, region: str = "compute"
) -> list[Flag]:
    """All sample-based flags of one timed region."""
    separation = max(0.05, 3 * target)
    checks = (
        not_converged(stop_reason, rel_ci, target, region),
        bimodality(samples, separation, region),
        drift(samples, separation, region),
    )
    return [flag for flag in checks if flag]
