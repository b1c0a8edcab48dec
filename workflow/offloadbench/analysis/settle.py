"""Rounds until the verdicts settle: which cells the next extra round measures.

After the planned rounds (`measure.processes`), an extra round goes only to:
- cells with a process to replace (disturbed, or far from the others; analysis/processes.py),
  together with the cells they are compared with, so that the pair keeps a shared round;
- both sides of the undecided comparisons (speedups over NumPy, thread scalings,
  self-comparisons) that more processes can likely decide within `measure.max_processes`,
  other than ties at the boundary and answers that depend on a side's state (which more
  processes would not change),
  ranked by the processes each would need (`stats.processes_to_decide`, from its CI and
  the spread between processes seen): the most likely first, so that a time budget too
  small for all of them buys the most decisions.
A comparison that would need more than the cap is not measured again: the plan lists it
with what would decide it (more processes, or, where its cells share every core with the
orchestrator, fewer threads than cores). A cell is never given more than the cap. Each
extra round is planned anew from all records, so an interrupted run plans the same round
again and resumes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..cells import Cell
from ..verdicts import UNDECIDED
from .measured import MeasuredCell
from .pairs import comparisons

# Why a cell is in the next extra round, as settle.json keeps it: a process of its to replace,
# processes that disagree, a partner of such a cell (their ratio stays paired), or a side of
# an undecided comparison
REPLACES, DISAGREE, PARTNER, UNDECIDED_SIDE = "replace", "disagree", "partner", "undecided"


@dataclass
class Plan:
    cells: dict[Cell, str] = field(default_factory=dict)  # to measure, and why (REPLACES, …)
    replacing: dict[str, int] = field(default_factory=dict)  # cell key → the round of the process it replaces
    undecided: list[str] = field(default_factory=list)  # comparisons given another round, likeliest first
    capped: list[str] = field(default_factory=list)  # cells and comparisons that need more but are at max_processes
    cannot_decide: dict[str, dict] = field(default_factory=dict)  # comparison → what would decide it
    sides: dict[str, tuple[Cell, Cell]] = field(default_factory=dict)  # an undecided comparison's two cells
    for_undecided: set[Cell] = field(default_factory=set)  # cells measured only for undecided comparisons

    def within(self, fits) -> Plan:
        """The plan cut to what `fits` (a cell set -> bool) allows: its replacements (with the
        cells they are compared with) whole, then undecided comparisons likeliest first."""
        replacing = {c: why for c, why in self.cells.items() if c not in self.for_undecided}
        kept = Plan(dict(replacing), dict(self.replacing), [], list(self.capped), dict(self.cannot_decide), {})
        if replacing and not fits(set(replacing)):
            return Plan(capped=list(self.capped), cannot_decide=dict(self.cannot_decide))
        for name in self.undecided:
            a, b = self.sides[name]
            trial = set(kept.cells) | {a, b}
            if fits(trial):
                for cell in (a, b):
                    kept.cells.setdefault(cell, self.cells.get(cell, UNDECIDED_SIDE))
                kept.undecided.append(name)
                kept.sides[name] = (a, b)
        kept.for_undecided = set(kept.cells) & self.for_undecided
        return kept


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
        if not room[mc.cell]:
            plan.capped.append(mc.cell.key)
            continue
        wanted = mc.judgement.wanted
        plan.cells[mc.cell] = REPLACES if wanted else DISAGREE
        if wanted:
            plan.replacing[mc.cell.key] = mc.ok[wanted[0].index].round
    for cell in list(plan.cells):  # a replacement shares its round with what it is compared with
        for partner in partners.get(cell, []):
            if room[partner]:
                plan.cells.setdefault(partner, PARTNER)
    ranked = []
    for comparison in found:
        if comparison.verdict != UNDECIDED or comparison.tie or comparison.depends:
            continue  # decided, or an answer no further process changes (a tie, or a state's)
        a, b = comparison.cell.cell, comparison.other.cell
        needed = comparison.processes_needed()
        if not (room[a] and room[b]):
            plan.capped.append(comparison.name)
        elif needed > max_processes:  # more processes would not decide it within the cap
            plan.cannot_decide[comparison.name] = comparison.what_would_decide(needed)
        else:
            ranked.append((needed if math.isfinite(needed) else 0.0, comparison.name, a, b, comparison.kind))
    for _, name, a, b, kind in sorted(ranked, key=lambda item: (item[0], item[1])):
        for cell in (a, b):
            if cell not in plan.cells:
                plan.cells[cell] = f"{kind} undecided"
                plan.for_undecided.add(cell)
        plan.undecided.append(name)
        plan.sides[name] = (a, b)
    return plan
