"""The report's words and numbers, in one place: how a number, a CI, a time and a ratio are
written, how threads are said, the order ops, devices and variants appear in, and the
words of the verdicts. Figures, sentences, LaTeX and the comparison all write through it,
so one cell reads the same everywhere.
"""

from __future__ import annotations

import math
import textwrap

import pandas as pd

from ..analysis.breakeven import FROM_SMALLEST
from ..analysis.columns import interval, text_of
from ..catalogue import family_of, op_order
from ..cells import (
    ALL_THREADS,
    device_sort_key,
    dtype_sort_key,
    library_sort_key,
    mode_sort_key,
    thread_sort_key,
)
from ..units import fmt_count, fmt_duration, fmt_time, format_bytes
from ..verdicts import FASTER, MAX_CI_SPAN, SAME, SLOWER, UNDECIDED, VERDICTS, ci_span

__all__ = [  # re-exported, so that the report's modules take every format and order from here
    "device_sort_key", "dtype_sort_key", "family_of", "fmt_duration", "fmt_time", "format_bytes", "library_sort_key",
    "mode_sort_key", "op_order", "text_of", "thread_sort_key",
]

# --- numbers --------------------------------------------------------------------------------


def finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _decimals(value: float, digits: int) -> int:
    if value == 0:
        return digits - 1
    return max(0, digits - 1 - math.floor(math.log10(abs(value))))


def fmt_sig(value, digits: int = 3) -> str:
    """A number with `digits` significant digits and no exponent: 1.23, 0.0456, 4103."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not finite(value):
        return "–"
    value = float(value)
    places = _decimals(value, digits)
    # Rounding can add a digit (9.996 -> 10.00); count again on the rounded value.
    places = _decimals(round(value, places), digits) if value else places
    return f"{value:.{places}f}"


def fmt_ci(value, low, high, *, unit: str = "", ci: str | None = None, ratio: bool = False,
           word: str = "") -> str:
    """The one way an estimate and its CI are written. In a table whose header names the
    CI: "1.23 (1.20–1.26)", the bounds with as many decimals as the value so they line up;
    with its label `ci` (Judging.ci, "95% CI"), in a sentence: "1.23 s (95% CI 1.20–1.26 s)".
    A `ratio` has two decimals (two significant digits under 0.1) and "×" ("2.10× faster
    (95% CI 2.05–2.14)" with `word`), and one whose CI spans more than MAX_CI_SPAN is no
    result and never a number: "undecided (its CI spans 3.5×)", or "CI spans 3.5×" in a table."""
    named = ci is not None
    if not finite(value):
        return "–"
    bounded = finite(low) and finite(high)
    if ratio and bounded and ci_span(low, high) > MAX_CI_SPAN:
        span = ci_span(low, high)
        return f"undecided (its CI spans {span:.1f}×)" if named else f"CI spans {span:.1f}×"
    # a ratio under 0.1 keeps two significant digits: "0.020× (0.014–0.028)", not "0.02× (0.01–0.03)"
    text = (f"{float(value):.2f}" if abs(float(value)) >= 0.1 else fmt_sig(value, 2)) if ratio else \
        fmt_sig(value)
    head = f"{text}{'×' if ratio else unit}{' ' + word if word else ''}"
    if not bounded:
        return f"{head} (CI unavailable)" if named else head
    places = len(text.split(".")[1]) if "." in text else 0
    bounds = f"{float(low):.{places}f}–{float(high):.{places}f}{'' if ratio else unit}"
    return f"{head} ({ci} {bounds})" if named else f"{head} ({bounds})"


def fmt_ratio(value: float, lo: float, hi: float, ci: str | None = None) -> str:
    """ "2.10× (95% CI 2.05–2.14)" in a sentence (with the label `ci`), "2.10× (2.05–2.14)" in
    a table whose header names the CI (see fmt_ci: a CI over MAX_CI_SPAN gives no number)."""
    return fmt_ci(value, lo, hi, ci=ci, ratio=True)


def ratio_of(row, column: str = "speedup", ci: str | None = None) -> str:
    """A ratio column of a table row with its CI, e.g. "2.10× (95% CI 2.05–2.14)"."""
    return fmt_ratio(*interval(row, column), ci=ci)


def fmt_time_ratio(ratio: float, lo: float, hi: float, ci: str) -> str:
    """A time ratio B/A read as speed: "3.10× faster (95% CI 3.02–3.18)"."""
    if not finite(ratio) or ratio <= 0:
        return "–"
    if ratio <= 1:
        return fmt_ci(1 / ratio, 1 / hi if finite(hi) else hi, 1 / lo if finite(lo) else lo, ci=ci, ratio=True,
                      word="faster")
    return fmt_ci(ratio, lo, hi, ci=ci, ratio=True, word="slower")


def fmt_speedup(value: float, decided: bool = False) -> str:
    """"3.2×", "0.81×" for a label in a figure; a measurable difference close to 1 keeps the
    digits that show it."""
    if not finite(value):
        return "–"
    if decided and 0.995 <= value < 1.005:
        return f"{value:.3f}×"
    if value >= 10:
        return f"{value:.0f}×"
    if value >= 0.995:  # 0.999 reads as 1.0×, not 1.00× next to 0.99×
        return f"{value:.1f}×"
    return f"{value:.2f}×" if value >= 0.1 else f"{value:.2g}×"


def fmt_plain(value: float) -> str:
    """"2", "0.05", "1e-06": a constant or setting as short as it reads."""
    return f"{value:g}"


def fmt_tick(value: float) -> str:
    """"1,250", "0.25": a tick label of a log axis, whole numbers from 1 on."""
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def fmt_factor(value: float) -> str:
    """"1/8×", "1×", "8×": a power of two as a short tick label."""
    return f"{value:g}×" if value >= 1 else f"1/{round(1 / value)}×"


def fmt_rate(value: float) -> str:
    """A rate or ratio at about two significant digits without powers of ten: 7.5, 31, 1,250."""
    if not finite(value):
        return "–"
    if abs(value) >= 10:
        return f"{value:,.0f}"
    return f"{value:.2g}"


def fmt_percent(fraction: float) -> str:
    """"42%", and two significant digits below 10%: "0.63%"."""
    if not finite(fraction):
        return "–"
    return f"{fraction:.0%}" if fraction >= 0.095 else f"{fraction * 100:.2g}%"


def fmt_size(value) -> str:
    """"512", "46,300": a size n, three significant digits from 1,000 on (an estimate's precision)."""
    if not finite(value):
        return "–"
    n = int(float(value))
    return f"{n:,}" if n < 1000 else f"{round(n, 3 - len(str(n))):,}"


def fmt_calls(value) -> str:
    """"1,090": a count of calls, rounded up (a call is paid back only once it is whole)."""
    return f"{math.ceil(float(value)):,}" if finite(value) else "–"


def fmt_payback(calls, low=math.nan, high=math.nan, ci: str | None = None) -> str:
    """"93 calls (70–130)": the calls that pay a compile back, with its interval where known
    (labelled `ci` in a sentence: "93 calls (95% CI 70–130)"); "never" where compiling is
    not faster (an infinite count)."""
    if not finite(calls):
        return "never" if calls == math.inf else "–"
    text = f"{fmt_calls(calls)} calls"
    if finite(low):
        text += f" ({f'{ci} ' if ci else ''}{fmt_calls(low)}–{fmt_calls(high) if finite(high) else 'never'})"
    return text


def fmt_break_even(size, status) -> str:
    """A series' break-even size in a table: "606", "at most 256", "not reached"."""
    if not finite(size):
        return "not reached"
    return f"at most {float(size):.0f}" if status == FROM_SMALLEST else f"{float(size):.0f}"


def fmt_seconds(value, digits: int = 2) -> str:
    """"0.81 s": a compile time or start-up, `digits` significant digits (no exponent below 10⁴)."""
    return f"{float(value):.{digits}g} s" if finite(value) else "–"


def fmt_times(value, decimals: int = 2) -> str:
    """"2.10×": a ratio in a sentence or a cell, without its CI."""
    return f"{float(value):.{decimals}f}×" if finite(value) else "–"


def fmt_error(value) -> str:
    """"3.2e-07": a relative error, one decimal and its power of ten."""
    return f"{float(value):.1e}" if finite(value) else "–"


def fmt_interval(lo: float, hi: float, ci: str, scale: float = 1.0, unit: str = "") -> str:
    """"95% CI 1.2–1.5 s" (`ci` its label): an interval alone, three significant digits
    (scaled, e.g. to %)."""
    if not (finite(lo) and finite(hi)):
        return "CI unavailable"
    return f"{ci} {fmt_sig(lo * scale)}–{fmt_sig(hi * scale)}{unit}"


def time_unit(seconds) -> tuple[str, float]:
    """ms or µs for a table, from the middle of its times, so most cells read 0.1–1000."""
    values = [float(v) for v in seconds if finite(v) and float(v) > 0]
    if not values:
        return "ms", 1e-3
    middle = sorted(values)[len(values) // 2]
    return ("ms", 1e-3) if middle >= 1e-3 else ("µs", 1e-6)


# --- threads --------------------------------------------------------------------------------


def threads_text(threads, effective=None) -> str:
    """"1 thread", "4 threads", "all = 16 threads" (or "all threads" when the count is unknown)."""
    label = str(threads)
    if label == ALL_THREADS:
        return f"all = {int(float(effective))} threads" if finite(effective) else "all threads"
    return f"{label} thread" + ("s" if label != "1" else "")


def row_threads(row) -> str:
    """"1 thread", "all = 16 threads": the threads a cpu row ran on (threads_text)."""
    return threads_text(row["threads"], row.get("threads_effective"))


def widest_threads(frame: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The rows to show for the cpu: all threads, else the highest thread count present
    (GPU rows are kept whatever their label), and the cpu label chosen. A variant measured
    without that count (compiled on one thread only, say) keeps its own widest rows."""
    cpu = frame["device"] == "cpu"
    labels = frame.loc[cpu, "threads"].astype(str)
    if labels.empty:
        return frame, None
    label = ALL_THREADS if ALL_THREADS in set(labels) else max(labels, key=thread_sort_key)
    keep = ~cpu | (frame["threads"].astype(str) == label)
    keys = [k for k in ("op", "library", "mode") if k in frame]
    shown = {tuple(row) for row in frame.loc[cpu & keep, keys].astype(str).to_numpy()}
    for values, group in frame[cpu & ~keep].groupby(keys):
        if tuple(map(str, values)) not in shown:
            widest = max(group["threads"].astype(str), key=thread_sort_key)
            keep |= frame.index.isin(group.index[group["threads"].astype(str) == widest])
    return frame[keep], label


def threads_phrase(frame: pd.DataFrame, label: str | None) -> str:
    """"all = 16 threads", "8 threads", from the rows chosen by `widest_threads`."""
    if label is None:
        return ""
    effective = frame.loc[frame["device"] == "cpu", "threads_effective"] if "threads_effective" in frame else []
    counts = {int(v) for v in effective if finite(v)}
    return threads_text(label, counts.pop() if len(counts) == 1 else None)


# --- names and orders -----------------------------------------------------------------------


def variant_of(row) -> str:
    """"numpy", "torch compiled": the library as it ran (tables from before modes: eager)."""
    return text_of(row.get("variant")) or row["library"]


def by_variant(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in variant order: numpy before torch, eager before compiled."""
    modes = frame["mode"] if "mode" in frame else pd.Series("eager", index=frame.index)
    key = [(library_sort_key(lib), mode_sort_key(mode)) for lib, mode in zip(frame["library"], modes, strict=True)]
    return frame.assign(_variant_key=key).sort_values("_variant_key").drop(columns="_variant_key")


def device_order(devices) -> list[str]:
    return sorted(set(devices), key=lambda d: (device_sort_key(d), d))


def dtype_order(dtypes) -> list[str]:
    return sorted(set(dtypes), key=lambda d: (dtype_sort_key(d), d))


def report_groups(frame: pd.DataFrame, keys: list[str]):
    """Groups in report order: op by family, device cpu first, dtype narrow to wide."""
    order = {op: i for i, op in enumerate(op_order(frame["op"]))}
    groups = list(frame.groupby(keys, sort=False))

    def key(item):
        values = dict(zip(keys, item[0], strict=True))
        return (order[values["op"]], device_sort_key(values.get("device")), dtype_sort_key(values.get("dtype", "")),
                tuple(str(values[k]) for k in keys))

    return sorted(groups, key=key)


def count_of(count: int, noun: str) -> str:
    """"1 cell", "3 cells": a count with its noun, in the plural where it is not one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def and_list(items: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def reasons_of(frame: pd.DataFrame, width: int | None = None) -> str:
    """The distinct reasons a table gives for what was not measured, sorted, shortened to `width`
    ("" where it gives none, or has no reason column)."""
    said = "; ".join(sorted({r for r in frame.get("reason", ()) if isinstance(r, str) and r}))
    return textwrap.shorten(said, width, placeholder=" …") if width else said


def where_phrase(device: str) -> str:
    return "on the cpu" if device == "cpu" else f"on {device}"


def cell_phrase(row) -> str:
    """"matmul with torch on the cpu (all = 16 threads), float32, n = 4096"."""
    cpu = row["device"] == "cpu"
    threads = f" ({row_threads(row)})" if cpu else ""
    return (f"{row['op']} with {variant_of(row)} {where_phrase(row['device'])}{threads}, {row['dtype']}, "
            f"n = {int(row['size'])}")


def times_of(row, end_to_end: bool = False) -> str:
    """The two medians behind a speedup, so a ratio can be read for what it is; `end_to_end`:
    those behind the decisions' speedup (host arrays in and out, copies counted)."""
    mine, base = ("end_to_end_s", "baseline_end_to_end_s") if end_to_end else ("median_s", "baseline_median_s")
    return f"{variant_of(row)} {fmt_time(row[mine])} against NumPy {fmt_time(row[base])}"


# --- verdicts -------------------------------------------------------------------------------

VERDICT_WORDS = {  # a cell against the NumPy baseline
    FASTER: "faster than NumPy",
    SLOWER: "slower than NumPy",
    SAME: "the same as NumPy within the minimum effect",
    UNDECIDED: "undecided against NumPy (its CI cannot tell yet)",
}


def verdict_counts(verdicts: pd.Series, same: str = "the same") -> str:
    """"12 faster, 9 slower, 8 the same, 3 undecided", in the vocabulary's order."""
    counts = verdicts.value_counts()
    return ", ".join(f"{counts[v]} {same if v == SAME else v}" for v in VERDICTS if v in counts) or "none"


PAGE_BYTES = 4096  # a fresh page the kernel maps


def fmt_pages(count: float) -> str:
    """"4,064 fresh pages (15.9 MiB)"."""
    return f"{fmt_count(count)} fresh pages ({format_bytes(count * PAGE_BYTES)})"
