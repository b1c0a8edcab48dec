"""Which of a cell's processes count: the ones that were neither disturbed nor far from the
others, when enough are left; never a silent drop.

A process is left out when the worker saw other processes use the machine while it
sampled (`disturbance.disturbed`), or when its median lies far from the median of the
cell's other processes. Far is judged on log medians, against the larger of a fixed 20%
and four typical spreads between processes of the same worker (the median over its cells
of a robust spread, 1.4826 × MAD). Four spreads: with the spread estimated from many
cells, an honest process lies beyond 4σ about once in 16,000; 20%: this VM's processes
differ by up to ~10% when nothing is wrong, so smaller gaps are noise, not a fault. At
most a minority is left out, the worst first, and each decision is made again with the
rest, so one wild process cannot hide another.

A left-out process is *replaced* when the cell still has the planned number of processes
without it: the settling stage measures extra processes for this (jobs/settle.py). Where
it could not (its cap reached, or results from before settling existed), every process is
kept; a cell whose processes then disagree is flagged, and its verdicts are undecided. So
are the verdicts of a cell that counts disturbed processes in half or more of its count:
a busy process beside a bout slows a multi-threaded turn far more than a one-thread one,
so pairing does not cancel it, and on our 2-core VM a one-core busy loop turned a thread
scaling of 1.28× (1.17-1.40) into 0.71× (0.52-0.97).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..records import CellRecord

OUTLIER_MIN = math.log(1.20)
OUTLIER_SIGMAS = 4.0
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class Judgement:
    """The verdict on a cell's processes (indices into its ok records, in round order)."""

    counted: tuple[int, ...]  # the processes its numbers come from
    left_out: tuple[tuple[int, str], ...]  # (index, why) of processes that are not counted
    wanted: tuple[tuple[int, str], ...]  # (index, why) that should be replaced but are not yet
    disagree: str = ""  # why the counted processes still disagree ("" when they agree)
    disturbed: str = ""  # "5 of 6 processes disturbed (...)" when half or more of the counted were

    @property
    def needs_more(self) -> bool:
        """Another process would let a disturbed or outlying one be replaced, or two that
        disagree be told apart."""
        return bool(self.wanted) or bool(self.disagree)


def robust_spread(log_medians) -> float | None:
    """σ of log process medians from their median absolute deviation (None below three)."""
    values = np.asarray(list(log_medians), dtype=float)
    if values.size < 3:
        return None
    return float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values))))


def threshold(typical_spread: float) -> float:
    """The log distance from the other processes beyond which a process is an outlier."""
    return max(OUTLIER_MIN, OUTLIER_SIGMAS * typical_spread)


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


def disturbed_share(records: list[CellRecord], counted: list[int]) -> str:
    """"5 of 6 processes disturbed (…)" where half or more of the counted processes were
    disturbed, else ""."""
    disturbed = [i for i in counted if records[i].disturbance.disturbed]
    if not disturbed or 2 * len(disturbed) < len(counted):
        return ""
    busiest = max(records[i].disturbance.others_cores or 0.0 for i in disturbed)
    return (f"{len(disturbed)} of {len(counted)} processes disturbed (other processes used up to {busiest:.2f} "
            "cores while they sampled)")


def judge(records: list[CellRecord], log_medians: list[float], planned: int, typical_spread: float) -> Judgement:
    """Which of `records` (a cell's ok processes, with their log medians) count."""
    why = {i: record.disturbance.describe() for i, record in enumerate(records) if record.disturbance.disturbed}
    clean = {i: v for i, v in enumerate(log_medians) if i not in why}
    limit = threshold(typical_spread)
    for i, factor in _outliers(clean, limit).items():
        why[i] = f"its median lies {factor:.2f}× from the other processes'"
    kept = [i for i in range(len(records)) if i not in why]
    reasons = tuple(sorted(why.items()))
    replaced = bool(why) and len(kept) >= planned
    counted = kept if replaced else list(range(len(records)))
    disagree = ""
    if len(clean) == 2:
        gap = abs(log_medians[min(clean)] - log_medians[max(clean)])
        if gap > limit:
            disagree = f"its two undisturbed processes differ by {math.exp(gap):.2f}×"
    if replaced:
        return Judgement(tuple(counted), reasons, (), disagree, disturbed_share(records, counted))
    outlying = [text for _, text in reasons if text.startswith("its median")]
    if outlying and not disagree:
        disagree = f"{len(outlying)} of {len(records)} processes disagree ({outlying[0]})"
    return Judgement(tuple(counted), (), reasons, disagree, disturbed_share(records, counted))
