"""Grid expansion: the validated config's `grid` section becomes the list of cells.

Impossible combinations are dropped here, at parse time, with the rule that dropped them:
numpy on a GPU, bfloat16 in numpy, float64 on mps, and thread counts for GPU cells
(measured once, with one host thread); so are sizes above an op's `op_max_size`. Pure
Python, so measurement jobs can expand the same grid as the Snakefile.
"""

from __future__ import annotations

import itertools

from .cells import Cell, dtype_sort_key, thread_label, thread_sort_key


def possible(library: str, device: str, dtype: str) -> bool:
    """Whether a library can run this dtype on this device at all."""
    numpy_off_cpu = library == "numpy" and (device != "cpu" or dtype == "bfloat16")
    mps_float64 = device == "mps" and dtype == "float64"  # MPS has no float64
    return not (numpy_off_cpu or mps_float64)


def expand(grid: dict) -> list[Cell]:
    """All possible cells of the grid section, sorted, without duplicates."""
    labels = sorted({thread_label(t) for t in grid["threads"]}, key=thread_sort_key)
    limits = grid.get("op_max_size") or {}
    cells = set()
    for op, library, device, dtype, size in itertools.product(
        grid["ops"], grid["libraries"], grid["devices"], grid["dtypes"], grid["sizes"]
    ):
        if possible(library, device, dtype) and size <= limits.get(op, size):
            for label in ["1"] if device != "cpu" else labels:
                cells.add(Cell(op, library, device, dtype, int(size), label))
    return sorted(cells, key=sort_key)


def sort_key(cell: Cell) -> tuple:
    return (cell.op, cell.library, cell.device, dtype_sort_key(cell.dtype), cell.size, thread_sort_key(cell.threads))
