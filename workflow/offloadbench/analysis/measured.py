"""Measured cells: each cell's records, one per process, read, checked and grouped.

The analysis sees a cell through `MeasuredCell`: its samples per process and phase, the
status the processes agree on, and the bootstrap draws its CIs come from (computed once
per cell and phase, whatever number of tables use them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import grid, layout
from ..catalogue import SPECS
from ..cells import Cell
from ..errors import shown
from ..kernels import read_kernel_files
from ..machine import mismatch
from ..records import FAILED, MalformedRecord, check_record_path, load_record, samples_held
from ..stats import MIN_PAIRED, Draws, Interval, centre_ci, draws, paired_ratio_ci, ratio_ci, seed_for
from ..verdicts import DEFAULT_MIN_EFFECT
from .processes import Judgement, judge, robust_spread


@dataclass(frozen=True)
class Analysis:
    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95
    min_effect: float = DEFAULT_MIN_EFFECT  # δ of the verdicts

    @classmethod
    def from_config(cls, section: dict) -> Analysis:
        return cls(int(section["bootstrap_resamples"]), int(section["seed"]), float(section["confidence"]),
                   float(section.get("min_effect", DEFAULT_MIN_EFFECT)))


def is_precision_note(flag: str) -> bool:
    return "CI not reached" in flag


def _flag_kind(flag: str) -> str:
    """The words before a flag's first number: "end_to_end: drift: second half", "bimodal samples"."""
    return re.split(r"\s[\d(+±-]", flag, maxsplit=1)[0].rstrip(" :")


def _flag_size(flag: str) -> float:
    """A flag's first percentage, its strength: the drift, the gap between modes, the CI reached."""
    found = re.search(r"(\d+(?:\.\d+)?)%", flag)
    return float(found.group(1)) if found else 0.0


def phase_samples(record: dict, phase: str) -> list[float]:
    """Per-call samples of a phase; a numpy cell without host work is its own end to end."""
    if phase == "compute":
        return record.get("samples_s") or []
    phases = record.get("phases") or {}
    if phase in phases:
        return phases[phase].get("samples_s") or []
    if phase == "end_to_end" and record["cell"]["library"] == "numpy" and "finish" not in phases:
        return record.get("samples_s") or []
    return []


@dataclass
class MeasuredCell:
    cell: Cell
    records: list[dict]  # one per process, by round
    analysis: Analysis = field(default_factory=Analysis)
    source: str = ""  # where the cell was measured, so that two machines' bootstraps differ
    between_floor: float = 0.0  # variance of log process medians its worker's cells typically show
    typical_spread: float = 0.0  # robust σ of log process medians its worker's cells show
    _draws: dict = field(default_factory=dict, repr=False)

    @cached_property
    def ok(self) -> list[dict]:
        return [r for r in self.records if r["status"] == "ok"]

    @property
    def planned(self) -> int:
        """The processes the run planned per cell (its regular rounds; extra ones come on top)."""
        return max((r["process"].get("rounds") or 1 for r in self.records), default=1)

    @cached_property
    def log_medians(self) -> list[float]:
        """The log of each ok process's compute median: what the outlier rule compares."""
        return [math.log(float(np.median(phase_samples(r, "compute")))) for r in self.ok]

    @cached_property
    def judgement(self) -> Judgement:
        """Which ok processes count: disturbed and outlying ones are left out once replaced."""
        return judge(self.ok, self.log_medians, self.planned, self.typical_spread)

    @cached_property
    def counted(self) -> list[dict]:
        """The ok records the cell's numbers come from."""
        return [self.ok[i] for i in self.judgement.counted]

    @property
    def replaced(self) -> str:
        """"1 of 4 processes replaced: disturbed (other processes used 0.90 cores)", or ""."""
        left = self.judgement.left_out
        if not left:
            return ""
        rounds = ", ".join(f"round {self.ok[i]['process']['round']}: {why}" for i, why in left)
        return f"{len(left)} of {len(self.ok)} processes replaced ({rounds})"

    @property
    def disagree(self) -> str:
        """Why the processes still disagree after replacing what could be ("" when they agree)."""
        return self.judgement.disagree

    @property
    def status(self) -> str:
        """ok when any process measured it; otherwise the failure the processes share."""
        if self.ok:
            return "ok"
        statuses = [r["status"] for r in self.records]
        for status in (*FAILED, "skipped"):
            if status in statuses:
                return status
        return statuses[0]

    @property
    def reason(self) -> str:
        if self.ok:
            return ""
        return next(r["reason"] for r in self.records if r["status"] == self.status)

    @property
    def first(self) -> dict:
        """The record that stands for the cell's fixed facts (model, check, device)."""
        return self.ok[0] if self.ok else self.records[0]

    def groups(self, phase: str, rounds: tuple[int, ...] | None = None) -> list[list[float]]:
        """The samples of `phase`, one list per counted process that measured it (of `rounds` only)."""
        return [s for r in self.counted if (s := phase_samples(r, phase))
                and (rounds is None or r["process"]["round"] in rounds)]

    def rounds(self, phase: str) -> list[int]:
        """The round of each of `groups(phase)`."""
        return [r["process"]["round"] for r in self.counted if phase_samples(r, phase)]

    def ratio(self, other: MeasuredCell, phase: str) -> Interval:
        """This cell's time over `other`'s, paired by round on the rounds both were measured
        in side by side, where they share at least MIN_PAIRED of them; independent otherwise.
        Two shared rounds give Student's t one degree of freedom (12.7 against 4.3 with two):
        an interval far wider than either cell's own, built on less than the data."""
        mine, theirs = self.rounds(phase), other.rounds(phase)
        common = tuple(sorted(set(mine) & set(theirs)))
        if self.source == other.source and len(common) >= MIN_PAIRED:
            on = None if mine == theirs else common
            seed = seed_for(self.analysis.seed, self.source, self.cell.key, other.cell.key, phase)
            return paired_ratio_ci(self.draws(phase, on), other.draws(phase, on), seed, self.analysis.confidence)
        return ratio_ci(self.draws(phase), other.draws(phase), self.analysis.confidence,
                        (self.between_floor, other.between_floor))

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
            seed = seed_for(self.analysis.seed, self.source, self.cell.key, phase, *map(str, rounds or ()))
            self._draws[key] = draws(self.groups(phase, rounds), self.analysis.resamples, seed)
        return self._draws[key]

    def median(self, phase: str) -> float:
        """Geometric mean of the process medians (the median itself with one process)."""
        medians = self.process_medians(phase)
        return math.exp(float(np.mean(np.log(medians)))) if medians else math.nan

    def process_medians(self, phase: str = "compute") -> list[float]:
        return [float(np.median(g)) for g in self.groups(phase)]

    def _diagnostics(self) -> list[str]:
        """Each kind of flag once: its strongest case, and in how many processes it was seen."""
        by_kind: dict[str, list[str]] = {}
        for record in self.counted:
            for flag in dict.fromkeys((record.get("diagnostics") or {}).get("flags") or []):
                by_kind.setdefault(_flag_kind(flag), []).append(flag)
        n = len(self.counted)
        return [max(seen, key=_flag_size) + (f" (in {len(seen)} of {n} processes)" if n > 1 else "")
                for seen in by_kind.values()]

    @property
    def flags(self) -> list[str]:
        """What makes the cell's numbers untrustworthy as they stand: two modes, drift, a
        clock that moved, a process that failed (each once over the processes)."""
        seen = [f for f in self._diagnostics() if not is_precision_note(f)]
        if self.disagree:
            seen.append(f"processes disagree: {self.disagree}")
        failed = [r for r in self.records if r["status"] in FAILED]
        if self.ok and failed:
            seen.append(f"{len(failed)} of {len(self.records)} processes failed ({failed[0]['status']}: {failed[0]['reason']})")
        return seen

    @property
    def precision_notes(self) -> list[str]:
        """Regions whose median within a process did not reach the CI target in its budget:
        the cell's CI is wider for it, which is honest, so it is a note, not a flag."""
        return [f for f in self._diagnostics() if is_precision_note(f)]

    @property
    def shares_cores(self) -> bool:
        """Its threads used every core, so it competed with the orchestrator for them."""
        return any((r.get("sharing") or {}).get("shares_cores_with_orchestrator") for r in self.counted)

    @property
    def disturbed_cores(self) -> float:
        """The most CPU that other processes used while any of its processes sampled (cores)."""
        return max(((r.get("disturbance") or {}).get("others_cores") or 0.0 for r in self.ok), default=0.0)


def grid_records(raw: str, grid_config: dict, rounds: int, kernel_paths=(), environment: dict | None = None
                 ) -> list[str]:
    """Every record a finished run of the grid holds below `raw`; one missing (deleted by
    hand, say) stops the analysis by name with the way to measure it again. The kernels
    files are read for their names, never run; `environment` (environment.json) says which
    devices the self-comparisons were chosen on."""
    kernels = read_kernel_files(list(kernel_paths), SPECS)
    cells = grid.expand(grid_config, kernels, grid.usable_devices(environment))
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


def load_cells(paths, environment: dict | None = None, analysis: Analysis = Analysis(),
               source: str = "", max_samples: int | None = None) -> list[MeasuredCell]:
    """Read every record, refusing malformed ones, misnamed ones and ones from other
    hardware by file name, and stopping as soon as they hold more than `max_samples`
    samples together (before any analysis); group them by cell, processes in round order."""
    expected = (environment or {}).get("fingerprint")
    records = []
    seen: dict[tuple[Cell, int], Path] = {}
    held = 0
    for path in map(Path, paths):
        record = load_record(path)
        held += samples_held(record)
        if max_samples is not None and held > max_samples:
            raise OverBudget(path, max_samples)
        cell = check_record_path(path, record)
        earlier = seen.setdefault((cell, record["process"]["round"]), path)
        if earlier != path:
            raise MalformedRecord(
                f"{shown(path)}: holds the same cell and process (round {record['process']['round']}) as {shown(earlier)}; "
                "one measurement counts once: delete one of them"
            )
        different = mismatch(expected, (record.get("provenance") or {}).get("fingerprint"))
        if different:
            raise MalformedRecord(
                f"{shown(path)}: measured on other hardware than environment.json records ({different}); "
                "results of two machines are mixed"
            )
        records.append(record)
    return group_records(records, analysis, source)


def group_records(records: list[dict], analysis: Analysis = Analysis(), source: str = "") -> list[MeasuredCell]:
    """One MeasuredCell per cell, its processes in round order."""
    by_cell: dict[Cell, list[dict]] = {}
    for record in records:
        by_cell.setdefault(Cell.from_dict(record["cell"]), []).append(record)
    cells = [
        MeasuredCell(cell, sorted(group, key=lambda r: r["process"]["round"]), analysis, source)
        for cell, group in by_cell.items()
    ]
    pool_typical_spread(cells)
    pool_between_variance(cells)
    return cells


def _worker(mc: MeasuredCell) -> tuple:
    return mc.cell.library, mc.cell.device, mc.cell.threads, mc.cell.mode


def pool_typical_spread(cells: list[MeasuredCell]) -> None:
    """Give each cell the spread between processes its worker's cells typically show (the
    median of their robust spreads): the scale of the outlier rule, which one cell's three
    processes are too few to set. Set before any cell judges its processes."""
    by_worker: dict[tuple, list[float]] = {}
    for mc in cells:
        spread = robust_spread(mc.log_medians)
        if spread is not None:
            by_worker.setdefault(_worker(mc), []).append(spread)
    for mc in cells:
        pooled = by_worker.get(_worker(mc), [])
        mc.typical_spread = float(np.median(pooled)) if pooled else 0.0


def pool_between_variance(cells: list[MeasuredCell]) -> None:
    """Give each cell a floor under its variance between processes: the median of its
    worker's cells (same library, device and threads). Three processes that happen to
    agree closely are weak evidence that processes agree, when the worker's other cells
    show that they do not: without the floor, such cells were the ones a second run fell
    outside of."""
    by_worker: dict[tuple, list[float]] = {}
    for mc in cells:
        variance = mc.between_variance() if mc.status == "ok" else None
        if variance is not None:
            by_worker.setdefault((mc.cell.library, mc.cell.device, mc.cell.threads), []).append(variance)
    for mc in cells:
        pooled = by_worker.get((mc.cell.library, mc.cell.device, mc.cell.threads), [])
        mc.between_floor = float(np.median(pooled)) if len(pooled) >= 3 else 0.0
