"""Where things live under results/<machine>/, shared by the Snakefile and the package.

Kept free of heavy imports: the Snakefile reads it at parse time.
"""

from __future__ import annotations

from .cells import Cell

FIGURE_NAMES = ("heatmap", "speedup", "copy_cost", "transfer_overhead", "bandwidth", "roofline", "throughput")
COMPARE_FIGURE_NAMES = ("speedups", "ratio", "break_even", "bandwidth")
TABLES = ("timings", "speedups", "thread_scaling", "transfer", "roofs")
# Folders below raw/ besides one per op: per-device records, round records, unfinished rounds.
DEVICE_RECORD_DIRS = ("roofs", "transfer")
ROUNDS_DIR = "rounds"
PARTIAL_DIR = ".partial"
NOT_CELL_DIRS = (*DEVICE_RECORD_DIRS, ROUNDS_DIR, PARTIAL_DIR)


def record_relpath(cell: Cell, round_index: int) -> str:
    """Path of a cell's record from one round, below results/<machine>/raw/."""
    return f"{cell.key}/p{round_index}.json"


def grid_record_paths(raw: str, cells, rounds: int) -> list[tuple[int, str]]:
    """(round, path) of every record a finished run of `rounds` rounds holds below `raw`."""
    return [(k, f"{raw}/{record_relpath(cell, k)}") for k in range(1, rounds + 1) for cell in cells]


def extra_record_paths(raw: str, cells, rounds: int) -> list[str]:
    """Records of extra rounds (beyond `rounds`) that are newer than their cell's regular
    ones: a regular record taken again later (other settings) makes older extras stale."""
    import os
    from pathlib import Path

    found = []
    for cell in cells:
        folder = Path(raw) / cell.key
        regular = [folder / f"p{k}.json" for k in range(1, rounds + 1)]
        newest = max((p.stat().st_mtime for p in regular if p.exists()), default=0.0)
        for path in sorted(folder.glob("p*.json")):
            k = path.stem[1:]
            if k.isdigit() and int(k) > rounds and os.path.getmtime(path) >= newest:
                found.append(str(path))
    return found


def partial_dir(round_index: int) -> str:
    """Where a round keeps its finished records until the whole round is done: the round's
    records appear together, and an interrupted round resumes where it stopped."""
    return f"{PARTIAL_DIR}/p{round_index}"


def partial_relpath(cell: Cell, round_index: int) -> str:
    return f"{partial_dir(round_index)}/{cell.key}.json"


def round_relpath(round_index: int) -> str:
    """The round's own record: its worker processes and the system check around it."""
    return f"{ROUNDS_DIR}/p{round_index}.json"


def extra_round_relpath(round_index: int) -> str:
    """An extra round's own record (x<k>, so that raising measure.processes later still
    runs its regular round k for the cells the extra round did not measure)."""
    return f"{ROUNDS_DIR}/x{round_index}.json"


SETTLE_RELPATH = f"{ROUNDS_DIR}/settle.json"  # what the extra rounds did, and why they stopped
