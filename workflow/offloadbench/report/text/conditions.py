"""How the measurement went: plain advice from the system check, cells that shared their
cores with the orchestrator, CIs that cover one process only, and how long the rounds
took against the estimate made before them."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ...analysis.columns import flag, sharing_cells, text_of
from ...analysis.measured import PAIRED_IN_TIME
from ...cells import Cell
from ...records import FAILED, Environment, RoundRecord, SettleRecord
from ...records.types import WouldDecide
from ...stats import binomial_interval
from ...verdicts import UNDECIDED, Judging, percent
from ..format import and_list, count_of, fmt_duration, fmt_percent, fmt_sig, fmt_times


def advice_lines(environment: Environment, rounds: list[RoundRecord]) -> list[str]:
    """What the read-only system check saw that may weaken the numbers: each warning once,
    with the checks that saw it."""
    seen: dict[str, tuple[list[str], list[str]]] = {}
    for item in environment.advice:
        seen.setdefault(item, ([], []))[0].append("the environment check")
    for r in rounds:
        for item in r.advice:
            seen.setdefault(item, ([], []))[1].append(str(r.round))
    lines = []
    for item, (checks, numbers) in list(seen.items())[:MOST_ADVICE]:
        if numbers:
            checks.append(f"round{'s' if len(numbers) > 1 else ''} {and_list(numbers)}")
        lines.append(f"- Before {and_list(checks)}, {item}.")
    if len(seen) > MOST_ADVICE:  # records from elsewhere may hold many: the report stays readable
        lines.append(f"- And {len(seen) - MOST_ADVICE} more pieces of advice (in the round records).")
    return lines


MOST_ADVICE = 8


def sharing_lines(timings: pd.DataFrame) -> list[str]:
    ok = timings[timings["status"] == "ok"]
    shared = ok[sharing_cells(ok)]
    if shared.empty:
        return []
    cores = shared["threads_effective"].dropna()
    count = f" ({int(cores.iloc[0])} threads)" if len(cores) else ""
    return [
        (f"- **{len(shared)} of {len(ok)} cells used every core of this machine{count}, which they share with the "
        "orchestrator (Snakemake and the supervising round job); their verdicts are weak.** Their CIs include the "
        "disagreement between processes that this causes; hollow markers in the figures. On a machine with more "
        "cores, or with fewer threads per cell, they are measured alone.")
    ]


def scope_lines(timings: pd.DataFrame) -> list[str]:
    ok = timings[timings["status"] == "ok"]
    single = ok[ok["processes"] < 2] if "processes" in ok else ok
    if single.empty:
        processes = sorted({int(p) for p in ok["processes"]}) if "processes" in ok and len(ok) else []
        if not processes:
            return []
        counted = str(processes[0]) if len(processes) == 1 else f"{processes[0]} to {processes[-1]}"
        more = " (more where extra rounds replaced a process or settled a verdict)" if len(processes) > 1 else ""
        return [(f"- Every cell was measured in {counted} independent processes{more}; its CI includes the "
                "variance between them.")]
    return [(f"- {len(single)} of {len(ok)} cells were measured in one process only: **their CIs cover the noise "
            "within that process, not the variance between processes**, and may not hold on a rerun "
            "(the tables say `within-process only`).")]


def duration_lines(rounds: list[RoundRecord]) -> list[str]:
    measured = [r for r in rounds if r.measured_now]
    if not measured:
        return []
    estimated = sum(r.estimated_s or 0.0 for r in measured)
    took = sum(r.took_s or 0.0 for r in measured)
    per_round = "; ".join(
        f"round {r.round}: {r.measured_now} cells in {fmt_duration(r.took_s or 0)} "
        f"(estimated {fmt_duration(r.estimated_s or 0)})" for r in measured
    )
    ratio = f", {fmt_times(took / estimated)} the estimate" if estimated > 0 else ""
    return [(f"- Measuring took {fmt_duration(took)} against {fmt_duration(estimated)} estimated before each round"
            f"{ratio} ({per_round}).")]


SHARED_CORES_ADVICE = ("Its cells use every core, shared with the orchestrator, so fewer threads than cores "
                       "(or a machine with more) would measure them alone")


def _would_decide(what: WouldDecide) -> str:
    return "no number of processes would" if what.processes is None else \
        f"about {what.processes} processes per cell would"


def settle_lines(settle: SettleRecord | None, timings: pd.DataFrame, flags: pd.DataFrame) -> list[str]:
    """What the extra rounds did: how many comparisons needed them, what stayed undecided,
    and every process replaced, with why."""
    lines = []
    if settle and settle.max_processes <= settle.planned_rounds and not settle.extra_rounds:
        lines.append(f"- No extra round: measure.max_processes ({settle.max_processes}) allows no more processes "
                     "than the planned rounds.")
    elif settle:
        extra, needed, still = settle.extra_rounds, settle.rounds_needed, settle.undecided_at_end
        most = max(needed.values(), default=0)
        lines.append(
            f"- After the planned rounds, {len(settle.undecided_at_start)} of "
            f"{settle.comparisons} comparisons were undecided. "
            + (f"{count_of(len(needed), 'comparison')} needed up to {count_of(most, 'more round')} "
               f"({count_of(len(extra), 'extra round')}, {fmt_duration(settle.spent_s)} of a "
               f"{fmt_duration(settle.budget_s)} budget); " if extra else "No extra round was run; ")
            + f"{len(still)} stayed undecided ({settle.stopped}).")
    cannot = settle.cannot_decide if settle else {}
    if cannot:
        # the count per comparison; the shared cores' advice once, marked where it applies
        shown = "; ".join(f"{name}: {_would_decide(what)}{' (a)' if what.shares_cores else ''}"
                          for name, what in list(cannot.items())[:6])
        more = f"; and {len(cannot) - 6} more" if len(cannot) > 6 else ""
        why = f" (a) {SHARED_CORES_ADVICE}." if any(what.shares_cores for what in cannot.values()) else ""
        lines.append(f"- {count_of(len(cannot), 'comparison')} cannot be decided on this machine within "
                     f"measure.max_processes ({settle.max_processes} processes per cell), so no "
                     f"extra round went to them: {shown}{more}.{why}")
    left_out = rows_by_cell(timings, flags, left_out=True)
    if left_out:
        lines.append(f"- {count_of(len(left_out), 'cell')} had a process left out, replaced by an extra one where there was "
                     "one, never averaged in: " + "; ".join(f"`{key}`: {left_out_phrase(rows)}" for key, rows in left_out[:8])
                     + (f"; and {len(left_out) - 8} more" if len(left_out) > 8 else "") + ".")
    return lines


def far_phrase(row) -> str:
    """Why a process lies far from the others: its distance, and its own record's flag."""
    return f"its median lies {fmt_times(row['factor'])} from the other processes' ({text_of(row['text'])})"


def flag_phrase(row) -> str:
    """One flag on a cell's counted processes (a row of flags.csv) in words."""
    kind, seen, of = row["kind"], int(row["processes"]), int(row["of_processes"])
    if kind == "two_differ":
        return f"processes disagree: its two undisturbed processes differ by {fmt_times(row['factor'])}"
    if kind == "disagree":
        return f"processes disagree: {seen} of {of} processes disagree ({far_phrase(row)})"
    if kind in FAILED:
        return f"{seen} of {of} processes failed ({kind}: {text_of(row['text'])})"
    return text_of(row["text"]) + (f" (in {seen} of {of} processes)" if of > 1 else "")


def left_out_phrase(rows: list) -> str:
    """"1 of 4 processes replaced (round 2: …)": a cell's processes left out (its rows of
    flags.csv), each with why: its own disturbed flag, or its distance and fault."""
    first = rows[0]
    rounds = ", ".join(f"round {int(row['left_out_round'])}: "
                       + (text_of(row["text"]) if row["kind"] == "disturbed" else far_phrase(row)) for row in rows)
    done = "replaced" if flag(first, "replaced") else "left out"
    return f"{int(first['processes'])} of {int(first['of_processes'])} processes {done} ({rounds})"


def flags_phrase(rows: list) -> str:
    """A cell's flags (its rows of flags.csv) in words, in the order they were found."""
    return "; ".join(map(flag_phrase, rows))


def rows_by_cell(timings: pd.DataFrame, flags: pd.DataFrame, left_out: bool) -> list[tuple[str, list]]:
    """(cell key, its rows of flags.csv) for each timings row, in order, that has any: the
    flags on its counted processes, or (`left_out`) its processes left out."""
    by_key: dict[str, list] = {}
    for _, row in flags.iterrows():
        if pd.notna(row["left_out_round"]) == left_out:
            by_key.setdefault(Cell.from_dict(row).key, []).append(row)
    keys = (Cell.from_dict(row).key for _, row in timings.iterrows())
    return [(key, by_key[key]) for key in keys if key in by_key]


def pairing_lines(comparisons: dict[str, pd.DataFrame]) -> list[str]:
    """How the run's ratios were paired (the tables' `pairing`): in time, where the two cells
    took turns in one bout in three rounds or more; else by round, or not at all."""
    counts = Counter(str(pairing) for frame in comparisons.values() if "pairing" in frame
                     for pairing in frame["pairing"].dropna() if pairing)
    total = sum(counts.values())
    if not total:
        return []
    in_time = counts.pop(PAIRED_IN_TIME, 0)
    line = (f"- {in_time} of {total} ratios were paired in time: their two cells took turns in one bout, so the "
            "machine's drift cancels in them")
    others = "; ".join(f"{count} {pairing}" for pairing, count in sorted(counts.items()))
    if others:
        line += (f"; {others} (records without a shared bout in three rounds or more, such as results from before "
                 "bouts, or cells measured with `measure.pairing: separate`)")
    return [line + "."]


def conditions_section(environment: Environment, rounds: list[RoundRecord], timings: pd.DataFrame,
                       settle: SettleRecord | None = None, comparisons: dict[str, pd.DataFrame] | None = None,
                       flags: pd.DataFrame | None = None) -> list[str]:
    """How the measurement went; `comparisons` are the tables of ratios (speedups, thread
    scaling, self-comparisons), for how they were paired; `flags` is flags.csv."""
    lines = [*scope_lines(timings), *pairing_lines(comparisons or {}), *sharing_lines(timings),
             *advice_lines(environment, rounds), *duration_lines(rounds),
             *settle_lines(settle, timings, pd.DataFrame() if flags is None else flags)]
    return ["## How the measurement went", "", *lines, ""] if lines else []


# A ratio whose truth is 1 lies wholly above 1 at most half the CI's error rate of the time
# (2.5% at 95%), and below at most as often; the minimum effect δ makes it rarer still.


def controls_summary(controls: pd.DataFrame) -> tuple[int, int]:
    """(self-comparisons judged, how many were called faster or slower)."""
    if controls is None or controls.empty or "false_verdict" not in controls:
        return 0, 0
    return len(controls), sum(flag(row, "false_verdict") for _, row in controls.iterrows())


def false_rate_text(false: int, count: int, judging: Judging) -> str:
    """"1 of 16 (6.2%; 95% CI 0.16–30%)": the run's false-verdict rate with its exact binomial interval."""
    low, high = binomial_interval(false, count, judging.confidence)
    return f"{false} of {count} ({fmt_percent(false / count)}; {judging.ci} {fmt_percent(low)}–{fmt_percent(high)})"


def controls_line(controls: pd.DataFrame, judging: Judging) -> list[str]:
    """The self-comparisons in one line: how many, how many called faster or slower (the
    run's false-verdict rate, with its exact binomial interval), what the CIs promise, and
    what a multi-threaded worker's spinning pool left behind for the next one."""
    count, false = controls_summary(controls)
    if not count:
        return []
    said = "called faster or slower: no false verdict" if not false else "called faster or slower, each a false verdict"
    undecided = int((controls["verdict"] == UNDECIDED).sum())
    promised = 1 - judging.confidence
    return [(f"- {count} self-comparisons (a cell measured again in a second worker process, taking its turns in "
             f"the same bouts, whose ratio is 1 in truth): {false_rate_text(false, count, judging)} {said}; "
             f"{count - false - undecided} the same, {undecided} undecided. The {judging.ci}s promise at most "
             f"{judging.each_way()} each way ({percent(promised)} in all), less with the minimum effect of "
             f"{judging.delta}.")] + carry_over_line(controls, judging)


def carry_over_line(controls: pd.DataFrame, judging: Judging) -> list[str]:
    """What the pause between turns left of a multi-threaded OpenMP worker's spinning pool, as
    the self-comparisons saw it: their cycles right after such a turn against the others."""
    seen = controls.dropna(subset=["carry_over"]) if "carry_over" in controls else controls.iloc[0:0]
    if seen.empty:
        return []
    values = np.log(seen["carry_over"].astype(float))
    middle = float(np.exp(np.median(values)))
    decided = seen[(seen["carry_over_ci_low"] > 1) | (seen["carry_over_ci_high"] < 1)]
    return [(f"- Carry-over between turns: in the self-comparisons' bouts, cycles right after a multi-threaded torch "
             f"or compiled worker's turn ran {fmt_times(middle, 3)} as long as the others (the median over {len(seen)} "
             f"cells, {fmt_sig(float(np.exp(values.min())))}–{fmt_sig(float(np.exp(values.max())))}); "
             f"{len(decided)} of them {'tells' if len(decided) == 1 else 'tell'} it from 1 at {judging.level}.")]


def controls_warning(controls: pd.DataFrame, judging: Judging) -> str:
    """A warning for every verdict of the run, where the self-comparisons were called faster
    or slower more often than the CIs promise, beyond doubt; a note where more often, but too
    few to tell (the rate's interval holds the promise: one of 12 is 8% of them, and a run
    whose CIs keep their promise has one such in 12 about half the time); "" otherwise."""
    count, false = controls_summary(controls)
    promised = 1 - judging.confidence
    if not count or false / count <= promised:
        return ""
    said = (f"{false_rate_text(false, count, judging)} self-comparisons were called faster or slower, above the "
            f"{percent(promised)} the CIs promise")
    if binomial_interval(false, count, judging.confidence)[0] <= promised:
        return (f"Note: {said}, but too few to tell from it (the interval holds {percent(promised)}): read the "
                "verdicts near their boundaries with care.")
    return (f"Warning: {said}: on this machine, in this run, a verdict is wrong more often than its CI says, so read "
            "every verdict of this report with care, and measure again on a quieter machine.")
