"""The paired interval holds its confidence level on a drifting machine: a simulation
(benchmarks/coverage.py) builds the records of many runs whose true ratio is known, and
the analysis the pipeline uses puts an interval on each."""

from conftest import load_benchmark

coverage = load_benchmark("coverage")


def test_the_paired_interval_covers_the_true_ratio_at_its_level_where_drift_misleads_separate_processes():
    for machine in coverage.SCENARIOS[:2]:  # a drifting speed, with and without a fading turbo
        paired = coverage.coverage(machine, rounds=3, cycles=30, paired=True, trials=1000, seed=11)
        assert paired.pairing == "paired in time"
        assert 0.93 <= paired.held / paired.trials <= 0.97, (machine.name, paired.held)
    # where the machine slows over a round, cells sampled one after the other are biased
    fading = coverage.coverage(coverage.SCENARIOS[1], rounds=3, cycles=30, paired=False, trials=300, seed=11)
    assert fading.pairing == "paired by round" and fading.held / fading.trials < 0.85
