from offloadbench.cells import Cell
from offloadbench.grid import expand, raw_paths

GRID = {
    "ops": ["matmul"],
    "libraries": ["numpy", "torch"],
    "devices": ["cpu", "cuda", "mps"],
    "dtypes": ["bfloat16", "float32", "float64"],
    "sizes": [128, 256],
    "threads": [1, "all"],
}


def test_impossible_combinations_are_dropped():
    cells = expand(GRID)
    assert not ((cells["library"] == "numpy") & (cells["device"] != "cpu")).any()
    assert not ((cells["library"] == "numpy") & (cells["dtype"] == "bfloat16")).any()
    assert not ((cells["device"] == "mps") & (cells["dtype"] == "float64")).any()


def test_gpu_cells_are_measured_once_with_one_host_thread():
    cells = expand(GRID)
    gpu = cells[cells["device"] != "cpu"]
    assert set(gpu["threads"]) == {"1"}
    assert not gpu.duplicated().any()
    # cuda: 3 dtypes x 2 sizes; mps: 2 dtypes (no float64) x 2 sizes
    assert len(gpu) == 6 + 4


def test_cpu_cells_cover_every_thread_label():
    cells = expand(GRID)
    cpu = cells[cells["device"] == "cpu"]
    assert set(cpu["threads"]) == {"1", "all"}
    # numpy: float32/float64 x 2 sizes x 2 threads; torch: 3 dtypes x 2 sizes x 2 threads
    assert len(cpu) == 8 + 12


def test_duplicate_thread_counts_collapse():
    cells = expand({**GRID, "threads": [1, 1, "all"]})
    assert not cells.duplicated().any()


def test_raw_paths_follow_the_contract():
    cells = expand({**GRID, "libraries": ["numpy"], "dtypes": ["float32"], "sizes": [128], "threads": ["all"]})
    assert raw_paths(cells, "results/m/raw") == ["results/m/raw/matmul/numpy-cpu-float32-n128-tall.json"]


def test_cell_stem_round_trips():
    cell = Cell("matmul", "torch", "cuda", "bfloat16", 4096, "1")
    assert Cell.from_stem("matmul", cell.stem) == cell
    assert cell.relpath == "matmul/torch-cuda-bfloat16-n4096-t1.json"
