"""Measured cells: each cell's records, one per process, read, checked and grouped.

The analysis sees a cell through `MeasuredCell`: its typed records (records.CellRecord), the
status the processes agree on, the bootstrap draws its own CIs come from (computed once per
cell and phase, whatever number of tables use them), and its ratio to another cell:

- *paired in time*, where the two took turns in one bout in each of at least three shared
  processes (rounds): per round, the median over the bout's cycles of log(t_self / t_other),
  each side's value in a cycle being the median of its samples there; then a t-interval on
  the rounds' medians with rounds − 1 degrees of freedom, turned back into a ratio. What a
  cycle shares (the machine's speed at that moment) cancels; what differs from process to
  process (memory layout, pages) stays in the spread of the rounds.
- *paired by round*, for records measured before bouts: the two-level bootstrap resampling
  rounds for both at once (stats.paired_ratio_ci);
- *unpaired* otherwise, from each cell's own interval (stats.ratio_ci).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import grid, layout
from ..catalogue import SPECS
from ..cells import Cell
from ..errors import shown
from ..kernels import read_kernel_files
from ..machine import mismatch
from ..records import FAILED, CellRecord, Environment, MalformedRecord, check_record_path, load_record
from ..records.types import WHOLE_CELL, Flag
from ..stats import (
    MIN_PAIRED,
    NO_INTERVAL,
    Draws,
    Interval,
    centre_ci,
    draws,
    log_t_interval,
    paired_ratio_ci,
    ratio_ci,
    stream_for,
)
from ..verdicts import Judging
from .processes import Judgement, judge, robust_spread

PAIRED_IN_TIME, PAIRED_BY_ROUND, UNPAIRED = "paired in time", "paired by round", "unpaired"


@dataclass(frozen=True)
class Analysis:
    """How the raw samples become tables: the bootstrap's resamples and random state, and
    the judging policy (δ and the confidence level) every interval and verdict follows."""

    resamples: int = 2000
    random_state: int = 0
    judging: Judging = field(default_factory=Judging)

    @property
    def confidence(self) -> float:
        return self.judging.confidence

    @classmethod
    def from_config(cls, section: dict) -> Analysis:
        return cls(int(section["bootstrap_resamples"]), int(section["random_state"]), Judging.from_config(section))


def cycle_values(record: CellRecord, phase: str) -> dict[int, float]:
    """The log of a process's time in each cycle of its bout: the median of the samples it
    took in that cycle (a turn of a fast op holds many)."""
    region = record.samples(phase)
    if not region.seconds or region.cycles is None:
        return {}
    by_cycle: dict[int, list[float]] = {}
    for cycle, seconds in zip(region.cycles, region.seconds, strict=True):
        by_cycle.setdefault(cycle, []).append(seconds)
    return {cycle: math.log(float(np.median(values))) for cycle, values in by_cycle.items()}


def paired_rounds(mine: CellRecord, theirs: CellRecord, phase: str) -> float | None:
    """One round's paired log ratio (mine over theirs): the median over the cycles both took
    a turn in, within one bout; None where they did not share a bout."""
    if mine.bout is None or theirs.bout is None or mine.bout.id != theirs.bout.id:
        return None
    a, b = cycle_values(mine, phase), cycle_values(theirs, phase)
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    return float(np.median([a[c] - b[c] for c in shared]))


def faults_per_call(records) -> float:
    """Fresh pages a call maps: the median over each process's compute samples, then over
    the processes (NaN where they were not counted)."""
    medians = [float(np.median(found)) for r in records
               if (found := [f for f in r.samples("compute").faults_per_call or () if f is not None])]
    return float(np.median(medians)) if medians else math.nan


@dataclass(frozen=True)
class States:
    """A cell whose counted processes fall into two groups far apart (analysis/processes.py):
    each group's records, fast first."""

    fast: tuple[CellRecord, ...]
    slow: tuple[CellRecord, ...]

    def time_s(self, state: str) -> float:
        """The time of the "fast" or "slow" state: the geometric mean of its process medians."""
        records = self.fast if state == "fast" else self.slow
        return math.exp(float(np.mean([math.log(float(np.median(r.samples("compute").seconds))) for r in records])))

    def of_round(self, round_index: int) -> str | None:
        """"fast" or "slow": the state of the cell's process of that round (None: none counted)."""
        if any(r.round == round_index for r in self.fast):
            return "fast"
        return "slow" if any(r.round == round_index for r in self.slow) else None

    def rounds(self, state: str) -> str:
        """The rounds of the "fast" or "slow" state's processes, in order: "1 2 4"."""
        records = self.fast if state == "fast" else self.slow
        return " ".join(str(r.round) for r in sorted(records, key=lambda r: r.round))


@dataclass
class MeasuredCell:
    cell: Cell
    records: list[CellRecord]  # one per process, by round
    analysis: Analysis = field(default_factory=Analysis)
    source: str = ""  # where the cell was measured, so that two machines' bootstraps differ
    between_floor: float = 0.0  # variance of log process medians its worker's cells typically show
    typical_spread: float = 0.0  # robust σ of log process medians its worker's cells show
    round_speed: dict = field(default_factory=dict)  # round -> log factor all its group's cells ran slower by
    _draws: dict = field(default_factory=dict, repr=False)

    @cached_property
    def ok(self) -> list[CellRecord]:
        return [r for r in self.records if r.ok]

    @property
    def planned(self) -> int:
        """The processes the run planned per cell (its regular rounds; extra ones come on top)."""
        return max((r.processes for r in self.records), default=1)

    @cached_property
    def log_medians(self) -> list[float]:
        """The log of each ok process's compute median."""
        return [math.log(float(np.median(r.samples("compute").seconds))) for r in self.ok]

    @property
    def own_log_medians(self) -> list[float]:
        """The log medians less their round's speed (`pool_round_speed`): what is the process's
        own, which the outlier rule and the states compare. A round in which the machine ran
        slower for the whole group is no state of one cell."""
        return [value - self.round_speed.get(r.round, 0.0) for value, r in zip(self.log_medians, self.ok, strict=True)]

    @cached_property
    def judgement(self) -> Judgement:
        """Which ok processes count: disturbed and outlying ones are left out once replaced."""
        return judge(self.ok, self.own_log_medians, self.planned, self.typical_spread)

    @cached_property
    def counted(self) -> list[CellRecord]:
        """The ok records the cell's numbers come from."""
        return [self.ok[i] for i in self.judgement.counted]

    @cached_property
    def states(self) -> States | None:
        """The two states its counted processes fall into (None: one)."""
        split = self.judgement.states
        if split is None:
            return None
        return States(tuple(self.ok[i] for i in split[0]), tuple(self.ok[i] for i in split[1]))

    @property
    def unsettled(self) -> bool:
        """No verdict may rest on this cell yet: its processes disagree, or half or more of
        them were disturbed."""
        return self.judgement.disagree is not None or self.judgement.disturbed

    @property
    def status(self) -> str:
        """ok when any process measured it; otherwise the failure the processes share."""
        if self.ok:
            return "ok"
        statuses = [r.status for r in self.records]
        return next((s for s in (*FAILED, "skipped") if s in statuses), statuses[0])

    @property
    def reason(self) -> str:
        if self.ok:
            return ""
        return next(r.reason for r in self.records if r.status == self.status)

    @property
    def first(self) -> CellRecord:
        """The record that stands for the cell's fixed facts (model, check, device)."""
        return self.ok[0] if self.ok else self.records[0]

    def groups(self, phase: str, rounds: tuple[int, ...] | None = None) -> list[tuple[float, ...]]:
        """The samples of `phase`, one tuple per counted process that measured it (of `rounds` only)."""
        return [s for r in self.counted if (s := r.samples(phase).seconds) and (rounds is None or r.round in rounds)]

    def rounds(self, phase: str) -> list[int]:
        """The round of each of `groups(phase)`."""
        return [r.round for r in self.counted if r.samples(phase).seconds]

    def ratio(self, other: MeasuredCell, phase: str) -> Interval:
        """This cell's time over `other`'s: paired in time on the rounds where the two took
        turns in one bout, where they share at least MIN_PAIRED of them; else paired by
        round on at least MIN_PAIRED shared rounds (records from before bouts); else
        unpaired. Two shared rounds give Student's t one degree of freedom (12.7 against
        4.3 with three): an interval far wider than either cell's own, built on less than
        the data."""
        confidence = self.analysis.confidence
        if self.source == other.source:
            theirs = {r.round: r for r in other.counted}
            per_round = [paired for r in self.counted if r.round in theirs
                         and (paired := paired_rounds(r, theirs[r.round], phase)) is not None]
            if len(per_round) >= MIN_PAIRED:
                return replace(log_t_interval(np.exp(per_round), confidence), pairing=PAIRED_IN_TIME)
        mine, theirs_rounds = self.rounds(phase), other.rounds(phase)
        common = tuple(sorted(set(mine) & set(theirs_rounds)))
        if self.source == other.source and len(common) >= MIN_PAIRED:
            on = None if mine == theirs_rounds else common
            seed = stream_for(self.analysis.random_state, self.source, self.cell.key, other.cell.key, phase)
            interval = paired_ratio_ci(self.draws(phase, on), other.draws(phase, on), seed, confidence)
            return replace(interval, pairing=PAIRED_BY_ROUND if interval.processes >= MIN_PAIRED else UNPAIRED)
        interval = ratio_ci(self.draws(phase), other.draws(phase), confidence, (self.between_floor, other.between_floor))
        return replace(interval, pairing=UNPAIRED)

    def interval(self, phase: str) -> Interval:
        """This cell's time with its CI."""
        return centre_ci(self.draws(phase), self.analysis.confidence, self.between_floor)

    def between_variance(self) -> float | None:
        """The sample variance of this cell's log process medians (None below two)."""
        medians = self.process_medians()
        return float(np.var(np.log(medians), ddof=1)) if len(medians) >= 2 else None

    def draws(self, phase: str, rounds: tuple[int, ...] | None = None) -> Draws | None:
        key = (phase, rounds)
        if key not in self._draws:
            seed = stream_for(self.analysis.random_state, self.source, self.cell.key, phase, *map(str, rounds or ()))
            self._draws[key] = draws(self.groups(phase, rounds), self.analysis.resamples, seed)
        return self._draws[key]

    def median(self, phase: str) -> float:
        """Geometric mean of the process medians (the median itself with one process)."""
        medians = self.process_medians(phase)
        return math.exp(float(np.mean(np.log(medians)))) if medians else math.nan

    def process_medians(self, phase: str = "compute") -> list[float]:
        return [float(np.median(g)) for g in self.groups(phase)]

    def flag_rows(self) -> list[dict]:
        """flags.csv's rows of the cell (`columns.FLAGS`): its noise flags, then each process
        left out, and whether another replaced it."""
        left = self.judgement.left_out
        replaced = len(self.ok) - len(left) >= self.planned
        return self.noise_rows + [
            _flag_row(out.flag, processes=len(left), of_processes=len(self.ok), factor=out.factor,
                      left_out_round=self.ok[out.index].round, replaced=replaced) for out in left]

    @cached_property
    def noise_rows(self) -> list[dict]:
        """What makes the cell's numbers untrustworthy as they stand: each kind of the counted
        processes' flags once per region, its strongest case, in how many processes (the CI
        not reached is a precision note, not a flag); processes that still disagree; processes
        that failed. Kept once worked out: every ratio with the cell asks whether it is flagged."""
        by_kind: dict[tuple[str, str], list[Flag]] = {}
        for record in self.counted:
            for flag in record.flags:
                if flag.kind != "not_converged":
                    by_kind.setdefault((flag.region, flag.kind), []).append(flag)
        n = len(self.counted)
        rows = [_flag_row(max(seen, key=lambda f: f.size), processes=len(seen), of_processes=n)
                for seen in by_kind.values()]
        if (disagree := self.judgement.disagree) is not None:
            fault = disagree.fault
            found = Flag("disagree", fault.region, fault.size, fault.text) if fault else \
                Flag("two_differ", WHOLE_CELL, math.nan, "")  # its only two undisturbed processes
            rows.append(_flag_row(found, processes=disagree.processes, of_processes=disagree.of,
                                  factor=disagree.factor))
        failed = [r for r in self.records if r.status in FAILED]
        if self.ok and failed:
            rows.append(_flag_row(Flag(failed[0].status, WHOLE_CELL, math.nan, failed[0].reason),
                                  processes=len(failed), of_processes=len(self.records)))
        return rows

    @property
    def flagged(self) -> bool:
        """A noise check flagged the cell (a process left out is no flag on the rest)."""
        return bool(self.noise_rows)

    @property
    def precision(self) -> dict:
        """Where a region's median within a process did not reach the CI target in its budget
        (the cell's CI is wider for it, which is honest, so it is a note, not a flag): in how
        many processes, which regions, and the widest such CI (relative half-width)."""
        missed = [[f for f in r.flags if f.kind == "not_converged"] for r in self.counted]
        flags = [f for found in missed for f in found]
        return {"precision_processes": sum(map(bool, missed)),
                "precision_regions": " ".join(sorted({f.region for f in flags})),
                "precision_widest_rel_ci": max((f.size for f in flags), default=math.nan)}

    @property
    def shares_cores(self) -> bool:
        """Its threads used every core, so it competed with the orchestrator for them."""
        return any(r.shares_cores for r in self.counted)

    @property
    def disturbed_cores(self) -> float:
        """The most CPU that other processes used while any of its processes sampled (cores)."""
        return max((r.disturbance.others_cores or 0.0 for r in self.ok), default=0.0)


def _flag_row(flag: Flag, *, processes: int, of_processes: int, factor: float | None = None,
              left_out_round: int | None = None, replaced: bool | None = None) -> dict:
    """One row of flags.csv without its cell's columns."""
    return {"kind": flag.kind, "region": flag.region, "amount": flag.size, "processes": processes,
            "of_processes": of_processes, "factor": math.nan if factor is None else factor,
            "left_out_round": left_out_round, "replaced": replaced, "text": flag.text}


def carry_over(cells: list[MeasuredCell], phase: str = "compute") -> Interval:
    """How much slower the cells' turns ran right after a multi-threaded OpenMP worker's turn
    than after any other: per process, the median log time of such cycles minus that of
    the rest; across processes, a t-interval (NaN with fewer than two processes that saw
    both). What the pause between turns leaves of one worker's spinning pool."""
    per_process = []
    for mc in cells:
        for record in mc.counted:
            values = cycle_values(record, phase)
            places = {turn.cycle: turn for turn in record.turns}
            hit = [v for c, v in values.items() if c in places and places[c].after_openmp_pool]
            rest = [v for c, v in values.items() if c in places and not places[c].after_openmp_pool]
            if hit and rest:
                per_process.append(float(np.median(hit) - np.median(rest)))
    if len(per_process) < 2:
        return NO_INTERVAL
    return log_t_interval(np.exp(per_process), cells[0].analysis.confidence)


def grid_records(raw: str, grid_config: dict, rounds: int, kernel_paths=(), environment: Environment | None = None
                 ) -> list[str]:
    """Every record a finished run of the grid holds below `raw`; one missing (deleted by
    hand, say) stops the analysis by name with the way to measure it again. The kernels
    files are read for their names, never run; `environment` (environment.json) says which
    devices the self-comparisons were chosen on."""
    kernels = read_kernel_files(list(kernel_paths), SPECS)
    cells = grid.expand(grid_config, kernels, environment.usable_devices if environment else None)
    paths = layout.grid_record_paths(raw, cells, rounds)
    for k, path in paths:
        if not Path(path).exists():
            raise MalformedRecord(
                f"{path}: missing although round {k} has finished; delete {raw}/{layout.round_relpath(k)} "
                "and run again to measure what is missing"
            )
    return [path for _, path in paths] + layout.extra_record_paths(raw, cells, rounds)


class OverBudget(MalformedRecord):
    """Records that hold more samples together than a source may (bundle_limits.max_samples)."""

    def __init__(self, path: Path, budget: int):
        super().__init__(f"{shown(path)}: with it, the records hold more than {budget} samples, over what "
                         "bundle_limits.max_samples allows one source")
        self.path = path


def load_cells(paths, environment: Environment | None = None, analysis: Analysis | None = None,
               source: str = "", max_samples: int | None = None) -> list[MeasuredCell]:
    """Read every record, refusing malformed ones, misnamed ones and ones from other
    hardware by file name, and stopping as soon as they hold more than `max_samples`
    samples together (before any analysis); group them by cell, processes in round order."""
    expected = environment.fingerprint if environment else None
    records = []
    seen: dict[tuple[Cell, int], Path] = {}
    held = 0
    for path in map(Path, paths):
        record = load_record(path)
        held += record.held
        if max_samples is not None and held > max_samples:
            raise OverBudget(path, max_samples)
        cell = check_record_path(record)
        earlier = seen.setdefault((cell, record.round), path)
        if earlier != path:
            raise MalformedRecord(
                f"{shown(path)}: holds the same cell and process (round {record.round}) as {shown(earlier)}; "
                "one measurement counts once: delete one of them"
            )
        different = mismatch(expected, record.fingerprint)
        if different:
            raise MalformedRecord(
                f"{shown(path)}: measured on other hardware than environment.json records ({different}); "
                "results of two machines are mixed"
            )
        records.append(record)
    return group_records(records, analysis or Analysis(), source)


def group_records(records: list[CellRecord], analysis: Analysis | None = None, source: str = "") -> list[MeasuredCell]:
    """One MeasuredCell per cell, its processes in round order."""
    analysis = analysis or Analysis()
    by_cell: dict[Cell, list[CellRecord]] = {}
    for record in records:
        by_cell.setdefault(record.cell, []).append(record)
    cells = [MeasuredCell(cell, sorted(group, key=lambda r: r.round), analysis, source)
             for cell, group in by_cell.items()]
    pool_round_speed(cells)
    pool_typical_spread(cells)
    pool_between_variance(cells)
    return cells


MIN_CELLS_FOR_ROUND_SPEED = 3


def pool_round_speed(cells: list[MeasuredCell]) -> None:
    """Give each cell the speed of each of its rounds, as its group (op, dtype and size,
    whose cells took turns in one bout) saw it: per round, the median over the group's
    cells of how far their process median lay from their own mean (on the log scale), where
    at least three cells ran in that round. A VM that ran slower for a whole round slows
    every cell of the bout; pairing cancels it in the ratios, and this takes it out of what
    the outlier rule and the states read as a process's own."""
    by_group: dict[tuple, list[MeasuredCell]] = {}
    for mc in cells:
        if mc.ok:
            by_group.setdefault((mc.cell.op, mc.cell.dtype, mc.cell.size), []).append(mc)
    for group in by_group.values():
        offsets: dict[int, list[float]] = {}
        for mc in group:
            mean = float(np.mean(mc.log_medians))
            for value, record in zip(mc.log_medians, mc.ok, strict=True):
                offsets.setdefault(record.round, []).append(value - mean)
        speed = {k: float(np.median(v)) for k, v in offsets.items() if len(v) >= MIN_CELLS_FOR_ROUND_SPEED}
        for mc in group:
            mc.round_speed = speed


def pool_typical_spread(cells: list[MeasuredCell]) -> None:
    """Give each cell the spread between processes its worker's cells typically show (the
    median of their robust spreads): the scale of the outlier rule, which one cell's three
    processes are too few to set. Set before any cell judges its processes."""
    spreads = _worker_medians(cells, lambda mc: robust_spread(mc.own_log_medians),
                              lambda c: (c.library, c.device, c.threads, c.mode))
    for mc, spread in zip(cells, spreads, strict=True):
        mc.typical_spread = spread


def pool_between_variance(cells: list[MeasuredCell]) -> None:
    """Give each cell a floor under its variance between processes: the median of its
    worker's cells (same library, device and threads). Three processes that happen to
    agree closely are weak evidence that processes agree, when the worker's other cells
    show that they do not: without the floor, such cells were the ones a second run fell
    outside of."""
    floors = _worker_medians(cells, lambda mc: mc.between_variance() if mc.status == "ok" else None,
                             lambda c: (c.library, c.device, c.threads), least=3)
    for mc, floor in zip(cells, floors, strict=True):
        mc.between_floor = floor


def _worker_medians(cells: list[MeasuredCell], value, worker, least: int = 1) -> list[float]:
    """For each cell, the median of `value` (None: the cell has none) over the cells of its
    worker (`worker` of a cell), where at least `least` of them have one; else 0."""
    by_worker: dict[tuple, list[float]] = {}
    for mc in cells:
        if (found := value(mc)) is not None:
            by_worker.setdefault(worker(mc.cell), []).append(found)
    return [float(np.median(pooled)) if len(pooled := by_worker.get(worker(mc.cell), [])) >= least else 0.0
            for mc in cells]
