"""Rounds until the verdicts settle: which cells the next extra round measures.

After the planned rounds (`measure.processes`), an extra round goes only to:
- cells with a process to replace (disturbed, or far from the others; analysis/processes.py),
  together with the cells they are compared with, so that the pair keeps a shared round;
- both sides of every comparison (speedup over NumPy, thread scaling) that is undecided.
A cell is never given more than `measure.max_processes` processes; what still needs more
at that cap is listed as capped. Each extra round is planned anew from all records, so an
interrupted run plans the same round again and resumes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cells import Cell
from ..verdicts import UNDECIDED
from .measured import MeasuredCell
from .pairs import pair_verdict, scaling_pairs, speedup_pairs


@dataclass(frozen=True)
class Comparison:
    kind: str  # "speedup" or "thread scaling"
    cell: MeasuredCell  # the contender (the most threads, for thread scaling)
    other: MeasuredCell  # its baseline (one thread, for thread scaling)
    verdict: str
    why: str

    @property
    def name(self) -> str:
        return f"{self.kind} of {self.cell.cell.key}"


def comparisons(cells: list[MeasuredCell]) -> list[Comparison]:
    """Every comparison the tables judge, with its verdict (end to end too where it has copies)."""
    found = []
    for mc, base, _ in speedup_pairs(cells):
        phases = ["compute"] + (["end_to_end"] if mc.cell.device != "cpu" else [])
        judged = [pair_verdict(base.ratio(mc, phase), mc.analysis.min_effect, mc, base) for phase in phases]
        word, why = next(((w, y) for w, y in judged if w == UNDECIDED), judged[0])
        found.append(Comparison("speedup", mc, base, word, why))
    for one, many in scaling_pairs(cells):
        word, why = pair_verdict(one.ratio(many, "compute"), many.analysis.min_effect, one, many)
        found.append(Comparison("thread scaling", many, one, word, why))
    return found


@dataclass
class Plan:
    cells: dict[Cell, str] = field(default_factory=dict)  # to measure, and why
    replacing: dict[str, str] = field(default_factory=dict)  # cell key → the process it replaces
    undecided: list[str] = field(default_factory=list)  # comparisons given another round
    capped: list[str] = field(default_factory=list)  # what needs more but is at max_processes


def plan_round(cells: list[MeasuredCell], max_processes: int) -> Plan:
    """The cells of the next extra round (none: the verdicts have settled, or are capped)."""
    plan = Plan()
    room = {mc.cell: len(mc.records) < max_processes for mc in cells}
    partners: dict[Cell, list[Cell]] = {}
    found = comparisons(cells)
    for comparison in found:
        partners.setdefault(comparison.cell.cell, []).append(comparison.other.cell)
        partners.setdefault(comparison.other.cell, []).append(comparison.cell.cell)
    for mc in cells:
        if mc.status != "ok" or not mc.judgement.needs_more:
            continue
        why = mc.judgement.wanted[0][1] if mc.judgement.wanted else mc.disagree
        if not room[mc.cell]:
            plan.capped.append(f"{mc.cell.key}: {why}")
            continue
        plan.cells[mc.cell] = f"replaces a process: {why}" if mc.judgement.wanted else why
        plan.replacing[mc.cell.key] = why
    for cell in list(plan.cells):  # a replacement shares its round with what it is compared with
        for partner in partners.get(cell, []):
            if room[partner]:
                plan.cells.setdefault(partner, f"compared with {cell.key}")
    for comparison in found:
        if comparison.verdict != UNDECIDED:
            continue
        a, b = comparison.cell.cell, comparison.other.cell
        if room[a] and room[b]:
            plan.cells.setdefault(a, f"{comparison.kind} undecided")
            plan.cells.setdefault(b, f"{comparison.kind} undecided")
            plan.undecided.append(comparison.name)
        else:
            plan.capped.append(f"{comparison.name}: {comparison.why}")
    return plan
