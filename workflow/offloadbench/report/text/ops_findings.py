"""Findings per op in sentences: from which size offloading pays with the copies counted, and
what bounds each op; the verdicts at each size are the op's table. Same style as `findings`:
Markdown bullets, numbers with their CIs, a weak mark after a number from a weak cell, plain
words where data is missing. The report gives each op's lines in its own section
(report.text.markdown).
"""

from __future__ import annotations

import pandas as pd

from ...analysis.breakeven import REACHED
from ...analysis.columns import falls_back, without_models
from ...analysis.roofline import bounds, device_roofs
from ...compared import baseline_rows
from ...verdicts import FASTER, Judging
from ..format import (
    VERDICT_WORDS,
    by_variant,
    device_order,
    finite,
    fmt_break_even,
    fmt_percent,
    fmt_rate,
    ratio_of,
    report_groups,
    threads_phrase,
    variant_of,
    where_phrase,
    widest_threads,
)
from .findings import caveat

E2E = "end_to_end_speedup"


def payoff_lines(speedups: pd.DataFrame, judging: Judging) -> list[str]:
    """Per op, GPU variant and dtype, what the op's table of speedups by size cannot say: from
    which n it pays with the copies counted, and where it pays at some sizes but not at the
    largest. A series that pays at every size, at none, or was measured at one size is its
    row of the table alone, and a compiled one that fell back to running uncompiled is said
    in What compiling costs: the report says nothing twice in one section."""
    if speedups.empty:
        return ["- No PyTorch cell has both a result and a NumPy baseline, so no payoff can be stated."]
    frame, _ = widest_threads(speedups)
    frame = frame.assign(variant=[variant_of(row) for _, row in frame.iterrows()])
    several_variants = frame["variant"].nunique() > 1
    lines = []
    for (op, variant, device, dtype), group in report_groups(frame, ["op", "variant", "device", "dtype"]):
        group = group.sort_values("size")
        largest = group.iloc[-1]
        if device == "cpu" or falls_back(largest):  # a fallback is said in What compiling costs
            continue
        head = f"- {op}{f' with {variant}' if several_variants else ''} {where_phrase(device)} ({dtype})"
        at_largest = ratio_of(largest, E2E, judging.ci) + caveat(largest)
        n_max = int(largest["size"])
        status, size = largest.get("break_even_status"), largest.get("break_even_size")  # the table's, per series
        sizes = group["size"].astype(int)
        paying = sizes[group["end_to_end_verdict"] == FASTER].tolist()
        if status == REACHED:
            lines.append(f"{head} pays from n ≈ {fmt_break_even(size, status)} (between {sizes[sizes < size].max()} "
                         f"and {sizes[sizes >= size].min()}) with the copies counted; at n = {n_max} it is "
                         f"{at_largest}.")
        elif paying and paying[-1] != n_max:
            words = VERDICT_WORDS.get(largest["end_to_end_verdict"], largest["end_to_end_verdict"])
            lines.append(f"{head} pays with the copies counted at n = {', '.join(map(str, paying))}, but not at "
                         f"the largest size, n = {n_max}: there it is {at_largest}, {words}.")
    return lines


def missing_baseline_lines(timings: pd.DataFrame) -> list[str]:
    """Where the NumPy baseline failed but other variants ran: no speedup for them, and why."""
    if timings.empty:
        return []
    base = baseline_rows(timings)
    lines = []
    for (op, dtype), group in report_groups(timings, ["op", "dtype"]):
        failed = group[base.loc[group.index] & (group["status"] != "ok")]
        others = group[~base.loc[group.index] & (group["status"] == "ok")]
        if failed.empty or others.empty:
            continue
        reasons = "; ".join(sorted({f"{r['status']}: {r['reason']}" for _, r in failed.iterrows()}))
        variants = ", ".join(sorted({variant_of(r) for _, r in others.iterrows()}))
        lines.append(f"- {op} ({dtype}): its NumPy baseline failed ({reasons}), so no speedup is stated for "
                     f"{variants}, which ran (see the timings table).")
    return lines


NO_ROOFS_LINE = ("- The roofs (each device's memory bandwidth and peak GFLOP/s) were not measured for these results, "
                 "so no op is placed against them.")


def _placed(timings: pd.DataFrame, roofs: pd.DataFrame | None) -> tuple[pd.DataFrame, list[str]]:
    """The ok cells that can be placed against a roof, and the devices that have no roofs."""
    placed = bounds(timings, roofs)
    if placed.empty or "intensity" not in placed:  # no ok cell, or tables older than the models
        return placed.iloc[0:0], []
    # .loc with booleans: an empty object Series in [] would select columns, not rows
    placed = placed.loc[placed["intensity"].map(finite).astype(bool)]
    without = [d for d in device_order(placed["device"]) if placed.loc[placed["device"] == d, "memory_gbs"].isna().all()]
    return placed.loc[~placed["device"].isin(without)], without


def unplaced_line(op: str, timings: pd.DataFrame, roofs: pd.DataFrame | None) -> list[str]:
    """Why one op gets no "what bounds it" line, where it gets none and the roofs exist: no
    cell of it finished ok (each failure said with its count), or it has no FLOP and byte model."""
    if device_roofs(roofs).empty or timings.empty:
        return []
    ok = timings[timings["status"] == "ok"]
    if ok.empty:
        failures = "; ".join(f"{len(group)} {status}: {reason}" for (status, reason), group
                             in timings.groupby(["status", "reason"], sort=True, dropna=False))
        return [(f"- No cell of {op} finished ok ({failures}), so what bounds it is not known and no speedup "
                "is stated.")]
    if op in without_models(timings):
        return [(f"- {op} gives no FLOP and byte model, so it has no place on the roofline and what bounds it is "
                "not said (`@kernel(flops=..., bytes=...)` adds it).")]
    return []


def bound_notes(timings: pd.DataFrame, roofs: pd.DataFrame | None) -> list[str]:
    """What keeps ops off the roofs, said once for the report: no roofs at all, a device
    without them, ops without a FLOP and byte model."""
    if device_roofs(roofs).empty:
        return [NO_ROOFS_LINE]
    if not (timings.get("status", pd.Series(dtype=str)) == "ok").any():
        return ["- No cell finished with status ok, so none can be placed against the roofs."]
    _, without = _placed(timings, roofs)
    lines = [f"- No roofs were measured {where_phrase(device)}, so its cells are not placed against one."
             for device in without]
    unmodelled = without_models(timings)
    if unmodelled:
        lines.append(f"- {', '.join(unmodelled)} {'gives' if len(unmodelled) == 1 else 'give'} no FLOP and byte "
                     "model, so what bounds {0} is not said, and the throughput and roofline figures leave {0} out "
                     "(`@kernel(flops=..., bytes=...)` adds it).".format("it" if len(unmodelled) == 1 else "them"))
    return lines


def bound_lines(timings: pd.DataFrame, roofs: pd.DataFrame | None) -> list[str]:
    """Per op, device and dtype at the largest size: memory- or compute-bound, and how close
    each library comes to that roof (ops without a model, and devices without roofs, are
    left out: `bound_notes` says so once)."""
    if device_roofs(roofs).empty:
        return []
    placed, _ = _placed(timings, roofs)
    if placed.empty:
        return []
    placed, label = widest_threads(placed)
    threads = threads_phrase(placed, label)
    lines = []
    for (op, device, dtype), group in report_groups(placed, ["op", "device", "dtype"]):
        largest = group[group["size"] == group["size"].max()]
        row = largest.iloc[0]
        where = f"{op} {where_phrase(device)} ({dtype}, n = {int(row['size'])}" + (f", {threads})" if device == "cpu" else ")")
        if not finite(row["ridge"]):
            lines.append(f"- {where}: no {dtype} compute roof was measured {where_phrase(device)}, so its bound is not known.")
            continue
        memory_bound = row["bound"] == "memory"
        roof = f"the memory roof ({fmt_rate(row['memory_gbs'])} GB/s)" if memory_bound else \
            f"the {dtype} roof ({fmt_rate(row['compute_gflops'])} GFLOP/s)"
        reached = " and ".join(f"{variant_of(r)} {fmt_percent(r['roof_fraction'])}{caveat(r)}"
                               for _, r in by_variant(largest).iterrows())
        line = (f"- {where}: {row['bound']}-bound (intensity {fmt_rate(row['intensity'])} FLOP/B, "
                f"ridge {fmt_rate(row['ridge'])} FLOP/B); {reached} of {roof}")
        if (largest["roof_fraction"] > 1.05).any():
            line += (", above the measured roof: its data likely stay in cache" if memory_bound
                     else ", above the measured roof (a large matmul, not the hardware's peak)")
        lines.append(line + ".")
    return lines
