"""How long the data must stay on the device: the calls per round trip that make the copies pay.

A program that copies its data to the GPU once, calls the op k times there (a time loop
that keeps its field on the device) and copies the result back, pays h2d + k·compute + d2h
against NumPy's k·numpy. It gains once k > k* = (h2d + d2h) ÷ (numpy − compute). In words:
- k* at most 1 (its CI's upper end): it pays with a copy on every call;
- the device not faster at computing (numpy − compute ≤ 0, or its CI's upper end ≤ 0):
  never, whatever the calls per trip;
- otherwise it pays once the data stay on the device for at least ⌈k*⌉ calls.
The interval joins the ends of the copies' interval (h2d's and d2h's added) and of the
saving per call's (NumPy's time and the device's, each with its CI), as the compile's
payback does (`compile_cost`), so it covers at least the confidence of each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..stats import Interval


@dataclass(frozen=True)
class Calls:
    """Calls that pay a cost back, with their interval: k* of a round trip, or the calls that
    amortize a compile (`compile_cost`)."""

    calls: float  # inf: never
    low: float
    high: float


NOT_MEASURED = Calls(math.nan, math.nan, math.nan)
NEVER, EVERY_CALL, AFTER = "never", "every call", "after"


def trip_kind(calls: float, high: float) -> str | None:
    """What k* and its CI's upper end say: NEVER (the device computes no faster), EVERY_CALL
    (a copy on every call pays), AFTER (pays once the data stay ⌈k*⌉ calls); None: not measured."""
    if not isinstance(calls, int | float) or math.isnan(calls):
        return None
    if math.isinf(calls):
        return NEVER
    return EVERY_CALL if isinstance(high, int | float) and math.isfinite(high) and high <= 1 else AFTER


def calls_per_round_trip(h2d: Interval, d2h: Interval, numpy: Interval, compute: Interval) -> Calls:
    """k* of a GPU cell from its copies, its device-resident compute time and NumPy's time."""
    parts = (h2d, d2h, numpy, compute)
    if not all(math.isfinite(p.value) for p in parts):
        return NOT_MEASURED
    copies = h2d.value + d2h.value
    saving = numpy.value - compute.value
    if saving <= 0:
        return Calls(math.inf, math.inf, math.inf)

    def end(value: float) -> float:
        return value if math.isfinite(value) else math.nan

    copies_low, copies_high = end(h2d.low) + end(d2h.low), end(h2d.high) + end(d2h.high)
    saving_low, saving_high = end(numpy.low) - end(compute.high), end(numpy.high) - end(compute.low)
    low = copies_low / saving_high if saving_high > 0 else math.nan
    high = copies_high / saving_low if saving_low > 0 else (math.inf if math.isfinite(saving_low) else math.nan)
    return Calls(copies / saving, low, high)
