"""What is compared with what, and each comparison judged: each cell with its NumPy baseline
(speedups), the most threads of a CPU series with one thread (thread scaling), and each
self-comparison's twin with its cell. The tables and the settling of verdicts by extra
rounds both take their comparisons from here; no pandas, so measuring jobs can use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..cells import ALL_THREADS, EAGER, thread_sort_key
from ..stats import Interval, processes_to_decide
from ..verdicts import MAX_CI_SPAN, UNDECIDED
from .measured import MeasuredCell

SPEEDUP, SCALING, CONTROL = "speedup", "thread scaling", "self-comparison"


def is_baseline(cell) -> bool:
    """numpy eager on the cpu: what every speedup is measured against (never a twin)."""
    return cell.library == "numpy" and cell.device == "cpu" and cell.mode == EAGER and not cell.twin


def baseline_threads(device: str, threads: str, available: set[str]) -> str | None:
    """Thread label of the numpy baseline: the cell's own on the cpu, all cores for GPUs."""
    if device == "cpu":
        return threads if threads in available else None
    if ALL_THREADS in available:
        return ALL_THREADS
    numeric = sorted((int(t) for t in available if t != ALL_THREADS), reverse=True)
    return str(numeric[0]) if numeric else None


def speedup_pairs(cells: list[MeasuredCell]) -> list[tuple[MeasuredCell, MeasuredCell, str]]:
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


def scaling_pairs(cells: list[MeasuredCell]) -> list[tuple[MeasuredCell, MeasuredCell]]:
    """(one thread, most threads) of every CPU series measured at one thread and more."""
    groups: dict[tuple, dict[str, MeasuredCell]] = {}
    for mc in cells:
        c = mc.cell
        if mc.status == "ok" and c.device == "cpu" and not c.twin:
            groups.setdefault((c.op, c.library, c.mode, c.dtype, c.size), {})[c.threads] = mc
    pairs = []
    for _, by_threads in sorted(groups.items()):
        if "1" not in by_threads or len(by_threads) < 2:
            continue
        pairs.append((by_threads["1"], by_threads[max(by_threads, key=thread_sort_key)]))
    return pairs


def control_pairs(cells: list[MeasuredCell]) -> list[tuple[MeasuredCell, MeasuredCell]]:
    """(a cell, its twin) of every self-comparison (A/A control) whose two copies are ok."""
    ok = {mc.cell: mc for mc in cells if mc.status == "ok"}
    return [(ok[mc.cell.original], mc) for mc in ok.values() if mc.cell.twin and mc.cell.original in ok]


@dataclass(frozen=True)
class Comparison:
    """One ratio the pipeline judges: the baseline's time over the contender's (above 1:
    the contender is faster), in one timed region, with its verdict under the run's policy."""

    kind: str  # SPEEDUP, SCALING or CONTROL
    cell: MeasuredCell  # the contender (the most threads, for thread scaling; the twin of a control)
    other: MeasuredCell  # its baseline (one thread, for thread scaling; the cell a twin copies)
    phase: str
    ratio: Interval
    verdict: str
    why: str  # why it is undecided ("" when decided)

    @property
    def name(self) -> str:
        return f"{self.kind} of {self.cell.cell.key}"

    def processes_needed(self) -> float:
        """Processes per cell that would likely decide it (NaN: nothing known of the spread)."""
        if self.verdict != UNDECIDED:
            return 0.0
        r = self.ratio
        return processes_to_decide(r.low, r.high, r.value, r.processes, self.cell.analysis.judging, MAX_CI_SPAN)

    def what_would_decide(self, needed: float) -> str:
        """Advice for a comparison more processes cannot decide within the cap."""
        count = "no number of processes would" if math.isinf(needed) else f"about {int(needed)} processes per cell would"
        if self.cell.shares_cores or self.other.shares_cores:
            return (f"{count}; its cells use every core, shared with the orchestrator, so fewer threads than cores "
                    "(or a machine with more) would measure them alone")
        return count


def compared(kind: str, base: MeasuredCell, contender: MeasuredCell, phase: str = "compute") -> Comparison:
    """`base`'s time over `contender`'s, judged; undecided whatever its CI says where a side's
    processes still disagree after replacing what could be."""
    ratio = base.ratio(contender, phase)
    disagree = next((f"{mc.cell.key}: processes disagree ({mc.disagree})" for mc in (contender, base)
                     if mc.disagree), "")
    word, why = contender.analysis.judging.judged(ratio.low, ratio.high, ratio.value, unstable=disagree)
    return Comparison(kind, contender, base, phase, ratio, word, why)


def comparisons(cells: list[MeasuredCell]) -> list[Comparison]:
    """Every comparison the tables judge: each speedup (its end-to-end ratio too, where the
    cell has copies; the undecided one stands for it), each thread scaling and each
    self-comparison."""
    found = []
    for mc, base, _ in speedup_pairs(cells):
        phases = ["compute"] + (["end_to_end"] if mc.cell.device != "cpu" else [])
        judged = [compared(SPEEDUP, base, mc, phase) for phase in phases]
        found.append(next((c for c in judged if c.verdict == UNDECIDED), judged[0]))
    found += [compared(SCALING, one, many) for one, many in scaling_pairs(cells)]
    found += [compared(CONTROL, original, twin) for original, twin in control_pairs(cells)]
    return found
