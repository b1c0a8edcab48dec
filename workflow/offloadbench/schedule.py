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

Between two turns the bout waits until the other workers' thread pools have stopped
spinning: it reads their threads' states every millisecond and hands the next turn out once
none runs (`wait_until_still`; where thread states cannot be read, their CPU time every few
milliseconds until it has stopped rising, `wait_until_quiet`). Measured on a 2-core VM, OpenBLAS's pool spins about
0.135 s after a BLAS call (2^28 TSC cycles) and none after NumPy's other calls; OpenMP's
(torch, and the code torch.compile makes) 10-20 ms. A fixed pause by library either wastes
that time or falls short of it, and a pool still spinning beside the next worker slows
its multi-threaded calls by up to 60% on a 2-core machine. Where a worker's CPU time
cannot be read, a fixed pause by library (`pause_s`) stands in. What remains is measured
by the twins and reported.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Sequence

from . import libraries
from .cells import Cell, WorkerSpec, dtype_sort_key, thread_sort_key

# Seconds a worker's idle thread pool keeps spinning after its last call are its runtime
# library's `pool_spin_s`: the fixed pause where CPU time cannot be read (OpenBLAS, NumPy's:
# 0.135 s measured on a 2.x GHz EPYC; OpenMP, torch's and compiled code's: far less).
SHORT_PAUSE_SHARE = 0.1  # before a one-thread turn, which a spinning pool slows less
# Waiting for quiet: the other workers' CPU time is read every QUIET_POLL_S; the next turn
# starts once they used under QUIET_SHARE of a core over a stretch of at least QUIET_STRETCH_S
# (a pool that busy-waits without system calls shows its time only at the scheduler's tick,
# every 1-10 ms), and after QUIET_CAP_S whatever they do (a pool told to spin forever).
QUIET_POLL_S = 0.005
QUIET_STRETCH_S = 0.012
STILL_POLL_S = 0.001  # between two reads of the pools' thread states (wait_until_still)
QUIET_SHARE = 0.1
QUIET_CAP_S = 0.5


def groups(cells: list[Cell], round_index: int, separate: bool = False) -> list[list[Cell]]:
    """The round's groups, each a bout's cells, in an order that turns from round to round
    (round 1 starts with the first group, round 2 with the second, ...). `separate`
    (measure.pairing: separate): each cell a bout of its own, one after another."""
    by_group: dict[tuple, list[Cell]] = {}
    for cell in cells:
        by_group.setdefault((cell.op, dtype_sort_key(cell.dtype), cell.dtype, cell.size), []).append(cell)
    order = sorted(by_group)
    shift = (round_index - 1) % len(order) if order else 0
    in_group = lambda c: (c.library, c.mode, c.device, thread_sort_key(c.threads), c.twin)
    bouts = [sorted(by_group[key], key=in_group) for key in order[shift:] + order[:shift]]
    return [[cell] for bout in bouts for cell in bout] if separate else bouts


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
        """The next cycle's order; the bout asks only while a cell is left."""
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
    spin = configured if configured is not None else spin_s(before)
    return spin if after.host_threads > 1 else spin * SHORT_PAUSE_SHARE


def spin_s(worker: WorkerSpec) -> float:
    """How long the thread pool that runs `worker`'s calls may spin after its last one."""
    return libraries.runtime(worker.library, worker.compiled).pool_spin_s


def may_spin(last_active: dict[WorkerSpec, float], after: WorkerSpec, now: float) -> list[WorkerSpec]:
    """The workers whose pool may still spin when `after` takes a turn: the other
    multi-threaded workers of `last_active` (those not found quiet since their last
    command, with the time it ended) that finished it less than QUIET_CAP_S ago."""
    return [worker for worker, at in last_active.items()
            if worker != after and worker.host_threads > 1 and now - at < QUIET_CAP_S]


def wait_until_still(running: Callable[[], bool | None], sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.monotonic) -> tuple[float, bool] | None:
    """Sleep until no thread of the processes `running` reads runs (their pools have gone
    to sleep), polling every STILL_POLL_S, or QUIET_CAP_S has passed; the seconds waited and
    whether they were still (False: the cap ended the wait); None where thread states
    cannot be read (then `wait_until_quiet` reads their CPU time instead)."""
    began = clock()
    while True:
        now = running()
        if now is None:
            return None
        if not now:
            return clock() - began, True
        if clock() - began >= QUIET_CAP_S:
            return clock() - began, False
        sleep(STILL_POLL_S)


def wait_until_quiet(cpu_s: Callable[[], float | None], sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.monotonic) -> tuple[float, bool] | None:
    """Sleep until the processes `cpu_s` reads (their CPU seconds together) have used under
    QUIET_SHARE of a core over QUIET_STRETCH_S, or QUIET_CAP_S has passed; the seconds
    waited and whether they were quiet (False: the cap ended the wait), None where their
    CPU time cannot be read."""
    began = stretch_began = clock()
    stretch_cpu = cpu_s()
    if stretch_cpu is None:
        return None
    while True:
        sleep(QUIET_POLL_S)
        now, used = clock(), cpu_s()
        if used is None:
            return None
        if used - stretch_cpu >= QUIET_SHARE * (now - stretch_began):
            stretch_began, stretch_cpu = now, used  # still busy: a new stretch starts here
        elif now - stretch_began >= QUIET_STRETCH_S:
            return now - began, True
        if now - began >= QUIET_CAP_S:
            return now - began, False
