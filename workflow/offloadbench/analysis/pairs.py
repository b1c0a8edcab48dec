"""Each comparison judged: each cell with its NumPy baseline (speedups), the most threads of a
CPU series with one thread (thread scaling), and each self-comparison's twin with its cell
(which cells those are: `offloadbench.compared`). The tables and the settling of verdicts
by extra rounds both take their comparisons from here; no pandas, so the settling job can
use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..compared import control_pairs, scaling_pairs, speedup_pairs
from ..stats import Interval, processes_to_decide
from ..verdicts import MAX_CI_SPAN, UNDECIDED
from .measured import MeasuredCell

SPEEDUP, SCALING, CONTROL = "speedup", "thread scaling", "self-comparison"


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
    processes still disagree after replacing what could be, or half or more of them were
    disturbed."""
    ratio = base.ratio(contender, phase)
    unsettled = next((f"{mc.cell.key}: {mc.unsettled}" for mc in (contender, base) if mc.unsettled), "")
    word, why = contender.analysis.judging.judged(ratio.low, ratio.high, ratio.value, unstable=unsettled)
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
