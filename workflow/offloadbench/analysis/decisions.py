"""The answer first: one decision per op (or kernel), device and dtype, and on the CPU per
thread count, from the speedup and timing tables.

At each measured size the *candidates* are the variants other than NumPy measured there
(torch, jax, numpy compiled, ...) whose code all compiled, each judged against
NumPy end to end: on a GPU with the copies counted, on the CPU with NumPy arrays in and
out. The rule:

- **use** the fastest candidate decided *faster* than NumPy; but where a simpler one
  (libraries.simplicity: NumPy, the other libraries eager, numpy compiled, the others
  compiled) is also decided
  faster and is not distinguishably slower than it (the ratio of their times, with an
  unpaired CI from each cell's own, is *same* or *undecided*), use the simpler one;
- **depends on the state** when no candidate is faster and one is faster in one state of
  a cell and not in the other (analysis/pairs.py: a cell whose processes fall into two
  groups far apart); the row gives the speedup in each state;
- **stay with NumPy** when no candidate is faster and none can still be: each is slower,
  the same, a tie at the boundary (its CI within ±δ of its point, about δ from 1, which
  no number of processes would decide), or undecided with its CI's upper end below 1 + δ;
- **cannot tell yet** otherwise, with the processes per cell that would likely decide
  the most promising candidate, estimated from the spread seen (`stats.processes_to_decide`).

A row gives the decision at the largest size, the size from which it holds on, its
speedup with the CI and verdict there, for a compiled variant the calls that pay the
compile back (with and without the compiler's start-up); decision_sizes.csv gives each
size's decision, and losses.csv why the variants that lose there do. `report.text.decisions`
words a row as a sentence for the report, LaTeX and the terminal.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pandas as pd

from .. import libraries
from ..catalogue import op_order
from ..cells import COMPILED, device_sort_key, dtype_sort_key, thread_sort_key
from ..kernels import FAMILY as KERNEL_FAMILY
from ..stats import independent_ratio, processes_to_decide
from ..verdicts import FASTER, MAX_CI_SPAN, UNDECIDED, Judging
from .columns import (
    DECISION_SIZES,
    DECISIONS,
    LOSSES,
    compile_fallbacks,
    flag,
    interval,
    is_flagged_row,
    text_of,
    weak_cells,
)
from .pairs import DEPENDS as STATE_DEPENDS

# the decision at a size, as a value (report.text.decisions words it): use a variant, stay with
# NumPy, cannot tell yet, or it depends on the state a process is in; and for a series asked for
# that has no speedup at all, no answer (why: NO_ANSWER_WHY)
USE, STAY, UNSURE, DEPENDS, NONE = "use", "stay", "unsure", "depends", "none"
# Why a series has no answer, worst first where several apply: the NumPy baseline failed at every
# size; every other variant's cell failed its check against float64, or failed otherwise (an
# error, out of memory, a timeout); none was measured (skipped, with its reason); none was asked
# (NumPy alone: a kernel without xp and no compiled mode, say).
BASELINE_FAILED, CHECK_FAILED, FAILED, SKIPPED, NO_VARIANT = (
    "baseline_failed", "check_failed", "failed", "skipped", "no_variant")
NUMPY = libraries.BASELINE  # the variant "stay" names
E2E = "end_to_end_speedup"


def simplicity(library: str, mode: str) -> int:
    """The order in which a user adopts the variants (libraries.simplicity): NumPy, the
    eager libraries, then the compiled ones, numpy compiled first (it keeps the NumPy code)."""
    return libraries.simplicity(library, mode == COMPILED)


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

    @property
    def disturbed(self) -> bool:
        """Its verdict waits for a quieter machine (False for tables from before the column)."""
        return flag(self.row, "disturbed")

    @property
    def depends(self) -> bool:
        """Faster in one state of a cell behind it and not in the other (analysis/pairs.py)."""
        return text_of(self.row.get("states_answer")) == STATE_DEPENDS

    def tie(self, judging: Judging) -> bool:
        """Undecided, but a tie at the boundary: about δ from 1, as close as it will get."""
        return self.verdict == UNDECIDED and judging.tie(self.speedup[1], self.speedup[2], self.speedup[0])

    def may_pay(self, judging: Judging) -> bool:
        """Undecided, no tie, and its CI still reaches a speedup of 1 + δ."""
        high = self.speedup[2]
        return self.verdict == UNDECIDED and not self.tie(judging) and not self.depends \
            and not (math.isfinite(high) and high < 1 + judging.min_effect)


@dataclass(frozen=True)
class Choice:
    """What one size says: use an option, stay with NumPy, or cannot tell yet (with the
    option most likely to decide and the processes it would take)."""

    size: int
    state: str  # USE, STAY, UNSURE or DEPENDS
    option: Option  # the one to use, or NumPy's best (most promising) alternative
    processes_needed: float = math.nan
    needs_quieter_machine: bool = False  # its likeliest option was disturbed: more processes here would not do
    passed_over: Option | None = None  # the fastest option, where a simpler one it cannot be told apart from won

    @property
    def variant(self) -> str:
        return self.option.variant if self.state == USE else NUMPY if self.state == STAY else ""


def _contrast(simple: Option, best: Option, judging: Judging) -> str:
    """The verdict of `best` against `simple`: faster when best is distinguishably faster."""
    ratio, low, high = independent_ratio(simple.time, best.time)
    return judging.verdict(low, high, ratio)


def choose(size: int, options: list[Option], judging: Judging) -> Choice:
    """The decision at one size (see the module's doc for the rule)."""
    faster = [o for o in options if o.verdict == FASTER]
    if faster:
        best = max(faster, key=lambda o: o.speedup[0])
        simpler = sorted((o for o in faster if o.rank < best.rank), key=lambda o: o.rank)
        pick = next((o for o in simpler if _contrast(o, best, judging) != FASTER), best)
        return Choice(size, USE, pick, passed_over=best if pick is not best else None)
    depends = [o for o in options if o.depends and o.verdict == UNDECIDED]
    if depends:
        return Choice(size, DEPENDS, max(depends, key=lambda o: o.speedup[0]))
    open_ = [o for o in options if o.may_pay(judging)]
    if not open_:
        return Choice(size, STAY, max(options, key=lambda o: o.speedup[0]))
    needed = {o.variant: processes_to_decide(o.speedup[1], o.speedup[2], o.speedup[0], o.processes, judging,
                                             MAX_CI_SPAN) for o in open_}
    likely = min(open_, key=lambda o: (o.disturbed, needed[o.variant] if math.isfinite(needed[o.variant])
                                       else math.inf, -o.speedup[0]))
    # a disturbed likeliest option waits for a quieter machine, not for more processes
    return Choice(size, UNSURE, likely, math.nan if likely.disturbed else needed[likely.variant], likely.disturbed)


def _cell_key(row) -> tuple:
    return (row["op"], row["library"], row.get("mode", "eager"), row["device"], row["dtype"], int(row["size"]),
            str(row["threads"]))


def _baseline_key(row) -> tuple:
    """The `_cell_key` of a speedup row's NumPy baseline."""
    op, _, _, _, dtype, size, threads = _cell_key(row)
    return op, NUMPY, "eager", "cpu", dtype, size, str(row.get("baseline_threads") or threads)


def _options(speedups: pd.DataFrame, timing_rows: dict[tuple, pd.Series]) -> list[Option]:
    options = []
    for _, row in speedups[~compile_fallbacks(speedups)].iterrows():
        timing = timing_rows.get(_cell_key(row))
        options.append(Option(str(row.get("variant") or row["library"]),
                              simplicity(row["library"], row.get("mode", "eager")), interval(row, E2E),
                              str(row["end_to_end_verdict"]),
                              interval(timing, "end_to_end_s") if timing is not None else (math.nan,) * 3,
                              int(row["processes"]) if pd.notna(row.get("processes")) else 0, row))
    return options


MANY_MORE_PAGES = 2.0  # a loser that maps this many times the winner's fresh pages per call, and
MATTERING_SHARE = 0.05  # whose extra pages cost at least this share of its time, loses to them


# Why a variant loses at a decision's size (losses.csv's `reason`), where the records say.
COMPILE_FALLBACK, COPIES, FRESH_PAGES = "compile_fallback", "copies", "fresh_pages"


def pages_loss(loser: pd.Series | None, winner: pd.Series | None, loser_name: str, winner_name: str,
               fault_s: float) -> dict | None:
    """Where a losing variant maps far more fresh pages per call than the winner, and they
    cost it a share of its time that matters (where the cost of a page is known): its pages,
    the winner's, their cost and its time per call. None where it does not."""
    if loser is None or winner is None:
        return None
    mine, theirs = float(loser.get("faults_per_call", math.nan)), float(winner.get("faults_per_call", math.nan))
    if not (math.isfinite(mine) and math.isfinite(theirs)) or mine < MANY_MORE_PAGES * max(theirs, 1.0) or mine < 64:
        return None
    time, cost = float(loser.get("median_s", math.nan)), math.nan
    if math.isfinite(fault_s) and math.isfinite(time) and time > 0:
        cost = (mine - theirs) * fault_s
        if cost < MATTERING_SHARE * time:
            return None
    return {"variant": loser_name, "reason": FRESH_PAGES, "pages_per_call": mine, "against": winner_name,
            "against_pages_per_call": theirs, "pages_s": cost, "call_s": time}


def losses(options: list[Option], choice: Choice, fallbacks: pd.DataFrame, timing_rows: dict[tuple, pd.Series],
           fault_s: float) -> list[dict]:
    """Why the variants that lose at the decision's size do, as losses.csv's rows: a
    compiled variant whose code did not all compile, a GPU variant whose copies cost more
    than its compute saves, a variant that maps far more fresh pages per call (`timing_rows`:
    each cell's row of timings.csv, `fault_s`: what one fresh page costs on the cpu)."""
    found = [{"variant": row.get("variant") or row["library"], "reason": COMPILE_FALLBACK,
              "compile_fallback": row["compile_fallback"]} for _, row in fallbacks.iterrows()]
    winner = choice.option if choice.state == USE else None
    for option in options:
        if option is winner:
            continue
        row = option.row
        device_speedup = float(row.get("speedup", math.nan))
        if row["device"] != "cpu" and option.verdict != FASTER and math.isfinite(device_speedup) \
                and device_speedup > 1 and option.speedup[0] < 1:
            found.append({"variant": option.variant, "reason": COPIES, "speedup": device_speedup,
                          "end_to_end_speedup": option.speedup[0]})
        winner_row = timing_rows.get(_cell_key(winner.row) if winner else _baseline_key(row))
        pages = pages_loss(timing_rows.get(_cell_key(row)), winner_row, option.variant,
                           winner.variant if winner else NUMPY, fault_s)
        if pages:
            found.append(pages)
    return found


def _series_key(row) -> tuple:
    """A decision's row: op, device, dtype, and on the CPU the thread count (a GPU cell is
    compared with NumPy on all cores whatever its host threads)."""
    return row["op"], row["device"], row["dtype"], str(row["threads"]) if row["device"] == "cpu" else ""


def _is_baseline(row) -> bool:
    return libraries.is_baseline(row["library"]) and row.get("mode", "eager") != COMPILED and row["device"] == "cpu"


def no_answer(key: tuple, cells: pd.DataFrame, baselines: pd.DataFrame) -> dict:
    """Why a series asked for has no speedup at any size, as values (NO_ANSWER_WHY): the
    code, the failing cells' status and one of their own reasons, the variants behind it, and
    for a failed check the worst relative error against its tolerance. `cells` are the
    series's cells of timings.csv, `baselines` its NumPy baseline's."""
    others = cells[~cells.apply(_is_baseline, axis=1)] if not cells.empty else cells
    failed_baseline = not baselines.empty and (baselines["status"] != "ok").all()
    if failed_baseline:
        why, behind = BASELINE_FAILED, baselines
    elif others.empty:
        why, behind = NO_VARIANT, others
    elif (others["status"] == "skipped").all():
        why, behind = SKIPPED, others
    else:
        behind = others[others["status"] != "ok"]
        wrong = behind["check_failed"].fillna(False).astype(bool) if "check_failed" in behind \
            else pd.Series(False, index=behind.index)
        why = CHECK_FAILED if wrong.any() and (wrong | (behind["status"] == "skipped")).all() else FAILED
        behind = behind[wrong] if why == CHECK_FAILED else behind[behind["status"] != "skipped"]
    errors = pd.to_numeric(behind["rel_err"], errors="coerce") if "rel_err" in behind else pd.Series(dtype=float)
    worst = errors.idxmax() if errors.notna().any() else (behind.index[0] if not behind.empty else None)
    first = behind.loc[worst] if worst is not None else None
    return {
        "no_answer": why,
        "no_answer_status": str(first["status"]) if first is not None else "",
        "no_answer_reason": str(first["reason"] or "") if first is not None else "",
        "no_answer_variants": ", ".join(dict.fromkeys(str(v) for v in behind.get("variant", ()))),
        "no_answer_rel_err": float(first["rel_err"]) if first is not None and pd.notna(first.get("rel_err"))
        else math.nan,
        "no_answer_tolerance": float(first["tolerance"]) if first is not None and pd.notna(first.get("tolerance"))
        else math.nan,
    }


def not_for(timings: pd.DataFrame) -> dict[tuple, str]:
    """Per series, which libraries cannot run its code as written and why, from their
    cells skipped for it (`not_for`), each reason once ("not for jax: the kernel updates
    its argument u in place, …")."""
    if timings.empty or "not_for" not in timings:
        return {}
    skipped = timings[timings["not_for"].fillna(False).astype(bool)]
    found: dict[tuple, list[str]] = {}
    for _, cell in skipped.iterrows():
        reasons = found.setdefault(_series_key(cell), [])
        if cell["reason"] not in reasons:
            reasons.append(str(cell["reason"]))
    return {key: "; ".join(reasons) for key, reasons in found.items()}


def unanswered_rows(timings: pd.DataFrame, answered: set[tuple], machine: str) -> list[dict]:
    """A row for each series asked for (an op or kernel where it runs) that has no decision:
    every series with a cell that was not skipped, so that a device or compiler that is
    absent here adds no row (the report says so once), but every op and kernel asked for is
    in the answer, with why it has none."""
    if timings.empty or "status" not in timings:
        return []
    rows = []
    keyed = timings.assign(_key=timings.apply(_series_key, axis=1))
    baselines = timings[timings.apply(_is_baseline, axis=1)]
    for key, cells in keyed.groupby("_key", sort=False):
        if key in answered or (cells["status"] == "skipped").all():
            continue
        op, device, dtype, threads = key
        base = baselines[(baselines["op"] == op) & (baselines["dtype"] == dtype)
                         & ((baselines["threads"].astype(str) == threads) if device == "cpu" else True)]
        if device != "cpu":  # a GPU series is compared with NumPy on every core
            base = base[base["threads"].astype(str) == "all"] if (base["threads"].astype(str) == "all").any() else base
        sizes = sorted(int(n) for n in cells["size"])
        first = cells.iloc[0]
        rows.append({
            "machine": machine, "op": op, "family": str(first.get("family") or KERNEL_FAMILY), "device": device,
            "dtype": dtype, "threads": threads if device == "cpu" else str(first["threads"]),
            "baseline_threads": threads if device == "cpu" else "all",
            "decision": NONE, "variant": "", "from_size": sizes[0], "size": sizes[-1],
            "compared_variant": "", "weak": False, "flagged": False, "shares_cores": False, "tie": False,
            "needs_quieter_machine": False,
            **no_answer(key, cells.drop(columns="_key"), base),
        })
    return rows


def _from_size(choices: list[Choice], headline: Choice) -> int:
    """The smallest size from which every size up to the largest decides as the largest does."""
    same = itertools.takewhile(lambda c: (c.state, c.variant) == (headline.state, headline.variant), reversed(choices))
    return list(same)[-1].size


def _payback(row: pd.Series) -> tuple[float, float, float, float]:
    """Calls that pay the compile back (with its interval), and the same with the
    compiler's one-time start-up added, as a program's first compiled function pays it."""
    calls, low, high = interval(row, "amortize_calls")
    compile_s, startup = row.get("compile_s"), row.get("compiler_startup_s")
    whole = math.nan
    if all(isinstance(v, (int, float)) and math.isfinite(v) for v in (calls, compile_s, startup)) and compile_s > 0:
        whole = calls * (compile_s + startup) / compile_s
    return calls, low, high, whole


def decision_row(key: tuple, choices: list[Choice], weak: pd.Series, machine: str, family: str, fits: dict,
                 judging: Judging, process_cap: int | None) -> dict:
    """One row of decisions.csv from the choices at each size, smallest first."""
    op, device, dtype, threads = key
    headline = choices[-1]
    option, row = headline.option, headline.option.row  # the variant stated, and its row of speedups.csv
    calls = _payback(row) if headline.state == USE and row.get("mode") == COMPILED else (math.nan,) * 4
    unsure = [c for c in choices if c.state == UNSURE]
    passed = headline.passed_over
    return {
        "machine": machine, "op": op, "family": family, "device": device, "dtype": dtype,
        "threads": threads if device == "cpu" else str(row["threads"]),
        "threads_effective": row.get("threads_effective"),
        "baseline_threads": str(row["baseline_threads"]),
        "decision": headline.state,
        "variant": headline.variant,
        "from_size": _from_size(choices, headline),
        "size": headline.size,
        "compared_variant": option.variant,
        "speedup": option.speedup[0], "speedup_ci_low": option.speedup[1], "speedup_ci_high": option.speedup[2],
        "verdict": option.verdict,
        "processes": option.processes,
        "break_even_size": float(row.get("break_even_size", math.nan)) if headline.state == USE and device != "cpu"
        else math.nan,
        "amortize_calls": calls[0], "amortize_calls_ci_low": calls[1], "amortize_calls_ci_high": calls[2],
        "amortize_calls_with_startup": calls[3],
        "fits_up_to": fits.get((op, option.variant, device, dtype), math.nan),
        "calls_per_round_trip": float(row.get("calls_per_round_trip", math.nan)),
        "processes_to_decide": unsure[-1].processes_needed if unsure else math.nan,
        "needs_quieter_machine": unsure[-1].needs_quieter_machine if unsure else False,
        "process_cap": process_cap if process_cap else math.nan,
        "weak": bool(weak.loc[row.name]),
        "flagged": is_flagged_row(row),
        "shares_cores": flag(row, "shares_cores"),
        "simpler_than": passed.variant if passed else "",
        "simpler_than_speedup": passed.speedup[0] if passed else math.nan,
        "tie": option.tie(judging),
        "states_answer": text_of(row.get("states_answer")),
    }


def decision_tables(speedups: pd.DataFrame, timings: pd.DataFrame, judging: Judging,
                    machine: str = "", memory: pd.DataFrame | None = None, fault_s: float = math.nan,
                    process_cap: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """decisions.csv: one decision per op × device × dtype (× CPU thread count), in the
    declared columns (`columns.DECISIONS`), a series asked for that has no speedup included
    (decision NONE, with why); decision_sizes.csv: each measured size's answer of each
    decision's series (`columns.DECISION_SIZES`); and losses.csv: why the variants that lose
    at a decision's size do (`columns.LOSSES`). `memory` (memory.csv) gives the largest size
    that fits, `fault_s` what one fresh page costs, to say what the pages a loser maps cost
    it, and `process_cap` the run's measure.max_processes, against which an open size's
    processes are read."""
    timings = timings if timings is not None else pd.DataFrame()
    speedups = speedups if speedups is not None else pd.DataFrame()
    if speedups.empty and timings.empty:
        return tuple(pd.DataFrame(columns=list(c)) for c in (DECISIONS, DECISION_SIZES, LOSSES))
    machine = machine or str((speedups if not speedups.empty else timings)["machine"].iloc[0])
    rows, sizes, lost = [], [], []
    by_key: dict[tuple, dict[int, list[Option]]] = {}
    if not speedups.empty:
        weak = weak_cells(speedups)
        families = dict(zip(timings["op"], timings["family"], strict=False)) if "family" in timings else {}
        fits = {} if memory is None or memory.empty else {
            (r.op, r.variant, r.device, r.dtype): float(r.largest_size) for r in memory.itertuples()}
        timing_rows = {_cell_key(row): row for _, row in timings.iterrows()}
        for option in _options(speedups, timing_rows):
            by_key.setdefault(_series_key(option.row), {}).setdefault(int(option.row["size"]), []).append(option)
        fallen = speedups[compile_fallbacks(speedups)]
        for key, by_size in by_key.items():
            choices = [choose(size, by_size[size], judging) for size in sorted(by_size)]
            headline = choices[-1]
            here = fallen[[_series_key(r) == key and int(r["size"]) == headline.size for _, r in fallen.iterrows()]]
            rows.append(decision_row(key, choices, weak, machine, families.get(key[0], KERNEL_FAMILY), fits,
                                     judging, process_cap))
            series = {name: rows[-1][name] for name in ("machine", "op", "device", "dtype", "threads")}
            sizes += [{**series, "size": c.size, "decision": c.state, "variant": c.variant} for c in choices]
            lost += [{**series, **loss} for loss in losses(by_size[headline.size], headline, here, timing_rows,
                                                           fault_s)]
    rows += unanswered_rows(timings, set(by_key), machine)
    cannot = not_for(timings)
    for row in rows:
        row["not_for"] = cannot.get(_series_key(row), "")
    order = {op: i for i, op in enumerate(op_order(r["op"] for r in rows))}
    rows.sort(key=lambda r: (order[r["op"]], device_sort_key(r["device"]), dtype_sort_key(r["dtype"]),
                             thread_sort_key(r["threads"]) if r["device"] == "cpu" else 0))
    rank = {_size_key(r): i for i, r in enumerate(rows)}  # each series's sizes and losses in the decisions' order
    sizes.sort(key=lambda r: (rank[_size_key(r)], r["size"]))
    lost.sort(key=lambda r: rank[_size_key(r)])  # stable: a series's losses as found
    return tuple(pd.DataFrame(found, columns=list(declared))
                 for found, declared in ((rows, DECISIONS), (sizes, DECISION_SIZES), (lost, LOSSES)))


def _size_key(row) -> tuple:
    return tuple(str(row[name]) for name in ("op", "device", "dtype", "threads"))

