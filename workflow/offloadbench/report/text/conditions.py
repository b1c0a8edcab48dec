"""How the measurement went: plain advice from the system check, cells that shared their
cores with the orchestrator, CIs that cover one process only, and how long the rounds
took against the estimate made before them."""

from __future__ import annotations

import pandas as pd

from ...analysis.columns import sharing_cells
from ...cells import Cell
from ...verdicts import UNDECIDED
from ..format import fmt_duration, fmt_percent


def advice_lines(environment: dict, rounds: list[dict]) -> list[str]:
    """What the read-only system check saw that may weaken the numbers: each warning once,
    with the checks that saw it."""
    seen: dict[str, tuple[list[str], list[str]]] = {}
    for item in (environment.get("system") or {}).get("advice") or []:
        seen.setdefault(item, ([], []))[0].append("the environment check")
    for r in rounds:
        for item in r.get("advice") or []:
            seen.setdefault(item, ([], []))[1].append(str(r.get("round", "?")))
    lines = []
    for item, (checks, numbers) in list(seen.items())[:MOST_ADVICE]:
        if numbers:
            checks.append(f"round{'s' if len(numbers) > 1 else ''} {_and(numbers)}")
        lines.append(f"- Before {_and(checks)}, {item}.")
    if len(seen) > MOST_ADVICE:  # records from elsewhere may hold many: the report stays readable
        lines.append(f"- And {len(seen) - MOST_ADVICE} more pieces of advice (in the round records).")
    return lines


MOST_ADVICE = 8


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


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


def duration_lines(rounds: list[dict]) -> list[str]:
    measured = [r for r in rounds if r.get("measured_now")]
    if not measured:
        return []
    estimated = sum(r.get("estimated_s") or 0.0 for r in measured)
    took = sum(r.get("took_s") or 0.0 for r in measured)
    per_round = "; ".join(
        f"round {r['round']}: {r['measured_now']} cells in {fmt_duration(r.get('took_s') or 0)} "
        f"(estimated {fmt_duration(r.get('estimated_s') or 0)})" for r in measured
    )
    ratio = f", {took / estimated:.2f}× the estimate" if estimated > 0 else ""
    return [(f"- Measuring took {fmt_duration(took)} against {fmt_duration(estimated)} estimated before each round"
            f"{ratio} ({per_round}).")]


def settle_lines(settle: dict | None, timings: pd.DataFrame) -> list[str]:
    """What the extra rounds did: how many comparisons needed them, what stayed undecided,
    and every process replaced, with why."""
    lines = []
    if settle:
        extra = settle.get("extra_rounds") or []
        needed = settle.get("rounds_needed") or {}
        still = settle.get("undecided_at_end") or []
        most = max(needed.values(), default=0)
        lines.append(
            f"- After the planned rounds, {len(settle.get('undecided_at_start') or [])} of "
            f"{settle.get('comparisons', 0)} comparisons were undecided. "
            + (f"{len(needed)} comparisons needed up to {most} more round{'s' if most != 1 else ''} "
               f"({len(extra)} extra rounds, {fmt_duration(settle.get('spent_s') or 0)} of a "
               f"{fmt_duration(settle.get('budget_s') or 0)} budget); " if extra else "No extra round was run; ")
            + f"{len(still)} stayed undecided ({settle.get('stopped', '')}).")
    cannot = (settle or {}).get("cannot_decide") or {}
    if cannot:
        shown = "; ".join(f"{name}: {why}" for name, why in list(cannot.items())[:6])
        more = f"; and {len(cannot) - 6} more" if len(cannot) > 6 else ""
        lines.append(f"- {len(cannot)} comparisons cannot be decided on this machine within "
                     f"measure.max_processes ({(settle or {}).get('max_processes', '?')} processes per cell), so no "
                     f"extra round went to them: {shown}{more}.")
    replaced = timings[timings["replaced"].fillna("") != ""] if "replaced" in timings else timings.iloc[0:0]
    if not replaced.empty:
        lines.append(f"- {len(replaced)} cells had a process replaced by an extra one, never averaged in: "
                     + "; ".join(f"`{Cell.from_dict(r).key}`: {r['replaced']}" for _, r in replaced.head(8).iterrows())
                     + (f"; and {len(replaced) - 8} more" if len(replaced) > 8 else "") + ".")
    return lines


def conditions_section(environment: dict, rounds: list[dict], timings: pd.DataFrame,
                       settle: dict | None = None) -> list[str]:
    lines = [*scope_lines(timings), *sharing_lines(timings), *advice_lines(environment, rounds), *duration_lines(rounds),
             *settle_lines(settle, timings)]
    return ["## How the measurement went", "", *lines, ""] if lines else []


# Two-sided 95% CIs: a ratio whose truth is 1 lies wholly above 1 at most 2.5% of the time,
# and below at most 2.5%; the minimum effect δ (faster needs at least 1 + δ) makes it rarer.
PROMISED_FALSE = 0.05


def controls_summary(controls: pd.DataFrame) -> tuple[int, int]:
    """(self-comparisons judged, how many were called faster or slower)."""
    if controls is None or controls.empty or "false_verdict" not in controls:
        return 0, 0
    false = controls["false_verdict"].astype(str).str.lower().isin(["true", "1", "1.0"])
    return len(controls), int(false.sum())


def controls_line(controls: pd.DataFrame, min_effect: float) -> list[str]:
    """The self-comparisons in one line: how many, how many called faster or slower, and
    what the CIs promise."""
    count, false = controls_summary(controls)
    if not count:
        return []
    said = "none called faster or slower" if not false else \
        f"{false} called faster or slower ({fmt_percent(false / count)}), each a false verdict"
    undecided = int((controls["verdict"] == UNDECIDED).sum())
    return [(f"- {count} self-comparisons (a cell measured again as a cell of its own, whose ratio is 1 in truth): "
             f"{said}; {count - false - undecided} the same, {undecided} undecided. The 95% CIs promise at most "
             f"{fmt_percent(PROMISED_FALSE / 2)} each way ({fmt_percent(PROMISED_FALSE)} in all), less with the "
             f"minimum effect of {fmt_percent(min_effect)}.")]


def controls_warning(controls: pd.DataFrame) -> str:
    """A warning for every verdict of the run, where the self-comparisons were called faster
    or slower more often than the CIs promise ("" when they were not)."""
    count, false = controls_summary(controls)
    if not count or false / count <= PROMISED_FALSE:
        return ""
    return (f"Warning: {false} of {count} self-comparisons were called faster or slower ({fmt_percent(false / count)}, "
            f"above the {fmt_percent(PROMISED_FALSE)} the CIs promise): on this machine, in this run, a verdict is "
            "wrong more often than its CI says, so read every verdict of this report with care, and measure again "
            "on a quieter machine.")
