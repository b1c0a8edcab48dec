"""What compiling costs: a compiled cell's compile time with its CI, and the calls needed to
amortize it against the baseline.

A compiled cell is compiled once in every process that measures it (its first call, never
a sample); the processes that compiled with an empty cache (a run's first round; later
rounds reuse its cache) give one compile time each: their geometric mean with a Student's
t interval on the logs (none with one such process). The calls to amortize the compile are compile time ÷
(baseline time − compiled time): the number of calls after which the compiled code has
paid its compile back. Its interval combines the ends of the compile time's interval and
of the per-call saving's (from the baseline's time and the speedup's CI), so it covers at
least the confidence asked for; where the saving's interval reaches zero the upper end is
infinite (never).
"""

from __future__ import annotations

import math

from ..stats import NO_INTERVAL, Interval, log_t_interval
from .measured import MeasuredCell
from .round_trip import Calls


def compile_interval(mc: MeasuredCell, confidence: float) -> Interval:
    """The compile phase (first call of the device-resident code) over the cell's processes
    whose compile found nothing in its cache: a run's first round compiles cold, its later
    rounds reuse that round's cache, and a program's first compile is the cold one."""
    compiled = [r.compile for r in mc.ok if r.compile and (r.compile.first_call_s or 0) > 0]
    cold = [c for c in compiled if c.cache_hits == 0] or compiled
    times = [c.first_call_s for c in cold]
    return log_t_interval(times, confidence) if times else NO_INTERVAL


def amortization(compile_time: Interval, baseline: Interval, speedup: Interval) -> Calls:
    """Calls after which a compiled cell has paid its compile back against the baseline;
    infinitely many (never) when it is not faster."""
    if not (math.isfinite(compile_time.value) and math.isfinite(speedup.value)) or speedup.value <= 1:
        return Calls(math.inf, math.inf, math.inf)

    def saving(base: float, ratio: float) -> float:
        return base * (1 - 1 / ratio) if math.isfinite(ratio) and ratio > 0 else math.nan

    calls = compile_time.value / saving(baseline.value, speedup.value)
    high_saving = saving(baseline.high, speedup.high)
    low_saving = saving(baseline.low, speedup.low)
    low = compile_time.low / high_saving if math.isfinite(high_saving) and high_saving > 0 else math.nan
    high = compile_time.high / low_saving if math.isfinite(low_saving) and low_saving > 0 else math.inf
    return Calls(calls, low, high)
