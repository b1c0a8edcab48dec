"""The one verdict vocabulary: every edge of faster, slower, same and undecided against δ."""

from __future__ import annotations

import math

import pytest
from offloadbench.verdicts import (
    ACROSS_ONE,
    BELOW_DELTA,
    FASTER,
    NO_CI,
    SAME,
    SLOWER,
    TIE,
    TOO_WIDE,
    UNDECIDED,
    UNDECIDED_REASONS,
    UNSTABLE,
    Judging,
    contradicts,
    percent,
)

D = Judging(min_effect=0.05, confidence=0.95)
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
    assert D.verdict(low, high, point) == expected, why
    reason = D.undecided_reason(low, high, point)
    assert reason in (UNDECIDED_REASONS if expected == UNDECIDED else ("",)), reason


def test_a_time_ratio_is_judged_as_the_speedup_it_implies():
    assert D.judged(0.5, 0.6, 0.55, time_ratio=True)[0] == FASTER  # B takes half the time: B is faster
    assert D.judged(1 / 1.04, 1 / 1.01, 1 / 1.03, time_ratio=True)[0] == SAME
    assert D.judged(1.6, 1.9, 1.7, time_ratio=True)[0] == SLOWER


def test_an_undecided_ratio_says_why_in_one_word_of_the_vocabulary():
    assert D.undecided_reason(0.01, 200.0, 9.95) == TOO_WIDE
    assert D.undecided_reason(0.9, 1.2, 1.0) == ACROSS_ONE
    assert D.undecided_reason(1.01, 1.20, 1.04) == BELOW_DELTA
    assert D.undecided_reason(math.nan, 1.2, 1.1) == NO_CI
    assert D.undecided_reason(1.015, 1.075, 1.045) == TIE
    assert D.undecided_reason(1.5, 1.7, 1.6) == ""


def test_contradictions_are_two_different_decided_verdicts():
    assert contradicts(FASTER, SLOWER) and contradicts(SAME, FASTER) and contradicts(SLOWER, SAME)
    assert not contradicts(FASTER, UNDECIDED) and not contradicts(UNDECIDED, SAME) and not contradicts(SAME, SAME)


def test_the_policy_labels_every_interval_at_its_own_level():
    assert Judging(0.05, 0.95).ci == "95% CI" and Judging(0.1, 0.9).ci == "90% CI"
    assert Judging(0.05, 0.995).level == "99.5%" and Judging(0.05, 0.9).each_way() == "5%"
    assert Judging(0.1, 0.9).describe() == "δ = 10%, 90% confidence"
    assert percent(0.025) == "2.5%" and percent(0.5) == "50%"


def test_one_unstable_rule_makes_any_ratio_undecided_with_its_reason():
    assert D.judged(1.5, 1.7, 1.6, held=UNSTABLE) == (UNDECIDED, UNSTABLE)
    assert D.judged(1.5, 1.7, 1.6) == (FASTER, "")
    assert D.judged(0.5, 0.6, 0.55, time_ratio=True) == (FASTER, "")


@pytest.mark.parametrize("low, high, point, tie", [
    (1.015, 1.075, 1.045, True),  # straddles 1 + δ, within ±δ of its point
    (0.93, 0.985, 0.955, True),  # straddles 1/(1 + δ)
    (0.97, 1.14, 1.05, False),  # wider than ±δ around its point: more data would tell
    (1.06, 1.09, 1.07, False),  # decided faster
    (0.98, 1.03, 1.0, False),  # decided same
])
def test_a_tie_at_the_boundary_is_a_narrow_ci_across_one_plus_delta(low, high, point, tie):
    judging = Judging(min_effect=0.05)
    assert judging.tie(low, high, point) is tie
    assert (judging.undecided_reason(low, high, point) == TIE) is tie
    if tie:
        way = "about 4.5% faster" if point > 1 else "about 4.5% slower"
        assert judging.tie_words(point) == f"{way}; too close to δ = 5% to call"
