"""Findings in sentences: numbers with their 95% CIs, and plain words where data is missing.

Each function takes tidy tables and returns Markdown bullet lines; the report arranges them.
"""

from __future__ import annotations

import pandas as pd

from ...analysis.columns import ci_columns, compile_fallbacks, interval, unstable_cells
from ...verdicts import FASTER, MAX_CI_SPAN, SLOWER, UNDECIDED, ci_span
from ..format import (
    cell_phrase,
    finite,
    fmt_time,
    format_bytes,
    ratio_of,
    times_of,
    verdict_counts,
    verdict_phrase,
)


def caveat(row) -> str:
    """A warning to append when a number comes from a weak cell: one that failed a noise
    check, or shared its cores with the orchestrator (the figures draw both hollow)."""
    flags = row.get("unstable")
    if isinstance(flags, str) and flags:
        return " *Flagged unstable, read with care:* " + flags + "."
    if str(row.get("shares_cores")).lower() in ("true", "1", "1.0"):
        return " *A cell behind this number shared its cores with the orchestrator; read with care.*"
    return ""


def speedup_findings(speedups: pd.DataFrame) -> list[str]:
    if speedups.empty:
        return ["- No PyTorch cell has both a result and a NumPy baseline, so no speedup can be stated."]
    lines = []
    fallbacks = compile_fallbacks(speedups)
    speedups = speedups[~fallbacks]
    if speedups.empty:
        return [(f"- Every compiled cell fell back, at least in part, to uncompiled code ({int(fallbacks.sum())} "
                "cells, listed under What compiling costs), so no speedup can be stated.")]
    verdicts = speedups["speedup_verdict"]
    faster = speedups[verdicts == FASTER]
    if not faster.empty:
        best = faster.loc[faster["speedup"].idxmax()]
        lines.append(
            f"- The largest speedup over NumPy is **{ratio_of(best)}**, "
            f"for {cell_phrase(best)} ({times_of(best)}).{caveat(best)}"
        )
    else:
        lines.append("- Nothing is faster than NumPy by the minimum effect or more.")
    slower = speedups[verdicts == SLOWER]
    if not slower.empty:
        worst = slower.loc[slower["speedup"].idxmin()]
        lines.append(
            f"- The slowest against NumPy is {cell_phrase(worst)}: {ratio_of(worst)}, {times_of(worst)}.{caveat(worst)}"
        )
    lines.append(f"- Of {len(speedups)} cells against NumPy: {verdict_counts(verdicts)}.")
    lines += undecided_lines(speedups, "speedup")
    if fallbacks.any():
        lines.append(f"- {int(fallbacks.sum())} compiled cells are left out above: their code did not all compile "
                     "(see What compiling costs).")
    return lines


def no_gpu_reason(timings: pd.DataFrame) -> str | None:
    """Why no GPU cell ran, or None when one did."""
    gpu_rows = timings[timings["device"] != "cpu"]
    if (gpu_rows["status"] == "ok").any():
        return None
    if gpu_rows.empty:
        return "the grid has no GPU cells"
    return "; ".join(sorted(gpu_rows["reason"].dropna().astype(str).unique())) or "no GPU cell succeeded"


def break_even_lines(speedups: pd.DataFrame) -> list[str]:
    lines = []
    gpu = speedups[speedups["device"] != "cpu"]
    for (op, device, dtype), group in gpu.groupby(["op", "device", "dtype"]):
        largest = group.loc[group["size"].idxmax()]
        lines.append(
            f"- {op}, {dtype} on {device}: with the copies counted, offloading pays from "
            f"{largest['break_even']}; at n = {int(largest['size'])} the end-to-end speedup is "
            f"{ratio_of(largest, 'end_to_end_speedup')} against {ratio_of(largest)} with the data already on the device."
        )
    return lines


def gpu_findings(timings: pd.DataFrame, speedups: pd.DataFrame) -> list[str]:
    reason = no_gpu_reason(timings)
    if reason:
        return [
            (f"- **No GPU cell ran on this machine** ({reason}). Whether offloading pays, and what the copies cost, "
             "cannot be answered here: run `config/paper.yaml` on a GPU machine, or `make gpu-check`.")
        ]
    gpu = speedups[speedups["device"] != "cpu"]
    return [
        f"- Offloading {op} ({dtype}) to {device} pays with the copies counted from {group['break_even'].iloc[0]}."
        for (op, device, dtype), group in gpu.groupby(["op", "device", "dtype"])
    ]


def phase_share_lines(timings: pd.DataFrame) -> list[str]:
    ok = timings[(timings["device"] != "cpu") & (timings["status"] == "ok")]
    lines = []
    for (op, device, dtype), group in ok.groupby(["op", "device", "dtype"]):
        row = group.loc[group["size"].idxmax()]
        if not finite(row["transfer_fraction"]):
            continue
        line = (
            f"- {op}, {dtype} on {device}, n = {int(row['size'])}: copies take {row['transfer_fraction']:.0%} of the "
            f"end-to-end time {fmt_time(row['end_to_end_s'])} (copy in {fmt_time(row['h2d_s'])}, compute "
            f"{fmt_time(row['compute_s'])}, copy out {fmt_time(row['d2h_s'])}"
        )
        if finite(row.get("finish_s")):
            line += f", plotting {fmt_time(row['finish_s'])} = {row['finish_s'] / row['end_to_end_s']:.0%}"
        lines.append(line + ").")
    return lines


def bandwidth_lines(transfer: pd.DataFrame) -> list[str]:
    if transfer is None or transfer.empty:
        return ["- The copy-bandwidth sweep is off (`transfer.devices` is empty)."]
    ok = transfer[transfer["status"] == "ok"]
    if ok.empty:
        reasons = "; ".join(sorted(transfer["reason"].dropna().astype(str).unique()))
        return [f"- No copy was measured: {reasons}."]
    lines = []
    for (device, direction, memory), group in ok.groupby(["device", "direction", "memory"]):
        row = group.loc[group["bytes"].idxmax()]
        arrow = "host→device" if direction == "h2d" else "device→host"
        line = (
            f"- {device} {arrow}, {memory} memory: {row['gbs']:.1f} GB/s (95% CI {row['gbs_ci_low']:.1f}–{row['gbs_ci_high']:.1f}) "
            f"for {format_bytes(row['bytes'])}"
        )
        if finite(row["link_gbs"]):
            line += f", {row['link_fraction']:.0%} of the {row['link']} rate ({row['link_gbs']:.0f} GB/s)"
        lines.append(line + ".")
    for (device, direction), group in ok.groupby(["device", "direction"]):
        kinds = group[group["bytes"] == group["bytes"].max()].set_index("memory")["gbs"]
        if {"pinned", "pageable"} <= set(kinds.index):
            lines.append(f"- {device} {direction}: pinned memory copies the largest size {kinds['pinned'] / kinds['pageable']:.2f}× as fast as pageable memory.")
    return lines


def offload_section(timings: pd.DataFrame, speedups: pd.DataFrame, transfer: pd.DataFrame) -> list[str]:
    """The section "Does offloading pay?": break-even sizes, where the time goes, bandwidth
    (the compute-then-plot saving is a seed claim, checked in its own section)."""
    lines = ["## Does offloading pay?", ""]
    reason = no_gpu_reason(timings)
    if reason:
        lines += [
            (f"**This machine has no GPU that PyTorch can use** ({reason}), so the break-even sizes, the copy costs "
             "and the compute-then-plot saving cannot be measured here. Run `make gpu-check` on a GPU machine for a "
             "quick answer, or `snakemake --cores all --configfile config/paper.yaml` for the full grid."),
            "",
            "### Copy bandwidth",
            "",
            *bandwidth_lines(transfer),
            "",
        ]
        return lines
    lines += ["### Break-even sizes", "", *break_even_lines(speedups), ""]
    lines += ["### Where the time goes", "", *phase_share_lines(timings), ""]
    lines += ["### Copy bandwidth", "", *bandwidth_lines(transfer), ""]
    return lines


def scaling_findings(scaling: pd.DataFrame) -> list[str]:
    lines = []
    keys = ["op", "variant" if "variant" in scaling else "library", "dtype"]
    for (op, variant, dtype), group in scaling.groupby(keys):
        row = group.loc[group["size"].idxmax()]
        threads = f"{int(row['threads_effective'])} threads" if finite(row["threads_effective"]) else f"{row['threads']} threads"
        head = f"- Thread scaling, {variant} {op} {dtype} at n = {int(row['size'])}: "
        if row.get("verdict") == UNDECIDED and ci_span(*interval(row, "scaling")[1:]) > MAX_CI_SPAN:
            lines.append(f"{head}undecided, {row.get('verdict_undecided') or 'its CI is too wide'}.{caveat(row)}")
            continue
        lines.append(f"{head}{threads} run {ratio_of(row, 'scaling')} as fast as one thread"
                     f"{'' if row.get('verdict') in (None, UNDECIDED) else ' (' + verdict_phrase(row['verdict']) + ')'}"
                     f".{caveat(row)}")
    return lines


def undecided_lines(frame: pd.DataFrame, column: str) -> list[str]:
    """The ratios too wide to be a result (CI over 2×), listed with their reason, never as numbers."""
    verdict = frame[f"{column}_verdict"] if f"{column}_verdict" in frame else frame["verdict"]
    low, high = ci_columns(column)
    spans = frame[high] / frame[low]
    wide = frame[(verdict == UNDECIDED) & ~(spans <= MAX_CI_SPAN)]
    if wide.empty:
        return []
    names = "; ".join(cell_phrase(row) for _, row in wide.head(5).iterrows())
    more = f" and {len(wide) - 5} more" if len(wide) > 5 else ""
    return [(f"- {len(wide)} ratios are undecided because their 95% CI spans more than {MAX_CI_SPAN:g}× "
            f"(too wide to be a result): {names}{more}.")]


def stability_findings(timings: pd.DataFrame) -> list[str]:
    ok = timings[timings["status"] == "ok"]
    unstable = ok[unstable_cells(ok)]
    if ok.empty:
        return []
    if unstable.empty:
        return [f"- All {len(ok)} measured cells met the noise checks."]
    return [f"- {len(unstable)} of {len(ok)} measured cells are flagged unstable (listed below; hollow markers in the figures)."]


