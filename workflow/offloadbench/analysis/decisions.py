"""The answer first: one decision per op (or kernel), device and dtype, and on the CPU per
thread count, from the speedup and timing tables.

At each measured size the *candidates* are the variants other than NumPy measured there
(torch, numpy compiled, torch compiled) whose code all compiled, each judged against
NumPy end to end: on a GPU with the copies counted, on the CPU with NumPy arrays in and
out. The rule:

- **use** the fastest candidate decided *faster* than NumPy; but where a simpler one
  (in the order NumPy, torch eager, numpy compiled, torch compiled) is also decided
  faster and is not distinguishably slower than it (the ratio of their times, with an
  unpaired CI from each cell's own, is *same* or *undecided*), use the simpler one;
- **stay with NumPy** when no candidate is faster and none can still be: each is slower,
  the same, or undecided with its CI's upper end below 1 + δ;
- **cannot tell yet** otherwise, with the processes per cell that would likely decide
  the most promising candidate, estimated from the spread seen (`stats.processes_to_decide`).

A row gives the decision at the largest size, the size from which it holds on, its
speedup with the CI and verdict there, for a compiled variant the calls that pay the
compile back (with and without the compiler's start-up), each size's decision, and the
sizes where it cannot tell yet. `report.text.decisions` words a row as a sentence for the
report, LaTeX and the terminal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..catalogue import op_order
from ..cells import COMPILED, device_sort_key, dtype_sort_key, thread_sort_key
from ..kernels import FAMILY as KERNEL_FAMILY
from ..stats import independent_ratio, processes_to_decide
from ..verdicts import FASTER, MAX_CI_SPAN, UNDECIDED, verdict
from .columns import DECISIONS, compile_fallbacks, interval, weak_cells

USE, STAY, UNSURE = "use", "stay with NumPy", "cannot tell yet"
NUMPY = "numpy"
E2E = "end_to_end_speedup"


def simplicity(library: str, mode: str) -> int:
    """0 for NumPy, 1 for torch eager, 2 for numpy compiled, 3 for torch compiled: the
    order in which a user adopts them (compiled NumPy keeps the NumPy code)."""
    return 2 * (mode == COMPILED) + (library == "torch")


@dataclass(frozen=True)
class Option:
    """One candidate variant at one size, against NumPy."""

    variant: str
    rank: int  # simplicity
    speedup: tuple[float, float, float]  # end to end, with its CI
    verdict: str
    time: tuple[float, float, float]  # its own end-to-end time, with its CI
    processes: int
    row: pd.Series  # its row of speedups.csv

    def may_pay(self, min_effect: float) -> bool:
        """Undecided, and its CI still reaches a speedup of 1 + δ."""
        high = self.speedup[2]
        return self.verdict == UNDECIDED and not (math.isfinite(high) and high < 1 + min_effect)


@dataclass(frozen=True)
class Choice:
    """What one size says: use an option, stay with NumPy, or cannot tell yet (with the
    option most likely to decide and the processes it would take)."""

    size: int
    state: str  # USE, STAY or UNSURE
    option: Option | None = None
    processes_needed: float = math.nan

    @property
    def variant(self) -> str:
        return self.option.variant if self.state == USE else NUMPY if self.state == STAY else ""


def _contrast(simple: Option, best: Option, min_effect: float) -> str:
    """The verdict of `best` against `simple`: faster when best is distinguishably faster."""
    ratio, low, high = independent_ratio(simple.time, best.time)
    return verdict(low, high, ratio, min_effect)


def choose(size: int, options: list[Option], min_effect: float) -> Choice:
    """The decision at one size (see the module's doc for the rule)."""
    faster = [o for o in options if o.verdict == FASTER]
    if faster:
        best = max(faster, key=lambda o: o.speedup[0])
        simpler = sorted((o for o in faster if o.rank < best.rank), key=lambda o: o.rank)
        pick = next((o for o in simpler if _contrast(o, best, min_effect) != FASTER), best)
        return Choice(size, USE, pick)
    open_ = [o for o in options if o.may_pay(min_effect)]
    if not open_:
        return Choice(size, STAY, max(options, key=lambda o: o.speedup[0]) if options else None)
    needed = {o.variant: processes_to_decide(o.speedup[1], o.speedup[2], o.speedup[0], o.processes, min_effect,
                                             MAX_CI_SPAN) for o in open_}
    likely = min(open_, key=lambda o: (needed[o.variant] if math.isfinite(needed[o.variant]) else math.inf,
                                       -o.speedup[0]))
    return Choice(size, UNSURE, likely, needed[likely.variant])


def _options(speedups: pd.DataFrame, timings: pd.DataFrame) -> list[Option]:
    time_of = {}
    for _, row in timings.iterrows():
        key = (row["op"], row["library"], row.get("mode", "eager"), row["device"], row["dtype"], int(row["size"]),
               str(row["threads"]))
        time_of[key] = interval(row, "end_to_end_s")
    usable = speedups[~compile_fallbacks(speedups)]
    options = []
    for _, row in usable.iterrows():
        mode = row.get("mode", "eager")
        key = (row["op"], row["library"], mode, row["device"], row["dtype"], int(row["size"]), str(row["threads"]))
        options.append(Option(str(row.get("variant") or row["library"]), simplicity(row["library"], mode),
                              interval(row, E2E), str(row["end_to_end_verdict"]),
                              time_of.get(key, (math.nan, math.nan, math.nan)),
                              int(row["processes"]) if pd.notna(row.get("processes")) else 0, row))
    return options


def text_of(value) -> str:
    return value if isinstance(value, str) else ""


def _series_key(row) -> tuple:
    """A decision's row: op, device, dtype, and on the CPU the thread count (a GPU cell is
    compared with NumPy on all cores whatever its host threads)."""
    return row["op"], row["device"], row["dtype"], str(row["threads"]) if row["device"] == "cpu" else ""


def _from_size(choices: list[Choice], headline: Choice) -> int:
    """The smallest size from which every size up to the largest decides as the largest does."""
    start = len(choices) - 1
    while start > 0 and choices[start - 1].state == headline.state \
            and choices[start - 1].variant == headline.variant:
        start -= 1
    return choices[start].size


def _payback(row: pd.Series) -> tuple[float, float, float, float]:
    """Calls that pay the compile back (with its interval), and the same with the
    compiler's one-time start-up added, as a program's first compiled function pays it."""
    calls, low, high = interval(row, "amortize_calls")
    compile_s, startup = row.get("compile_s"), row.get("compiler_startup_s")
    whole = math.nan
    if all(isinstance(v, (int, float)) and math.isfinite(v) for v in (calls, compile_s, startup)) and compile_s > 0:
        whole = calls * (compile_s + startup) / compile_s
    return calls, low, high, whole


def decision_row(key: tuple, choices: list[Choice], weak: pd.Series, machine: str, family: str,
                 fits: dict | None = None) -> dict:
    """One row of decisions.csv from the choices at each size, smallest first."""
    op, device, dtype, threads = key
    headline = choices[-1]
    shown = option = headline.option  # the variant to use, or NumPy's best (most promising) alternative
    speedup = shown.speedup if shown else (math.nan, math.nan, math.nan)
    calls = _payback(option.row) if headline.state == USE and option.row.get("mode") == COMPILED \
        else (math.nan,) * 4
    unsure = [c for c in choices if c.state == UNSURE]
    return {
        "machine": machine, "op": op, "family": family, "device": device, "dtype": dtype,
        "threads": threads if device == "cpu" else (str(option.row["threads"]) if option is not None else ""),
        "threads_effective": option.row.get("threads_effective") if option is not None else math.nan,
        "baseline_threads": str(option.row["baseline_threads"]) if option is not None else "",
        "decision": f"{USE} {option.variant}" if headline.state == USE else headline.state,
        "variant": headline.variant,
        "by_size": "; ".join(f"{c.size}: {c.variant or '?'}" for c in choices),
        "from_size": _from_size(choices, headline),
        "size": headline.size,
        "compared_variant": shown.variant if shown else "",
        "speedup": speedup[0], "speedup_ci_low": speedup[1], "speedup_ci_high": speedup[2],
        "verdict": shown.verdict if shown else "",
        "processes": shown.processes if shown else math.nan,
        "break_even_size": float(option.row.get("break_even_size", math.nan))
        if headline.state == USE and device != "cpu" else math.nan,
        "amortize_calls": calls[0], "amortize_calls_ci_low": calls[1], "amortize_calls_ci_high": calls[2],
        "amortize_calls_with_startup": calls[3],
        "fits_up_to": (fits or {}).get((op, shown.variant, device, dtype), math.nan) if shown else math.nan,
        "calls_per_round_trip": float(shown.row.get("calls_per_round_trip", math.nan)) if shown else math.nan,
        "round_trip": text_of(shown.row.get("round_trip")) if shown else "",
        "undecided_sizes": ", ".join(str(c.size) for c in unsure),
        "processes_to_decide": unsure[-1].processes_needed if unsure else math.nan,
        "weak": bool(weak.loc[shown.row.name]) if shown else False,
    }


def decisions_table(speedups: pd.DataFrame, timings: pd.DataFrame, min_effect: float,
                    machine: str = "", memory: pd.DataFrame | None = None) -> pd.DataFrame:
    """One decision per op × device × dtype (× CPU thread count), in the declared columns
    (`columns.DECISIONS`); `memory` (memory.csv) gives the largest size that fits."""
    if speedups is None or speedups.empty:
        return pd.DataFrame(columns=list(DECISIONS))
    machine = machine or str(speedups["machine"].iloc[0])
    weak = weak_cells(speedups)
    families = dict(zip(timings["op"], timings["family"], strict=False)) if "family" in timings else {}
    fits = {} if memory is None or memory.empty else {
        (r.op, r.variant, r.device, r.dtype): float(r.largest_size) for r in memory.itertuples()}
    by_key: dict[tuple, dict[int, list[Option]]] = {}
    for option in _options(speedups, timings):
        by_key.setdefault(_series_key(option.row), {}).setdefault(int(option.row["size"]), []).append(option)
    rows = []
    for key, by_size in by_key.items():
        choices = [choose(size, by_size[size], min_effect) for size in sorted(by_size)]
        rows.append(decision_row(key, choices, weak, machine, families.get(key[0], KERNEL_FAMILY), fits))
    frame = pd.DataFrame(rows, columns=list(DECISIONS))
    order = {op: i for i, op in enumerate(op_order(frame["op"]))}
    key = [(order[r.op], device_sort_key(r.device), dtype_sort_key(r.dtype),
            thread_sort_key(r.threads) if r.device == "cpu" else 0) for r in frame.itertuples()]
    return frame.assign(_k=key).sort_values("_k").drop(columns="_k").reset_index(drop=True)

