import math

import numpy as np
import pytest
from offloadbench.stats import (
    MIN_PAIRED,
    centre_ci,
    draws,
    median_and_ci,
    median_ci,
    median_ci_ranks,
    median_ci_rel_halfwidth,
    ratio_ci,
    stream_for,
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
    from offloadbench.stats import t_quantile

    for dof, value in ((1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042), (math.inf, 1.960)):
        assert t_quantile(0.975, dof) == pytest.approx(value, abs=2e-3)


def test_seeds_are_stable_and_differ_per_quantity():
    assert stream_for(0, "matmul/x", "compute") == stream_for(0, "matmul/x", "compute")
    assert stream_for(0, "matmul/x", "compute") != stream_for(0, "matmul/x", "end_to_end")


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


# --- no interval built on less than the data -------------------------------------------------


def _cell_records(library, rounds, medians, left_out=(), seed=0, within=0.03, n=20):
    """A cell's records, one per round, with `left_out` rounds disturbed (so they are replaced)."""
    from conftest import make_record

    records = []
    for k, median in zip(rounds, medians, strict=True):
        record = make_record(library=library, median=median, spread=within, n=n, seed=seed * 97 + k, round=k, rounds=3)
        if k in left_out:
            record["disturbance"] = {"disturbed": True, "others_cores": 0.5}
        records.append(record)
    return records


def _speedup(base_records, cell_records, resamples=200):
    from conftest import group_typed
    from offloadbench.analysis.measured import Analysis

    cells = {mc.cell.library: mc for mc in group_typed(base_records + cell_records, Analysis(resamples=resamples))}
    shared = set(cells["numpy"].rounds("compute")) & set(cells["torch"].rounds("compute"))
    return cells["numpy"].ratio(cells["torch"], "compute"), len(shared)


def test_two_shared_rounds_give_the_unpaired_interval_not_one_with_one_degree_of_freedom():
    """The case a run printed as 2.74× (95% CI 0.33–22.91): each cell had a different round
    replaced (4 and 2), which left rounds 1 and 3 shared; paired on those two, Student's t had
    one degree of freedom. Now the ratio is unpaired, never wider than that, and a result."""
    from conftest import group_typed
    from offloadbench.analysis.measured import Analysis
    from offloadbench.stats import ratio_ci

    base = _cell_records("numpy", [1, 2, 3, 4], [11.0e-3, 13.5e-3, 10.0e-3, 40e-3], left_out=(4,), seed=1, within=0.08)
    contender = _cell_records("torch", [1, 2, 3, 4], [3.6e-3, 9.0e-3, 4.3e-3, 3.9e-3], left_out=(2,), seed=2,
                              within=0.08)
    cells = {mc.cell.library: mc for mc in group_typed(base + contender, Analysis(resamples=500))}
    numpy, torch = cells["numpy"], cells["torch"]
    assert numpy.rounds("compute") == [1, 2, 3] and torch.rounds("compute") == [1, 3, 4]
    ratio = numpy.ratio(torch, "compute")
    unpaired = ratio_ci(numpy.draws("compute"), torch.draws("compute"), 0.95)
    assert (ratio.low, ratio.high) == (unpaired.low, unpaired.high)
    assert ratio.high / ratio.low <= unpaired.high / unpaired.low < 6


@pytest.mark.parametrize("left_out_a, left_out_b, paired", [
    ((), (), True),          # 3 processes each, side by side in every round
    ((4,), (4,), True),      # one round replaced in both: still 3 shared
    ((4,), (2,), False),     # different rounds replaced: 2 shared, so unpaired
])
def test_paired_and_unpaired_ratios_cover_the_true_ratio_within_two_points_of_95(left_out_a, left_out_b, paired):
    """Synthetic cells with a known ratio (2), a spread between processes (5%), noise within
    them (3%) and replaced processes, 2,000 draws each: both intervals cover the truth 93–97%."""
    rounds = [1, 2, 3, 4] if left_out_a or left_out_b else [1, 2, 3]
    hits = 0
    draws_ = 2000
    for k in range(draws_):
        rng = np.random.default_rng(k)
        a = 2e-3 * np.exp(rng.normal(0, 0.05, len(rounds)))
        b = 1e-3 * np.exp(rng.normal(0, 0.05, len(rounds)))
        a[[r - 1 for r in left_out_a]] *= 3  # what a disturbed process looks like; it is left out
        b[[r - 1 for r in left_out_b]] *= 3
        ratio, shared = _speedup(_cell_records("numpy", rounds, a, left_out_a, seed=k),
                                 _cell_records("torch", rounds, b, left_out_b, seed=k + 7))
        hits += ratio.low <= 2.0 <= ratio.high
    assert (shared >= MIN_PAIRED) == paired
    assert 0.93 <= hits / draws_ <= 0.97, hits / draws_
