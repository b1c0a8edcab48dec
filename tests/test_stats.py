import math

import numpy as np
import pytest

from offloadbench.stats import (
    bootstrap_median_ci,
    bootstrap_ratio_ci,
    median_ci,
    median_ci_ranks,
    median_ci_rel_halfwidth,
)


@pytest.mark.parametrize("n", [6, 7, 10, 25, 100, 399, 400, 401, 1000, 5000])
def test_order_statistic_ci_has_at_least_nominal_coverage(n):
    lo, hi = median_ci_ranks(n)
    # Coverage = P(lo + 1 <= B <= hi), B ~ Binomial(n, 1/2) counting samples below the median.
    if n <= 1000:
        coverage = sum(math.comb(n, b) for b in range(lo + 1, hi + 1)) / 2**n
    else:
        from statistics import NormalDist

        dist = NormalDist(n / 2, math.sqrt(n) / 2)
        coverage = dist.cdf(hi + 0.5) - dist.cdf(lo + 0.5)
    assert 0.95 <= coverage < 0.99


def test_too_few_samples_give_no_interval():
    assert median_ci_ranks(5) is None
    assert all(math.isnan(v) for v in median_ci([1.0, 2.0, 3.0]))
    assert median_ci_rel_halfwidth([1.0, 2.0, 3.0]) == math.inf


def test_bootstrap_median_ci_brackets_the_median():
    rng = np.random.default_rng(0)
    data = rng.lognormal(0, 0.1, 200)
    lo, hi = bootstrap_median_ci(data, seed=1)
    assert lo < np.median(data) < hi
    assert bootstrap_median_ci(data, seed=1) == (lo, hi)  # seeded: reproducible


def test_ratio_ci_covers_the_true_ratio_at_about_the_nominal_rate():
    true_ratio = 2.5
    trials, hits = 200, 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        base = rng.lognormal(math.log(2.5e-3), 0.05, 40)
        contender = rng.lognormal(math.log(1e-3), 0.05, 40)
        _, lo, hi = bootstrap_ratio_ci(base, contender, resamples=1000, seed=seed)
        hits += lo <= true_ratio <= hi
    coverage = hits / trials
    assert 0.88 <= coverage <= 0.995


def test_ratio_ci_uses_the_noise_of_both_samples():
    rng = np.random.default_rng(5)
    quiet = rng.lognormal(0, 0.01, 50)
    noisy = rng.lognormal(0, 0.2, 50)
    _, lo1, hi1 = bootstrap_ratio_ci(quiet, rng.lognormal(0, 0.01, 50))
    _, lo2, hi2 = bootstrap_ratio_ci(noisy, rng.lognormal(0, 0.01, 50))
    _, lo3, hi3 = bootstrap_ratio_ci(quiet, noisy)
    assert hi2 - lo2 > 3 * (hi1 - lo1)
    assert hi3 - lo3 > 3 * (hi1 - lo1)


def test_equal_distributions_give_a_ratio_ci_that_includes_one():
    rng = np.random.default_rng(6)
    ratio, lo, hi = bootstrap_ratio_ci(rng.lognormal(0, 0.1, 60), rng.lognormal(0, 0.1, 60))
    assert lo < 1 < hi
