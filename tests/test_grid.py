
import pytest
from offloadbench import grid, layout, schedule
from offloadbench.cells import Cell

GRID = {
    "ops": ["matmul"],
    "libraries": ["numpy", "torch"],
    "devices": ["cpu", "cuda", "mps"],
    "dtypes": ["bfloat16", "float32", "float64"],
    "sizes": [128, 256],
    "threads": [1, "all"],
}


def test_impossible_combinations_are_dropped():
    cells = grid.expand(GRID)
    assert not any(c.library == "numpy" and c.device != "cpu" for c in cells)
    assert not any(c.library == "numpy" and c.dtype == "bfloat16" for c in cells)
    assert not any(c.device == "mps" and c.dtype == "float64" for c in cells)


def test_gpu_cells_are_measured_once_with_one_host_thread():
    gpu = [c for c in grid.expand(GRID) if c.is_gpu]
    assert {c.threads for c in gpu} == {"1"}
    assert len(gpu) == len(set(gpu)) == 6 + 4  # cuda: 3 dtypes x 2 sizes; mps: 2 dtypes x 2 sizes


def test_cpu_cells_cover_every_thread_label():
    cpu = [c for c in grid.expand(GRID) if c.device == "cpu"]
    assert {c.threads for c in cpu} == {"1", "all"}
    assert len(cpu) == 8 + 12  # numpy: 2 dtypes x 2 sizes x 2; torch: 3 dtypes x 2 sizes x 2


def test_duplicate_thread_counts_collapse():
    assert len(grid.expand({**GRID, "threads": [1, 1, "all"]})) == len(grid.expand(GRID))


def test_record_paths_follow_the_contract():
    cell = Cell("matmul", "numpy", "cpu", "float32", 128, "all")
    assert layout.record_relpath(cell, 2) == "matmul/numpy-cpu-float32-n128-tall/p2.json"


def test_a_cell_round_trips_through_its_name():
    cell = Cell("matmul", "torch", "cuda", "bfloat16", 4096, "1")
    assert Cell.from_stem("matmul", cell.stem) == cell
    assert Cell.from_key(cell.key) == cell
    with pytest.raises(ValueError, match="not a cell name"):
        Cell.from_stem("matmul", "numpy-cpu-float32-nBIG-t1")


def _groups(round_index, cells=None):
    return schedule.groups(cells or grid.expand({**GRID, "dtypes": ["float32", "float64"]}), round_index)


def test_a_round_measures_every_cell_once_in_the_bout_of_its_group():
    cells = grid.expand(GRID)
    for k in (1, 2, 3):
        bouts = _groups(k, cells)
        assert sorted(c for bout in bouts for c in bout) == sorted(cells)
        for bout in bouts:  # one op, dtype and size; every variant, device and thread count
            assert len({c.group for c in bout}) == 1 and len({c.worker for c in bout}) == len(bout)


def test_measured_separately_each_cell_is_a_bout_of_its_own_in_the_same_order():
    cells = grid.expand(GRID)
    together, apart = schedule.groups(cells, 2), schedule.groups(cells, 2, separate=True)
    assert all(len(bout) == 1 for bout in apart) and [b[0] for b in apart] == [c for b in together for c in b]


def test_the_groups_order_turns_from_round_to_round():
    first, second = [b[0].group for b in _groups(1)], [b[0].group for b in _groups(2)]
    assert sorted(first) == sorted(second) and second == first[1:] + first[:1]


def test_each_cycle_is_a_fresh_order_and_every_cell_goes_first_equally_often():
    cells = [c for c in grid.expand(GRID) if c.group == ("matmul", "float32", 256)]
    cycles = schedule.Cycles(cells, schedule.generator(1, "matmul-float32-n256"))
    orders = [cycles.next() for _ in range(3 * len(cells))]
    assert all(sorted(order) == sorted(cells) for order in orders)
    firsts = [order[0] for order in orders]
    assert all(firsts.count(cell) == 3 for cell in cells)
    assert len({tuple(order) for order in orders}) > len(cells)  # not one order over and over
    again = schedule.Cycles(cells, schedule.generator(1, "matmul-float32-n256"))
    assert [again.next() for _ in range(3 * len(cells))] == orders  # a rerun takes the same turns
    cycles.drop(cells[0])
    assert all(cells[0] not in cycles.next() for _ in range(4))


def test_a_pause_follows_a_multi_threaded_worker_long_enough_for_its_pool_to_spin_down():
    from offloadbench.cells import WorkerSpec

    one, numpy_all = WorkerSpec("numpy", "cpu", "1"), WorkerSpec("numpy", "cpu", "4")
    torch_all, compiled_all = WorkerSpec("torch", "cpu", "4"), WorkerSpec("numpy", "cpu", "4", "compiled")
    assert schedule.pause_s(None, numpy_all) == 0 and schedule.pause_s(one, numpy_all) == 0
    assert schedule.pause_s(numpy_all, torch_all) == schedule.SPIN_S["numpy"]  # OpenBLAS spins longest
    assert schedule.pause_s(torch_all, numpy_all) == schedule.pause_s(compiled_all, numpy_all) == \
        schedule.SPIN_S["torch"]
    assert schedule.pause_s(numpy_all, one) == schedule.SPIN_S["numpy"] * schedule.SHORT_PAUSE_SHARE
    assert schedule.pause_s(numpy_all, numpy_all) == 0  # the same worker: nothing to wait for
    assert schedule.pause_s(torch_all, one, configured=0.5) == 0.05


class FakeClock:
    """A clock that sleeping advances, and the CPU seconds of a pool that spins until `stops`."""

    def __init__(self, stops: float):
        self.now, self.stops, self.cpu = 0.0, stops, 0.0

    def sleep(self, seconds: float) -> None:
        spinning = max(0.0, min(self.now + seconds, self.stops) - self.now)
        self.cpu += spinning  # one thread busy while it spins
        self.now += seconds

    def cpu_s(self) -> float:
        return self.cpu


def test_the_next_turn_waits_until_the_other_pools_stop_spinning_and_no_longer():
    pool = FakeClock(stops=0.135)  # OpenBLAS after a BLAS call, as measured on the 2-core VM
    waited = schedule.wait_until_quiet(pool.cpu_s, pool.sleep, lambda: pool.now)
    assert 0.135 < waited <= 0.135 + 3 * schedule.QUIET_POLL_S  # two quiet polls after the spinning ends
    idle = FakeClock(stops=0.0)  # a pool that does not spin (NumPy after exp: no BLAS call)
    assert schedule.wait_until_quiet(idle.cpu_s, idle.sleep, lambda: idle.now) == 2 * schedule.QUIET_POLL_S
    forever = FakeClock(stops=float("inf"))  # OMP_WAIT_POLICY=active: the cap ends the wait
    waited = schedule.wait_until_quiet(forever.cpu_s, forever.sleep, lambda: forever.now)
    assert schedule.QUIET_CAP_S <= waited < schedule.QUIET_CAP_S + schedule.QUIET_POLL_S + 1e-9
    assert schedule.wait_until_quiet(lambda: None, idle.sleep, lambda: idle.now) is None  # cannot read: a fixed pause


def test_only_other_multi_threaded_workers_active_lately_are_waited_for():
    from offloadbench.cells import WorkerSpec

    one, numpy_all, torch_all = WorkerSpec("numpy", "cpu", "1"), WorkerSpec("numpy", "cpu", "2"), \
        WorkerSpec("torch", "cpu", "2")
    active = {one: 10.0, numpy_all: 10.0, torch_all: 10.0 - schedule.QUIET_CAP_S}
    assert schedule.may_spin(active, one, now=10.01) == [numpy_all]  # one thread never spins; torch long idle
    assert schedule.may_spin(active, numpy_all, now=10.01) == []  # its own pool is part of its turn


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


def test_twins_take_their_groups_numpy_cell_at_the_thread_counts_in_turn():
    cells = grid.expand({**GRID, "controls": "all"})
    twins = [c for c in cells if c.twin]
    groups = {c.group for c in cells}
    assert len(twins) == len(groups) and all(t.device == "cpu" for t in twins)
    # NumPy where the group has it; NumPy has no bfloat16, so there torch takes its place
    assert all((t.library == "numpy") == (t.dtype != "bfloat16") for t in twins)
    assert {t.threads for t in twins} == {"1", "all"}
    assert all(t.worker.twin and t.worker != t.original.worker for t in twins)