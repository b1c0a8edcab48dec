import math
import time

import numpy as np
import pytest
from offloadbench.measure.diagnostics import flags_for_samples
from offloadbench.measure.timing import (
    COPY_PREROLL_MAX_S,
    COPY_REGIONS,
    PREROLL_MAX_S,
    PREROLL_S,
    BlockRule,
    Region,
    StopRule,
    Warmup,
    WarmupRule,
    choose_calls_per_sample,
    measure_region,
    rewarm,
    sample_region,
    warm_up,
)


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def timed(region: Region, warmup: WarmupRule, stop: StopRule):
    """Measure a region; also the wall time around it, which its samples cannot exceed."""
    start = time.perf_counter()
    measured = measure_region(region, BlockRule(), warmup, stop)
    return measured, time.perf_counter() - start


def test_timer_reads_a_known_busy_loop():
    measured, wall = timed(Region("busy", lambda: busy_wait(2e-3)), WarmupRule(budget_s=0.2),
                           StopRule(budget_s=0.5, min_samples=10))
    # The loop can only overrun (preemption), never finish early; and no time is invented.
    assert min(measured.samples_s) >= 2e-3
    assert sum(measured.samples_s) * measured.calls_per_sample <= wall


def test_timer_reads_a_known_sleep():
    measured, wall = timed(Region("sleep", lambda: time.sleep(5e-3)), WarmupRule(budget_s=0.05),
                           StopRule(budget_s=0.3, min_samples=8, target_rel_ci=0.5))
    assert min(measured.samples_s) >= 5e-3
    assert sum(measured.samples_s) * measured.calls_per_sample <= wall


def test_synchronisation_is_inside_the_timed_region():
    calls = []
    region = Region("sync", lambda: calls.append("fn"), sync=lambda: calls.append("sync"))
    region.time_block(3)
    assert calls == ["sync", "fn", "fn", "fn", "sync"]


def test_warm_up_absorbs_first_call_costs():
    state = {"first": True}

    def lazy_init_then_fast():
        if state["first"]:
            state["first"] = False
            busy_wait(30e-3)  # e.g. a CUDA context or cuBLAS handle
        busy_wait(1e-3)

    measured = measure_region(Region("lazy", lazy_init_then_fast), BlockRule(), WarmupRule(budget_s=0.5),
                              StopRule(budget_s=0.3))
    assert measured.warmup.first_call_s >= 30e-3
    assert min(measured.samples_s) >= 1e-3
    assert np.median(measured.samples_s) < measured.warmup.first_call_s  # the first call is not a sample


def test_fast_calls_are_batched_so_the_timer_cost_is_negligible():
    assert choose_calls_per_sample(1e-6, overhead_s=1e-7, rule=BlockRule(min_sample_s=1e-4)) == 100
    # Timer overhead dominates: blocks grow until it is below 0.1%.
    assert choose_calls_per_sample(1e-5, overhead_s=1e-5, rule=BlockRule(min_sample_s=1e-4)) == 1000
    assert choose_calls_per_sample(2.0, overhead_s=1e-7) == 1


class ScriptedRegion:
    """A region whose samples come from a list: tests the stopping rule without a clock."""

    def __init__(self, values, name="scripted", pages=None):
        self.name = name
        self._values = iter(values)
        self._pages = iter(pages) if pages is not None else None

    def time_block(self, calls):
        return next(self._values)

    def sample(self, calls):
        from offloadbench.measure.timing import Sample

        return Sample(self.time_block(calls), next(self._pages) if self._pages is not None else None)


def sample(region, rule, now):
    """Sample a scripted region (one call per sample)."""
    return sample_region(region, Warmup(1.0, (), 1), rule, now=now)


class FakeClock:
    def __init__(self, step):
        self.t, self.step = 0.0, step

    def __call__(self):
        self.t += self.step
        return self.t


def test_stable_stream_stops_on_the_ci():
    rng = np.random.default_rng(0)
    m = sample(ScriptedRegion(1e-3 * np.exp(rng.normal(0, 0.01, 10_000))),
               rule=StopRule(target_rel_ci=0.02, min_samples=10, budget_s=100), now=FakeClock(0.001))
    assert m.stop_reason == "ci"
    assert m.converged and m.rel_ci <= 0.02
    assert len(m.samples_s) < 100


def test_noisy_stream_hits_the_budget_and_is_flagged():
    rng = np.random.default_rng(1)
    rule = StopRule(target_rel_ci=0.01, min_samples=10, budget_s=1.0)
    m = sample(ScriptedRegion(1e-3 * np.exp(rng.normal(0, 0.6, 10_000))), rule=rule, now=FakeClock(0.05))
    assert m.stop_reason == "budget"
    assert not m.converged
    flags = flags_for_samples(m.samples_s, m.stop_reason, m.rel_ci, rule.target_rel_ci)
    (flag,) = [f for f in flags if f.kind == "not_converged"]
    assert flag.region == "compute" and flag.size == m.rel_ci > rule.target_rel_ci


def test_bimodal_stream_is_flagged():
    rng = np.random.default_rng(2)
    values = np.where(rng.random(10_000) < 0.5, 1e-3, 1.4e-3) * np.exp(rng.normal(0, 0.005, 10_000))
    rule = StopRule(target_rel_ci=0.02, min_samples=40, budget_s=100)
    m = sample(ScriptedRegion(values), rule=rule, now=FakeClock(0.001))
    flags = flags_for_samples(m.samples_s, m.stop_reason, m.rel_ci, rule.target_rel_ci)
    (flag,) = [f for f in flags if f.kind == "bimodal"]
    assert flag.size == pytest.approx(0.4, abs=0.03)  # the modes lie 40% apart


def test_drifting_stream_is_flagged():
    values = [1e-3] * 30 + [1.2e-3] * 30
    flags = flags_for_samples(values, "ci", 0.01, 0.02, region="end_to_end")
    (flag,) = [f for f in flags if f.kind == "drift"]
    assert (flag.region, round(flag.size, 3)) == ("end_to_end", 0.2)
    assert flag.text.startswith("end_to_end: drift: second half 20.0% slower")


def test_unimodal_noise_is_not_flagged():
    rng = np.random.default_rng(3)
    values = list(1e-3 * np.exp(rng.normal(0, 0.05, 400)))
    assert flags_for_samples(values, "ci", 0.005, 0.02) == []


def test_at_least_the_floor_of_samples_is_taken_past_the_budget():
    m = sample(ScriptedRegion([1.0] * 100), rule=StopRule(budget_s=0.0, floor_samples=6, min_samples=10),
               now=FakeClock(10))
    assert len(m.samples_s) == 6
    assert m.stop_reason == "budget"
    assert math.isfinite(m.rel_ci)


@pytest.mark.parametrize("max_samples", [7, 12])
def test_max_samples_caps_the_count(max_samples):
    rng = np.random.default_rng(4)
    rule = StopRule(min_samples=6, max_samples=max_samples, budget_s=100, target_rel_ci=1e-6)
    m = sample(ScriptedRegion(np.exp(rng.normal(0, 1, 100))), rule=rule, now=FakeClock(0.001))
    assert m.stop_reason == "max_samples"
    assert len(m.samples_s) == max_samples


def test_cheap_regions_sample_long_enough_for_the_noise_checks():
    m = sample(ScriptedRegion([1e-3] * 1000), rule=StopRule(min_samples=6, min_sampling_s=0.05, budget_s=100),
               now=FakeClock(0.0005))
    # Each sample spends 0.0005 s on the fake clock: 0.05 s takes 100 samples.
    assert len(m.samples_s) >= 100
    assert m.converged


def test_a_slow_first_call_that_agrees_with_the_next_ends_warm_up_early():
    class SlowRegion(ScriptedRegion):
        def timer_overhead_s(self):
            return 1e-6

    warmup = warm_up(SlowRegion([20e-3, 20.2e-3, 30e-3, 30e-3]), BlockRule(), WarmupRule(budget_s=1.0))
    assert warmup.calls_per_sample == 1
    assert warmup.blocks_s == (20e-3, 20.2e-3)  # the first call counts as a block when it is warm


def test_warm_up_goes_on_while_the_calls_still_map_fresh_pages():
    """A process's heap grows over its first calls: a block as fast as the best, but mapping
    4,096 fresh pages per call where the one before mapped none, is no settled block."""
    class Growing(ScriptedRegion):
        def timer_overhead_s(self):
            return 1e-6

    times = [20e-3, 20.1e-3, 20.0e-3, 20.1e-3, 20.0e-3]
    warmup = warm_up(Growing(times, pages=[0, 4096, 4096, 0, 0]), BlockRule(), WarmupRule(budget_s=1.0))
    assert len(warmup.blocks_s) == 4  # 4,096 after a block of none is no settled block; none again is
    steady = warm_up(Growing(times, pages=[4100, 4100, 4100]), BlockRule(), WarmupRule(budget_s=1.0))
    assert len(steady.blocks_s) == 2  # a call that maps its pages every time is settled at its count


GROWING = """
import sys, time
from offloadbench.measure.timing import BlockRule, Region, WarmupRule, warm_up
kept = []
def call():
    if len(kept) < 12:
        kept.append(bytearray(2 * 2**20))  # below the steady mmap threshold: from the heap, and kept
    time.sleep(0.002)
warm_up(Region("grows", call), BlockRule(min_sample_s=1e-3), WarmupRule(budget_s=0.005, growing_budget_s=float(sys.argv[1])))
print(len(kept))
"""


@pytest.mark.parametrize("cap, calls", [(5.0, 12), (0.005, 3)])
def test_warm_up_goes_on_past_its_budget_while_the_calls_grow_the_heap(cap, calls):
    """torch's outputs took fresh heap for each of their first calls (1,024 fresh pages a
    call for a 1024² matmul, a quarter slower); a program calling the function for real
    runs past that, so the warm-up does, up to its cap for growing heaps."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from offloadbench.measure.allocator import STEADY, allocator_env, heap_bytes

    if heap_bytes() is None:
        pytest.skip("no glibc mallinfo2 here to see the heap")
    workflow = str(Path(__file__).resolve().parents[2] / "workflow")
    done = subprocess.run([sys.executable, "-c", GROWING, str(cap)], capture_output=True, text=True, check=True,
                          env={**os.environ, **allocator_env(STEADY), "PYTHONPATH": workflow}, timeout=120)
    kept = int(done.stdout.strip())
    assert kept == calls if cap > 1 else kept <= calls  # past the budget until it stops growing; the cap holds


class ClockedRegion(ScriptedRegion):
    """A scripted region whose blocks move a fake clock on by the time they report."""

    def __init__(self, values, name="scripted"):
        super().__init__(values, name)
        self.now, self.blocks = 0.0, 0

    def time_block(self, calls):
        self.blocks += 1
        seconds = super().time_block(calls)
        self.now += seconds
        return seconds


@pytest.mark.parametrize("times, blocks", [
    ([9e-3, 7.5e-3, 6.2e-3, 6e-3], 3),  # back within 5% of the best (6 ms) on the third call
    ([10e-3] * 20, math.ceil(PREROLL_MAX_S / 10e-3)),  # never back: the cap ends it
    ([0.1e-3] * 100, math.ceil(PREROLL_S / 0.1e-3)),  # warm at once, yet at least PREROLL_S of calls
])
def test_a_turn_rewarms_until_a_block_is_back_near_the_best(times, blocks):
    region = ClockedRegion(times)
    spent = rewarm(region, 1, min(times[-1], 6e-3), 0.05, now=lambda: region.now)
    assert region.blocks == blocks
    assert spent == pytest.approx(sum(times[:blocks]))


def test_a_call_as_long_as_the_cap_gets_no_rewarm():
    region = ClockedRegion([PREROLL_MAX_S * 2] * 3)
    assert rewarm(region, 1, PREROLL_MAX_S * 1.5, 0.05, now=lambda: region.now) == 0.0
    assert region.blocks == 0


def test_a_rewarm_never_begins_a_block_past_its_cap_nor_runs_on_with_a_stalled_clock():
    region = ClockedRegion([PREROLL_MAX_S * 0.45] * 10)  # a third block would end past the cap
    assert rewarm(region, 1, PREROLL_MAX_S * 0.3, 0.05, now=lambda: region.now) <= PREROLL_MAX_S
    assert region.blocks == 2
    stalled = ClockedRegion([10e-3] * 100)  # no block comes back near the best, and the clock never moves
    rewarm(stalled, 1, 6e-3, 0.05, now=lambda: 0.0)
    assert stalled.blocks == math.ceil(PREROLL_MAX_S / 6e-3)


@pytest.mark.parametrize("region", COPY_REGIONS)
def test_a_copy_regions_pre_roll_stops_at_its_own_cap_though_no_block_comes_back_near_the_best(region):
    """Pageable copies rarely come within 5% of their best block: under the general cap their
    pre-roll ran 150 ms on every turn of every GPU cell, and a copy has no cache to refill."""
    copies = ClockedRegion([1.2e-3] * 1000, name=region)  # 20% over the best, always
    spent = rewarm(copies, 1, 1e-3, 0.05, now=lambda: copies.now)
    assert spent <= COPY_PREROLL_MAX_S < PREROLL_MAX_S / 10
    assert copies.blocks == int(COPY_PREROLL_MAX_S // 1.2e-3)
    compute = ClockedRegion([1.2e-3] * 1000, name="compute")  # a compute region keeps the general cap
    assert rewarm(compute, 1, 1e-3, 0.05, now=lambda: compute.now) > COPY_PREROLL_MAX_S


def test_a_region_waits_for_its_best_block_so_far_and_records_each_turns_pre_roll():
    from offloadbench.measure.cell import RegionState

    region = ClockedRegion([9e-3, 5e-3, 5e-3, 5.1e-3, 5.2e-3])
    state = RegionState(region, Warmup(30e-3, (30e-3, 8e-3), 1))
    assert state.best_s == 8e-3  # the warm-up's best block
    state.take(1e-9, 0, 100, 0.05, now=lambda: region.now)  # 9 ms is no steady block, 5 ms is; then a sample
    assert state.samples == [5e-3] and state.best_s == 5e-3 and state.preroll_s == [pytest.approx(14e-3)]
    state.take(1e-9, 1, 100, 0.05, now=lambda: region.now)  # 5.1 ms is within 5% of the sample's 5 ms
    assert state.preroll_s[1] == pytest.approx(5.1e-3) and state.samples[-1] == 5.2e-3
    assert state.phase_fields(StopRule())["preroll_s"] == state.preroll_s
