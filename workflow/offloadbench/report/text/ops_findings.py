"""Findings per op in sentences: where offloading pays with the copies counted, what bounds
each op, and the verdict at the largest size. Same style as `findings`: Markdown bullets,
numbers with their 95% CIs, plain words where data is missing.
"""

from __future__ import annotations

import pandas as pd

from ...analysis.breakeven import break_even
from ...analysis.columns import ci_columns, falls_back
from ...analysis.roofline import bounds, device_roofs
from ..format import (
    VERDICT_WORDS,
    by_variant,
    device_order,
    finite,
    fmt_percent,
    fmt_rate,
    ratio_of,
    report_groups,
    threads_phrase,
    threads_text,
    variant_of,
    where_phrase,
    widest_threads,
)
from .findings import caveat

E2E = "end_to_end_speedup"
def payoff_lines(speedups: pd.DataFrame) -> list[str]:
    """Per op, device and dtype: does PyTorch pay with the copies counted, and from which n."""
    if speedups.empty:
        return ["- No PyTorch cell has both a result and a NumPy baseline, so no payoff can be stated."]
    frame, label = widest_threads(speedups)
    threads = threads_phrase(frame, label)
    frame = frame.assign(variant=[variant_of(row) for _, row in frame.iterrows()])
    several_variants = frame["variant"].nunique() > 1
    lines = []
    for (op, variant, device, dtype), group in report_groups(frame, ["op", "variant", "device", "dtype"]):
        group = group.sort_values("size")
        largest = group.iloc[-1]
        who = f"{op} with {variant}" if several_variants else op
        at_largest = ratio_of(largest, E2E)
        if falls_back(largest):
            lines.append(f"- {op} with {variant} {where_phrase(device)} ({dtype}) is no compiled speedup: "
                         f"{largest['compile_fallback']}.")
            continue
        if device == "cpu":
            words = VERDICT_WORDS.get(largest["end_to_end_verdict"], largest["end_to_end_verdict"])
            here = threads if str(largest["threads"]) == label else threads_text(largest["threads"],
                                                                                   largest.get("threads_effective"))
            lines.append(
                f"- {op} with {variant} on the cpu ({dtype}, {here}) is {words} at n = {int(largest['size'])}, "
                f"the largest size measured: {at_largest} end to end.{caveat(largest)}"
            )
            continue
        result = break_even(group["size"].tolist(), group[ci_columns(E2E)[0]].tolist())
        head = f"- {who} {where_phrase(device)} ({dtype})"
        n_max = int(largest["size"])
        if result.status == "from the smallest size":
            lines.append(f"{head} pays at every size measured (from n = {result.above}) with the copies counted; "
                         f"at n = {n_max} it is {at_largest}.{caveat(largest)}")
        elif result.status == "reached":
            lines.append(f"{head} pays from n ≈ {result.size:.0f} with the copies counted (between {result.below} "
                         f"and {result.above}); at n = {n_max} it is {at_largest}.{caveat(largest)}")
        else:
            words = VERDICT_WORDS.get(largest["end_to_end_verdict"], largest["end_to_end_verdict"])
            paying = group.loc[group["end_to_end_verdict"] == "faster", "size"].astype(int).tolist()
            if paying:
                sizes = ", ".join(str(s) for s in paying)
                lines.append(f"{head} pays with the copies counted at n = {sizes}, but not at the largest size, "
                             f"n = {n_max}: there it is {at_largest}, {words}.{caveat(largest)}")
            else:
                lines.append(f"{head} never pays with the copies counted up to n = {n_max}: there it is "
                             f"{at_largest}, {words}.{caveat(largest)}")
    return lines


def missing_baseline_lines(timings: pd.DataFrame) -> list[str]:
    """Where the NumPy baseline failed but other variants ran: no speedup for them, and why."""
    if timings.empty:
        return []
    modes = timings["mode"] if "mode" in timings else pd.Series("eager", index=timings.index)
    base = (timings["library"] == "numpy") & (timings["device"] == "cpu") & (modes == "eager")
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


def bound_lines(timings: pd.DataFrame, roofs: pd.DataFrame | None) -> list[str]:
    """Per op, device and dtype at the largest size: memory- or compute-bound, and how close
    each library comes to that roof."""
    if device_roofs(roofs).empty:
        return [NO_ROOFS_LINE]
    placed = bounds(timings, roofs)
    if placed.empty:
        return ["- No cell finished with status ok, so none can be placed against the roofs."]
    placed, label = widest_threads(placed)
    threads = threads_phrase(placed, label)
    lines = []
    without = [d for d in device_order(placed["device"]) if placed.loc[placed["device"] == d, "memory_gbs"].isna().all()]
    for device in without:
        lines.append(f"- No roofs were measured {where_phrase(device)}, so its cells are not placed against one.")
    for (op, device, dtype), group in report_groups(placed[~placed["device"].isin(without)], ["op", "device", "dtype"]):
        largest = group[group["size"] == group["size"].max()]
        row = largest.iloc[0]
        where = f"{op} {where_phrase(device)} ({dtype}, n = {int(row['size'])}" + (f", {threads})" if device == "cpu" else ")")
        if not finite(row["ridge"]):
            lines.append(f"- {where}: no {dtype} compute roof was measured {where_phrase(device)}, so its bound is not known.")
            continue
        memory_bound = row["bound"] == "memory"
        roof = f"the memory roof ({fmt_rate(row['memory_gbs'])} GB/s)" if memory_bound else \
            f"the {dtype} roof ({fmt_rate(row['compute_gflops'])} GFLOP/s)"
        reached = " and ".join(f"{variant_of(r)} {fmt_percent(r['roof_fraction'])}"
                               for _, r in by_variant(largest).iterrows())
        line = (f"- {where}: {row['bound']}-bound (intensity {fmt_rate(row['intensity'])} FLOP/B, "
                f"ridge {fmt_rate(row['ridge'])} FLOP/B); {reached} of {roof}")
        if (largest["roof_fraction"] > 1.05).any():
            line += (", above the measured roof: its data likely stay in cache" if memory_bound
                     else ", above the measured roof (a large matmul, not the hardware's peak)")
        lines.append(line + "." + next(filter(None, (caveat(r) for _, r in largest.iterrows())), ""))
    return lines
