"""The order in which a round measures its cells.

A run measures every cell once per round, in fresh processes each round, so the
between-process variance enters each cell's CI and a cell's processes are spread over the
run. Within a round one worker process per (library, device, threads) measures its cells
in turns. A turn is one worker's cells of one op and dtype, and the turns of variants that
are compared with each other (numpy and torch at the same threads, GPUs against numpy on
all cores) follow each other, in an order that reverses from one round and family to the
next, so slow drift of the machine hits both sides of a ratio alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cells import (
    ALL_THREADS,
    EAGER,
    Cell,
    device_sort_key,
    dtype_sort_key,
    library_sort_key,
    mode_sort_key,
    thread_sort_key,
)


def worker_key(cell: Cell) -> str:
    """The worker process that measures a cell: `<library>-<device>-t<threads>[-compiled]`.
    Compiled cells get workers of their own: the compiler's imports and threads never share
    a process with an eager cell, least of all with the numpy baseline."""
    suffix = "" if cell.mode == EAGER else f"-{cell.mode}"
    return f"{cell.library}-{cell.device}-t{cell.threads}{suffix}"


def worker_parts(key: str) -> tuple[str, str, str, str]:
    """(library, device, threads, mode) of a worker key."""
    library, device, threads, *mode = key.split("-")
    return library, device, threads.removeprefix("t"), mode[0] if mode else EAGER


@dataclass(frozen=True)
class Turn:
    worker: str
    cells: tuple[Cell, ...]


def _worker_rank(cell: Cell) -> tuple:
    # GPU cells are compared with NumPy on all cores, so they follow that pair.
    threads = thread_sort_key(ALL_THREADS if cell.is_gpu else cell.threads)
    return (threads, device_sort_key(cell.device), mode_sort_key(cell.mode), library_sort_key(cell.library))


def round_plan(cells: list[Cell], round_index: int) -> list[Turn]:
    """The turns of round `round_index` (1-based)."""
    families: dict[tuple, list[Cell]] = {}
    for cell in cells:
        families.setdefault((cell.op, dtype_sort_key(cell.dtype), cell.dtype), []).append(cell)
    order = sorted(families)
    shift = (round_index - 1) % len(order) if order else 0
    turns = []
    for family in order[shift:] + order[:shift]:
        by_worker: dict[str, list[Cell]] = {}
        for cell in sorted(families[family], key=lambda c: (_worker_rank(c), c.size)):
            by_worker.setdefault(worker_key(cell), []).append(cell)
        workers = list(by_worker)
        if (round_index + order.index(family)) % 2 == 0:
            workers.reverse()
        turns.extend(Turn(w, tuple(by_worker[w])) for w in workers)
    return turns
