
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
    openblas, openmp = schedule.spin_s(numpy_all), schedule.spin_s(torch_all)
    assert openblas > openmp > 0  # OpenBLAS spins longest
    assert schedule.pause_s(numpy_all, torch_all) == openblas
    # compiled NumPy runs in torch's OpenMP pool, not NumPy's
    assert schedule.pause_s(torch_all, numpy_all) == schedule.pause_s(compiled_all, numpy_all) == openmp
    assert schedule.pause_s(numpy_all, one) == openblas * schedule.SHORT_PAUSE_SHARE
    assert schedule.pause_s(numpy_all, numpy_all) == 0  # the same worker: nothing to wait for
    assert schedule.pause_s(torch_all, one, configured=0.5) == 0.05


def test_twins_take_their_groups_numpy_cell_at_the_thread_counts_in_turn():
    cells = grid.expand({**GRID, "controls": "all"})
    twins = [c for c in cells if c.twin]
    groups = {c.group for c in cells}
    assert len(twins) == 2 * len(groups) and all(t.device == "cpu" for t in twins)  # one per thread count
    # NumPy where the group has it; NumPy has no bfloat16, so there torch takes its place
    assert all((t.library == "numpy") == (t.dtype != "bfloat16") for t in twins)
    assert {t.threads for t in twins} == {"1", "all"}
    assert all(t.worker.twin and t.worker != t.original.worker for t in twins)