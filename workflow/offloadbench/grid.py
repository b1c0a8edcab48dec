"""Grid expansion: the validated config's `grid` section becomes the list of cells.

Impossible combinations are dropped here, at parse time, with the rule that dropped them:
numpy on a GPU (but numpy compiled, which torch.compile runs there), a library off its devices
(CuPy on the CPU, JAX on a GPU) or in a mode it lacks (CuPy compiled), bfloat16 in numpy,
float64 on mps, torch cells of a kernel that takes plain NumPy arrays (no `xp`), and
thread counts for GPU cells (measured once, with one host thread: cells.thread_labels);
so are sizes above an op's `op_max_size`, and compiled cells outside `grid.compiled`. A
grid that asks for self-comparisons (`controls`, from analysis.controls) gets that many
twins, one per group and thread count at most (`control_cells`). Pure Python, so
measurement jobs can expand the same grid as the Snakefile.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping

from . import libraries
from .cells import (
    COMPILED,
    EAGER,
    Cell,
    dtype_sort_key,
    mode_sort_key,
    thread_label,
    thread_labels,
    thread_sort_key,
)


def possible(library: str, device: str, dtype: str, mode: str = EAGER) -> bool:
    """Whether a library can run this dtype on this device at all, in this mode."""
    own = libraries.get(library)
    if mode == COMPILED and not own.compiler:
        return False  # no compiled form (CuPy)
    # compiled, a library that runs on the CPU only runs on its compiler's devices
    off_its_devices = not own.runs_on(device) and (mode == EAGER or not libraries.runtime(library, True).runs_on(device))
    mps_float64 = device == "mps" and dtype == "float64"  # MPS has no float64
    return not (off_its_devices or own.dtype_reason(dtype) or mps_float64)


def _compiled_here(narrowed: Mapping, op: str, device: str, size: int, threads: str) -> bool:
    def allows(key, value, label=lambda v: v):
        values = narrowed.get(key)
        return values is None or value in {label(v) for v in values}

    return (allows("ops", op) and allows("devices", device) and allows("sizes", size)
            and (device != "cpu" or allows("threads", threads, thread_label)))


def expand(grid: dict, kernels: Mapping | None = None, usable: Collection[str] | None = None) -> list[Cell]:
    """All possible cells of the grid section, sorted, without duplicates. `kernels` maps
    a user kernel's name to what its source says (kernels.KernelInfo): a kernel that takes
    no `xp` runs as numpy only. `usable` names the devices this machine can measure on
    (records.Environment.usable_devices): the self-comparisons are chosen among their cells."""
    kernels = kernels or {}
    labels = sorted({thread_label(t) for t in grid["threads"]}, key=thread_sort_key)
    limits = grid.get("op_max_size") or {}
    narrowed = grid.get("compiled") or {}
    cells = set()
    for op, library, device, dtype, size, mode in itertools.product(
        grid["ops"], grid["libraries"], grid["devices"], grid["dtypes"], grid["sizes"], grid.get("modes") or [EAGER]
    ):
        if op in kernels and library not in kernels[op].libraries:
            continue
        if not possible(library, device, dtype, mode) or size > limits.get(op, size):
            continue
        for label in thread_labels(device, labels):
            if mode == COMPILED and not _compiled_here(narrowed, op, device, size, label):
                continue
            cells.add(Cell(op, library, device, dtype, int(size), label, mode))
    ordered = sorted(cells, key=sort_key)
    twins = [cell.twinned() for cell in control_cells(ordered, grid.get("controls") or 0, usable)]
    return sorted(ordered + twins, key=sort_key)


ALL_GROUPS = "all"


def control_cells(cells: list[Cell], count: int | str, usable: Collection[str] | None = None) -> list[Cell]:
    """The cells measured twice, each copy a cell of its own (an A/A control). A group's
    twins copy its NumPy cell (else its first eager cell) on a usable device, one twin per
    thread count. `count` twins ("all": every group at each of its thread counts) are
    chosen in passes: the first gives one twin to each group (to `count` of them, spread
    evenly over the groups sorted by size then op), at the grid's thread counts in turn from
    group to group; the next pass gives each group a twin at its next thread count, and so
    on, so the twins span sizes and thread counts whatever their number. Compiled cells are
    left out: each copy would compile again in every process."""
    eligible = [c for c in cells if c.mode == EAGER and not c.twin and (usable is None or c.device in usable)]
    groups: dict[tuple, list[Cell]] = {}
    for cell in sorted(eligible, key=lambda c: (c.size, c.op, dtype_sort_key(c.dtype))):
        groups.setdefault(cell.group, []).append(cell)
    copied = {key: _copied_cells(members) for key, members in groups.items()}
    slots = sum(map(len, copied.values()))
    left = slots if count == ALL_GROUPS else min(int(count), slots)
    twins: list[Cell] = []
    offset: dict[tuple, int] = {}  # where a group's thread counts start: set by the first pass
    for turn in range(max(map(len, copied.values()), default=0)):
        open_groups = [key for key, copies in copied.items() if turn < len(copies)]
        take = min(left, len(open_groups))
        step = len(open_groups) / take if take else 0
        for j in range(take):
            key = open_groups[int(j * step + step / 2)]
            offset.setdefault(key, j)
            twins.append(copied[key][(offset[key] + turn) % len(copied[key])])
        left -= take
    return twins


def _copied_cells(members: list[Cell]) -> list[Cell]:
    """A group's cells a twin may copy: its NumPy cells on the cpu (else its first eager
    library and device's), by thread count."""
    members = sorted(members, key=lambda c: (not libraries.is_baseline(c.library), c.device != "cpu"))
    first = members[0]
    same = [c for c in members if (c.library, c.device) == (first.library, first.device)]
    return sorted(same, key=lambda c: thread_sort_key(c.threads))


def sort_key(cell: Cell) -> tuple:
    return (cell.op, cell.library, mode_sort_key(cell.mode), cell.device, dtype_sort_key(cell.dtype), cell.size,
            thread_sort_key(cell.threads), cell.twin)
