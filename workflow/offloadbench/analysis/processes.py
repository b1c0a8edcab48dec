"""Which of a cell's processes count, and whether they fall into states; never a silent drop.

A process is left out when the worker saw other processes use the machine while it
sampled (`disturbance.disturbed`), or when its median lies far from the others' *for a
reason its own record shows*: its samples drifted or split in two, or its CPU clock moved
while it sampled. A process is never left out for being fast, or slow, alone: on our
2-core test VM one NumPy process of the heat-step kernel (n = 1024) ran 3.1 ms a call and
seven ran 7-8 ms, each steady in itself; the fast one was the function's speed in a
program of its own, and the rule that dropped it kept the majority's state, whichever
state that was. Far is judged on log medians, against the larger of a fixed 20% and four
typical spreads between processes of the same worker (the median over its cells of a
robust spread, 1.4826 × MAD). At most a minority is left out, the worst first.

A left-out process is *replaced* when the cell still has the planned number of processes
without it: the settling stage measures extra processes for this (jobs/settle.py). A cell
of many processes may also leave a quarter of them out unreplaced (2 of 8: `enough`), each
named with its reason. Where it could not (its cap reached, or results from before
settling existed), every process is kept; a cell whose processes then disagree is flagged, and its verdicts are undecided. So
are the verdicts of a cell that counts disturbed processes in half or more of its count:
a busy process beside a bout slows a multi-threaded turn far more than a one-thread one,
so pairing does not cancel it, and on our 2-core VM a one-core busy loop turned a thread
scaling of 1.28× (1.17-1.40) into 0.71× (0.52-0.97).

Every distance is taken on the process's own log median: its round's speed, which all the
cells of its bout shared (a VM slower for a whole round), is taken out first
(analysis/measured.py, `pool_round_speed`).

Where the counted processes fall into two groups far apart (a gap between their sorted log
medians beyond the same threshold), the cell has two *states* (`States`): both are kept,
both times are reported with what the records show differs between them (fresh pages per
call, the rounds), and each comparison of the cell is judged in each state
(analysis/pairs.py), so that the answer says whether it holds in both.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..records import CellRecord
from ..records.types import WHOLE_CELL, Flag

OUTLIER_MIN = math.log(1.20)
MIN_KEPT = 3
OUTLIER_SIGMAS = 4.0
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class LeftOut:
    """A process not counted (an index into the cell's ok records): disturbed, as its `flag`
    says, or far from the others (`factor`, None when disturbed) for the fault its own
    record shows (`flag`)."""

    index: int
    flag: Flag
    factor: float | None = None


@dataclass(frozen=True)
class Disagreement:
    """Counted processes that still disagree: its two undisturbed processes `factor` apart
    (`fault` None), or `processes` of `of` far from the others, the first `factor` away for
    `fault`."""

    processes: int
    of: int
    factor: float
    fault: Flag | None = None


@dataclass(frozen=True)
class Judgement:
    """The verdict on a cell's processes (indices into its ok records, in round order)."""

    counted: tuple[int, ...]  # the processes its numbers come from
    left_out: tuple[LeftOut, ...]  # processes that are not counted
    wanted: tuple[LeftOut, ...]  # processes that should be replaced but are not yet
    disagree: Disagreement | None = None  # the counted processes still disagree
    disturbed: bool = False  # half or more of the counted processes were disturbed
    states: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # the counted split into fast and slow

    @property
    def needs_more(self) -> bool:
        """Another process would let a disturbed or outlying one be replaced, or two that
        disagree be told apart."""
        return bool(self.wanted) or self.disagree is not None


def method() -> dict[str, float]:
    """Which processes count, as numbers: written into judging.json for the report's words."""
    return {"outlier_min_rel": round(math.exp(OUTLIER_MIN) - 1, 6), "outlier_sigmas": OUTLIER_SIGMAS,
            "min_kept_processes": MIN_KEPT}


def robust_spread(log_medians) -> float | None:
    """σ of log process medians from their median absolute deviation (None below three)."""
    values = np.asarray(list(log_medians), dtype=float)
    if values.size < 3:
        return None
    return float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values))))


def _outliers(logs: dict[int, float], limit: float) -> dict[int, float]:
    """Outlying processes (index → factor from the others), the worst first, a minority at most."""
    remaining, found = sorted(logs), {}
    keep_at_least = len(remaining) // 2 + 1
    while len(remaining) >= 3 and len(remaining) > keep_at_least:
        gaps = {i: abs(logs[i] - float(np.median([logs[j] for j in remaining if j != i]))) for i in remaining}
        worst = max(remaining, key=lambda i: gaps[i])
        if gaps[worst] <= limit:
            break
        found[worst] = math.exp(gaps[worst])
        remaining.remove(worst)
    return found


def mostly_disturbed(records: list[CellRecord], counted: list[int]) -> bool:
    """Half or more of the counted processes were disturbed."""
    disturbed = sum(1 for i in counted if records[i].disturbance.disturbed)
    return disturbed > 0 and 2 * disturbed >= len(counted)


def split_states(log_medians: dict[int, float], limit: float) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The processes in two groups, fast then slow, where the largest gap between their
    sorted log medians exceeds `limit` (None: one state; fewer than three processes never
    show two)."""
    if len(log_medians) < 3:
        return None
    ordered = sorted(log_medians, key=lambda i: log_medians[i])
    gaps = [log_medians[b] - log_medians[a] for a, b in itertools.pairwise(ordered)]
    at = max(range(len(gaps)), key=lambda k: gaps[k])
    if gaps[at] <= limit:
        return None
    return tuple(sorted(ordered[:at + 1])), tuple(sorted(ordered[at + 1:]))


def enough(planned: int) -> int:
    """The processes a cell must keep to leave the others out: the planned number less a
    quarter of it (6 of 8), never fewer than three (a paired ratio needs three)."""
    return max(MIN_KEPT, planned - planned // 4)


def judge(records: list[CellRecord], log_medians: list[float], planned: int, typical_spread: float) -> Judgement:
    """Which of `records` (a cell's ok processes, with their log medians) count, and the
    states the counted ones fall into."""
    # a disturbed process, with its own flag (the worker finds the disturbance where it measures it)
    why = {i: next((flag for flag in record.flags if flag.kind == "disturbed"),
                   Flag("disturbed", WHOLE_CELL, record.disturbance.others_cores or 0.0, "disturbed"))
           for i, record in enumerate(records) if record.disturbance.disturbed}
    left = {i: LeftOut(i, flag) for i, flag in why.items()}
    clean = {i: v for i, v in enumerate(log_medians) if i not in why}
    limit = max(OUTLIER_MIN, OUTLIER_SIGMAS * typical_spread)  # the log distance that makes an outlier
    outlying = []
    for i, factor in _outliers(clean, limit).items():
        # the first flag of its own samples that explains the distance (records.OWN_FAULT_KINDS)
        fault = next((flag for flag in records[i].flags if flag.own_fault), None)
        if fault:  # far for a reason of its own; far alone is a state
            left[i] = LeftOut(i, fault, factor)
            outlying.append(left[i])
    kept = [i for i in range(len(records)) if i not in left]
    reasons = tuple(left[i] for i in sorted(left))
    replaced = bool(left) and len(kept) >= enough(planned)
    counted = kept if replaced else list(range(len(records)))
    disagree = None
    if len(clean) == 2:
        gap = abs(log_medians[min(clean)] - log_medians[max(clean)])
        if gap > limit:
            disagree = Disagreement(2, 2, math.exp(gap))
    states = split_states({i: log_medians[i] for i in counted}, limit)
    if replaced:
        return Judgement(tuple(counted), reasons, (), disagree, mostly_disturbed(records, counted), states)
    if outlying and not disagree:
        disagree = Disagreement(len(outlying), len(records), outlying[0].factor, outlying[0].flag)
    return Judgement(tuple(counted), (), reasons, disagree, mostly_disturbed(records, counted),
                     None if disagree else states)
