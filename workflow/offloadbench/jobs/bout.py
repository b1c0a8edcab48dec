"""One bout: the cells of one group measured taking turns, each in its own worker process.

First every cell's process gets ready for it (inputs made, compiled, its regions warmed
up). Then the bout hands out turns, one process computing at a time: in each cycle every
cell takes one turn, in a fresh random order, each cell going first equally often
(schedule.Cycles). Before each turn the bout waits until the other multi-threaded
workers' pools have stopped spinning (schedule.wait_until_still, on their threads'
states; on their CPU time, or a fixed pause by library, where those cannot be read; or
`measure.pause_s` where the config sets one). The bout ends once it has run `measure.min_cycles`
cycles and either its comparisons are precise (after `measure.min_samples` cycles at
least, the fewest a median's CI needs; `precise_pairs`: each ratio the tables will
judge, end to end as the decisions take it (on a GPU the copies counted), as the median
over this bout's cycles, within `measure.target_rel_ci`) or it has run
its cycles: in a run's first two rounds, until the group's budget is spent
(`measure.budget_s` per timed region of each cell); from the third, the cycles that make
the group's rounds buy the most precision for their time, from the variances the earlier
rounds measured within and between rounds and what a round and a cycle cost
(allocation.py, after Kalibera & Jones). It ends at `measure.max_samples` cycles at
most. Then every worker finishes its cell and writes its record, which keeps each sample's
cycle and each turn's place, so the pairs can be rebuilt from the raw data. The bout's entry
in the round's record keeps, per comparison, the median and spread of its cycles' log
ratios, from which the later rounds plan theirs.

A cell that fails, times out or runs out of memory ends as its own record and leaves the
bout; the others go on.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field

from .. import schedule
from ..allocation import BoutPlan, cycle_stats
from ..catalogue import SPECS
from ..cells import Cell, WorkerSpec
from ..compared import DECIDED_ON, decided_region, planned_comparisons
from ..measure.disturbance import processes_cpu_s, processes_running
from ..stats import median_ci_rel_halfwidth
from .protocol import Done, Finish, Prepare, Prepared, Turn, Turned

STOP_CONFIDENCE = 0.95  # of the in-bout precision that ends a bout (the tables use the config's level)


def method(min_cycles: int) -> dict[str, float]:
    """The bout's length and stop rule as numbers, for the round's record (the report words them)."""
    return {"min_cycles": min_cycles, "bout_stop_confidence": STOP_CONFIDENCE}


def paired_cycles(turns: dict[Cell, dict[str, dict[int, float]]], a: Cell, b: Cell) -> list[tuple[float, float]]:
    """(a's, b's) median in each cycle both took a turn in, in the region the comparison is
    decided on (compared.decided_region: end to end, the copies counted on a GPU); none
    where a side has not timed it."""
    mine = turns.get(a, {}).get(decided_region(a, turns.get(a, {})) or "", {})
    theirs = turns.get(b, {}).get(decided_region(b, turns.get(b, {})) or "", {})
    return [(mine[c], theirs[c]) for c in sorted(mine.keys() & theirs.keys())]


def precise_pairs(turns: dict[Cell, dict[str, dict[int, float]]], pairs: list[tuple[Cell, Cell]],
                  target: float) -> bool:
    """Whether every pair's ratio, end to end, is known within `target` (relative half-width
    of the CI of its median over the cycles both took a turn in). `turns`: each cell's
    median per region and cycle."""
    for a, b in pairs:
        ratios = [mine / theirs for mine, theirs in paired_cycles(turns, a, b) if theirs > 0]
        if ratios and median_ci_rel_halfwidth(ratios, STOP_CONFIDENCE) > target:
            return False
    return True


@dataclass
class BoutResult:
    """What one bout did, for the round's record."""

    group: str
    cells: int
    cycles: int = 0
    stop_reason: str = ""
    sampling_s: float = 0.0
    paused_s: float = 0.0
    still_spinning: int = 0  # hand-offs whose wait for quiet pools ended at the cap
    failed: list[str] = field(default_factory=list)
    process_s: float = 0.0  # the cells' preparation and finish: what the bout costs beside its cycles
    budget_s: float = 0.0  # its sampling budget (`measure.budget_s` per region of each cell)
    planned_cycles: int | None = None
    plan: str = ""
    pairs: dict[str, list] = field(default_factory=dict)  # "<a>|<b>|<region>" -> cycle_stats of a / b


class Bout:
    """Run by the round job (`round.Round`), which owns the workers and the records."""

    def __init__(self, round_job, cells: list[Cell], plan: BoutPlan | None = None):
        self.job = round_job
        self.cells = cells
        self.plan = plan or BoutPlan(None, "")
        self.name = cells[0].group_name
        self.id = uuid.uuid4().hex[:12]  # a rerun of an interrupted round is another bout
        self.regions: dict[Cell, int] = {}
        self.converged: dict[Cell, bool] = {}
        self.turns: dict[Cell, dict[str, dict[int, float]]] = {}  # median per region and cycle
        self.result = BoutResult(self.name, len(cells), planned_cycles=self.plan.cycles, plan=self.plan.why)
        self.last: WorkerSpec | None = None
        self.active: dict[WorkerSpec, float] = {}  # when each worker not yet found quiet last finished a command

    def run(self) -> BoutResult:
        settings = self.job.settings
        began = time.monotonic()
        for cell in self.cells:
            reason = self.job.device_reason(cell)
            if reason:
                self.job.write_failure(cell, "skipped", reason)
                self.job.cell_done(cell, "skipped", reason)
            else:
                regions = self.prepare(cell)
                if regions:
                    self.regions[cell] = regions
        self.result.process_s += time.monotonic() - began
        cycles = schedule.Cycles(list(self.regions), schedule.generator(self.job.args.round, self.name))
        budget = self.result.budget_s = sum(settings.budget_s * regions for regions in self.regions.values())
        min_cycles, max_cycles = settings.min_cycles, settings.max_samples
        min_for_ci = max(min_cycles, settings.min_samples)  # a median's CI needs this many
        target = settings.target_rel_ci
        pairs = planned_comparisons(list(self.regions))
        alone = [cell for cell in self.regions if not any(cell in pair for pair in pairs)]
        pause = settings.pause_s
        while cycles.cells:
            order = cycles.next()
            for position, cell in enumerate(order):
                if cell not in cycles.cells:
                    continue
                wait = self.hand_off(cell.worker, pause)
                self.result.paused_s += wait
                began = time.monotonic()
                if not self.turn(cell, cycles.count - 1, position, wait):
                    cycles.drop(cell)
                self.result.sampling_s += time.monotonic() - began
                self.last = cell.worker
            done = cycles.count >= min_cycles
            live = set(cycles.cells)
            if (cycles.count >= min_for_ci and all(self.converged.get(c) for c in alone if c in live)
                    and precise_pairs(self.turns, [p for p in pairs if set(p) <= live], target)):
                self.result.stop_reason = "ci"
            elif done and self.plan.cycles is not None and cycles.count >= self.plan.cycles:
                self.result.stop_reason = "planned"
            elif done and self.plan.cycles is None and self.result.sampling_s >= budget:
                self.result.stop_reason = "budget"
            elif cycles.count >= max_cycles:
                self.result.stop_reason = "max_samples"
            if self.result.stop_reason:
                break
        self.result.cycles = cycles.count
        self.result.pairs = self.pair_stats(pairs)
        began = time.monotonic()
        for cell in cycles.cells:
            self.finish(cell)
        self.result.process_s += time.monotonic() - began
        return self.result

    def pair_stats(self, pairs: list[tuple[Cell, Cell]]) -> dict[str, list]:
        """Per comparison, end to end: the median, variance and count of its cycles' log
        ratios (allocation.cycle_stats), for the later rounds' planning."""
        found = {}
        for a, b in pairs:
            logs = [math.log(mine / theirs) for mine, theirs in paired_cycles(self.turns, a, b) if mine > 0 and theirs > 0]
            median, variance, count = cycle_stats(logs)
            if math.isfinite(median):
                found[f"{a.key}|{b.key}|{DECIDED_ON}"] = [median, variance, count]
        return found

    def info(self) -> dict:
        """What a record keeps of its bout: which bout, its cells' workers, its cycles."""
        return {"id": self.id, "group": self.name, "workers": sorted(c.worker.name for c in self.regions),
                "cycles": self.result.cycles, "stop_reason": self.result.stop_reason or "budget"}

    def hand_off(self, after: WorkerSpec, pause: float | None) -> float:
        """Wait before `after`'s turn until no other worker's pool spins; the seconds waited.
        A pool still spinning at the cap is counted in the bout's `still_spinning`."""
        if pause is None:
            spinning = schedule.may_spin(self.active, after, time.monotonic())
            pids = self.job.pool.pids(spinning)
            if not pids:
                return 0.0
            waited = schedule.wait_until_still(lambda: processes_running(pids)) or \
                schedule.wait_until_quiet(lambda: processes_cpu_s(pids))
            if waited is not None:
                seconds, quiet = waited
                self.result.still_spinning += not quiet
                for worker in spinning:  # not polled again before their next command
                    self.active.pop(worker, None)
                return seconds
        wait = schedule.pause_s(self.last, after, pause)
        if wait:
            time.sleep(wait)
        return wait

    def prepare(self, cell: Cell) -> int:
        """Get the cell's worker ready for it; its timed regions, 0 when the cell failed."""
        artifact = cell.op in SPECS and SPECS[cell.op].finish is not None
        answer = self.job.command(cell, Prepare(cell.key, str(self.job.staging.partial(cell)), artifact,
                                                self.job.earlier.memory_scale(cell)), Prepared)
        self.last = cell.worker  # its warm-up left its pool spinning, as a turn does
        self.active[cell.worker] = time.monotonic()
        if answer is None:
            self.result.failed.append(cell.key)
            return 0
        return answer.regions or 1

    def turn(self, cell: Cell, cycle: int, position: int, pause: float) -> bool:
        before = self.last
        siblings = self.job.pool.pids(other.worker for other in self.regions if other.worker != cell.worker)
        answer = self.job.command(cell, Turn(cell.key, cycle, position, before.name if before else None,
                                             before.host_threads if before else None, pause, siblings), Turned)
        self.active[cell.worker] = time.monotonic()
        if answer is None:
            self.result.failed.append(cell.key)
            return False
        self.converged[cell] = answer.converged
        for region, seconds in answer.medians.items():
            self.turns.setdefault(cell, {}).setdefault(region, {})[cycle] = float(seconds)
        return True

    def finish(self, cell: Cell) -> None:
        self.job.command(cell, Finish(cell.key, self.result.stop_reason or "budget", self.info()), Done)
