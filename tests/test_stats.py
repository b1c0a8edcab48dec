import math

import numpy as np
import pytest
from offloadbench.stats import (
    centre_ci,
    draws,
    median_and_ci,
    median_ci,
    median_ci_ranks,
    median_ci_rel_halfwidth,
    ratio_ci,
    seed_for,
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


def _two_level(seed, processes, n, between, within):
    rng = np.random.default_rng(seed)
    return [np.exp(rng.normal(0, between) + rng.normal(0, within, n)) for _ in range(processes)]


@pytest.mark.parametrize(
    "processes, between, within",
    [(3, 0.02, 0.05), (3, 0.10, 0.02), (5, 0.05, 0.05), (5, 0.20, 0.01), (2, 0.10, 0.02)],
)
def test_the_two_level_ci_covers_the_true_centre_at_about_the_nominal_rate(processes, between, within):
    """Synthetic cells with known between- and within-process variance, true centre 1."""
    trials = 300
    hits = sum(
        (ci := centre_ci(draws(_two_level(seed, processes, 20, between, within), 400, seed))).low <= 1 <= ci.high
        for seed in range(trials)
    )
    assert 0.91 <= hits / trials <= 0.995


def test_without_variance_between_processes_the_ci_is_safe_and_not_far_wider():
    """Processes that agree: the interval covers at least nominally, within about 3x the
    width the within-process noise alone would give."""
    hits, ratios = 0, []
    for seed in range(200):
        groups = _two_level(seed, 3, 20, 0.0, 0.05)
        ci = centre_ci(draws(groups, 400, seed))
        hits += ci.low <= 1 <= ci.high
        within_only = centre_ci(draws([np.concatenate(groups)], 400, seed))
        ratios.append(ci.rel_halfwidth / within_only.rel_halfwidth)
    assert hits / 200 >= 0.95
    assert np.median(ratios) < 3.5


def test_processes_that_disagree_widen_the_ci_beyond_the_within_process_noise():
    quiet = centre_ci(draws(_two_level(1, 3, 40, 0.0, 0.02), 1000, 1))
    spread = centre_ci(draws(_two_level(1, 3, 40, 0.2, 0.02), 1000, 1))
    assert spread.rel_halfwidth > 5 * quiet.rel_halfwidth
    assert spread.processes == 3 and spread.scope == "across processes"


def test_one_process_gives_a_ci_labelled_within_process_only():
    rng = np.random.default_rng(3)
    ci = median_and_ci(rng.lognormal(0, 0.05, 60), seed=3)
    assert ci.processes == 1 and ci.scope == "within-process only"
    assert ci.low < ci.value < ci.high


def test_a_ratio_ci_covers_the_true_ratio_across_processes():
    trials, hits = 200, 0
    for seed in range(trials):
        base = [g * 2.5 for g in _two_level(seed, 3, 20, 0.05, 0.03)]
        contender = _two_level(seed + 10_000, 3, 20, 0.05, 0.03)
        ratio = ratio_ci(draws(base, 400, seed), draws(contender, 400, seed + 1))
        hits += ratio.low <= 2.5 <= ratio.high
    assert 0.90 <= hits / trials <= 0.995


def test_student_t_quantiles_match_the_tables():
    from offloadbench.stats import _t_quantile

    for dof, value in ((1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042), (math.inf, 1.960)):
        assert _t_quantile(0.975, dof) == pytest.approx(value, abs=2e-3)


def test_seeds_are_stable_and_differ_per_quantity():
    assert seed_for(0, "matmul/x", "compute") == seed_for(0, "matmul/x", "compute")
    assert seed_for(0, "matmul/x", "compute") != seed_for(0, "matmul/x", "end_to_end")


def test_pairing_by_round_cancels_what_a_round_shares():
    """Both cells slowed alike in each round (the machine's state): the paired ratio's CI is
    narrow and still covers the truth; the unpaired one is wide."""
    from offloadbench.stats import paired_ratio_ci

    hits, widths = 0, []
    for seed in range(150):
        rng = np.random.default_rng(seed)
        rounds = np.exp(rng.normal(0, 0.2, 3))  # shared by both cells, per round
        base = [r * 2.0 * np.exp(rng.normal(0, 0.02, 20)) for r in rounds]
        contender = [r * np.exp(rng.normal(0, 0.02, 20)) for r in rounds]
        num, den = draws(base, 400, seed), draws(contender, 400, seed + 1)
        paired = paired_ratio_ci(num, den, seed)
        hits += paired.low <= 2.0 <= paired.high
        widths.append((paired.rel_halfwidth, ratio_ci(num, den).rel_halfwidth))
    assert hits / 150 >= 0.90
    assert np.median([p for p, _ in widths]) < np.median([u for _, u in widths]) / 5
