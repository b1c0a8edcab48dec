"""What compiling costs, and what the report says about the user's own kernels.

Sentences in the style of `findings`: per compiled series at its largest size, the speedup
over NumPy, the compile time and the calls to amortize it; what eager and compiled give
side by side; the compiler's start-up, graph breaks, recompiles and cache; and for user
kernels, why a variant or a figure leaves one out.
"""

from __future__ import annotations

import math

import pandas as pd

from ... import libraries
from ...analysis.columns import falls_back, flag, interval
from ...cells import COMPILED
from ...verdicts import Judging
from ..format import (
    by_variant,
    count_of,
    finite,
    fmt_calls,
    fmt_interval,
    fmt_payback,
    fmt_seconds,
    fmt_times,
    ratio_of,
    report_groups,
    row_threads,
    variant_of,
    where_phrase,
    widest_threads,
)
from .findings import caveat


def _compile_time(row, judging: Judging) -> str:
    text = fmt_seconds(row["compile_s"])
    if finite(row.get("compile_s_ci_low")) and finite(row.get("compile_s_ci_high")):
        text += f" ({fmt_interval(row['compile_s_ci_low'], row['compile_s_ci_high'], judging.ci, unit=' s')})"
    return text


def _place(row) -> str:
    """"on the cpu, 4 threads", "on cuda"."""
    return f"on the cpu, {row_threads(row)}" if row["device"] == "cpu" else where_phrase(row["device"])


def _where_full(row) -> str:
    return f"{_place(row)}, {row['dtype']}, n = {int(row['size'])}"


def series_lines(speedups: pd.DataFrame, judging: Judging) -> list[str]:
    """Per compiled series at its largest size: speedup, compile time, calls to amortize."""
    compiled = speedups[speedups["mode"] == COMPILED]
    frame, _ = widest_threads(compiled)
    lines, never_pay = [], {}
    for _, group in report_groups(frame.assign(variant=[variant_of(r) for _, r in frame.iterrows()]),
                            ["op", "variant", "device", "dtype"]):
        row = group.loc[group["size"].idxmax()]
        head = f"- {row['op']} with {variant_of(row)} ({_where_full(row)})"
        if falls_back(row):
            lines.append(f"{head}: **no compiled speedup**, {row['compile_fallback']}; {variant_of(row)} times "
                         f"{row['op']} as partly uncompiled code.")
        elif row.get("amortize_calls") == math.inf:  # compiled is not faster: one line per op says so
            never_pay.setdefault(row["op"], []).append(
                f"{variant_of(row)} ({_where_full(row)}: compile {_compile_time(row, judging)}, "
                f"{ratio_of(row, ci=judging.ci)}{caveat(row)})")
        else:
            lines.append(f"{head}: the compile takes {_compile_time(row, judging)} once per process and "
                         f"{_pays_back(row, judging)}; its speedup over NumPy is {ratio_of(row, ci=judging.ci)}"
                         f"{caveat(row)}.")
    for op, series in never_pay.items():
        lead = ("its compiled form never pays its compile back, since it never runs" if len(series) == 1 else
                "no compiled form pays its compile back, since none runs")
        lines.append(f"- {op}: {lead} {op} faster than NumPy: " + "; ".join(series) + ".")
    return lines


def _pays_back(row, judging: Judging) -> str:
    """After how many calls a compiled series pays its compile back, and with the compiler's
    start-up where the record has it."""
    pays = f"pays its compile back after {fmt_payback(*interval(row, 'amortize_calls'), ci=judging.ci)}"
    startup = row.get("compiler_startup_s")
    if finite(startup) and finite(row["amortize_calls"]):
        whole = row["amortize_calls"] * (row["compile_s"] + startup) / row["compile_s"]
        pays += (f"; after about {fmt_calls(whole)} calls for a program's first compiled function, which also "
                 f"pays the compiler's start-up ({fmt_seconds(startup)})")
    return pays


def eager_against_compiled(speedups: pd.DataFrame, judging: Judging) -> list[str]:
    """What compiling changes: eager and compiled speedups side by side at the largest size,
    at each thread count that has compiled cells (each against NumPy at its own)."""
    lines = []
    for (op, device, dtype, threads), group in report_groups(speedups, ["op", "device", "dtype", "threads"]):
        largest = group[group["size"] == group["size"].max()]
        if not (largest["mode"] == COMPILED).any():
            continue
        parts = ["numpy 1×", *(f"{variant_of(r)} {ratio_of(r, ci=judging.ci)}" for _, r in by_variant(largest).iterrows())]
        first = largest.iloc[0]
        lines.append(f"- {op} {_place(first)} ({dtype}, n = {int(first['size'])}), against NumPy: " + "; ".join(parts)
                     + ".")
    return lines


def two_compilers(speedups: pd.DataFrame, judging: Judging) -> list[str]:
    """Where two compilers compiled the same kernel (torch.compile of the torch code and
    jax.jit of the JAX code, say): their speedups over NumPy side by side at the largest
    size, and how many times faster the faster one runs."""
    lines = []
    compiled = speedups[speedups["mode"] == COMPILED]
    for (op, device, dtype, threads), group in report_groups(compiled, ["op", "device", "dtype", "threads"]):
        largest = group[group["size"] == group["size"].max()]
        # each library compiled by its own compiler: numpy compiled is torch's compiler again
        own = largest[[libraries.runtime(name, True).name == name for name in largest["library"]]]
        if own["library"].nunique() < 2:
            continue
        rows = sorted((r for _, r in own.iterrows()), key=lambda r: -float(r["end_to_end_speedup"]))
        best, other = rows[0], rows[1]
        times = float(best["end_to_end_speedup"]) / float(other["end_to_end_speedup"])
        parts = "; ".join(f"{variant_of(r)} {ratio_of(r, 'end_to_end_speedup', ci=judging.ci)}" for r in rows)
        lines.append(f"- {op} {_place(best)} ({dtype}, n = {int(best['size'])}): {parts} against NumPy, so "
                     f"{variant_of(best)} runs {fmt_times(times, 1)} as fast as {variant_of(other)}.")
    return lines


def process_lines(timings: pd.DataFrame) -> list[str]:
    """The compiler's start-up, graph breaks, recompiles and the cache, over compiled cells."""
    ok = timings[(timings["mode"] == COMPILED) & (timings["status"] == "ok")]
    if ok.empty:
        return []
    lines = []
    startup = ok["compiler_startup_s"].dropna()
    if not startup.empty:
        least, most = fmt_seconds(startup.min()), fmt_seconds(startup.max())
        took = least if least == most else f"{least} to {most}"  # "6 s", not "6 s to 6 s"
        lines.append(f"- Each compiled worker process first started the compiler once ({took}: its imports and the code "
                     "it builds for itself); a program pays that once, with its first compile, on top of the compile "
                     "times above.")
    broken = ok[ok["graph_breaks"].fillna(0) > 0]
    if broken.empty:
        lines.append("- Every compiled cell was captured whole: no graph break.")
    else:
        lines += [f"- {row['op']} with {variant_of(row)} ({_where_full(row)}): "
                  f"{count_of(int(row['graph_breaks']), 'graph break')}, first: {row['first_break']}."
                  for _, row in broken.iterrows()]
    recompiled = ok[ok["recompiles"].fillna(0) > 0]
    if not recompiled.empty:
        names = ", ".join(f"{r['op']} {variant_of(r)} n = {int(r['size'])}" for _, r in recompiled.iterrows())
        lines.append(f"- Recompiled while sampling (a guard failed): {names}.")
    compiled = ok[ok["compile_processes"].notna()] if "compile_processes" in ok else ok.iloc[:0]
    caches = sorted({cache_words(row) for _, row in compiled.iterrows()})
    if caches == ["cold"]:
        lines.append("- Every process compiled with an empty on-disk compile cache (`compile.cold_cache`), so each "
                     "compile time is what a program pays the first time it runs.")
    elif caches:
        lines.append(f"- The compile cache: {', '.join(caches)}; times with hits are those of a program run before.")
    return lines


def cache_words(row) -> str:
    """A compiled cell's compile cache: "cold", "your cache", or "cold in 2, the run's own in 1
    later" (an earlier process of the run filled it), with its hits."""
    reused, hits = int(row["compile_cache_reused"]), int(row["compile_cache_hits"])
    cache = "your cache" if not flag(row, "compile_cache_cold") else "cold" if not reused else \
        f"cold in {int(row['compile_processes']) - reused}, the run's own in {reused} later"
    return cache + (f", {hits} hits" if hits else "")


def compile_section(timings: pd.DataFrame, speedups: pd.DataFrame, judging: Judging) -> list[str]:
    """The section "What compiling costs" (nothing when the grid has no compiled cell)."""
    if "mode" not in timings or not (timings["mode"] == COMPILED).any():
        return []
    lines = ["## What compiling costs", "",
             ("Compiled cells run `torch.compile` of the unchanged NumPy function (numpy compiled) or of the torch "
              "code (torch compiled), or `jax.jit` of the JAX code (jax compiled). The first call compiles; it is timed on its own and never a sample. The calls "
              "to amortize are the compile time divided by the time saved per call against NumPy."), ""]
    skipped = timings[(timings["mode"] == COMPILED) & (timings["status"] != "ok")]
    for (status, reason), group in skipped.groupby(["status", "reason"]):
        cells = "1 compiled cell is" if len(group) == 1 else f"{len(group)} compiled cells are"
        lines.append(f"- {cells} {status}: {reason}.")
    if not speedups.empty and (speedups["mode"] == COMPILED).any():
        lines += [*series_lines(speedups, judging), "", "### Eager and compiled side by side", "",
                  *eager_against_compiled(speedups, judging)]
        compilers = two_compilers(speedups, judging)
        if compilers:
            lines += ["", "### Two compilers of the same code", "",
                      ("The same code compiled by each library's own compiler (`torch.compile` of the torch "
                       "code, `jax.jit` of the JAX code), end to end against NumPy:"), "", *compilers]
    lines += ["", *process_lines(timings), ""]
    return lines
