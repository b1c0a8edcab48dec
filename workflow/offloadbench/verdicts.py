"""The one verdict vocabulary: faster, slower, same, undecided.

Every ratio the pipeline judges (a speedup over NumPy, thread scaling, the end-to-end
speedup behind a break-even size, one machine against another) is judged here, from its
95% CI and the minimum effect δ (`analysis.min_effect`) that counts. For a ratio R where
R > 1 means "faster" (a speedup; for time ratios pass the inverse, see `time_ratio_verdict`):

- *same*: the whole CI lies within [1/(1+δ), 1+δ]. This is an equivalence test (two
  one-sided tests at 2.5% each, so stricter than TOST's usual 5%): the ratio is shown to
  be within δ of 1, not merely "not shown to differ".
- *faster*: the CI lies above 1 and the point estimate is at least 1+δ: the difference is
  real and as large as δ.
- *slower*: the mirror image, below 1 and at most 1/(1+δ).
- *undecided*: neither. Either the CI includes 1 and reaches beyond ±δ (more data would
  tell), or it excludes 1 but the effect is smaller than δ while the CI is not inside ±δ,
  or the CI spans more than a factor of 2 whatever it includes: such a ratio is no result.

Edge cases, precisely: a CI above 1 that is also inside ±δ (1.01–1.04) is *same*, since the
equivalence test passes; a small effect that is real is the same for practical purposes.
The bounds are inclusive (a CI of exactly [1/(1+δ), 1+δ] is same). A CI above 1 whose
point estimate is below 1+δ while its upper end is beyond it (1.01–1.08, 1.04) is
undecided. A missing or non-positive bound is undecided.
"""

from __future__ import annotations

import math

FASTER, SLOWER, SAME, UNDECIDED = "faster", "slower", "same", "undecided"
VERDICTS = (FASTER, SLOWER, SAME, UNDECIDED)
DECIDED = (FASTER, SLOWER, SAME)
MAX_CI_SPAN = 2.0  # a ratio whose CI spans more than this factor is never a headline number
DEFAULT_MIN_EFFECT = 0.05


def _finite_positive(*values: float) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values)


def ci_span(low: float, high: float) -> float:
    """The factor from the CI's low end to its high end (inf when undefined)."""
    return high / low if _finite_positive(low, high) else math.inf


def verdict(low: float, high: float, point: float, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """The verdict of a ratio where above 1 means faster (see the module's doc)."""
    if not _finite_positive(low, high, point) or ci_span(low, high) > MAX_CI_SPAN:
        return UNDECIDED
    same_low, same_high = 1 / (1 + min_effect), 1 + min_effect
    if same_low <= low and high <= same_high:
        return SAME
    if low > 1 and point >= same_high:
        return FASTER
    if high < 1 and point <= same_low:
        return SLOWER
    return UNDECIDED


def time_ratio_verdict(low: float, high: float, point: float, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """The verdict of B from the CI of time_B / time_A, where below 1 means B is faster."""
    if not _finite_positive(low, high, point):
        return UNDECIDED
    return verdict(1 / high, 1 / low, 1 / point, min_effect)


def undecided_reason(low: float, high: float, point: float, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """Why a ratio is undecided, in words ("" when it is decided)."""
    if verdict(low, high, point, min_effect) != UNDECIDED:
        return ""
    if not _finite_positive(low, high, point):
        return "no CI"
    if ci_span(low, high) > MAX_CI_SPAN:
        return f"its CI spans {ci_span(low, high):.1f}×, too wide to be a result"
    if low <= 1 <= high:
        return f"its CI includes 1 and reaches beyond ±{min_effect:.0%}"
    return f"the difference is real but may be smaller than {min_effect:.0%}"


def time_ratio_undecided_reason(low: float, high: float, point: float, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """Why the verdict of a time ratio (below 1: B faster) is undecided ("" when decided)."""
    if not _finite_positive(low, high, point):
        return "no CI"
    return undecided_reason(1 / high, 1 / low, 1 / point, min_effect)


def contradicts(first: str, second: str) -> bool:
    """Two decided verdicts of one comparison that cannot both be true: faster against
    slower, or same against either (undecided contradicts nothing)."""
    return first in DECIDED and second in DECIDED and first != second


def is_decided(word: str) -> bool:
    return word in DECIDED
