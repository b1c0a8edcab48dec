"""Each comparison judged: each cell with its NumPy baseline (speedups), the most threads of a
CPU series with one thread (thread scaling), and each self-comparison's twin with its cell
(which cells those are: `offloadbench.compared`). The tables and the settling of verdicts
by extra rounds both take their comparisons from here; no pandas, so the settling job can
use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..compared import control_pairs, scaling_pairs, speedup_pairs
from ..stats import Interval, processes_to_decide
from ..verdicts import DEPENDS_ON_STATE, FASTER, MAX_CI_SPAN, SAME, SLOWER, UNDECIDED, UNSTABLE, Judging
from .measured import MeasuredCell, paired_rounds

SPEEDUP, SCALING, CONTROL = "speedup", "thread scaling", "self-comparison"


@dataclass(frozen=True)
class StateRatio:
    """A comparison's ratio over the rounds where each side ran in one state: "fast" or
    "slow" for a side with two states ("" for one with one), with that state's time."""

    base_state: str
    contender_state: str
    base_state_s: float
    contender_state_s: float
    ratio: float
    rounds: int
    of_rounds: int


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
    states_answer: str = ""  # where a side has two states: HOLDS, DEPENDS or ONE_ROUND
    states: tuple[StateRatio, ...] = ()  # and the ratio in each state

    @property
    def name(self) -> str:
        return f"{self.kind} of {self.cell.cell.key}"

    @property
    def tie(self) -> bool:
        """Undecided, but known to lie about δ from 1: an answer, for which nothing is measured again."""
        r = self.ratio
        return self.verdict == UNDECIDED and self.cell.analysis.judging.tie(r.low, r.high, r.value)

    @property
    def depends(self) -> bool:
        """The answer differs between a side's two states: more processes would not change that."""
        return self.states_answer == DEPENDS

    def processes_needed(self) -> float:
        """Processes per cell that would likely decide it (NaN: nothing known of the spread;
        0: nothing more to measure, decided, a tie, or an answer that depends on a state)."""
        if self.verdict != UNDECIDED or self.tie or self.depends:
            return 0.0
        r = self.ratio
        return processes_to_decide(r.low, r.high, r.value, r.processes, self.cell.analysis.judging, MAX_CI_SPAN)

    def what_would_decide(self, needed: float) -> dict:
        """What would decide a comparison more processes cannot decide within the cap, as
        values (the report words them): the processes per cell (None: no number would), and
        whether its cells share every core with the orchestrator (then fewer threads than
        cores, or a machine with more, would measure them alone)."""
        return {"processes": None if math.isinf(needed) else int(needed),
                "shares_cores": self.cell.shares_cores or self.other.shares_cores}


# whether a comparison's answer holds in both states of a side, as a value (the report words it):
# holds in both, depends on the state (each state two rounds or more), or differs in one round
HOLDS, DEPENDS, ONE_ROUND = "holds", "depends", "one_round"
MIN_STATE_ROUNDS = 2  # a state seen in one round only cannot be told from a passing glitch


def point_word(ratio: float, judging: Judging) -> str:
    """A ratio's verdict from its value alone: faster, slower, or same (within ±δ)."""
    if ratio >= 1 + judging.min_effect:
        return FASTER
    return SLOWER if ratio <= 1 / (1 + judging.min_effect) else SAME


def by_state(base: MeasuredCell, contender: MeasuredCell, phase: str) -> tuple[str, tuple[StateRatio, ...]]:
    """Where a side has two states: whether its verdict holds in both (HOLDS) or not
    (DEPENDS, where each state has two rounds or more; ONE_ROUND where one has a single
    round, which the interval already holds and the verdict follows), and the ratio (base
    over contender) of the rounds in each; "" and () where neither side has two."""
    sides = {"base": base.states, "contender": contender.states}
    if not any(sides.values()):
        return "", ()
    theirs = {r.round: r for r in contender.counted}
    logs: dict[tuple, list[float]] = {}
    for mine in base.counted:
        other = theirs.get(mine.round)
        if other is None:
            continue
        value = paired_rounds(mine, other, phase)
        if value is None:
            value = math.log(float(np.median(mine.samples(phase).seconds or [math.nan]))
                             / float(np.median(other.samples(phase).seconds or [math.nan])))
        label = tuple(states.of_round(mine.round) if states else "" for states in sides.values())
        if math.isfinite(value) and None not in label:
            logs.setdefault(label, []).append(value)
    if len(logs) < 2:
        return "", ()
    total = sum(map(len, logs.values()))
    found = tuple(StateRatio(*label, *(states.time_s(state) if state else math.nan
                                       for states, state in zip(sides.values(), label, strict=True)),
                             math.exp(float(np.mean(values))), len(values), total)
                  for label, values in sorted(logs.items()))
    judging = base.analysis.judging
    if len({point_word(s.ratio, judging) for s in found}) == 1:
        return HOLDS, found
    few = min(s.rounds for s in found) < MIN_STATE_ROUNDS
    return ONE_ROUND if few else DEPENDS, found


def compared(kind: str, base: MeasuredCell, contender: MeasuredCell, phase: str = "compute") -> Comparison:
    """`base`'s time over `contender`'s, judged; undecided whatever its CI says where a side's
    processes still disagree after replacing what could be, or half or more of them were
    disturbed, or where the answer differs between a side's two states."""
    ratio = base.ratio(contender, phase)
    answer, states = by_state(base, contender, phase)
    held = UNSTABLE if contender.unsettled or base.unsettled else DEPENDS_ON_STATE if answer == DEPENDS else ""
    word, why = contender.analysis.judging.judged(ratio.low, ratio.high, ratio.value, held=held)
    return Comparison(kind, contender, base, phase, ratio, word, why, answer, states)


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
