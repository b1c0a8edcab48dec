"""The decisions in words: the sentence of each row of decisions.csv, the table that leads
the report (declared once, DECISIONS, and rendered in every format), the notes the terminal
adds under it, and the paragraph that answers the question for the machine
(analysis/decisions.py makes the rows)."""

from __future__ import annotations

import math
import textwrap
from dataclasses import replace

import pandas as pd

from ... import libraries
from ...analysis.columns import flag
from ...analysis.decisions import (
    BASELINE_FAILED,
    CHECK_FAILED,
    COMPILE_FALLBACK,
    COPIES,
    DEPENDS,
    NO_VARIANT,
    NONE,
    NUMPY,
    SKIPPED,
    STAY,
    UNSURE,
    USE,
)
from ...analysis.round_trip import AFTER, NEVER, trip_kind
from ...verdicts import SAME, SLOWER, Judging
from ..format import (
    and_list,
    finite,
    fmt_calls,
    fmt_count,
    fmt_error,
    fmt_pages,
    fmt_rate,
    fmt_ratio,
    fmt_sig,
    fmt_size,
    fmt_time,
    fmt_times,
    row_threads,
    text_of,
    where_phrase,
)
from ..table import LATEX, MARKDOWN, TERMINAL, Column, Shown, Table, wrapped

WEAK_MARK = "†"
WEAK_NOTE = (f"{WEAK_MARK} marks a number from a weak cell: one that shared its cores with the orchestrator, or "
             "that a noise check flagged (How the measurement went and Unstable cells say which and why).")


def by_size(row) -> list[tuple[int, str]]:
    """(size, variant) of each size measured, smallest first: decision_sizes.csv's rows of the
    decision's series (analysis.tables.with_series_rows); "?" where it cannot tell yet."""
    answers = row.get("by_size")
    return [(size, variant or "?") for size, _, variant in answers] if isinstance(answers, tuple) else []


def _said(variant: str) -> str:
    if libraries.is_baseline(variant):
        return f"stay with {libraries.get(variant).label}"
    return "cannot tell yet" if variant in ("?", "") else f"use {variant}"


def who(row) -> str:
    """"matmul on the cpu (1 thread, float32)", "fft2 on cuda (float32)"."""
    if row["device"] == "cpu":
        return f"{row['op']} on the cpu ({row_threads(row)}, {row['dtype']})"
    return f"{row['op']} {where_phrase(row['device'])} ({row['dtype']})"


def where_cell(row) -> str:
    """"cpu, 1 thread", "cuda": where a decision holds, in a table."""
    return f"cpu, {row_threads(row)}" if row["device"] == "cpu" else str(row["device"])


def speedup_text(row, ci: str | None = None, mark: bool = True) -> str:
    """The stated speedup with its CI (labelled `ci` in a sentence) and the weak mark (unless
    `mark` is false: the table says it once for all its rows), or why it is no number (a CI
    over 2×)."""
    if not finite(row.get("speedup")):
        return "–"
    text = fmt_ratio(row["speedup"], row["speedup_ci_low"], row["speedup_ci_high"], ci)
    return text + (WEAK_MARK if mark and flag(row, "weak") else "")


def _how(row) -> str:
    return "with the copies counted" if row["device"] != "cpu" else "end to end"


def starts_at(row) -> tuple[str, int]:
    """Where a decision starts to pay: ("every", 0) at every size measured, ("=", n) from the
    first size that pays, or ("≈", n) where a GPU series' break-even lies between the last
    size that does not pay and the first that does."""
    sizes = [size for size, _ in by_size(row)]
    first = int(row["from_size"])
    if not sizes or first <= sizes[0]:
        return "every", 0
    before = max(size for size in sizes if size < first)
    break_even = row.get("break_even_size")
    if finite(break_even) and before < float(break_even) <= first:
        return "≈", round(float(break_even))
    return "=", first


def from_text(row) -> str:
    """"at every size measured", "from n = 1024", or "from n ≈ 700" (starts_at)."""
    how, size = starts_at(row)
    return "at every size measured" if how == "every" else f"from n {how} {size}"


def _below(row) -> str:
    """What the sizes below the decision's range say: "; below that, stay with NumPy"."""
    first = int(row["from_size"]) if finite(row.get("from_size")) else None
    smaller = [(size, variant) for size, variant in by_size(row) if first is not None and size < first]
    if not smaller:
        return ""
    words = {_said(variant) for _, variant in smaller}
    if len(words) == 1:
        return f"; below that, {words.pop()}"
    return "; below that: " + ", ".join(f"n = {size} {_said(variant)}" for size, variant in smaller)


def payback_calls(row, startup: str = "") -> str:
    """"93 calls (1,090)": the calls at the row's size that pay a compile back, and in
    parentheses with the compiler's start-up (followed by `startup`); "" where none compiled."""
    if not finite(row.get("amortize_calls")):
        return ""
    whole = row.get("amortize_calls_with_startup")
    with_startup = f" ({fmt_calls(whole)}{startup})" if finite(whole) else ""
    return f"{fmt_calls(row['amortize_calls'])} calls{with_startup}"


QUIETER_NOTE = ("A quieter machine would decide it: other programs disturbed half or more of a cell's processes, "
                "which more processes here would not change.")


def processes_text(row, cell: bool = False) -> str:
    """What would likely decide an open size: "about 9 processes per cell would likely decide it
    (…, 4 now)", from the spread seen, or, in the decision table's `cell`, "≈9 processes"."""
    needed = row.get("processes_to_decide")
    if flag(row, "needs_quieter_machine"):  # the table's legend says why: disturbed processes
        sentence, short = "a quieter machine would decide it", "a quieter machine"
    elif needed == math.inf:
        sentence = "more processes would hardly decide it: the ratio sits on a boundary of the minimum effect"
        short = "not by processes"
    elif not finite(needed):
        sentence = "one process per cell says nothing of the spread between processes: measure more"
        short = "more processes"
    elif finite(row.get("process_cap")) and float(needed) > float(row["process_cap"]):  # more than the run's cap
        so_far = f"; {int(row['processes'])} so far" if finite(row.get("processes")) else ""
        sentence = (f"about {int(needed)} processes per cell would likely decide it, more than the run's cap of "
                    f"{int(row['process_cap'])} (measure.max_processes{so_far})")
        short = f"more processes than the cap of {int(row['process_cap'])}"
    else:
        now = f", {int(row['processes'])} now" if finite(row.get("processes")) else ""
        sentence = (f"about {int(needed)} processes per cell would likely decide it (estimated from the spread "
                    f"between processes seen{now})")
        short = f"≈{int(needed)} processes"
    return short if cell else sentence


def simpler_text(row) -> str:
    """"chosen over torch compiled (8.91×) as the simpler: the two cannot be told apart"."""
    other = text_of(row.get("simpler_than"))
    if not other:
        return ""
    speed = row.get("simpler_than_speedup")
    return (f"chosen over {other}{f' ({fmt_times(speed)})' if finite(speed) else ''}, the simpler of two that "
            "cannot be told apart")


def _fits(row) -> str:
    """"; one call fits the device's memory up to n ≈ 46,000" where the peaks were measured."""
    largest = row.get("fits_up_to")
    if not finite(largest):
        return ""
    where = "the host's memory" if row["device"] == "cpu" else f"{row['device']}'s memory"
    return f"; a call fits {where} up to n ≈ {fmt_size(largest)}"


def _trip(row) -> str:
    """A GPU row's calls per round trip, where the copies do not pay on every call."""
    calls, high = row.get("calls_per_round_trip"), row.get("calls_per_round_trip_ci_high")
    kind = trip_kind(calls, high) if row["device"] != "cpu" else None
    if kind == NEVER:
        return f"; keeping the data on {row['device']} between calls would not help: it computes {row['op']} no faster"
    if kind == AFTER:
        return (f"; with the data kept on the device between calls, it pays once they stay "
                f"{fmt_calls(max(1, float(calls)))} calls (k* = {fmt_rate(calls)})")
    return ""


def loss_words(loss: dict, device: str) -> str:
    """One row of losses.csv as words: "torch compiled did not all compile (…)", "torch on cuda
    computes 3.1× faster than NumPy, but with the copies it is 0.62×", "torch maps 4.06k
    fresh pages (15.9 MiB) per call against numpy's 1,008, about 3.9 ms of its 18.3 ms a call"."""
    variant, reason = str(loss["variant"]), loss["reason"]
    if reason == COMPILE_FALLBACK:
        return f"{variant} did not all compile ({text_of(loss.get('compile_fallback'))})"
    if reason == COPIES:
        return (f"{variant} on {device} computes {fmt_sig(loss['speedup'], 2)}× faster than NumPy, but with the "
                f"copies it is {fmt_sig(loss['end_to_end_speedup'], 2)}×")
    against = text_of(loss.get("against"))
    text = f"{variant} maps {fmt_pages(loss['pages_per_call'])} per call against {against}'s " \
           f"{fmt_count(loss['against_pages_per_call'])}"
    if finite(loss.get("pages_s")):
        text += f", about {fmt_time(loss['pages_s'])} of {variant}'s {fmt_time(loss['call_s'])} a call"
    return text


def why_losers_lose(row) -> str:
    """Why the variants that lose at the row's size do (losses.csv), "" where the records do not say."""
    losses = row.get("losses")
    return "; ".join(loss_words(loss, str(row["device"])) for loss in losses) if isinstance(losses, tuple) else ""


DECISION_WORDS = {USE: "use {variant}", STAY: "stay with NumPy", UNSURE: "cannot tell yet", DEPENDS: "depends on the state",
                  NONE: "no answer: {why}"}
# why a row has no answer, in the few words its table cell has room for
NO_ANSWER_SHORT = {BASELINE_FAILED: "NumPy failed", CHECK_FAILED: "wrong results", SKIPPED: "not measured",
                   NO_VARIANT: "NumPy only"}


def decision_words(row) -> str:
    """"use torch", "stay with NumPy", "no answer: wrong results", …: a row's decision in
    words (an unknown one as it is)."""
    decision = str(row["decision"])
    why = NO_ANSWER_SHORT.get(text_of(row.get("no_answer")), "cells failed")
    return DECISION_WORDS.get(decision, decision).replace("{variant}", text_of(row.get("variant"))).replace(
        "{why}", why)


def no_answer_text(row) -> str:
    """Why a row has no answer, in a few words, and where to read more: "every other variant
    failed the check against float64 (torch: relative error 2.0e-03 against 7.8e-06 allowed)"."""
    why, variants = text_of(row.get("no_answer")), text_of(row.get("no_answer_variants"))
    reason = text_of(row.get("no_answer_reason"))
    quoted = f" ({text_of(row.get('no_answer_status'))}: {reason[:160]}{'…' if len(reason) > 160 else ''})" \
        if reason else ""
    if why == CHECK_FAILED:
        return (f"every other variant failed the check against float64 ({variants + ': ' if variants else ''}"
                f"relative error {fmt_error(row.get('no_answer_rel_err'))} against "
                f"{fmt_error(row.get('no_answer_tolerance'))} allowed)")
    if why == BASELINE_FAILED:
        return f"NumPy itself failed, so nothing has a speedup{quoted}"
    if why == SKIPPED:
        return f"{variants or 'every other variant'} was not measured{quoted}"
    if why == NO_VARIANT:
        return ("only NumPy ran, so nothing is compared with it (a kernel without xp runs as numpy and numpy "
                "compiled only)")
    return f"every {variants or 'other'} cell failed{quoted}"


NO_ANSWER_MORE = "the report's Skipped or failed cells list each cell with its reason"


def states_text(row) -> str:
    """"1.30× where numpy-cpu-float32-n256-t1 ran 1.2 ms (2 of 6 rounds); …": the stated
    speedup in each state of its sides (states.csv's rows beside the decision)."""
    def where(state) -> str:
        return " and ".join(f"{state[f'{side}_cell']} ran {fmt_time(state[f'{side}_state_s'])}"
                            for side in ("base", "contender") if text_of(state.get(f"{side}_state")))

    return "; ".join(f"{fmt_times(s['ratio'])} where {where(s)} ({int(s['rounds'])} of {int(s['of_rounds'])} rounds)"
                     for s in row.get("state_ratios") or ())


def tie_text(row, judging: Judging) -> str:
    """"about 5% slower; too close to δ = 5% to call" where the row's speedup is a tie, else ""."""
    speedup = row.get("speedup")
    return judging.tie_words(float(speedup)) if flag(row, "tie") and finite(speedup) else ""


def answer(row, judging: Judging) -> str:
    """The decision of one row as a sentence, without naming the row."""
    decision, size = str(row["decision"]), int(row["size"])
    alternative = text_of(row.get("compared_variant"))
    trip, why, speedup = _trip(row), why_losers_lose(row), speedup_text(row, judging.ci)
    why = f"; why the others lose: {why}" if why else ""
    if decision == USE:
        payback = payback_calls(row, " with the compiler's start-up")
        payback = f"; its compile pays back after {payback}" if payback else ""
        simpler = simpler_text(row)
        return (f"{decision_words(row)} {from_text(row)}: at n = {size} it is {speedup} as fast as NumPy, "
                f"{_how(row)}{'; ' + simpler if simpler else ''}{payback}{trip}{_fits(row)}{_below(row)}"
                f"{why}.")
    if decision == STAY:
        if not alternative:
            return f"stay with NumPy: nothing else ran at n = {size}{_below(row)}."
        said = tie_text(row, judging) or {SLOWER: "slower", SAME: "the same within the minimum effect"}.get(
            str(row["verdict"]), "not faster by the minimum effect")
        return (f"stay with NumPy: at n = {size} the best alternative, {alternative}, is {said}, "
                f"{speedup} {_how(row)}{trip}{_below(row)}{why}.")
    if decision == DEPENDS:
        return (f"it depends on the state of the process: at n = {size} {alternative} against NumPy is "
                f"{states_text(row)}"
                f"{_below(row)}{why}.")
    if decision == UNSURE:
        # one clause with its numbers: the same estimate for several rows must not read as a repeated sentence
        return (f"cannot tell yet: at n = {size} {alternative} is {speedup} {_how(row)}, and "
                f"{processes_text(row)}{_below(row)}{why}.")
    if decision == NONE:
        return f"no answer: {no_answer_text(row)}."
    return f"{decision_words(row)}."


# --- the table that leads the report, and its terminal twin ---------------------------------


def sharing_said_once(decisions: pd.DataFrame) -> bool:
    """Whether every all-threads cpu row shares its cores with the orchestrator (a machine of
    few cores): then that is said once for them all instead of a mark on each."""
    if decisions.empty or "shares_cores" not in decisions:
        return False
    every = decisions[(decisions["device"] == "cpu") & (decisions["threads"].astype(str) == "all")]
    return not every.empty and all(flag(row, "shares_cores") for _, row in every.iterrows())


def _marked(row, once: bool) -> bool:
    """A row's † : weak, unless only for sharing its cores, where that is said once."""
    if not flag(row, "weak"):
        return False
    shared_only = flag(row, "shares_cores") and not flag(row, "flagged")
    return not (once and shared_only and str(row["threads"]) == "all" and row["device"] == "cpu")


def all_threads_count(decisions: pd.DataFrame) -> int | None:
    """The threads `all` stands for on this machine, where the rows say."""
    counts = pd.to_numeric(decisions.loc[decisions["threads"].astype(str) == "all", "threads_effective"],
                           errors="coerce").dropna() if "threads_effective" in decisions else pd.Series(dtype=float)
    return int(counts.max()) if not counts.empty else None


def weak_notes(decisions: pd.DataFrame) -> list[str]:
    """What the table's weak rows need said, once each: that every all-threads row shared its
    cores (where so), and what † means (where a row carries one)."""
    once = sharing_said_once(decisions)
    notes = []
    if once:
        count = all_threads_count(decisions)
        notes.append(f"Every all-threads row shared its {f'{count} cores' if count else 'cores'} with the "
                     "orchestrator (Snakemake and the round's supervisor), so its numbers are weaker than the "
                     "one-thread rows', though unmarked.")
    if any(_marked(row, once) for _, row in decisions.iterrows()):
        notes.append(WEAK_NOTE)
    return notes


def _speedup_cell(row, once: bool) -> str:
    """The speedup, named by its variant where the decision does not name it ("torch 0.94×")."""
    text = speedup_text(row, mark=_marked(row, once))
    variant = text_of(row.get("compared_variant"))
    if text == "–" or not variant or str(row["decision"]) == USE:
        return text
    return f"{variant} {text}"


def _from_cell(row) -> str:
    if str(row["decision"]) != USE:
        return "–"
    how, size = starts_at(row)
    return {"every": "every n", "=": str(size)}.get(how, f"≈ {size}")


def _simpler_cell(row) -> str:
    other = text_of(row.get("simpler_than"))
    if not other:
        return "–"
    speed = row.get("simpler_than_speedup")
    return f"{other} {fmt_times(speed)}" if finite(speed) else other


def open_sizes(row) -> list[int]:
    """The sizes that cannot tell yet, smallest first (decision_sizes.csv's unsure rows)."""
    answers = row.get("by_size")
    return [size for size, decision, _ in answers if decision == UNSURE] if isinstance(answers, tuple) else []


def _open_sizes(row) -> str:
    """"n = 256" or "n = 256, 1024": the sizes that cannot tell yet."""
    sizes = open_sizes(row)
    return f"n = {', '.join(map(str, sizes))}" if sizes else ""


def _open_cell(row) -> str:
    """The sizes that cannot tell yet and what would likely decide the largest of them."""
    sizes = _open_sizes(row)
    return f"{sizes}: {processes_text(row, cell=True)}" if sizes else "–"


def row_notes(row, judging: Judging) -> list[str]:
    """What a row needs said beyond its cells, each naming its size: a compile's payback, the
    variant the simplicity rule passed over, a tie, two states, the sizes still open, why
    the others lose."""
    cannot = [text_of(row.get("not_for"))] if text_of(row.get("not_for")) else []
    if str(row["decision"]) == NONE:
        return [f"no answer: {no_answer_text(row)}; {NO_ANSWER_MORE}", *cannot]
    size = int(row["size"])
    notes = [*cannot]
    payback = payback_calls(row, " with the compiler's one-time start-up")
    if payback:
        notes.append(f"at n = {size} the compile pays back after {payback}")
    simpler = simpler_text(row)
    if simpler:
        notes.append(f"at n = {size} {simpler}")
    tie = tie_text(row, judging)
    if tie:
        notes.append(f"at n = {size} a tie: {text_of(row.get('compared_variant'))} {tie.replace(';', ',')}; "
                     "more processes would not decide it")
    if str(row["decision"]) == DEPENDS:
        notes.append(f"at n = {size} two states of a process: {states_text(row)}")
    sizes = _open_sizes(row)
    if sizes:
        notes.append(f"{sizes} cannot tell yet: {processes_text(row)}")
    choices = by_size(row)
    first = int(row["from_size"]) if finite(row.get("from_size")) else 0
    if {variant for n, variant in choices if n < first} - {NUMPY}:  # more than "NumPy below from n"
        notes.append("by size: " + "; ".join(f"n = {n} {_said(variant)}" for n, variant in choices))
    why = why_losers_lose(row)
    if why:
        notes.append(f"at n = {size}, why the others lose: {why}")
    return notes


def _short_where(row) -> str:
    """"cpu 1t", "cpu all", "cuda": where_cell in the terminal's narrow table."""
    threads = str(row["threads"])
    return f"cpu {threads if threads == 'all' else threads + 't'}" if row["device"] == "cpu" else str(row["device"])


DOCUMENTS = frozenset({MARKDOWN, LATEX})  # the formats of the columns the terminal leaves out


DECISIONS = Table(
    (
        Column("op", lambda row, context: str(row["op"])),
        Column("where", lambda row, context: where_cell(row), formats=DOCUMENTS),
        Column("where", lambda row, context: _short_where(row), formats=frozenset({TERMINAL}),
               legend="1t: one thread; all: every core{threads_here}."),
        Column("dtype", lambda row, context: str(row["dtype"])),
        Column("decision", lambda row, context: decision_words(row),
               legend="decision: what to use at the largest size measured, judged against NumPy end to end (on a "
                      "GPU with the copies counted); numpy compiled is the NumPy code through torch.compile, torch "
                      "compiled the torch code."),
        Column("from n", lambda row, context: _from_cell(row),
               legend="from n: the smallest n from which the decision holds."),
        Column("at n", lambda row, context: str(int(row["size"])),
               legend="at n: the largest size measured; n: the op's size (the side of its matrices for most)."),
        Column("speedup ({ci})", lambda row, context: _speedup_cell(row, context["once"]),
               legend="speedup: NumPy's time ÷ the variant's at n (above 1: faster), with the {ci}, without a "
                      "compile's one-time cost; where the decision uses no variant, it names the best alternative "
                      "(\"torch 0.94×\")."),
        Column("compile pays back after", lambda row, context: payback_calls(row) or "–", optional=True,
               formats=DOCUMENTS,
               legend="compile pays back after: the calls at n that pay a compile back, and in parentheses with the "
                      "compiler's one-time start-up."),
        Column("simpler than", lambda row, context: _simpler_cell(row), optional=True,
               formats=DOCUMENTS,
               legend="simpler than: the faster-looking variant the rule passed over for the simpler one, with its "
                      "speedup."),
        Column("fits up to n", lambda row, context: fmt_size(row.get("fits_up_to")), optional=True, formats=DOCUMENTS,
               legend="fits up to n: the largest size whose call fits the memory of its device (the host's for the "
                      "cpu), from the measured peaks."),
        Column("still open", lambda row, context: _open_cell(row), optional=True, formats=DOCUMENTS,
               legend="still open: the sizes that cannot tell yet, and the processes per cell that would likely "
                      "decide the largest of them, estimated from the spread between processes seen (or more than "
                      "the run's cap, measure.max_processes), or a quieter machine where other programs disturbed "
                      "half or more of a cell's processes."),
    ),
    empty="No decision: no variant other than NumPy has both a result and a NumPy baseline.",
    intro="Each row is one op (or kernel of yours) where it runs. The rule: the fastest variant decided faster than "
          "NumPy, but a simpler one (in order: NumPy, the other libraries eager, numpy compiled, the others compiled) where the two cannot be told "
          "apart or tie (within the minimum effect δ = {delta} of a boundary, as close as it will get).",
    context=lambda frame, base: {"once": sharing_said_once(frame), "threads_here": _threads_here(frame)},
)


def _threads_here(decisions: pd.DataFrame) -> str:
    count = all_threads_count(decisions) if not decisions.empty else None
    return f" ({count} threads here)" if count else ""


def decision_table(decisions: pd.DataFrame, judging: Judging, fmt: str = MARKDOWN) -> Shown:
    """The decision table in format `fmt`, its legend followed by what its weak rows need said."""
    shown = DECISIONS.shown(decisions, judging, fmt)
    notes = weak_notes(decisions)
    if fmt == TERMINAL and any(flag(row, "needs_quieter_machine") for _, row in decisions.iterrows()):
        notes.append(QUIETER_NOTE)
    return replace(shown, legend=" ".join([shown.legend, *notes]))


def plain_table(decisions: pd.DataFrame, judging: Judging, width: int = 100) -> list[str]:
    """The decision table as plain text for the terminal, at most `width` characters wide (the
    dtype said once where every row has one), the notes each row needs, one kind of note per
    line, each naming its size, and the legend."""
    shown = decision_table(decisions, judging, TERMINAL)
    if decisions.empty:
        return shown.plain(width)
    cells, notes = shown.cells, []
    one_dtype = cells["dtype"].nunique() == 1
    for i, (_, row) in enumerate(decisions.iterrows()):
        name = f"{cells.loc[i, 'op']} {cells.loc[i, 'where']}" + ("" if one_dtype else f" {cells.loc[i, 'dtype']}")
        for note in row_notes(row, judging):
            notes += textwrap.wrap(f"{name}: {note}", width, subsequent_indent="    ", break_on_hyphens=False)
    return [*shown.plain(width, once=("dtype",)), *(["notes:", *notes] if notes else []), "",
            *wrapped(shown.legend, width)]


# --- the paragraph that answers the question ------------------------------------------------


# What the lead paragraph says of the rows of each decision other than USE, in this order ({}: their ops).
LEAD_WORDS = {
    STAY: "Stay with NumPy for {}: nothing else is faster there by the minimum effect.",
    DEPENDS: "For {} the answer depends on the state a process happens to be in (two groups of processes far apart, "
             "both kept); the table gives the speedup in each.",
    UNSURE: "It cannot tell yet for {}; the table says what would decide it.",
    NONE: "There is no answer for {}: the table says why.",
}


def lead_paragraph(decisions: pd.DataFrame, gpu_reason: str | None, judging: Judging) -> str:
    """What to do on this machine, in a few sentences: what pays and where it pays most,
    where NumPy stays, what is still open."""
    if decisions.empty:
        return ("No decision can be made here: no variant other than NumPy has both a result and a NumPy "
                "baseline on this machine.")
    use = decisions[decisions["decision"] == USE]
    parts = []
    if not use.empty:
        groups = "; ".join(f"{variant} for {_ops(group, decisions)}" for variant, group in use.groupby("variant"))
        parts.append(f"Moving work off NumPy pays in {len(use)} of the {len(decisions)} cases asked for here: "
                     f"use {groups}.")
        best = use.loc[pd.to_numeric(use["speedup"], errors="coerce").idxmax()]
        shown = speedup_text(best, judging.ci, mark=_marked(best, sharing_said_once(decisions)))
        parts.append(f"It pays most for {who(best)}: {shown} at n = {int(best['size'])}, "
                     f"{_how(best)}.")
    else:
        parts.append(f"Moving work off NumPy pays in none of the {len(decisions)} cases asked for here.")
    for decision, words in LEAD_WORDS.items():
        rows = decisions[decisions["decision"] == decision]
        if not rows.empty:
            parts.append(words.format(_ops(rows, decisions)))
    if gpu_reason:
        parts.append(f"No GPU cell ran here ({gpu_reason}), so this answers for the CPU only.")
    return " ".join(parts)


def _ops(group: pd.DataFrame, decisions: pd.DataFrame) -> str:
    """"fft2, sum_rows and transcendental (cpu, all threads)": each op once, with where it
    holds when that is not everywhere the op was measured."""
    names = []
    for op, rows in group.groupby("op", sort=False):
        everywhere = len(rows) == (decisions["op"] == op).sum()
        names.append(op if everywhere else f"{op} ({', '.join(where_cell(r) for _, r in rows.iterrows())})")
    return and_list(names)
