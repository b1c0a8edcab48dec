"""When a bout may end: the comparisons among its cells (which pairs the tables will judge)
and whether each is precise as the median over the bout's cycles; and how it hands out a
turn: once the other workers' thread pools are quiet."""

import random
import sys
import time

import pytest
from offloadbench import schedule
from offloadbench.cells import Cell
from offloadbench.compared import planned_comparisons
from offloadbench.jobs.bout import paired_cycles, precise_pairs


def cell(library="numpy", threads="1", mode="eager", device="cpu", twin=False):
    return Cell("fft2", library, device, "float32", 1024, threads, mode, twin)


def test_a_group_compares_each_variant_with_numpy_its_threads_and_its_twin():
    numpy1, numpy_all, torch1, torch_all = cell(), cell(threads="all"), cell("torch"), cell("torch", "all")
    compiled, gpu, twin = cell("torch", mode="compiled"), cell("torch", device="cuda"), cell(twin=True)
    pairs = set(planned_comparisons([numpy1, numpy_all, torch1, torch_all, compiled, gpu, twin]))
    assert pairs == {
        (torch1, numpy1), (torch_all, numpy_all), (compiled, numpy1), (gpu, numpy_all),  # speedups
        (numpy_all, numpy1), (torch_all, torch1),  # thread scaling
        (twin, numpy1),  # the self-comparison
    }


def turns_of(times_by_cycle):
    return {"compute": dict(enumerate(times_by_cycle))}


def test_a_pair_is_precise_once_the_median_ratio_over_cycles_is_within_the_target():
    rng = random.Random(1)
    a, b = cell("torch"), cell()
    drift = [1 + 0.3 * rng.random() for _ in range(12)]  # the machine's speed, common to both turns of a cycle
    steady = {a: turns_of([2e-3 * d for d in drift]), b: turns_of([4e-3 * d for d in drift])}
    assert precise_pairs(steady, [(a, b)], target=0.02)  # drift cancels in each cycle's ratio
    noisy = {a: turns_of([2e-3 * d * (1 + 0.2 * rng.random()) for d in drift]), b: steady[b]}
    assert not precise_pairs(noisy, [(a, b)], target=0.02)
    assert precise_pairs(noisy, [(a, b)], target=0.5)
    few = {a: turns_of([2e-3] * 4), b: turns_of([4e-3] * 4)}  # 4 cycles give no 95% CI of a median
    assert not precise_pairs(few, [(a, b)], target=0.5)


def test_a_gpu_cells_pair_is_judged_end_to_end_with_the_copies_as_the_decision_is():
    """Defect: the bout judged the regions both sides timed, which for a GPU cell against
    NumPy is the device-resident compute alone; the decision counts the copies."""
    rng = random.Random(2)
    gpu, numpy_all = cell("torch", device="cuda"), cell(threads="all")
    steady = dict(enumerate([1e-3] * 12))
    copies = dict(enumerate([5e-3 * (1 + 0.5 * rng.random()) for _ in range(12)]))  # a noisy link
    turns = {gpu: {"compute": steady, "h2d": copies, "end_to_end": copies},
             numpy_all: {"compute": dict(enumerate([2e-3] * 12))}}  # a CPU cell's compute is its end to end
    assert not precise_pairs(turns, [(gpu, numpy_all)], target=0.02)
    turns[gpu]["end_to_end"] = dict(enumerate([6e-3] * 12))
    assert precise_pairs(turns, [(gpu, numpy_all)], target=0.02)
    assert paired_cycles(turns, gpu, numpy_all)[0] == (6e-3, 2e-3)


def test_a_side_without_the_decided_region_makes_no_pair():
    a, b = cell("torch", device="cuda"), cell(threads="all")
    turns = {a: {"compute": dict(enumerate([1e-3] * 8)), "h2d": dict(enumerate([5e-4] * 8))},
             b: {"compute": dict(enumerate([2e-3] * 8))}}
    assert paired_cycles(turns, a, b) == [] and precise_pairs(turns, [(a, b)], target=0.01)


class Pools:
    """A fake clock that sleeping advances, and the CPU seconds of a pool spinning (one busy
    thread) until `stops`, counted only at the scheduler's tick (`tick_s`), as a busy-wait is."""

    def __init__(self, stops: float, tick_s: float = 0.004):
        self.now, self.stops, self.tick_s = 0.0, stops, tick_s

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def cpu_s(self) -> float:
        ticks = int(min(self.now, self.stops) / self.tick_s)
        return ticks * self.tick_s


def test_the_next_turn_waits_until_the_other_pools_stop_spinning_and_no_longer():
    for tick in (0.001, 0.004, 0.010):  # HZ = 1000, 250, 100
        pool = Pools(stops=0.135, tick_s=tick)  # OpenBLAS after a BLAS call, as measured on the 2-core VM
        waited, quiet = schedule.wait_until_quiet(pool.cpu_s, pool.sleep, pool.clock)
        assert quiet and 0.135 < waited <= 0.135 + tick + schedule.QUIET_STRETCH_S + 2 * schedule.QUIET_POLL_S, tick
    idle = Pools(stops=0.0)  # a pool that does not spin (NumPy after exp: no BLAS call)
    waited, quiet = schedule.wait_until_quiet(idle.cpu_s, idle.sleep, idle.clock)
    assert quiet and waited < schedule.QUIET_STRETCH_S + schedule.QUIET_POLL_S
    forever = Pools(stops=float("inf"))  # OMP_WAIT_POLICY=active: the cap ends the wait, and says so
    waited, quiet = schedule.wait_until_quiet(forever.cpu_s, forever.sleep, forever.clock)
    assert not quiet and schedule.QUIET_CAP_S <= waited < schedule.QUIET_CAP_S + schedule.QUIET_POLL_S + 1e-9
    assert schedule.wait_until_quiet(lambda: None, idle.sleep, idle.clock) is None  # cannot read: a fixed pause


def test_the_next_turn_waits_while_a_thread_of_the_other_pools_runs_and_no_longer():
    pool = Pools(stops=0.0135)  # torch's OpenMP threads spin 10-20 ms after a parallel call
    waited, still = schedule.wait_until_still(lambda: pool.now < pool.stops, pool.sleep, pool.clock)
    assert still and 0.0135 <= waited < 0.0135 + schedule.STILL_POLL_S + 1e-9
    assert schedule.wait_until_still(lambda: False, pool.sleep, pool.clock) == (0.0, True)  # asleep: no wait
    forever = Pools(stops=float("inf"))
    waited, still = schedule.wait_until_still(lambda: True, forever.sleep, forever.clock)
    assert not still and schedule.QUIET_CAP_S <= waited < schedule.QUIET_CAP_S + schedule.STILL_POLL_S + 1e-9
    assert schedule.wait_until_still(lambda: None, pool.sleep, pool.clock) is None  # no thread states: CPU time


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread states come from /proc")
def test_a_spinning_thread_reads_as_running_and_a_sleeping_one_not():
    import subprocess

    from offloadbench.measure.disturbance import processes_running

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    asleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        assert processes_running([asleep.pid]) is False
        assert any(processes_running([busy.pid]) for _ in range(20))  # it may wait for a core now and then
        assert processes_running([busy.pid, asleep.pid]) in (True, False)
        assert processes_running([2**22 + 12345]) is False  # a process gone runs nothing
    finally:
        busy.kill()
        asleep.kill()


def test_only_other_multi_threaded_workers_active_lately_are_waited_for():
    from offloadbench.cells import WorkerSpec

    one, numpy_all, torch_all = WorkerSpec("numpy", "cpu", "1"), WorkerSpec("numpy", "cpu", "2"), \
        WorkerSpec("torch", "cpu", "2")
    active = {one: 10.0, numpy_all: 10.0, torch_all: 10.0 - schedule.QUIET_CAP_S}
    assert schedule.may_spin(active, one, now=10.01) == [numpy_all]  # one thread never spins; torch long idle
    assert schedule.may_spin(active, numpy_all, now=10.01) == []  # its own pool is part of its turn


class FakeRound:
    """What a bout asks of its round for a hand-off: the pids of running workers (its pool's)."""

    def __init__(self, running: dict):
        self.running = running
        self.pool = self

    def pids(self, specs):
        return [self.running[spec] for spec in specs if spec in self.running]


def hand_off_bout(running: dict, active: dict, last=None):
    from offloadbench.cells import WorkerSpec
    from offloadbench.jobs.bout import Bout

    bout = Bout(FakeRound(running), [Cell("matmul", "numpy", "cpu", "float32", 64, "1")])
    bout.active, bout.last = dict(active), last
    return bout, WorkerSpec("numpy", "cpu", "1")


def test_a_hand_off_polls_the_spinning_workers_then_leaves_them_until_their_next_command(monkeypatch):
    import time

    from offloadbench.cells import WorkerSpec
    from offloadbench.jobs import bout as bout_module

    numpy_all, torch_all = WorkerSpec("numpy", "cpu", "2"), WorkerSpec("torch", "cpu", "2")
    polled = []
    readings = iter([True, True, True] + [False] * 20)  # a thread running (spinning), then none

    def running(pids):
        polled.append(tuple(pids))
        return next(readings)

    monkeypatch.setattr(bout_module, "processes_running", running)
    now = time.monotonic()
    bout, after = hand_off_bout({numpy_all: 101, torch_all: 102}, {numpy_all: now, torch_all: now})
    assert bout.hand_off(after, None) > 0
    assert set(polled) == {(101, 102)} and bout.active == {} and bout.result.still_spinning == 0
    polled.clear()
    assert bout.hand_off(after, None) == 0.0 and polled == []  # found quiet: not polled again


def test_a_hand_off_falls_back_to_the_pause_by_library_where_cpu_time_cannot_be_read(monkeypatch):
    import time

    from offloadbench.cells import WorkerSpec
    from offloadbench.jobs import bout as bout_module

    numpy_all = WorkerSpec("numpy", "cpu", "2")
    slept = []
    monkeypatch.setattr(bout_module, "processes_running", lambda pids: None)
    monkeypatch.setattr(bout_module, "processes_cpu_s", lambda pids: None)
    monkeypatch.setattr(bout_module.time, "sleep", slept.append)
    bout, after = hand_off_bout({numpy_all: 101}, {numpy_all: time.monotonic()}, last=numpy_all)
    assert bout.hand_off(after, None) == schedule.pause_s(numpy_all, after) and slept == [schedule.pause_s(numpy_all, after)]
    slept.clear()  # a pause the config sets: no polling at all
    monkeypatch.setattr(bout_module, "processes_cpu_s", lambda pids: pytest.fail("polled despite measure.pause_s"))
    assert bout.hand_off(after, 0.5) == 0.05 and slept == [0.05]
    gone, _ = hand_off_bout({}, {numpy_all: time.monotonic()}, last=numpy_all)  # its worker died: nothing to wait for
    assert gone.hand_off(after, None) == 0.0


def test_the_cpu_time_of_other_processes_is_read_while_they_run():
    import subprocess
    import sys

    from offloadbench.measure import disturbance

    busy = subprocess.Popen([sys.executable, "-c", "import sys\nfor _ in range(3_000_000): pass\nsys.stdin.read()"],
                            stdin=subprocess.PIPE)
    try:
        before = disturbance.processes_cpu_s([busy.pid])
        assert before is not None
        while busy.poll() is None and disturbance.processes_cpu_s([busy.pid]) == before:
            pass  # it runs its loop meanwhile
        assert disturbance.processes_cpu_s([busy.pid]) > before
    finally:
        busy.communicate(b"")
    assert disturbance.processes_cpu_s([busy.pid]) == 0.0  # a process gone counts nothing


def test_where_schedstat_cannot_be_read_the_reading_comes_from_psutil_not_as_quiet(monkeypatch, tmp_path):
    import os

    from offloadbench.measure import disturbance

    real = disturbance.Path
    monkeypatch.setattr(disturbance, "Path", lambda p: tmp_path / "task" if str(p).endswith("/task") else real(p))
    (tmp_path / "task" / "1").mkdir(parents=True)  # a thread whose schedstat is missing
    for _ in range(200_000):
        pass  # this process has used some CPU time for psutil to count
    assert disturbance.processes_cpu_s([os.getpid()]) > 0
