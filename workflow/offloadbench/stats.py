"""Statistics of timing samples.

Two kinds of interval, each where it fits:
- while sampling, a distribution-free order-statistic CI of one process's median (cheap,
  exact coverage), which decides when a region has enough samples;
- in the analysis, the CI of a cell measured in several processes, and of the ratio of
  two such cells, from a two-level bootstrap (processes, then samples within each).

Why the two-level estimate is built as it is (docs/measuring.md has the longer story):
a cell's time is the geometric mean of its process medians. Its variance has a part
between processes, known only with P - 1 degrees of freedom, and the noise of each median
within its process, known with many. The two-level bootstrap (resample processes, then
samples within each) and its within-only counterpart estimate both; the spread between
processes sets the interval, never narrower than the within noise or than a floor the
analysis pools from similar cells, with Student's t on P - 1 degrees of freedom on the
log scale (Satterthwaite's formula where a ratio adds two cells' parts). The bootstrap's own percentiles would be
too narrow with 2 to 5 processes: it cannot see variation beyond the handful of process
medians it was given.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from .verdicts import finite_positive

_EXACT_BINOMIAL_UP_TO = 400
# Indices drawn at once by the bootstrap: 2**22 of them (32 MiB, plus as much for the
# values they pick) whatever a record's sample count, so a huge record cannot exhaust memory.
BOOTSTRAP_BLOCK_ELEMENTS = 2**22
WITHIN_ONLY = "within-process only"
MIN_PAIRED = 3  # shared processes a paired ratio needs: with two, Student's t has one degree of freedom
ACROSS_PROCESSES = "across processes"


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
    lo = max(0, math.floor(n / 2 - half) - 1)
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


def stream_for(base: int, *names: str) -> int:
    """The bootstrap's random state for one quantity, stable across runs and Python processes."""
    return (base * 1_000_003 + zlib.crc32("/".join(names).encode())) % 2**32


@dataclass(frozen=True)
class Draws:
    """Bootstrap draws of the log of a cell's centre, at both levels, with what the CI
    needs to know about where its variance comes from."""

    centre: float  # log of the geometric mean of the process medians
    two_level: np.ndarray  # resample processes, then samples within each
    within: np.ndarray  # processes fixed, samples resampled within each
    processes: int
    within_dof: float
    logs: np.ndarray  # per process (rows), the log of each within-process bootstrap median

    def components(self, floor: float = 0.0) -> list[tuple[float, float]]:
        """(variance, degrees of freedom) of Var(log centre).

        With several processes, the spread of their medians sets the variance, known with
        P - 1 degrees of freedom, never below what the noise within each process alone
        gives: with three processes, three close medians are weak evidence that processes
        agree (a CI built on the within-process noise then covered 85% where we wanted 95%)."""
        v_within = float(np.var(self.within))
        if self.processes < 2:
            return [(v_within, self.within_dof)]
        p = self.processes
        # The two-level bootstrap sees (P-1)/P of the spread of the process medians plus
        # the within noise once more; this recovers s_b^2 / P, the variance of their mean.
        spread = max(0.0, float(np.var(self.two_level)) - v_within) * p / (p - 1)
        return [(max(spread, v_within, floor / p), p - 1)]


def draws(groups: Sequence[Sequence[float]], resamples: int, seed: int) -> Draws | None:
    """Two-level bootstrap draws of one cell; `groups` holds each process's samples."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g) > 0]
    if not groups:
        return None
    rng = np.random.default_rng(seed)
    medians = np.empty((len(groups), resamples))
    for p, samples in enumerate(groups):
        # Resample in blocks, so memory stays under a fixed cap whatever the sample count.
        block = max(1, BOOTSTRAP_BLOCK_ELEMENTS // samples.size)
        for start in range(0, resamples, block):
            stop = min(resamples, start + block)
            idx = rng.integers(0, samples.size, size=(stop - start, samples.size))
            medians[p, start:stop] = np.median(samples[idx], axis=1)
    logs = np.log(medians)
    centre = float(np.mean(np.log([np.median(g) for g in groups])))
    within_dof = float(sum(g.size - 1 for g in groups)) or 1.0
    return _from_logs(centre, logs, within_dof, rng)


def _from_logs(centre: float, logs: np.ndarray, within_dof: float, rng: np.random.Generator) -> Draws:
    p, resamples = logs.shape
    picks = rng.integers(0, p, size=(resamples, p))
    # Each pick gets its own within-process resample, also when a process is drawn twice.
    columns = (np.arange(resamples)[:, None] + 7919 * np.arange(p)[None, :]) % resamples
    two_level = logs[picks, columns].mean(axis=1)
    return Draws(centre, two_level, logs.mean(axis=0), p, within_dof, logs)


@dataclass(frozen=True)
class Interval:
    """A positive quantity (a time or a ratio of times) with its CI."""

    value: float
    low: float
    high: float
    processes: int  # the fewest processes behind any side of it
    pairing: str = ""  # a ratio's: paired in time, paired by round or unpaired (analysis.measured)

    @property
    def scope(self) -> str:
        return ACROSS_PROCESSES if self.processes >= 2 else WITHIN_ONLY

    @property
    def rel_halfwidth(self) -> float:
        return (self.high - self.low) / 2 / self.value if self.value > 0 else math.nan


NO_INTERVAL = Interval(math.nan, math.nan, math.nan, 0)


def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile (scipy.stats); degrees of freedom to two decimals are plenty for a CI."""
    if not math.isfinite(dof) or dof > 1e6:
        return NormalDist().inv_cdf(p)
    return _t_quantile_cached(p, round(dof, 2))


@lru_cache(maxsize=4096)
def _t_quantile_cached(p: float, dof: float) -> float:
    from scipy.stats import t  # here, so that a measuring process that times never loads scipy

    return float(t.ppf(p, dof))


def _interval(log_value: float, parts: list[tuple[float, float]], processes: int, confidence: float) -> Interval:
    variance = sum(v for v, _ in parts)
    value = math.exp(log_value)
    if variance <= 0:
        return Interval(value, value, value, processes)
    # Satterthwaite: the degrees of freedom of a sum of independently estimated variances.
    denominator = sum(v * v / dof for v, dof in parts if v > 0)
    dof = variance * variance / denominator if denominator > 0 else math.inf
    half = t_quantile(1 - (1 - confidence) / 2, dof) * math.sqrt(variance)
    return Interval(value, math.exp(log_value - half), math.exp(log_value + half), processes)


def centre_ci(d: Draws | None, confidence: float = 0.95, floor: float = 0.0) -> Interval:
    """A cell's time (geometric mean of its process medians) with its CI; `floor` is a
    variance of log process medians the cell is assumed to have at least."""
    if d is None:
        return NO_INTERVAL
    return _interval(d.centre, d.components(floor), d.processes, confidence)


def ratio_ci(num: Draws | None, den: Draws | None, confidence: float = 0.95,
             floors: tuple[float, float] = (0.0, 0.0)) -> Interval:
    """num / den (e.g. baseline time / contender time = speedup) with its CI."""
    if num is None or den is None:
        return NO_INTERVAL
    parts = num.components(floors[0]) + den.components(floors[1])
    return _interval(num.centre - den.centre, parts, min(num.processes, den.processes), confidence)


def paired_ratio_ci(num: Draws | None, den: Draws | None, seed: int, confidence: float = 0.95) -> Interval:
    """num / den where process k of one was measured next to process k of the other (the
    same round): resampling rounds for both at once lets what a round shares (the
    machine's state at the time) cancel in the ratio. Falls back to `ratio_ci` when the
    two were not measured in the same rounds, or in fewer than MIN_PAIRED of them."""
    if num is None or den is None or num.processes != den.processes or num.processes < MIN_PAIRED \
            or num.logs.shape != den.logs.shape:
        return ratio_ci(num, den, confidence)
    diff = _from_logs(num.centre - den.centre, num.logs - den.logs, min(num.within_dof, den.within_dof),
                      np.random.default_rng(seed))
    return _interval(diff.centre, diff.components(), diff.processes, confidence)


def log_t_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Geometric mean of positive values, one per process, with a Student's t CI on their
    logs (one value: no interval)."""
    logs = np.log(np.asarray(values, dtype=float))
    centre, p = float(np.mean(logs)), len(logs)
    if p < 2:
        return Interval(math.exp(centre), math.nan, math.nan, p)
    return _interval(centre, [(float(np.var(logs, ddof=1)) / p, p - 1)], p, confidence)


def binomial_interval(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of a rate from `successes` in `trials`: the
    shares whose binomial tails each leave half the error rate; it covers at least the
    confidence asked for. (nan, nan) without trials."""
    if trials <= 0:
        return math.nan, math.nan
    from scipy.stats import beta

    tail = (1 - confidence) / 2
    low = 0.0 if successes == 0 else float(beta.ppf(tail, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1 - tail, successes + 1, trials - successes))
    return low, high


def median_and_ci(samples: Sequence[float], resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> Interval:
    """One process's samples: their median with its CI (within-process only)."""
    return centre_ci(draws([samples], resamples, seed), confidence)


def independent_ratio(num: tuple[float, float, float], den: tuple[float, float, float]) -> tuple[float, float, float]:
    """num / den of two independently estimated positive quantities, each given as
    (value, CI low, CI high): each end's distance from the value on the log scale is
    combined in quadrature (NaN where an end is missing). Conservative for two cells
    measured side by side, whose shared rounds would cancel in a paired ratio."""
    if not finite_positive(*num, *den):
        return math.nan, math.nan, math.nan
    (a, a_lo, a_hi), (b, b_lo, b_hi) = num, den
    centre = math.log(a) - math.log(b)
    below = math.hypot(math.log(a) - math.log(a_lo), math.log(b_hi) - math.log(b))
    above = math.hypot(math.log(a_hi) - math.log(a), math.log(b) - math.log(b_lo))
    return math.exp(centre), math.exp(centre - below), math.exp(centre + above)


def processes_to_decide(low: float, high: float, value: float, processes: int, judging, max_span: float,
                        cap: int = 1000) -> float:
    """How many processes per cell would likely decide a ratio that is undecided now: its
    CI's half-width on the log scale, t(P-1)·s/√P, shrunk until it excludes 1 (where the
    ratio is at least δ from 1) or fits inside ±δ (where it is closer), and spans at most
    `max_span`, assuming the ratio and the spread between processes stay as observed. inf
    when no count up to `cap` would, or the ratio sits on a boundary; NaN with fewer than
    two processes, whose CI says nothing about the spread between them."""
    if processes < 2 or not all(math.isfinite(v) and v > 0 for v in (low, high, value)):
        return math.nan
    confidence, min_effect = judging.confidence, judging.min_effect
    t_now = t_quantile(1 - (1 - confidence) / 2, processes - 1)
    spread = (math.log(high) - math.log(low)) / 2 / t_now * math.sqrt(processes)
    distance, band = abs(math.log(value)), math.log(1 + min_effect)
    target = min(distance if distance >= band else band - distance, math.log(max_span) / 2)
    if target <= 0:
        return math.inf
    for count in range(processes + 1, cap + 1):
        if t_quantile(1 - (1 - confidence) / 2, count - 1) * spread / math.sqrt(count) < target:
            return float(count)
    return math.inf
