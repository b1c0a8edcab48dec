
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


def _plan(round_index, cells=None):
    return schedule.round_plan(cells or grid.expand({**GRID, "dtypes": ["float32", "float64"]}), round_index)


def test_a_round_measures_every_cell_once():
    cells = grid.expand(GRID)
    for k in (1, 2, 3):
        measured = [c for turn in _plan(k, cells) for c in turn.cells]
        assert sorted(measured) == sorted(cells)


def test_compared_variants_take_adjacent_turns_and_swap_order_between_rounds():
    first, second = _plan(1), _plan(2)
    family = [t.worker for t in first if t.cells[0].dtype == "float32"]
    # numpy and torch at the same threads follow each other; GPUs follow the all-cores pair
    assert family in (
        ["numpy-cpu-t1", "torch-cpu-t1", "numpy-cpu-tall", "torch-cpu-tall", "torch-cuda-t1", "torch-mps-t1"],
        ["torch-mps-t1", "torch-cuda-t1", "torch-cpu-tall", "numpy-cpu-tall", "torch-cpu-t1", "numpy-cpu-t1"],
    )
    again = [t.worker for t in second if t.cells[0].dtype == "float32"]
    assert again == family[::-1]


def test_a_cells_processes_are_not_back_to_back():
    """Other cells come between a cell's measurements in consecutive rounds; on average
    about a round's worth."""
    cells = grid.expand(GRID)
    order = [c for k in (1, 2) for turn in _plan(k, cells) for c in turn.cells]
    gaps = []
    for cell in cells:
        first, second = [i for i, c in enumerate(order) if c == cell]
        gaps.append(second - first)
    assert min(gaps) > 1
    assert sum(gaps) / len(gaps) >= len(cells) * 0.75
