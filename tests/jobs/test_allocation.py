"""Where a run spends its time: Kalibera & Jones's cycles per bout from the variances and
costs the earlier rounds measured (allocation.py), checked against the formula and against
a simulation of rounds."""

import math

import numpy as np
import pytest
from offloadbench.allocation import (
    MEDIAN_EFFICIENCY,
    BoutPlan,
    best_cycles,
    cycle_stats,
    pair_spread,
    plan_cycles,
)


def test_the_spread_between_rounds_is_what_their_cycles_do_not_explain():
    # rounds whose medians differ by 10% (σ of logs ≈ 0.1), each from 20 cycles of σ = 0.05
    rng = np.random.default_rng(1)
    rounds = [(float(m), 0.05**2, 20) for m in rng.normal(0.0, 0.1, 40)]
    spread = pair_spread(rounds)
    assert spread.rounds == 40 and spread.within == pytest.approx(0.0025)
    assert math.sqrt(spread.between) == pytest.approx(0.1, rel=0.25)
    assert pair_spread(rounds[:1]) is None  # one round says nothing of the spread between rounds


def test_best_cycles_is_kalibera_and_jones_m_star():
    spread = pair_spread([(0.0, 0.04, 10), (0.1, 0.04, 10), (-0.1, 0.04, 10)])
    m = best_cycles(process_s=2.0, cycle_s=0.05, spread=spread)
    assert m == pytest.approx(math.sqrt(2.0 / 0.05 * MEDIAN_EFFICIENCY * spread.within / spread.between))
    # dearer processes or noisier cycles want more cycles; a larger spread between rounds fewer
    assert best_cycles(8.0, 0.05, spread) == pytest.approx(2 * m)
    wider = pair_spread([(0.0, 0.04, 10), (0.3, 0.04, 10), (-0.3, 0.04, 10)])
    assert best_cycles(2.0, 0.05, wider) < m


def test_m_star_buys_the_narrowest_interval_for_a_fixed_time():
    """For a fixed time, rounds of m* cycles give a smaller variance of the mean than rounds of
    a tenth or ten times as many."""
    spread = pair_spread([(0.0, 0.01, 10), (0.05, 0.01, 10), (-0.05, 0.01, 10), (0.02, 0.01, 10)])
    process_s, cycle_s, budget = 1.0, 0.02, 100.0
    m = best_cycles(process_s, cycle_s, spread)

    def variance_of_mean(cycles):
        rounds = budget / (process_s + cycles * cycle_s)
        round_variance = spread.between + MEDIAN_EFFICIENCY * spread.within / max(cycles, 1.0)  # of one round's ratio
        return round_variance / rounds

    assert variance_of_mean(m) < variance_of_mean(m / 10) and variance_of_mean(m) < variance_of_mean(m * 10)


def test_a_bouts_cycle_statistics_resist_one_stray_cycle():
    calm = [0.01 * k for k in range(-5, 6)]
    median, variance, count = cycle_stats([*calm, 5.0])
    assert count == 12 and abs(median) < 0.02 and variance < 0.01


def bout(cycles=10, pairs=None, process_s=3.0, sampling_s=1.0, paused_s=0.1, budget_s=1.0):
    return {"cycles": cycles, "pairs": pairs or {}, "process_s": process_s, "sampling_s": sampling_s,
            "paused_s": paused_s, "budget_s": budget_s}


def test_a_bout_plans_its_cycles_from_two_earlier_rounds():
    plans = plan_cycles({"a": [bout()], "b": [bout(), bout()]}, ["a", "b", "c"], min_cycles=6)
    assert plans["a"] == BoutPlan(None, "fewer than 2 earlier rounds: the budget decides")
    assert plans["b"].cycles is None and plans["c"].cycles is None  # nothing compared, or nothing measured
    agree = [bout(pairs={"a|b|compute": [m, 0.04, 10]}) for m in (0.0, 0.01, -0.01)]
    differ = [bout(pairs={"a|b|compute": [m, 0.0004, 10]}) for m in (0.0, 0.3, -0.3)]
    plans = plan_cycles({"agree": agree, "differ": differ}, ["agree", "differ"], min_cycles=6)
    # rounds that agree far better than their cycles want many cycles; rounds that differ far more, the fewest
    assert plans["differ"].cycles == 6 and plans["agree"].cycles > 6 and "m* = " in plans["agree"].why


def test_the_round_samples_no_longer_than_its_budgets_say_and_gives_the_time_where_it_buys_most():
    agree = [bout(pairs={"x|y|compute": [m, 0.04, 10]}) for m in (0.0, 0.01, -0.01)]
    calmer = [bout(pairs={"x|y|compute": [m, 0.01, 10]}) for m in (0.0, 0.01, -0.01)]
    plans = plan_cycles({"g": agree, "h": calmer}, ["g", "h"], min_cycles=6)
    # both budgets are 10 cycles (1 s at 0.1 s a cycle): together at most 20 cycles, rounding up
    assert plans["g"].cycles + plans["h"].cycles <= 22 and "scaled by" in plans["g"].why
    assert plans["g"].cycles > plans["h"].cycles  # the noisier cycles get more of them
