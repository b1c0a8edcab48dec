"""The one verdict vocabulary, faster, slower, same, undecided, and the one judging policy
every verdict and every interval's label follows (`Judging`: the minimum effect δ and the
confidence level, from the config's `analysis` section).

Every ratio the pipeline judges (a speedup over NumPy, thread scaling, the end-to-end
speedup behind a break-even size, one machine against another) is judged here, from its CI
at the policy's confidence level and the minimum effect δ that counts. For a ratio R where
R > 1 means "faster" (a speedup; a time ratio is judged as its inverse, `Judging.judged`):

- *same*: the whole CI lies within [1/(1+δ), 1+δ]. This is an equivalence test (two
  one-sided tests at half the CI's error rate each, stricter than TOST's usual 5%): the
  ratio is shown to be within δ of 1, not merely "not shown to differ".
- *faster*: the CI lies above 1 and the point estimate is at least 1+δ: the difference is
  real and as large as δ.
- *slower*: the mirror image, below 1 and at most 1/(1+δ).
- *undecided*: neither. Either the CI includes 1 and reaches beyond ±δ (more data would
  tell), or it excludes 1 but the effect is smaller than δ while the CI is not inside ±δ,
  or the CI spans more than a factor of 2 whatever it includes: such a ratio is no result.

A *tie at the boundary* is an undecided ratio whose CI is as narrow as a verdict needs
(within ±δ of its own point) but straddles 1 + δ or 1/(1 + δ): the ratio is known to be
about δ from 1, and no number of processes would put it on one side. It is an answer, said
as one ("about 5% slower; too close to δ to call"), and never asks for more processes.

Edge cases, precisely: a CI above 1 that is also inside ±δ (1.01–1.04) is *same*, since the
equivalence test passes; a small effect that is real is the same for practical purposes.
The bounds are inclusive (a CI of exactly [1/(1+δ), 1+δ] is same). A CI above 1 whose
point estimate is below 1+δ while its upper end is beyond it (1.01–1.08, 1.04) is
undecided. A missing or non-positive bound is undecided.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

FASTER, SLOWER, SAME, UNDECIDED = "faster", "slower", "same", "undecided"
VERDICTS = (FASTER, SLOWER, SAME, UNDECIDED)
DECIDED = (FASTER, SLOWER, SAME)
MAX_CI_SPAN = 2.0  # a ratio whose CI spans more than this factor is never a headline number
# Why a ratio is undecided (the tables' `*_undecided` columns; "" where it is decided): no CI;
# a tie at the boundary; a CI wider than MAX_CI_SPAN; a CI across 1 and beyond ±δ; an effect
# that is real but may be below δ; a side whose processes disagree or were disturbed; an
# answer that differs between a side's two states. The report words them.
NO_CI, TIE, TOO_WIDE, ACROSS_ONE, BELOW_DELTA, UNSTABLE, DEPENDS_ON_STATE = (
    "no_ci", "tie", "too_wide", "across_one", "below_delta", "unstable", "depends_on_state")
UNDECIDED_REASONS = (NO_CI, TIE, TOO_WIDE, ACROSS_ONE, BELOW_DELTA, UNSTABLE, DEPENDS_ON_STATE)


def method() -> dict[str, float]:
    """The widest CI that is a result, as a number (judging.json's `method`, with the analysis's)."""
    return {"max_ci_span": MAX_CI_SPAN}


def finite_positive(*values: float) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values)


def ci_span(low: float, high: float) -> float:
    """The factor from the CI's low end to its high end (inf when undefined)."""
    return high / low if finite_positive(low, high) else math.inf


MAX_CONFIDENCE = 0.999  # the highest level the labels print as it is (percent: two decimals)


def percent(share: float) -> str:
    """A share as a percentage with the digits it needs: 0.95 → "95%", 0.995 → "99.5%"."""
    text = f"{share * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


@dataclass(frozen=True)
class Judging:
    """The judging policy of a run: the minimum effect δ of every verdict and the confidence
    level of every interval. Built once from the config, written beside the tables
    (judging.json), and passed to everything that judges or labels an interval, so a report
    never computes 90% intervals and calls them 95%."""

    min_effect: float = 0.05
    confidence: float = 0.95
    # the analysis's thresholds the tables were built with (judging.json's `method`: which
    # processes count, the widest CI that is a result), for the report's words; not policy
    method: tuple[tuple[str, float], ...] = field(default=(), compare=False)  # (name, value) pairs

    @classmethod
    def from_config(cls, analysis: dict) -> Judging:
        """From the config's validated `analysis` section."""
        return cls(float(analysis["min_effect"]), float(analysis["confidence"]))

    def with_method(self, method: Mapping[str, float]) -> Judging:
        return Judging(self.min_effect, self.confidence, tuple(sorted(method.items())))

    def as_json(self) -> dict:
        return {"min_effect": self.min_effect, "confidence": self.confidence, "method": dict(self.method)}

    @property
    def level(self) -> str:
        """The confidence level as the text labels it: "95%"."""
        return percent(self.confidence)

    @property
    def ci(self) -> str:
        """"95% CI", as every table and caption labels an interval."""
        return f"{self.level} CI"

    @property
    def delta(self) -> str:
        """δ as a percentage: "5%"."""
        return percent(self.min_effect)

    def describe(self) -> str:
        """"δ = 5%, 95% confidence": the policy in words."""
        return f"δ = {self.delta}, {self.level} confidence"

    def each_way(self) -> str:
        """The false-verdict rate the CIs promise each way: "2.5%"."""
        return percent((1 - self.confidence) / 2)

    def verdict(self, low: float, high: float, point: float) -> str:
        """The verdict of a ratio where above 1 means faster (see the module's doc)."""
        if not finite_positive(low, high, point) or ci_span(low, high) > MAX_CI_SPAN:
            return UNDECIDED
        same_low, same_high = 1 / (1 + self.min_effect), 1 + self.min_effect
        if same_low <= low and high <= same_high:
            return SAME
        if low > 1 and point >= same_high:
            return FASTER
        if high < 1 and point <= same_low:
            return SLOWER
        return UNDECIDED

    def tie(self, low: float, high: float, point: float) -> bool:
        """Undecided, but a tie at the boundary: the CI lies within ±δ of its point."""
        if not finite_positive(low, high, point) or self.verdict(low, high, point) != UNDECIDED:
            return False
        return high <= point * (1 + self.min_effect) and low >= point / (1 + self.min_effect)

    def tie_words(self, point: float) -> str:
        """"about 5% slower; too close to δ to call" (above 1: faster)."""
        way = "faster" if point >= 1 else "slower"
        share = point - 1 if point >= 1 else 1 - point
        return f"about {percent(round(share, 3))} {way}; too close to δ = {self.delta} to call"

    def undecided_reason(self, low: float, high: float, point: float) -> str:
        """Why a ratio is undecided, one of UNDECIDED_REASONS ("" when it is decided)."""
        if self.verdict(low, high, point) != UNDECIDED:
            return ""
        if not finite_positive(low, high, point):
            return NO_CI
        if self.tie(low, high, point):
            return TIE
        if ci_span(low, high) > MAX_CI_SPAN:
            return TOO_WIDE
        return ACROSS_ONE if low <= 1 <= high else BELOW_DELTA

    def judged(self, low: float, high: float, point: float, held: str = "", time_ratio: bool = False
               ) -> tuple[str, str]:
        """(verdict, why undecided) of a ratio, undecided whatever its CI says where a side
        `held` it (UNSTABLE: its processes still disagree, say; DEPENDS_ON_STATE): the one
        such rule. A `time_ratio` (time_B / time_A, below 1 where B is faster) is judged as
        the speedup it inverts."""
        if held:
            return UNDECIDED, held
        if time_ratio:
            if not finite_positive(low, high, point):
                return UNDECIDED, NO_CI
            low, high, point = 1 / high, 1 / low, 1 / point
        return self.verdict(low, high, point), self.undecided_reason(low, high, point)


def contradicts(first: str, second: str) -> bool:
    """Two decided verdicts of one comparison that cannot both be true: faster against
    slower, or same against either (undecided contradicts nothing)."""
    return first in DECIDED and second in DECIDED and first != second


def is_decided(word: str) -> bool:
    return word in DECIDED
