"""The one verdict vocabulary: every edge of faster, slower, same and undecided against δ."""

from __future__ import annotations

import math

import pytest
from offloadbench.verdicts import (
    FASTER,
    SAME,
    SLOWER,
    UNDECIDED,
    contradicts,
    time_ratio_verdict,
    undecided_reason,
    verdict,
)

D = 0.05
LO, HI = 1 / 1.05, 1.05  # the equivalence band of δ = 5%


@pytest.mark.parametrize("low, high, point, expected, why", [
    (1.20, 1.40, 1.30, FASTER, "CI above 1 and the effect beyond δ"),
    (1.001, 1.30, 1.06, FASTER, "CI barely above 1, point beyond 1 + δ"),
    (1.01, 1.30, 1.05, FASTER, "point exactly 1 + δ counts"),
    (1.01, 1.08, 1.04, UNDECIDED, "real, but the effect may be below δ"),
    (1.01, 1.04, 1.03, SAME, "above 1 and inside ±δ: equivalence wins"),
    (1.00, 1.05, 1.02, SAME, "the band's edges are inclusive"),
    (LO, HI, 1.00, SAME, "exactly the band"),
    (0.97, 1.03, 1.00, SAME, "inside the band, around 1"),
    (0.96, 1.06, 1.00, UNDECIDED, "includes 1, reaches beyond δ"),
    (0.70, 0.80, 0.75, SLOWER, "the mirror image of faster"),
    (0.70, 0.99, 1 / 1.05, SLOWER, "point exactly 1/(1 + δ) counts"),
    (0.93, 0.99, 0.96, UNDECIDED, "below 1, but the effect may be below δ"),
    (2.0, 4.1, 3.0, UNDECIDED, "a CI spanning more than 2× is no result, even above 1"),
    (2.0, 4.0, 3.0, FASTER, "a span of exactly 2× still is"),
    (0.01, 200.0, 9.95, UNDECIDED, "the headline of the disturbed run"),
    (math.nan, 1.2, 1.1, UNDECIDED, "no CI"),
    (0.0, 1.2, 1.1, UNDECIDED, "a bound of zero"),
    (1.1, math.inf, 1.2, UNDECIDED, "an infinite bound"),
])
def test_the_verdict_of_each_edge(low, high, point, expected, why):
    assert verdict(low, high, point, D) == expected, why
    reason = undecided_reason(low, high, point, D)
    assert bool(reason) == (expected == UNDECIDED), reason


def test_a_time_ratio_is_judged_as_the_speedup_it_implies():
    assert time_ratio_verdict(0.5, 0.6, 0.55, D) == FASTER  # B takes half the time: B is faster
    assert time_ratio_verdict(1 / 1.04, 1 / 1.01, 1 / 1.03, D) == SAME
    assert time_ratio_verdict(1.6, 1.9, 1.7, D) == SLOWER


def test_a_wide_ci_says_why_it_is_undecided():
    assert "spans 20000.0×" in undecided_reason(0.01, 200.0, 9.95, D)
    assert "includes 1" in undecided_reason(0.9, 1.2, 1.0, D)
    assert "smaller than 5%" in undecided_reason(1.01, 1.08, 1.04, D)


def test_contradictions_are_two_different_decided_verdicts():
    assert contradicts(FASTER, SLOWER) and contradicts(SAME, FASTER) and contradicts(SLOWER, SAME)
    assert not contradicts(FASTER, UNDECIDED) and not contradicts(UNDECIDED, SAME) and not contradicts(SAME, SAME)
