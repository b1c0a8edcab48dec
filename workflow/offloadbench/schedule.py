"""The order in which a round measures its cells: groups, one bout each, and the turns of a
bout.

A run measures every cell once per round, in fresh processes each round, so the variance
between processes enters each cell's CI. Within a round the cells that are compared with
each other, a *group* (one op, dtype and size: every variant, device and thread count,
and a self-comparison's twin), are measured in one *bout*: each in its own worker process,
all of them ready before the first sample, then one turn at a time, in a fresh random
order every cycle, balanced so that each cell goes first equally often. A machine whose
speed drifts over seconds then slows both sides of a ratio alike, and the ratio of the
two cells' samples of one cycle cancels the drift. The groups' order turns from round to
round. Orders come from a generator seeded by the round and the group, so a rerun of an
interrupted round takes the same turns.

Between two workers the bout pauses while the last one's thread pool spins down: OpenBLAS
threads spin about 0.1 s after their last call (2^28 cycles), OpenMP's (torch, and the
code torch.compile makes) a few ms to 30 ms. A busy pool slows the next worker's
multi-threaded calls by up to 60% on a 2-core machine, a single-threaded one's by much
less; what remains is measured by the twins and reported.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

from .cells import Cell, WorkerSpec, dtype_sort_key, thread_sort_key

# Seconds a worker's idle thread pool keeps spinning after its last call, by library.
SPIN_S = {"numpy": 0.1, "torch": 0.03}
SHORT_PAUSE_SHARE = 0.1  # before a one-thread turn, which a spinning pool barely slows


def groups(cells: list[Cell], round_index: int, separate: bool = False) -> list[list[Cell]]:
    """The round's groups, each a bout's cells, in an order that turns from round to round
    (round 1 starts with the first group, round 2 with the second, ...). `separate`
    (measure.pairing: separate): each cell a bout of its own, one after another."""
    by_group: dict[tuple, list[Cell]] = {}
    for cell in cells:
        by_group.setdefault((cell.op, dtype_sort_key(cell.dtype), cell.dtype, cell.size), []).append(cell)
    order = sorted(by_group)
    shift = (round_index - 1) % len(order) if order else 0
    bouts = [sorted(by_group[key], key=_in_group) for key in order[shift:] + order[:shift]]
    return [[cell] for bout in bouts for cell in bout] if separate else bouts


def _in_group(cell: Cell) -> tuple:
    return (cell.library, cell.mode, cell.device, thread_sort_key(cell.threads), cell.twin)


def generator(round_index: int, group_name: str) -> random.Random:
    """The turns' random source of one bout: the same in a rerun of the round."""
    return random.Random(zlib.crc32(f"{round_index}/{group_name}".encode()))


class Cycles:
    """The order of each cycle of one bout: a fresh random order every cycle, and over each
    run of len(cells) cycles every cell goes first exactly once. Cells drop out when they
    fail; the rest go on."""

    def __init__(self, cells: Sequence[Cell], rng: random.Random):
        self.cells = list(cells)
        self.rng = rng
        self.firsts: list[Cell] = []
        self.count = 0

    def drop(self, cell: Cell) -> None:
        self.cells = [c for c in self.cells if c != cell]
        self.firsts = [c for c in self.firsts if c != cell]

    def next(self) -> list[Cell]:
        if not self.cells:
            return []
        if not self.firsts:
            self.firsts = self.rng.sample(self.cells, len(self.cells))
        first = self.firsts.pop()
        rest = [c for c in self.cells if c != first]
        self.rng.shuffle(rest)
        self.count += 1
        return [first, *rest]


def pause_s(before: WorkerSpec | None, after: WorkerSpec, configured: float | None = None) -> float:
    """Seconds to wait between a turn of `before` and one of `after`: none after a worker
    with one thread (nothing of it spins) or between turns of one worker; after several
    threads, their spin time (or `configured`), a tenth of it when `after` has one thread."""
    if before is None or before == after or before.host_threads <= 1:
        return 0.0
    spin = configured if configured is not None else SPIN_S["numpy" if _blas_only(before) else "torch"]
    return spin if after.host_threads > 1 else spin * SHORT_PAUSE_SHARE


def _blas_only(worker: WorkerSpec) -> bool:
    """NumPy eager runs its threads in OpenBLAS; torch and compiled code in OpenMP."""
    return worker.library == "numpy" and not worker.compiled
