"""Where a run spends its time: the cycles of each bout, from what the earlier rounds measured.

A ratio's variance has two levels (Kalibera & Jones, "Rigorous benchmarking in reasonable
time", ISMM 2013): the cycles within a round (a bout's cycle gives one log ratio, with
variance `within`), and the rounds, each a fresh process per cell, which differ by more than
their cycles explain (variance `between`: where malloc put the arrays, how the threads
were placed). A round's ratio is the median over its m cycles, with variance
`between + MEDIAN_EFFICIENCY · within / m`. A round costs a fixed `process_s` (starting
the cells' processes, their inputs, compiles, warm-ups and finishes) and `cycle_s` per
cycle, so for a given time the variance of the mean over rounds is least at

    m* = sqrt((process_s / cycle_s) · (MEDIAN_EFFICIENCY · within / between)),

and the rounds needed for a half-width h follow from t(P − 1) · sqrt(v(m*) / P) ≤ h. From
its third round on, a run gives each bout the m* of its comparisons (the largest, so
that each gets at least its own), at least `measure.min_cycles`; where the bouts'
m* together would sample longer than their budgets add up to, all are scaled down alike,
so a run takes what its budget says and the time goes where it buys the most. A bout
whose ratios are already as precise as the target (`measure.target_rel_ci`) still ends
early.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MEDIAN_EFFICIENCY = math.pi / 2  # the variance of a median of m normal values is about π/2 · σ²/m
FIRST_PLANNED_ROUND = 3  # two earlier rounds give the first estimate of `between`
BETWEEN_FLOOR = 1e-6  # (0.1% as a standard deviation): rounds never agree better than this


@dataclass(frozen=True)
class PairSpread:
    """One comparison's variances at the two levels, on the log scale, from earlier rounds."""

    within: float  # of one cycle's log ratio
    between: float  # of a round's log ratio beyond what its cycles explain
    rounds: int


def pair_spread(rounds: Sequence[tuple[float, float, int]]) -> PairSpread | None:
    """From each earlier round's (median log ratio, variance of its cycles' log ratios,
    cycles); None below two rounds."""
    usable = [(m, v, c) for m, v, c in rounds if math.isfinite(m) and math.isfinite(v) and c >= 2]
    if len(usable) < 2:
        return None
    medians = np.array([m for m, _, _ in usable])
    within = float(np.mean([v for _, v, _ in usable]))
    cycles = float(np.mean([c for _, _, c in usable]))
    total = float(np.var(medians, ddof=1))
    between = max(total - MEDIAN_EFFICIENCY * within / cycles, BETWEEN_FLOOR)
    return PairSpread(within, between, len(usable))


def best_cycles(process_s: float, cycle_s: float, spread: PairSpread) -> float:
    """Kalibera & Jones's m*: the cycles per round that make a round's time buy the most."""
    if not (process_s > 0 and cycle_s > 0):
        return math.nan
    return math.sqrt(process_s / cycle_s * MEDIAN_EFFICIENCY * spread.within / spread.between)


def cycle_stats(log_ratios: Sequence[float]) -> tuple[float, float, int]:
    """What a bout keeps of one comparison for the next rounds: the median of its cycles' log
    ratios, their variance (from the interquartile range, robust to a stray cycle), and
    their count."""
    values = np.asarray([v for v in log_ratios if math.isfinite(v)], dtype=float)
    if values.size < 2:
        return math.nan, math.nan, int(values.size)
    q1, q3 = np.percentile(values, [25, 75])
    sigma = (q3 - q1) / 1.349  # the interquartile range of a normal distribution is 1.349 σ
    return float(np.median(values)), float(sigma * sigma), int(values.size)


@dataclass(frozen=True)
class BoutPlan:
    """The cycles a bout should run, and why (for the round's record)."""

    cycles: int | None  # None: the budget decides, as in the first rounds
    why: str


@dataclass(frozen=True)
class Need:
    """What a group's earlier bouts say of its next one: m* cycles, at `sampled_s` of sampling
    a cycle, against a budget worth `budget_cycles`."""

    cycles: float
    sampled_s: float
    budget_cycles: float
    why: str


def group_need(earlier: Sequence[dict]) -> Need | str:
    """m* of a group from its bouts in earlier rounds (their round records' entries: `pairs`,
    `process_s`, `sampling_s`, `paused_s`, `cycles`, `budget_s`): the largest of its
    comparisons', so that each gets at least its own; or why there is none."""
    if len(earlier) < FIRST_PLANNED_ROUND - 1:
        return f"fewer than {FIRST_PLANNED_ROUND - 1} earlier rounds: the budget decides"
    cycles = sum(b.get("cycles") or 0 for b in earlier)
    cycle_s = sum((b.get("sampling_s") or 0.0) + (b.get("paused_s") or 0.0) for b in earlier) / max(1, cycles)
    sampled_s = sum(b.get("sampling_s") or 0.0 for b in earlier) / max(1, cycles)
    process_s = float(np.median([b.get("process_s") or 0.0 for b in earlier]))
    by_pair: dict[str, list[tuple[float, float, int]]] = {}
    for bout in earlier:
        for name, stats in (bout.get("pairs") or {}).items():
            if isinstance(stats, list | tuple) and len(stats) == 3:
                by_pair.setdefault(name, []).append((float(stats[0]), float(stats[1]), int(stats[2])))
    wanted = []
    for name, rounds in by_pair.items():
        spread = pair_spread(rounds)
        if spread is not None:
            m = best_cycles(process_s, cycle_s, spread)
            if math.isfinite(m):
                wanted.append((m, name))
    if not wanted or sampled_s <= 0:
        return "no comparison measured in two earlier rounds: the budget decides"
    m, name = max(wanted)
    budget = float(np.median([b.get("budget_s") or 0.0 for b in earlier]))
    return Need(m, sampled_s, budget / sampled_s, f"m* = {m:.1f} for {name.rsplit('|', 1)[0]} "
                                                   f"(a round's fixed {process_s:.2f} s, {cycle_s * 1e3:.0f} ms a cycle)")


def plan_cycles(earlier: dict[str, Sequence[dict]], groups: Sequence[str], min_cycles: int) -> dict[str, BoutPlan]:
    """Each group's cycles in the next round: its m* (`group_need`), all of them scaled down
    together where they would sample longer than the groups' budgets add up to (a run's
    length stays what its budget says; the time goes where it buys the most), and never
    below `min_cycles`."""
    needs = {g: group_need(earlier.get(g, ())) for g in groups}
    planned = {g: n for g, n in needs.items() if isinstance(n, Need)}
    wanted_s = sum(n.cycles * n.sampled_s for n in planned.values())
    budget_s = sum(n.budget_cycles * n.sampled_s for n in planned.values())
    scale = min(1.0, budget_s / wanted_s) if wanted_s > 0 else 1.0
    plans = {}
    for group, need in needs.items():
        if not isinstance(need, Need):
            plans[group] = BoutPlan(None, need)
            continue
        cycles = max(min_cycles, math.ceil(scale * need.cycles))
        scaled = f", scaled by {scale:.2f} to the round's budget" if scale < 1 else ""
        plans[group] = BoutPlan(cycles, f"{need.why}{scaled}: {cycles} cycles (at least {min_cycles})")
    return plans
