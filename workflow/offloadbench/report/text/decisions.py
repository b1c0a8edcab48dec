"""The decisions in words: the sentence of each row of decisions.csv, the table that leads
the report, the paragraph that answers the question for the machine, and the same table as
plain text for the terminal (analysis/decisions.py makes the rows)."""

from __future__ import annotations

import math
import textwrap

import pandas as pd

from ...analysis.columns import flag
from ...analysis.decisions import DEPENDS, STAY, UNSURE, USE
from ...analysis.round_trip import AFTER, NEVER, trip_kind
from ...verdicts import SAME, SLOWER, Judging
from ..format import finite, fmt_calls, fmt_ratio, fmt_size, text_of, threads_text, where_phrase

WEAK_MARK = "†"
WEAK_NOTE = (f"{WEAK_MARK} marks a number from a weak cell: one that shared its cores with the orchestrator, or "
             "that a noise check flagged (How the measurement went says which and why).")


def is_weak(row) -> bool:
    return flag(row, "weak")


def by_size(row) -> list[tuple[int, str]]:
    """(size, variant) of each size measured, smallest first: decision_sizes.csv's rows of the
    decision's series (analysis.tables.with_size_answers); "?" where it cannot tell yet."""
    answers = row.get("by_size")
    return [(size, variant or "?") for size, _, variant in answers] if isinstance(answers, tuple) else []


def _said(variant: str) -> str:
    return {"numpy": "stay with NumPy", "?": "cannot tell yet", "": "cannot tell yet"}.get(variant, f"use {variant}")


def _threads(row) -> str:
    return threads_text(row["threads"], row.get("threads_effective"))


def who(row) -> str:
    """"matmul on the cpu (1 thread, float32)", "fft2 on cuda (float32)"."""
    if row["device"] == "cpu":
        return f"{row['op']} on the cpu ({_threads(row)}, {row['dtype']})"
    return f"{row['op']} {where_phrase(row['device'])} ({row['dtype']})"


def where_cell(row) -> str:
    """"cpu, 1 thread", "cuda": where a decision holds, in a table."""
    return f"cpu, {_threads(row)}" if row["device"] == "cpu" else str(row["device"])


def speedup_text(row, ci: str | None = None, mark: bool = True) -> str:
    """The stated speedup with its CI (labelled `ci` in a sentence) and the weak mark (unless
    `mark` is false: the table says it once for all its rows), or why it is no number (a CI
    over 2×)."""
    if not finite(row.get("speedup")):
        return "–"
    text = fmt_ratio(row["speedup"], row["speedup_ci_low"], row["speedup_ci_high"], ci)
    return text + (WEAK_MARK if mark and is_weak(row) else "")


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


def payback_text(row) -> str:
    """"its compile pays back after 93 calls (1,090 with the compiler's start-up)"."""
    if not finite(row.get("amortize_calls")):
        return ""
    text = f"its compile pays back after {fmt_calls(row['amortize_calls'])} calls"
    if finite(row.get("amortize_calls_with_startup")):
        text += f" ({fmt_calls(row['amortize_calls_with_startup'])} with the compiler's start-up)"
    return text


QUIETER_NOTE = ("a quieter machine would decide it: other programs disturbed half or more of a cell's processes, "
                "which more processes here would not change.")


def processes_text(row) -> str:
    """"about 9 processes per cell would likely decide it (…, 4 now)", from the spread seen."""
    if flag(row, "needs_quieter_machine"):
        return "a quieter machine would decide it"  # the table's legend says why: disturbed processes
    needed = row.get("processes_to_decide")
    if needed == math.inf:
        return "more processes would hardly decide it: the ratio sits on a boundary of the minimum effect"
    if not finite(needed):
        return "one process per cell says nothing of the spread between processes: measure more"
    now = f", {int(row['processes'])} now" if finite(row.get("processes")) else ""
    if over_cap(row):
        so_far = f"; {int(row['processes'])} so far" if finite(row.get("processes")) else ""
        return (f"about {int(needed)} processes per cell would likely decide it, more than the run's cap of "
                f"{int(row['process_cap'])} (measure.max_processes{so_far})")
    return (f"about {int(needed)} processes per cell would likely decide it (estimated from the spread between "
            f"processes seen{now})")


def over_cap(row) -> bool:
    """Whether the processes that would likely decide an open size exceed the run's cap."""
    needed, cap = row.get("processes_to_decide"), row.get("process_cap")
    return finite(needed) and finite(cap) and float(needed) > float(cap)


def simpler_text(row) -> str:
    """"chosen over torch compiled (8.91×) as the simpler: the two cannot be told apart"."""
    other = text_of(row.get("simpler_than"))
    if not other:
        return ""
    speed = row.get("simpler_than_speedup")
    return (f"chosen over {other}{f' ({float(speed):.2f}×)' if finite(speed) else ''}, the simpler of two that "
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
                f"{max(1, math.ceil(float(calls))):,} calls (k* = {float(calls):.2g})")
    return ""


def why_text(row) -> str:
    """"; why the others lose: torch maps 4.06k fresh pages (15.9 MiB) per call against …"."""
    why = text_of(row.get("why"))
    return f"; why the others lose: {why}" if why else ""


DECISION_WORDS = {USE: "use {variant}", STAY: "stay with NumPy", UNSURE: "cannot tell yet", DEPENDS: "depends on the state"}


def decision_words(row) -> str:
    """"use torch", "stay with NumPy", …: a row's decision in words (an unknown one as it is)."""
    decision = str(row["decision"])
    return DECISION_WORDS.get(decision, decision).replace("{variant}", text_of(row.get("variant")))


def tie_text(row, judging: Judging) -> str:
    """"about 5% slower; too close to δ = 5% to call" where the row's speedup is a tie, else ""."""
    speedup = row.get("speedup")
    return judging.tie_words(float(speedup)) if flag(row, "tie") and finite(speedup) else ""


def answer(row, judging: Judging) -> str:
    """The decision of one row as a sentence, without naming the row."""
    decision, size = str(row["decision"]), int(row["size"])
    alternative = text_of(row.get("compared_variant"))
    trip, why, speedup = _trip(row), why_text(row), speedup_text(row, judging.ci)
    if decision == USE:
        payback = payback_text(row)
        simpler = simpler_text(row)
        return (f"{decision_words(row)} {from_text(row)}: at n = {size} it is {speedup} as fast as NumPy, "
                f"{_how(row)}{'; ' + simpler if simpler else ''}{'; ' + payback if payback else ''}{trip}"
                f"{_fits(row)}{_below(row)}{why}.")
    if decision == STAY:
        if not alternative:
            return f"stay with NumPy: nothing else ran at n = {size}{_below(row)}."
        said = tie_text(row, judging) or {SLOWER: "slower", SAME: "the same within the minimum effect"}.get(
            str(row["verdict"]), "not faster by the minimum effect")
        return (f"stay with NumPy: at n = {size} the best alternative, {alternative}, is {said}, "
                f"{speedup} {_how(row)}{trip}{_below(row)}{why}.")
    if decision == DEPENDS:
        states = text_of(row.get("states"))
        return (f"it depends on the state of the process: at n = {size} {alternative} against NumPy is {states}"
                f"{_below(row)}{why}.")
    if decision == UNSURE:
        return (f"cannot tell yet: at n = {size} {alternative} is {speedup} {_how(row)}; "
                f"{processes_text(row)}{_below(row)}{why}.")
    return f"{decision_words(row)}."


# --- the table that leads the report, and its terminal twin ---------------------------------


OPTIONAL = ("compile pays back after", "simpler than", "fits up to n", "still open")  # only where a row has one


def speedup_header(judging: Judging) -> str:
    return f"speedup ({judging.ci})"


def sharing_said_once(decisions: pd.DataFrame) -> bool:
    """Whether every all-threads cpu row shares its cores with the orchestrator (a machine of
    few cores): then that is said once for them all instead of a mark on each."""
    if decisions.empty or "shares_cores" not in decisions:
        return False
    every = decisions[(decisions["device"] == "cpu") & (decisions["threads"].astype(str) == "all")]
    return not every.empty and all(flag(row, "shares_cores") for _, row in every.iterrows())


def _marked(row, once: bool) -> bool:
    """A row's † : weak, unless only for sharing its cores, where that is said once."""
    if not is_weak(row):
        return False
    shared_only = flag(row, "shares_cores") and not flag(row, "unstable")
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


def table_rows(decisions: pd.DataFrame, judging: Judging, compact_where: bool = False) -> pd.DataFrame:
    """The decision table's cells as text, one row per decision, in the table's order; a
    row that does not use a variant names the one its speedup is of; the optional columns
    only where a row has one."""
    speedup = speedup_header(judging)
    once = sharing_said_once(decisions)
    rows = []
    for _, row in decisions.iterrows():
        where = where_cell(row)
        if compact_where:
            where = f"cpu {'all' if str(row['threads']) == 'all' else str(row['threads']) + 't'}" \
                if row["device"] == "cpu" else str(row["device"])
        rows.append({
            "op": row["op"], "where": where, "dtype": row["dtype"], "decision": decision_words(row),
            "from n": _from_cell(row), "at n": str(int(row["size"])), speedup: _speedup_cell(row, once),
            "compile pays back after": _payback_cell(row),
            "simpler than": _simpler_cell(row),
            "fits up to n": fmt_size(row["fits_up_to"]) if finite(row.get("fits_up_to")) else "–",
            "still open": _open_cell(row),
        })
    frame = pd.DataFrame(rows, columns=["op", "where", "dtype", "decision", "from n", "at n", speedup, *OPTIONAL])
    return frame.drop(columns=[c for c in OPTIONAL if (frame[c] == "–").all()])


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


def _payback_cell(row) -> str:
    if not finite(row.get("amortize_calls")):
        return "–"
    whole = row.get("amortize_calls_with_startup")
    return f"{fmt_calls(row['amortize_calls'])} calls" + (f" ({fmt_calls(whole)})" if finite(whole) else "")


def _simpler_cell(row) -> str:
    other = text_of(row.get("simpler_than"))
    if not other:
        return "–"
    speed = row.get("simpler_than_speedup")
    return f"{other} {float(speed):.2f}×" if finite(speed) else other


def _open_sizes(row) -> str:
    """"n = 256" or "n = 256, 1024": the sizes that cannot tell yet."""
    sizes = text_of(row.get("undecided_sizes"))
    return f"n = {sizes}" if sizes else ""


def _open_cell(row) -> str:
    """The sizes that cannot tell yet and what would likely decide the largest of them."""
    sizes = _open_sizes(row)
    if not sizes:
        return "–"
    if flag(row, "needs_quieter_machine"):
        return f"{sizes}: a quieter machine"
    needed = row.get("processes_to_decide")
    if over_cap(row):
        return f"{sizes}: more processes than the cap of {int(row['process_cap'])}"
    if finite(needed):
        return f"{sizes}: ≈{int(needed)} processes"
    return f"{sizes}: not by processes" if needed == math.inf else f"{sizes}: more processes"


def table_legend(judging: Judging, columns=OPTIONAL, decisions: pd.DataFrame | None = None) -> str:
    """What the decision table's columns mean, in one paragraph: the optional columns only
    where the table (`columns`) has them; then what its weak rows need said."""
    text = ("Each row is one op (or kernel of yours) where it runs: *decision* is what to use at the largest size "
            "measured (*at n*; n is the op's size, the side of its matrices for most), judged against NumPy end to "
            "end (on a GPU with the copies counted), and *from n* the smallest size from which it holds; *speedup* "
            f"is the variant's speedup over NumPy there (above 1: faster than NumPy), with the {judging.ci}; where "
            "the decision uses no variant, the speedup names the best alternative (\"torch 0.94×\"). The rule: the "
            "fastest variant decided faster than NumPy, but a simpler one (NumPy, torch, numpy compiled, torch "
            "compiled) where the two cannot be told apart.")
    optional = {
        "compile pays back after": "*Compile pays back after*: the calls at n that pay a compile back, and in "
                                   "parentheses with the compiler's one-time start-up.",
        "simpler than": "*Simpler than*: the faster-looking variant the rule passed over for the simpler one, with "
                        "its speedup.",
        "fits up to n": "*Fits up to n*: the largest size whose call fits the memory of its device (the host's for "
                        "the cpu), from the measured peaks.",
        "still open": "*Still open*: the sizes that cannot tell yet, and the processes per cell that would likely "
                      "decide the largest of them, estimated from the spread between processes seen (or more than "
                      "the run's cap, measure.max_processes), or a quieter machine where other programs disturbed "
                      "half or more of a cell's processes.",
    }
    notes = weak_notes(decisions) if decisions is not None else []
    return " ".join([text, *(optional[c] for c in OPTIONAL if c in columns), *notes])


def plain_table(decisions: pd.DataFrame, judging: Judging, width: int = 100) -> list[str]:
    """The decision table as plain text for the terminal: one line per row, at most `width`
    characters; the dtype column is left out (and said once) when every row has one; then
    the notes each row needs, one kind of note per line, each naming its size."""
    cells = table_rows(decisions, judging, compact_where=True)
    if cells.empty:
        return ["no decision: no variant other than NumPy has both a result and a NumPy baseline"]
    columns = ["op", "where", "dtype", "decision", "from n", "at n", speedup_header(judging)]
    lines = []
    if cells["dtype"].nunique() == 1:
        columns.remove("dtype")
        lines.append(f"all {cells['dtype'].iloc[0]}:")
    widths = {c: max(len(c), *(len(v) for v in cells[c])) for c in columns}
    widths["op"] = min(widths["op"], 18)
    while sum(widths.values()) + 2 * (len(columns) - 1) > width and widths["op"] > 10:
        widths["op"] -= 1  # a long name gives way before the numbers do

    def line(values) -> str:
        return "  ".join(_fit(str(values[c]), widths[c]) for c in columns).rstrip()[:width]

    notes = []
    for i, (_, row) in enumerate(decisions.iterrows()):
        name = f"{cells.loc[i, 'op']} {cells.loc[i, 'where']}" + ("" if "dtype" not in columns
                                                                  else f" {cells.loc[i, 'dtype']}")
        for note in row_notes(row, judging):
            notes += textwrap.wrap(f"{name}: {note}", width, subsequent_indent="    ", break_on_hyphens=False)
    return lines + [line({c: c for c in columns}), *(line(row) for _, row in cells.iterrows()),
                    *(["notes:", *notes] if notes else [])]


def row_notes(row, judging: Judging) -> list[str]:
    """What a row needs said beyond its cells, each naming its size: a compile's payback, the
    variant the simplicity rule passed over, a tie, two states, the sizes still open, why
    the others lose."""
    size = int(row["size"])
    notes = []
    if finite(row.get("amortize_calls")):
        whole = row.get("amortize_calls_with_startup")
        notes.append(f"at n = {size} the compile pays back after {fmt_calls(row['amortize_calls'])} calls"
                     + (f" ({fmt_calls(whole)} with the compiler's one-time start-up)" if finite(whole) else ""))
    simpler = simpler_text(row)
    if simpler:
        notes.append(f"at n = {size} {simpler}")
    tie = tie_text(row, judging)
    if tie:
        notes.append(f"at n = {size} a tie: {text_of(row.get('compared_variant'))} {tie.replace(';', ',')}; "
                     "more processes would not decide it")
    if str(row["decision"]) == DEPENDS:
        notes.append(f"at n = {size} two states of a process: {text_of(row.get('states'))}")
    sizes = _open_sizes(row)
    if sizes:
        notes.append(f"{sizes} cannot tell yet: {processes_text(row)}")
    choices = by_size(row)
    first = int(row["from_size"]) if finite(row.get("from_size")) else 0
    if {variant for n, variant in choices if n < first} - {"numpy"}:  # more than "NumPy below from n"
        notes.append("by size: " + "; ".join(f"n = {n} {_said(variant)}" for n, variant in choices))
    why = text_of(row.get("why"))
    if why:
        notes.append(f"at n = {size}, why the others lose: {why}")
    return notes


def plain_legend(decisions: pd.DataFrame | None = None) -> list[str]:
    """The terminal table's legend: every column and mark it uses, and what its weak rows
    need said once."""
    count = all_threads_count(decisions) if decisions is not None else None
    text = ("decision: what to use at the largest n measured (at n), end to end (on a GPU with the copies "
            "counted); from n: the smallest n from which it holds; n: the op's size (its matrices' side for most "
            "ops); speedup: NumPy's time ÷ the variant's (above 1: faster), with its CI, without a compile's one-time "
            "cost (see its payback); a row that uses no variant names the best alternative; numpy compiled: the "
            "NumPy code through torch.compile, torch compiled: the torch code through it; a tie: within the minimum "
            "effect δ of a boundary, as close as it will get; a cell: one variant at one n and place, measured in "
            f"fresh processes; 1t: one thread; all: every core{f' ({count} threads here)' if count else ''}.")
    notes = weak_notes(decisions) if decisions is not None else [WEAK_NOTE]
    if decisions is not None and any(flag(row, "needs_quieter_machine") for _, row in decisions.iterrows()):
        notes.append(QUIETER_NOTE)
    return [line for part in (text, *notes) for line in _wrap(part, 100)]


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=False)


# --- the paragraph that answers the question ------------------------------------------------


def lead_paragraph(decisions: pd.DataFrame, gpu_reason: str | None, judging: Judging) -> str:
    """What to do on this machine, in a few sentences: what pays and where it pays most,
    where NumPy stays, what is still open."""
    if decisions.empty:
        return ("No decision can be made here: no variant other than NumPy has both a result and a NumPy "
                "baseline on this machine.")
    use = decisions[decisions["decision"] == USE]
    stay = decisions[decisions["decision"] == STAY]
    unsure = decisions[decisions["decision"] == UNSURE]
    parts = []
    if not use.empty:
        groups = "; ".join(f"{variant} for {_ops(group, decisions)}" for variant, group in use.groupby("variant"))
        parts.append(f"Moving work off NumPy pays in {len(use)} of the {len(decisions)} cases measured here: "
                     f"use {groups}.")
        best = use.loc[pd.to_numeric(use["speedup"], errors="coerce").idxmax()]
        shown = speedup_text(best, judging.ci, mark=_marked(best, sharing_said_once(decisions)))
        parts.append(f"It pays most for {who(best)}: {shown} at n = {int(best['size'])}, "
                     f"{_how(best)}.")
    if not stay.empty:
        parts.append(f"Stay with NumPy for {_ops(stay, decisions)}: nothing else is faster there by the minimum "
                     "effect.")
    depends = decisions[decisions["decision"] == DEPENDS]
    if not depends.empty:
        parts.append(f"For {_ops(depends, decisions)} the answer depends on the state a process happens to be in "
                     "(two groups of processes far apart, both kept); the table gives the speedup in each.")
    if not unsure.empty:
        parts.append(f"It cannot tell yet for {_ops(unsure, decisions)}; the table says what would decide it.")
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
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
