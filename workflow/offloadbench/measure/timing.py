"""How one region is timed: blocks of calls, warm-up until stable, adaptive sampling.

As in torch.utils.benchmark, what to time (`Region`: a callable and how to wait for the
device) is separate from what timing found (`Measurement`: immutable samples and their
stopping decision). The timer only knows callables and a synchronise function, so it is
tested on synthetic workloads and reused for every phase (host->device copy, compute,
device->host copy, end to end) and for the copy sweep.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..stats import median_ci_rel_halfwidth
from .allocator import heap_bytes

try:
    import resource
except ImportError:  # Windows
    resource = None


@dataclass(frozen=True)
class StopRule:
    """When a region's sampling ends: its median's 95% CI is tight enough, or its time
    budget or sample cap runs out."""

    target_rel_ci: float = 0.02
    min_samples: int = 6  # fewer give no 95% CI of a median
    min_sampling_s: float = 0.05  # cheap regions sample at least this long, for the noise checks
    floor_samples: int = 6  # taken even past the budget
    max_samples: int = 2000
    budget_s: float = 2.0  # per timed region
    confidence: float = 0.95

    def reason(self, samples: int, spent_s: float, converged: bool) -> str | None:
        """Why a region with `samples` taken in `spent_s` could stop: its CI (`converged`),
        the sample cap, or its budget; None: go on."""
        if converged:
            return "ci"
        if samples >= self.max_samples:
            return "max_samples"
        if samples >= self.floor_samples and spent_s >= self.budget_s:
            return "budget"
        return None


# Another worker's turn leaves this one's caches, TLB and thread pool cold: the first call of a
# turn ran 10-25% slower here (a 12 ms matmul on two threads), and a call whose data fills
# the cache needs several: torch's transcendental op at n = 2048 (80 MB) ran 7.4 ms one call
# after a switch, 6.6 ms three calls after, 5.7 ms in long turns. So a turn starts with
# untimed blocks (`rewarm`) until one runs within the warm-up's tolerance of the region's
# best time so far, for at least PREROLL_S and at most PREROLL_MAX_S; a call as long as the cap
# gets none, as it refills what it needs within a small part of itself. The cap is long
# enough for a memory-bound call of tens of ms: torch's heat_step at n = 2048 (15 ms a call
# alone) needed 50-140 ms of calls after a switch; under a 50 ms cap its pipeline median was
# 20.6 ms, under this one 15.0 ms.
PREROLL_S = 0.002
PREROLL_MAX_S = 0.15
# A copy to or from a GPU has no cache to refill, and a pageable one rarely comes within 5% of
# its best block (the driver stages it through bounce buffers, differently each time): under
# the general cap its pre-roll ran the whole 150 ms on every turn, for nothing.
COPY_REGIONS = ("h2d", "d2h")
COPY_PREROLL_MAX_S = 0.01


def preroll_cap(region: str) -> float:
    """The most seconds a turn's pre-roll of `region` runs."""
    return COPY_PREROLL_MAX_S if region in COPY_REGIONS else PREROLL_MAX_S

HEAP_GROWTH_BYTES = 64 * 1024  # a block that grows the C heap by less is the interpreter's own small objects


@dataclass(frozen=True)
class WarmupRule:
    """Warm-up ends once the time per call has settled: a block within `rel_tol` of the
    best block before it, either way (the time no longer falls, and the block is no
    passing slow one), that maps no more fresh pages than the fewest before it
    (`pages_settled`) and did not grow the heap; or at `max_blocks`, or at its budget, a
    cap. While the calls still grow the heap, the cap is `growing_budget_s`: a program
    that calls the function for real runs past its heap's growth."""

    rel_tol: float = 0.05
    min_blocks: int = 2
    max_blocks: int = 50
    budget_s: float = 1.0
    growing_budget_s: float = 3.0


@dataclass(frozen=True)
class BlockRule:
    """How many calls make one sample: enough that the timer's own cost is negligible."""

    min_sample_s: float = 1e-3
    max_overhead_frac: float = 1e-3
    max_calls: int = 1_000_000


def minor_faults() -> int | None:
    """Minor page faults of this process so far (all threads): each one a fresh page the
    kernel mapped and zeroed, about a microsecond each. None where getrusage is missing."""
    if resource is None:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@dataclass(frozen=True)
class Sample:
    """One timed block: seconds per call, and fresh pages mapped per call (None: not counted)."""

    seconds: float
    faults_per_call: float | None = None


@dataclass(frozen=True)
class Region:
    """What to time: a callable, how to wait for its device, and the clock; `restore`, for
    a call that changes its own inputs (a kernel that updates its arguments), puts them back
    before each call, outside the clock, so that every call sees the inputs of the first."""

    name: str
    fn: Callable[[], object]
    sync: Callable[[], object] = lambda: None  # a CPU's work is done when the call returns
    clock: Callable[[], int] = time.perf_counter_ns
    restore: Callable[[], object] | None = None

    @property
    def per_call(self) -> bool:
        """Whether each call is timed on its own (its inputs restored between calls), not
        a block of calls back to back."""
        return self.restore is not None

    def time_block(self, calls: int) -> float:
        """Mean seconds per call over `calls` back-to-back calls, device work included; with
        `restore`, each call timed alone after its inputs are put back, and the times summed."""
        if self.restore is not None:
            return self._time_each(calls)
        fn, sync, clock = self.fn, self.sync, self.clock
        sync()
        start = clock()
        for _ in range(calls):
            fn()
        sync()
        return (clock() - start) / calls / 1e9

    def _time_each(self, calls: int) -> float:
        fn, sync, clock, restore = self.fn, self.sync, self.clock, self.restore
        total = 0
        for _ in range(calls):
            restore()
            sync()
            start = clock()
            fn()
            sync()
            total += clock() - start
        return total / calls / 1e9

    def sample(self, calls: int) -> Sample:
        """One sample: `time_block`, with the minor page faults of its calls counted around
        it (outside the clock reads), per call."""
        before = minor_faults()
        seconds = self.time_block(calls)
        after = minor_faults()
        return Sample(seconds, (after - before) / calls if before is not None and after is not None else None)

    def timer_overhead_s(self, repeats: int = 7) -> float:
        """Cost of an empty timed block (clock reads plus two synchronisations)."""
        sync, clock = self.sync, self.clock
        costs = []
        for _ in range(repeats):
            sync()
            start = clock()
            sync()
            costs.append((clock() - start) / 1e9)
        return sorted(costs)[len(costs) // 2]


@dataclass(frozen=True)
class Warmup:
    """What warm-up found: the cold first call, the blocks run, and the block size."""

    first_call_s: float
    blocks_s: tuple[float, ...]
    calls_per_sample: int


@dataclass(frozen=True)
class Measurement:
    """A region's samples (seconds per call, in the order taken) and how sampling ended."""

    samples_s: tuple[float, ...]
    calls_per_sample: int
    warmup: Warmup
    rel_ci: float
    converged: bool
    stop_reason: str  # "ci" | "budget" | "max_samples"


def choose_calls_per_sample(call_s: float, overhead_s: float, rule: BlockRule = BlockRule()) -> int:
    """Calls per sample so that a sample lasts min_sample_s and overhead stays below its share."""
    if call_s <= 0:
        return rule.max_calls
    wanted_s = max(rule.min_sample_s, overhead_s / rule.max_overhead_frac)
    calls = math.ceil(wanted_s / call_s * (1 - 1e-9))  # no extra call from rounding noise
    return int(min(rule.max_calls, max(1, calls)))


def warm_up(region: Region, block: BlockRule, rule: WarmupRule) -> Warmup:
    """Pay first-call costs, size the blocks, then run blocks until the time per call has
    settled (`settled`)."""
    first = region.sample(1)
    first_call = first.seconds
    overhead = region.timer_overhead_s()
    calls = choose_calls_per_sample(first_call, overhead, block)
    # A slow call is its own block: if the next call agrees with the first, neither was cold.
    first_is_block = calls == 1
    blocks = [first_call] if first_is_block else []
    pages = [first.faults_per_call] if first_is_block else []
    began = time.perf_counter()
    heaps = [heap_bytes()]
    while len(blocks) < rule.max_blocks:
        taken = region.sample(calls)
        heaps.append(heap_bytes())
        blocks.append(taken.seconds)
        pages.append(taken.faults_per_call)
        grew = heap_growing(heaps)
        if len(blocks) >= rule.min_blocks and not grew and settled(blocks, rule.rel_tol) and pages_settled(pages):
            break
        if time.perf_counter() - began > (rule.growing_budget_s if grew else rule.budget_s):
            break
    recorded = blocks if first_is_block else [first_call, *blocks]
    # Re-size once from warm numbers: the cold estimate may have been far off.
    return Warmup(first_call, tuple(recorded), choose_calls_per_sample(min(blocks), overhead, block))


def heap_growing(heaps: Sequence[int | None], blocks: int = 3) -> bool:
    """Whether the C heap grew over the last `blocks` blocks (by at least HEAP_GROWTH_BYTES):
    glibc takes more from the system only once the slack above its top is used up, so a
    call that keeps memory may grow it every second or third block."""
    recent = heaps[-(blocks + 1):]
    return len(recent) >= 2 and None not in recent and recent[-1] >= recent[0] + HEAP_GROWTH_BYTES


def pages_settled(pages: Sequence[float | None]) -> bool:
    """Whether the newest block maps no more fresh pages per call than the fewest block
    before it (a page or a twentieth more at most): a process's heap grows over its first
    calls, each mapping some of its temporaries afresh (a 2048² float32 op of torch: 4,096
    to 12,288 pages in its first calls, then none), a few percent of the time that a
    timing within 5% does not see. A call that maps fresh pages every time is settled at
    its count. True where pages are not counted."""
    if len(pages) < 2 or pages[-1] is None or any(p is None for p in pages[:-1]):
        return True
    fewest = min(pages[:-1])
    return pages[-1] <= fewest + max(1.0, 0.05 * fewest)


def settled(blocks: Sequence[float], rel_tol: float) -> bool:
    """Whether the newest block shows the time per call settled: within `rel_tol` of the
    best block before it, either way."""
    if len(blocks) < 2:
        return False
    best = min(blocks[:-1])
    return (1 - rel_tol) * best <= blocks[-1] <= (1 + rel_tol) * best


def rewarm(region: Region, calls: int, best_s: float, rel_tol: float,
           now: Callable[[], float] = time.perf_counter) -> float:
    """A turn's untimed pre-roll: blocks of `calls` calls until one runs within `rel_tol` of
    `best_s` (the region's best seconds per call so far), after at least PREROLL_S, and no
    block begun that would end past the region's cap (preroll_cap); the seconds it took (0:
    none, for blocks as long as the cap)."""
    cap = preroll_cap(region.name)
    if best_s * calls >= cap:
        return 0.0
    began, spent = now(), 0.0
    for _ in range(math.ceil(cap / max(best_s * calls, 1e-6))):  # bounded if the clock stalls
        seconds = region.time_block(calls)
        spent = now() - began
        if spent >= PREROLL_S and seconds <= (1 + rel_tol) * best_s:
            break
        if spent + seconds * calls > cap:  # the next block would pass the cap
            break
    return spent


@contextlib.contextmanager
def collector_off():
    """The garbage collector off while sampling, and no gc.collect() either: with torch
    loaded it costs ~70 ms per cell for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def sample_region(region: Region, warmup: Warmup, rule: StopRule,
                  now: Callable[[], float] = time.perf_counter) -> Measurement:
    """Sample a warmed-up region until its median's CI meets the target, or its time budget
    (after the floor of samples) or the sample cap ends it. The garbage collector is off
    while sampling."""
    samples: list[float] = []
    calls, spent, rel_ci, converged = warmup.calls_per_sample, 0.0, math.inf, False
    with collector_off():
        while (reason := rule.reason(len(samples), spent, converged)) is None:
            began = now()
            samples.append(region.time_block(calls))
            spent += now() - began
            n = len(samples)
            # The CI costs a sort; past 50 samples, every 5th sample is often enough.
            if n >= rule.min_samples and spent >= rule.min_sampling_s and (n < 50 or n % 5 == 0):
                rel_ci = median_ci_rel_halfwidth(samples, rule.confidence)
                converged = rel_ci <= rule.target_rel_ci
    if len(samples) >= 2:
        rel_ci = median_ci_rel_halfwidth(samples, rule.confidence)
        # Tight enough is tight enough, even when few samples fit the budget.
        converged = rel_ci <= rule.target_rel_ci
    return Measurement(tuple(samples), calls, warmup, rel_ci, converged, reason)


def measure_region(region: Region, block: BlockRule, warmup: WarmupRule, stop: StopRule) -> Measurement:
    """Warm one region up and sample it."""
    return sample_region(region, warm_up(region, block, warmup), stop)
