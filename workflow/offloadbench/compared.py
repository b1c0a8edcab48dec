"""What is compared with what: each cell with its NumPy baseline (speedups), the most threads
of a CPU series with one thread (thread scaling), and each self-comparison's twin with the
cell it copies. The analysis judges these pairs once measured (analysis/pairs.py); a bout
judges them while its cells take turns, to know when its pairs are precise enough. The
functions take anything with a `cell` and a `status`: measured cells, or `Planned` ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from . import libraries
from .cells import ALL_THREADS, EAGER, Cell, thread_sort_key

T = TypeVar("T")  # a measured cell (analysis/measured.py) or a Planned one


def is_baseline(cell) -> bool:
    """numpy eager on the cpu: what every speedup is measured against (never a twin)."""
    return libraries.is_baseline(cell.library) and cell.device == "cpu" and cell.mode == EAGER and not cell.twin


def baseline_rows(frame):
    """Which rows of a table are baseline cells (numpy eager on the cpu), as a boolean
    Series; tables from before modes hold eager cells only."""
    modes = frame.get("mode", EAGER)
    return frame["library"].map(libraries.is_baseline).astype(bool) & (frame["device"] == "cpu") & (modes == EAGER)


def baseline_threads(device: str, threads: str, available: set[str]) -> str | None:
    """Thread label of the numpy baseline: the cell's own on the cpu, all cores for GPUs."""
    if device == "cpu":
        return threads if threads in available else None
    if ALL_THREADS in available:
        return ALL_THREADS
    numeric = sorted((int(t) for t in available if t != ALL_THREADS), reverse=True)
    return str(numeric[0]) if numeric else None


def speedup_pairs(cells: list[T]) -> list[tuple[T, T, str]]:
    """(cell, its baseline, the baseline's threads) for every ok cell other than a baseline
    that has an ok numpy-eager cpu baseline at the same op, dtype and size."""
    ok = [mc for mc in cells if mc.status == "ok"]
    baselines = {(mc.cell.op, mc.cell.dtype, mc.cell.size, mc.cell.threads): mc for mc in ok if is_baseline(mc.cell)}
    pairs = []
    for mc in ok:
        cell = mc.cell
        if is_baseline(cell) or cell.twin:
            continue
        available = {k[3] for k in baselines if k[:3] == (cell.op, cell.dtype, cell.size)}
        label = baseline_threads(cell.device, cell.threads, available)
        if label is not None:
            pairs.append((mc, baselines[(cell.op, cell.dtype, cell.size, label)], label))
    return pairs


def scaling_pairs(cells: list[T]) -> list[tuple[T, T]]:
    """(one thread, most threads) of every CPU series measured at one thread and more."""
    groups: dict[tuple, dict[str, T]] = {}
    for mc in cells:
        c = mc.cell
        if mc.status == "ok" and c.device == "cpu" and not c.twin:
            groups.setdefault((c.op, c.library, c.mode, c.dtype, c.size), {})[c.threads] = mc
    return [(by_threads["1"], by_threads[max(by_threads, key=thread_sort_key)])
            for _, by_threads in sorted(groups.items()) if "1" in by_threads and len(by_threads) >= 2]


@dataclass(frozen=True)
class Planned:
    """A cell before it is measured, as the pair functions read one: for a bout, which
    judges its comparisons while they take turns."""

    cell: Cell
    status: str = "ok"


def planned_comparisons(cells: list[Cell]) -> list[tuple[Cell, Cell]]:
    """(contender, baseline) of every comparison among `cells` that the tables will judge:
    speedups, thread scaling and self-comparisons."""
    planned = [Planned(cell) for cell in cells]
    pairs = [(mc.cell, base.cell) for mc, base, _ in speedup_pairs(planned)]
    pairs += [(most.cell, one.cell) for one, most in scaling_pairs(planned)]
    return pairs + [(twin.cell, original.cell) for original, twin in control_pairs(planned)]


DECIDED_ON = "end_to_end"  # the region every comparison is decided on


def decided_region(cell: Cell, regions) -> str | None:
    """The region of `cell`, among the `regions` it timed, that its comparisons are decided
    on: end to end, host arrays in and out (on a GPU the copies counted), which a CPU cell
    without host work times as its compute region. None: it timed neither."""
    if DECIDED_ON in regions:
        return DECIDED_ON
    return "compute" if cell.device == "cpu" and "compute" in regions else None


def control_pairs(cells: list[T]) -> list[tuple[T, T]]:
    """(a cell, its twin) of every self-comparison (A/A control) whose two copies are ok."""
    ok = {mc.cell: mc for mc in cells if mc.status == "ok"}
    return [(ok[mc.cell.original], mc) for mc in ok.values() if mc.cell.twin and mc.cell.original in ok]
