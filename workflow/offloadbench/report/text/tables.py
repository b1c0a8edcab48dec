"""Every table the report, the LaTeX and the terminal print, declared once (report/table.py
renders them): the speedups, the timings, the copy bandwidth and a comparison of machines.
The decision table is declared beside its words, in decisions.py."""

from __future__ import annotations

import pandas as pd

from ...analysis.columns import interval, unstable_cells
from ..format import (
    finite,
    fmt_break_even,
    fmt_ci,
    fmt_error,
    fmt_payback,
    fmt_percent,
    fmt_rate,
    fmt_sig,
    format_bytes,
    reasons_of,
    time_unit,
    variant_of,
)
from ..table import MARKDOWN, TERMINAL, Column, Table


def value(name: str):
    """A column that shows the row's value as it is."""
    return lambda row, context: str(row[name])


def ratio(name: str):
    """A ratio with its CI in parentheses (the header names the CI)."""
    return lambda row, context: fmt_ci(*interval(row, name), ratio=True)


def scaled(name: str):
    """A time in the table's unit (context["scale"]), three significant digits."""
    return lambda row, context: fmt_sig(row[name] / context["scale"]) if finite(row.get(name)) else "–"


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["status"] == "ok"] if "status" in frame else frame.iloc[0:0]


def in_unit(frame: pd.DataFrame, *columns: str) -> dict:
    """The time unit of a table's times, chosen from the middle of `columns`' values."""
    unit, scale = time_unit(pd.concat([frame[c] for c in columns if c in frame] or [pd.Series(dtype=float)]))
    return {"unit": unit, "scale": scale}


NAME = (  # the columns that name a cell
    Column("op", value("op")),
    Column("variant", lambda row, context: variant_of(row),
           legend="variant: the library as it ran (numpy compiled: the NumPy code through torch.compile)."),
    Column("device", value("device")),
    Column("dtype", value("dtype")),
    Column("n", lambda row, context: str(int(row["size"])), legend="n: the op's size (its matrices' side for most)."),
    Column("threads", value("threads")),
)


def _median(row, context) -> str:
    scale = context["scale"]
    text = fmt_ci(row["median_s"] / scale, row["ci_low_s"] / scale, row["ci_high_s"] / scale)
    return text + (" *" if row.name in context["unstable"] else "")


TIMINGS = Table(
    (
        *NAME,
        Column("median ({unit}), {ci}", _median,
               legend="median: of the processes' medians, with its {ci}; * marks a cell a noise check flagged "
                      "unstable (the report's Cells section says why)."),
        Column("GFLOP/s", lambda row, context: fmt_sig(row["gflops"]), legend="GFLOP/s: from the op's FLOP model."),
        Column("end to end ({unit})", scaled("end_to_end_s"), formats=frozenset({MARKDOWN, TERMINAL}),
               legend="end to end: host arrays in and out, the copies counted."),
        Column("copies", lambda row, context: fmt_percent(row.get("transfer_fraction")), optional=True,
               formats=frozenset({MARKDOWN, TERMINAL}), legend="copies: their share of the end-to-end time."),
        Column("rel. error", lambda row, context: fmt_error(row.get("rel_err")),
               formats=frozenset({MARKDOWN}), legend="rel. error: against float64."),
        Column("samples", lambda row, context: str(int(row["n_samples"])), formats=frozenset({MARKDOWN})),
    ),
    empty="No cell ran.",
    intro="Compute time per cell over {processes}.",
    rows=ok_rows,
    context=lambda frame, base: {**in_unit(ok_rows(frame), "median_s"),
                                 "unstable": set(frame.index[unstable_cells(frame)]) if not frame.empty else set(),
                                 "processes": _processes_phrase(ok_rows(frame))},
)


def _processes_phrase(frame: pd.DataFrame) -> str:
    """"1 process", "7 to 9 processes"."""
    span = processes_range(frame)
    return f"{span} process" if span == "1" else f"{span} processes"


def processes_range(frame: pd.DataFrame) -> str:
    counts = sorted({int(p) for p in frame.get("processes", []) if finite(p)})
    if not counts:
        return "n/a"
    return str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]} to {counts[-1]}"


SPEEDUPS = Table(
    (
        *NAME,
        Column("speedup ({ci})", ratio("speedup"),
               legend="speedup: NumPy's time ÷ PyTorch's with the data already on the device, with its {ci}."),
        Column("verdict", value("speedup_verdict"),
               legend="verdict: faster (slower) where the CI lies above (below) 1 and the speedup is at least "
                      "1 + δ (at most its inverse), δ = {delta}; same where the whole CI lies within ±δ of 1; else "
                      "undecided."),
        Column("end-to-end speedup ({ci})", ratio("end_to_end_speedup"),
               legend="end-to-end: with the host-device copies counted."),
        Column("end-to-end verdict", value("end_to_end_verdict")),
        Column("break-even n", lambda row, context: fmt_break_even(row.get("break_even_size"),
                                                                   row.get("break_even_status")),
               legend="break-even n: the size from which the end-to-end speedup's CI stays above 1."),
        Column("calls per round trip k* ({ci})", lambda row, context: fmt_ci(*interval(row, "calls_per_round_trip")),
               optional=True,
               legend="k*: the calls the data must stay on the device for one copy in and out to pay, (h2d + d2h) "
                      "÷ (NumPy's time − the device's compute time); at most 1: a copy on every call pays."),
        Column("compile pays back after", lambda row, context: fmt_payback(*interval(row, "amortize_calls"))
               if row.get("mode") == "compiled" else "–", optional=True,
               legend="compile pays back after: the calls that pay a compile back against NumPy."),
    ),
    empty="No PyTorch cell has both a result and a NumPy baseline.",
    intro="Speedup of PyTorch over NumPy (NumPy's time ÷ PyTorch's; above 1: faster).",
)

DIRECTIONS = {"h2d": "host → device", "d2h": "device → host"}

TRANSFER = Table(
    (
        Column("device", value("device")),
        Column("direction", lambda row, context: DIRECTIONS.get(row["direction"], str(row["direction"]))),
        Column("memory", value("memory"), legend="memory: pageable or pinned host memory."),
        Column("size", lambda row, context: format_bytes(row["bytes"])),
        Column("GB/s ({ci})", lambda row, context: fmt_ci(*interval(row, "gbs")),
               legend="GB/s: the median bandwidth with its {ci}."),
        Column("of link", lambda row, context: fmt_percent(row.get("link_fraction")),
               legend="of link: the share of the link's rated bandwidth ({links})."),
    ),
    empty="No copy was measured{reasons}.",
    intro="Host-device copy bandwidth.",
    rows=ok_rows,
    context=lambda frame, base: {"links": _links(ok_rows(frame)), "reasons": _reasons(frame)},
)


def _links(transfer: pd.DataFrame) -> str:
    """"PCIe 5.0 x16 64 GB/s": the links the copies ran over, as recorded."""
    return ", ".join(sorted({f"{k} {fmt_rate(g)} GB/s" for k, g in zip(transfer.get("link", []), transfer.get("link_gbs", []),
                                                                  strict=True)
                             if isinstance(k, str) and k and finite(g)})) or "not known"


def _reasons(transfer: pd.DataFrame) -> str:
    """" (no CUDA device)": why no copy was measured, where the table says."""
    reasons = reasons_of(transfer)
    return f" ({reasons})" if reasons else ""


def comparison_table(pair: bool) -> Table:
    """A comparison of machines: each cell's median on both and the ratio b/a; `pair`: of one
    pair of machines, named in the headers (else each row names its two)."""
    a, b = ("{a}", "{b}") if pair else ("a", "b")
    machines = () if pair else (Column("machine a", value("machine_a")), Column("machine b", value("machine_b")))
    return Table(
        (
            *machines,
            *NAME,
            Column(f"median on {a} ({{unit}})", scaled("median_a_s")),
            Column(f"median on {b} ({{unit}})", scaled("median_b_s")),
            Column(f"ratio {b}/{a} ({{ci}})", ratio("ratio"),
                   legend=f"ratio: the time on {b} ÷ the time on {a}, with its {{ci}} from both machines' "
                          "bootstraps."),
            Column("verdict", value("verdict"), legend="verdict: undecided where the CI cannot decide."),
            Column("CI from", value("ci_scope"), formats=frozenset({MARKDOWN, TERMINAL}),
                   legend="CI from: what the interval covers."),
        ),
        empty="No cell was measured on both machines.",
        intro="Median compute time of each cell on both machines.",
        context=lambda frame, base: in_unit(frame, "median_a_s", "median_b_s"),
    )

