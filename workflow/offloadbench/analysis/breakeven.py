"""Break-even size: from which size on offloading pays once the copies are counted.

For one series (op, library, device, dtype, threads) ordered by size, it is the smallest
size from which the lower end of the end-to-end speedup's CI stays above 1, interpolated
on log-log axes between the last measured size that is not clearly faster and the next.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

REACHED, NOT_REACHED, FROM_SMALLEST = "reached", "not reached", "from the smallest size"  # a break-even's status


@dataclass(frozen=True)
class BreakEven:
    size: float  # nan when not reached
    status: str  # REACHED, NOT_REACHED or FROM_SMALLEST
    below: int | None  # the measured sizes that bracket it
    above: int | None


def break_even(sizes: Sequence[int], ci_low: Sequence[float]) -> BreakEven:
    """Break-even of one series; `ci_low` is the lower CI bound of the end-to-end speedup."""
    pairs = sorted((int(s), float(lo)) for s, lo in zip(sizes, ci_low, strict=True))
    if not pairs:
        return BreakEven(math.nan, NOT_REACHED, None, None)
    clearly_faster = [not math.isnan(lo) and lo > 1.0 for _, lo in pairs]
    if not clearly_faster[-1]:
        return BreakEven(math.nan, NOT_REACHED, pairs[-1][0], None)
    last_not = max((i for i, ok in enumerate(clearly_faster) if not ok), default=None)
    if last_not is None:
        return BreakEven(float(pairs[0][0]), FROM_SMALLEST, None, pairs[0][0])
    (s0, lo0), (s1, lo1) = pairs[last_not], pairs[last_not + 1]
    if math.isnan(lo0) or lo0 <= 0:
        return BreakEven(float(s1), REACHED, s0, s1)
    # Where log(ci_low) crosses 0 between the two sizes, on a log size axis.
    t = (0.0 - math.log(lo0)) / (math.log(lo1) - math.log(lo0))
    size = math.exp(math.log(s0) + t * (math.log(s1) - math.log(s0)))
    return BreakEven(size, REACHED, s0, s1)
