"""Findings in sentences: numbers with their CIs (at the run's confidence level), and plain words where
data is missing.

Each function takes tidy tables and returns Markdown bullet lines; the report arranges them.
"""

from __future__ import annotations

import pandas as pd

from ...analysis.breakeven import FROM_SMALLEST, REACHED
from ...analysis.columns import ci_columns, compile_fallbacks, headline, interval, is_weak_row, unstable_cells
from ...analysis.round_trip import AFTER, EVERY_CALL, NEVER, trip_kind
from ...cells import CELL_COLUMNS
from ...verdicts import MAX_CI_SPAN, SLOWER, UNDECIDED, Judging
from ..format import (
    and_list,
    cell_phrase,
    finite,
    fmt_calls,
    fmt_ci,
    fmt_interval,
    fmt_percent,
    fmt_plain,
    fmt_rate,
    fmt_ratio,
    fmt_sig,
    fmt_time,
    fmt_times,
    format_bytes,
    ratio_of,
    reasons_of,
    report_groups,
    row_threads,
    times_of,
    variant_of,
    verdict_counts,
)
from ..table import by_size, markdown_table
from .decisions import WEAK_MARK


def caveat(row) -> str:
    """The weak mark to put after a number from a weak cell (flagged unstable, or sharing its
    cores with the orchestrator; the figures draw both hollow). The report explains the mark
    once, and says which cells are weak and why in How the measurement went and Unstable cells."""
    return WEAK_MARK if is_weak_row(row) else ""


def resident_clause(row, judging: Judging) -> str:
    """Where a cell's compute time (the data already where it runs: on a GPU, on the device)
    differs from its end-to-end time, the speedup with the data already there, beside the
    end-to-end one the decisions use; empty where the two are one time."""
    compute, whole = row.get("median_s"), row.get("end_to_end_s")
    if not (finite(compute) and finite(whole) and finite(row.get("speedup"))) or whole == compute:
        return ""
    arrays = "on the device" if row["device"] != "cpu" else f"in {row['library']}'s arrays"
    return f"; with the data already {arrays} it is {ratio_of(row, 'speedup', judging.ci)}"


def speedup_findings(speedups: pd.DataFrame, judging: Judging) -> list[str]:
    """The largest and smallest speedups and the verdicts' counts, end to end as the decisions
    count them (host arrays in and out; on a GPU the copies counted)."""
    if speedups.empty:
        return ["- No PyTorch cell has both a result and a NumPy baseline, so no speedup can be stated."]
    lines = []
    fallbacks = compile_fallbacks(speedups)
    best = headline(speedups)
    speedups = speedups[~fallbacks]
    if speedups.empty:
        return [(f"- Every compiled cell fell back, at least in part, to uncompiled code ({int(fallbacks.sum())} "
                "cells, listed under What compiling costs), so no speedup can be stated.")]
    verdicts = speedups["end_to_end_verdict"]
    if best is not None:
        lines.append(
            f"- The largest speedup over NumPy at any size, end to end as the decisions count it, is "
            f"**{ratio_of(best, 'end_to_end_speedup', judging.ci)}**{caveat(best)}, for {cell_phrase(best)} "
            f"({times_of(best, end_to_end=True)}){resident_clause(best, judging)}."
        )
    else:
        lines.append("- Nothing is faster than NumPy by the minimum effect or more.")
    slower = speedups[verdicts == SLOWER]
    if not slower.empty:
        worst = slower.loc[pd.to_numeric(slower["end_to_end_speedup"], errors="coerce").idxmin()]
        lines.append(
            f"- The slowest against NumPy is {cell_phrase(worst)}: "
            f"{ratio_of(worst, 'end_to_end_speedup', judging.ci)}{caveat(worst)}, {times_of(worst, end_to_end=True)}."
        )
    lines.append(f"- Of {len(speedups)} cells against NumPy: {verdict_counts(verdicts)}.")
    lines += undecided_lines(speedups)
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
    return reasons_of(gpu_rows) or "no GPU cell succeeded"


def break_even_lines(speedups: pd.DataFrame, judging: Judging) -> list[str]:
    """Per op on each GPU: from which n offloading pays with the copies counted, and its
    end-to-end speedup at the largest size against that with the data already on the device.
    Ops that share a device, dtype and verdict are named in one sentence, their numbers in one
    table, rather than the sentence once per op."""
    gpu = speedups[speedups["device"] != "cpu"]
    alike: dict[tuple, list] = {}  # (device, dtype, how it pays) -> [(op, its largest size's row)]
    for (op, device, dtype), group in gpu.groupby(["op", "device", "dtype"]):
        alike.setdefault((device, dtype, pays_from(group)), []).append((op, group.loc[group["size"].idxmax()]))
    lines = []
    for (device, dtype, pays), ops in alike.items():
        if len(ops) == 1:
            ((op, largest),) = ops
            lines.append(
                f"- {op}, {dtype} on {device}: with the copies counted, offloading {pays}; at "
                f"n = {int(largest['size'])} the end-to-end speedup is "
                f"{ratio_of(largest, 'end_to_end_speedup', judging.ci)} against {ratio_of(largest, ci=judging.ci)} "
                "with the data already on the device."
            )
            continue
        rows = pd.DataFrame([{"op": op, "n": int(largest["size"]),
                              "end to end": ratio_of(largest, "end_to_end_speedup"),
                              "with the data on the device": ratio_of(largest)} for op, largest in ops])
        lead = (f"- On {device} ({dtype}), with the copies counted, offloading {pays} for "
                f"{and_list([op for op, _ in ops])}; the speedups at the largest size ({judging.ci}):")
        lines += [lead, "", markdown_table(rows), ""]
    return lines[:-1] if lines and not lines[-1] else lines  # the section ends on a blank line of its own


def gpu_findings(timings: pd.DataFrame, speedups: pd.DataFrame) -> list[str]:
    reason = no_gpu_reason(timings)
    if reason:
        return [
            (f"- **No GPU cell ran on this machine** ({reason}). Whether offloading pays, and what the copies cost, "
             "cannot be answered here: run `config/paper.yaml` on a GPU machine, or `make gpu-check`.")
        ]
    gpu = speedups[speedups["device"] != "cpu"]
    return [f"- Offloading {op} ({dtype}) to {device} {pays_from(group)} with the copies counted."
            for (op, device, dtype), group in gpu.groupby(["op", "device", "dtype"])]


def pays_from(series: pd.DataFrame) -> str:
    """"pays from n ≈ 606", "pays at every size measured (from n = 256)", "does not pay at
    any size measured (up to n = 256)": a series' break-even, from its status and size."""
    first, sizes = series.iloc[0], series["size"].astype(int)
    status, size = first.get("break_even_status"), first.get("break_even_size")
    if status == FROM_SMALLEST:
        return f"pays at every size measured (from n = {sizes.min()})"
    if status == REACHED and finite(size):
        return f"pays from n ≈ {round(float(size))}"
    return f"does not pay at any size measured (up to n = {sizes.max()})"


def round_trip_lines(speedups: pd.DataFrame, judging: Judging) -> list[str]:
    """Per GPU series: how many calls the data must stay on the device for one copy in and
    out to pay (k*), with its interval; the sizes where it never pays, or pays on every
    call, said once each."""
    gpu = speedups[(speedups["device"] != "cpu") & speedups["calls_per_round_trip"].notna()] \
        if "calls_per_round_trip" in speedups else speedups.iloc[0:0]
    gpu = gpu.assign(variant=[variant_of(r) for _, r in gpu.iterrows()])
    lines, never_only = [], {}  # variants that never pay at the same sizes: one line for them all
    for (op, variant, device, dtype), group in report_groups(gpu, ["op", "variant", "device", "dtype"]):
        by_kind: dict[str, list] = {}
        for _, row in group.sort_values("size").iterrows():
            value, low, high = interval(row, "calls_per_round_trip")
            by_kind.setdefault(trip_kind(value, high), []).append((int(row["size"]), value, low, high))
        parts = [f"pays once the data stay {fmt_calls(max(1, value))} calls at n = {size} "
                 f"(k* = {fmt_sig(value, 2)}, {fmt_interval(low, high, judging.ci)})"
                 for size, value, low, high in by_kind.get(AFTER, [])]
        sizes = {kind: and_list([str(point[0]) for point in points]) for kind, points in by_kind.items()}
        if EVERY_CALL in sizes:
            parts.insert(0, f"pays with a copy on every call at n = {sizes[EVERY_CALL]}")
        if NEVER in sizes and not parts:
            never_only.setdefault((op, device, dtype, sizes[NEVER]), []).append(variant)
            continue
        if NEVER in sizes:
            parts.append(f"never pays at n = {sizes[NEVER]}, where {device} computes {op} no faster")
        lines.append(f"- {op} with {variant} on {device} ({dtype}): " + "; ".join(parts) + ".")
    lines += [f"- {op} with {and_list(variants)} on {device} ({dtype}): never pays at n = {at}, where {device} "
              f"computes {op} no faster." for (op, device, dtype, at), variants in never_only.items()]
    return lines


def resident_lines(resident: pd.DataFrame) -> list[str]:
    """Each GPU cell's resident trips against their prediction (resident.csv)."""
    if resident.empty:
        return []
    key = [c for c in CELL_COLUMNS if c in resident]
    return [f"- {cell_phrase(trips.iloc[0])}: {trips_text(trips)}." for _, trips in resident.groupby(key, sort=False)]


def trips_text(trips: pd.DataFrame) -> str:
    """"k = 1: 1.2 ms, the phases predict 1.1 ms (1.09×); k = 16: …" of one cell's trips."""
    return "; ".join(f"k = {int(t.calls)}: {fmt_time(t.resident_s)}, the phases predict {fmt_time(t.predicted_s)} "
                     f"({fmt_times(t.resident_s / t.predicted_s)})" if finite(t.predicted_s) and t.predicted_s > 0
                     else f"k = {int(t.calls)}: {fmt_time(t.resident_s)}" for t in trips.itertuples())


def phase_share_lines(timings: pd.DataFrame) -> list[str]:
    ok = timings[(timings["device"] != "cpu") & (timings["status"] == "ok")]
    lines = []
    for (op, device, dtype), group in ok.groupby(["op", "device", "dtype"]):
        row = group.loc[group["size"].idxmax()]
        if not finite(row["transfer_fraction"]):
            continue
        line = (
            f"- {op}, {dtype} on {device}, n = {int(row['size'])}: copies take {fmt_percent(row['transfer_fraction'])} of the "
            f"end-to-end time {fmt_time(row['end_to_end_s'])} (copy in {fmt_time(row['h2d_s'])}, compute "
            f"{fmt_time(row['compute_s'])}, copy out {fmt_time(row['d2h_s'])}"
        )
        if finite(row.get("finish_s")):
            line += f", plotting {fmt_time(row['finish_s'])} = {fmt_percent(row['finish_s'] / row['end_to_end_s'])}"
        lines.append(line + ").")
    return lines


def bandwidth_lines(transfer: pd.DataFrame, judging: Judging) -> list[str]:
    if transfer is None or transfer.empty:
        return ["- The copy-bandwidth sweep is off (`transfer.devices` is empty)."]
    ok = transfer[transfer["status"] == "ok"]
    if ok.empty:
        return [f"- No copy was measured: {reasons_of(transfer)}."]
    lines = []
    for (device, direction, memory), group in ok.groupby(["device", "direction", "memory"]):
        row = group.loc[group["bytes"].idxmax()]
        arrow = "host→device" if direction == "h2d" else "device→host"
        line = (
            f"- {device} {arrow}, {memory} memory: {fmt_ci(*interval(row, 'gbs'), unit=' GB/s', ci=judging.ci)} "
            f"for {format_bytes(row['bytes'])}"
        )
        if finite(row["link_gbs"]):
            line += f", {fmt_percent(row['link_fraction'])} of the {row['link']} rate ({fmt_rate(row['link_gbs'])} GB/s)"
        lines.append(line + ".")
    for (device, direction), group in ok.groupby(["device", "direction"]):
        kinds = group[group["bytes"] == group["bytes"].max()].set_index("memory")["gbs"]
        if {"pinned", "pageable"} <= set(kinds.index):
            lines.append(f"- {device} {direction}: pinned memory copies the largest size {fmt_times(kinds['pinned'] / kinds['pageable'])} as fast as pageable memory.")
    return lines


def offload_section(timings: pd.DataFrame, speedups: pd.DataFrame, transfer: pd.DataFrame, resident: pd.DataFrame,
                    judging: Judging) -> list[str]:
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
        ]
    sections = [] if reason else [
        ("Break-even sizes", "", break_even_lines(speedups, judging)),
        ("How long the data must stay on the device",
         ("A program that copies its data to the GPU once, calls the op k times there and copies the result back "
          "gains once k > k* = (h2d + d2h) ÷ (NumPy's time − the device's compute time): the copies then cost less "
          "than the calls save."), round_trip_lines(speedups, judging)),
        ("Where the time goes", "", phase_share_lines(timings)),
        ("Data kept on the device, measured",
         ("Resident trips: one copy in, k calls chained on the device (each output the next input, as a time loop "
          "does), one copy out, timed as one region, against what the phases predict, h2d + k·compute + d2h."),
         resident_lines(resident)),
    ]
    sections.append(("Copy bandwidth", "", bandwidth_lines(transfer, judging)))
    for title, lead, found in sections:
        if found:  # a subsection with nothing to say is left out
            lines += [f"### {title}", "", *([lead, ""] if lead else []), *found, ""]
    return lines


def scaling_table(scaling: pd.DataFrame) -> pd.DataFrame:
    """Thread scaling as a table: one row per op, variant, dtype and thread count, one column
    per size, each cell the most threads' speed against one thread with its CI and verdict
    (a CI over 2× is no number); a weak cell carries the mark."""
    if scaling.empty:
        return pd.DataFrame()
    frame = scaling.assign(variant=[variant_of(r) for _, r in scaling.iterrows()])
    groups = report_groups(frame, ["op", "variant", "dtype", "threads"])
    return by_size(groups, sorted({int(s) for s in frame["size"]}),
                   lambda keys, first: {**dict(zip(("op", "variant", "dtype"), keys)),
                                        "threads": row_threads(first)},
                   lambda row: f"{fmt_ratio(*interval(row, 'scaling'))}{caveat(row)}, {row.get('verdict')}")


def undecided_lines(frame: pd.DataFrame) -> list[str]:
    """The end-to-end ratios too wide to be a result (CI over 2×), listed with their reason, never as numbers."""
    low, high = ci_columns("end_to_end_speedup")
    wide = frame[(frame["end_to_end_verdict"] == UNDECIDED) & ~(frame[high] / frame[low] <= MAX_CI_SPAN)]
    if wide.empty:
        return []
    names = "; ".join(cell_phrase(row) for _, row in wide.head(5).iterrows())
    more = f" and {len(wide) - 5} more" if len(wide) > 5 else ""
    said = "1 ratio is undecided because its CI spans" if len(wide) == 1 else \
        f"{len(wide)} ratios are undecided because their CIs span"
    return [(f"- {said} more than {fmt_plain(MAX_CI_SPAN)}× "
            f"(too wide to be a result): {names}{more}.")]


def stability_findings(timings: pd.DataFrame) -> list[str]:
    ok = timings[timings["status"] == "ok"]
    unstable = ok[unstable_cells(ok)]
    if ok.empty:
        return []
    if unstable.empty:
        return [f"- All {len(ok)} measured cells met the noise checks."]
    return [f"- {len(unstable)} of {len(ok)} measured cells are flagged unstable (listed below; hollow markers in the figures)."]


