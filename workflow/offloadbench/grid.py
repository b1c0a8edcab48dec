"""Grid expansion: the validated config becomes a DataFrame of cells, one job each.

Impossible combinations are dropped here, at parse time, with the rule that dropped them:
numpy on a GPU, bfloat16 in numpy, and thread counts for GPU cells (measured once, t1).
"""

from __future__ import annotations

import itertools

import pandas as pd

from .cells import ALL_THREADS, Cell

COLUMNS = ["op", "library", "device", "dtype", "size", "threads"]


def _thread_label(value) -> str:
    return ALL_THREADS if str(value) == ALL_THREADS else str(int(value))


def possible(op: str, library: str, device: str, dtype: str) -> bool:
    numpy_off_cpu = library == "numpy" and (device != "cpu" or dtype == "bfloat16")
    mps_float64 = device == "mps" and dtype == "float64"  # MPS has no float64
    return not (numpy_off_cpu or mps_float64)


def expand(grid: dict) -> pd.DataFrame:
    """All possible cells of the grid section, sorted, without duplicates."""
    thread_labels = [_thread_label(t) for t in grid["threads"]]
    rows = []
    for op, library, device, dtype, size in itertools.product(
        grid["ops"], grid["libraries"], grid["devices"], grid["dtypes"], grid["sizes"]
    ):
        if not possible(op, library, device, dtype):
            continue
        labels = ["1"] if device in ("cuda", "mps") else thread_labels
        rows.extend((op, library, device, dtype, int(size), label) for label in labels)
    cells = pd.DataFrame(rows, columns=COLUMNS).drop_duplicates()
    return cells.sort_values(COLUMNS, key=_sort_key).reset_index(drop=True)


def _sort_key(column: pd.Series) -> pd.Series:
    if column.name == "threads":
        return column.map(lambda t: 10**9 if t == ALL_THREADS else int(t))
    return column


def cells_of(frame: pd.DataFrame) -> list[Cell]:
    return [Cell(**row) for row in frame.to_dict(orient="records")]


def raw_paths(frame: pd.DataFrame, raw_dir: str) -> list[str]:
    return [f"{raw_dir}/{cell.relpath}" for cell in cells_of(frame)]
