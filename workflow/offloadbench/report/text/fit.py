"""Does the problem fit? The section of the report that says how much memory one call of
each variant needs, how far the model was from the measurement, and the largest size that
fits each device (analysis/memory_fit.py makes the table)."""

from __future__ import annotations

import pandas as pd

from ...units import fmt_count, fmt_time
from ..format import (
    PAGE_BYTES,
    finite,
    fmt_percent,
    fmt_size,
    format_bytes,
    report_groups,
    variant_of,
    where_phrase,
)

MANY_PAGES = 64  # fresh pages per call below which a call's page faults are not worth a line


def fit_lines(memory: pd.DataFrame) -> list[str]:
    """Per op and device: each variant's peak at its largest size, its calibrated scale, and
    the largest size that fits."""
    if memory is None or memory.empty:
        return ["- No peak memory was measured for these results (they are older than peak readings)."]
    lines = []
    for (op, device, dtype), group in report_groups(memory, ["op", "device", "dtype"]):
        parts = []
        for _, row in group.iterrows():
            fits = (f"fits up to n ≈ {fmt_size(row['largest_size'])}" if finite(row["largest_size"])
                    else no_fit(row))
            parts.append(f"{row['variant']} {format_bytes(row['peak_bytes'])} at n = {int(row['largest_measured'])} "
                         f"({held(row)}), {fits}")
        where = "host memory" if device == "cpu" else f"{device} memory"
        total = group["memory_bytes"].dropna()
        of = f" of {format_bytes(total.iloc[0])}" if not total.empty else ""
        lines.append(f"- {op} {where_phrase(device)} ({dtype}, {where}{of}): " + "; ".join(parts) + ".")
    return lines


def held(row) -> str:
    """What a call holds besides that peak: an op's peak in outputs' worth, a kernel's inputs
    and how both grow; and where a peak was read too low to believe."""
    if finite(row.get("scale")):
        text = f"{outputs(row['scale'])} of results and temporaries"
    else:
        grows = [f"{what} growing as n^{int(row[column])}" for what, column in (("inputs", "inputs_degree"),
                                                                               ("extra", "extra_degree"))
                 if finite(row.get(column))]
        text = f"beside {format_bytes(row['inputs_bytes'])} of inputs" if finite(row.get("inputs_bytes")) \
            else "its inputs not measured"
        text += f"; {', '.join(grows)}" if grows else ""
    if row.get("peak_doubted") is True:
        text += "; a peak read below the bytes it returns, which stand in for it"
    return text


def outputs(scale: float, spec: str = ".2g") -> str:
    """A peak in outputs' worth: "1 output", "2.5 outputs"."""
    text = format(scale, spec)
    return f"{text} output" if text == "1" else f"{text} outputs"


def no_fit(row) -> str:
    """Why a row has no largest size (analysis/memory_fit.py leaves it empty): the device's
    memory was not recorded, no peak gave a scale to fit, or not even n = 1 fits."""
    if not finite(row.get("memory_bytes")):
        return "its fit is unknown: the device's memory was not recorded"
    kernel = not finite(row.get("model_scale"))  # a kernel has no model of the catalogue's
    if kernel and not finite(row.get("inputs_bytes")):
        return "its fit is unknown: its inputs' bytes were not measured (records from before they were)"
    if not kernel and not finite(row.get("scale")):
        return "its fit is unknown: no measured peak gave a scale to fit the model to"
    headroom = row.get("headroom")
    kept = f", with {fmt_percent(headroom)} kept free" if finite(headroom) and headroom > 0 else ""
    return f"not even n = 1 fits in its {format_bytes(row['memory_bytes'])}{kept}"


def model_line(memory: pd.DataFrame) -> list[str]:
    """How far the model's guess (results and temporaries as three outputs) was, once."""
    if memory is None or memory.empty or not memory["model_error"].map(finite).any():
        return []
    error = memory["model_error"].dropna()
    return [(f"- Where nothing was measured, the model takes a call's results and temporaries as "
             f"{outputs(memory['model_scale'].iloc[0], '.0f')}; against the measurements that is "
             f"{fmt_percent(error.min())} to {fmt_percent(error.max())} too much (less than 0: too little). "
             "The next run's out-of-memory check uses the measured scale of each series.")]


STEADY = "only blocks of 32 MiB or more come so, in every process alike"
ADAPTIVE = "the count varies from process to process with what each freed before, which a bout's pairing cannot cancel"


def allocator_text(timings: pd.DataFrame) -> str:
    """What the allocator state of these cells' workers means for their fresh pages: the
    state this run used, or both where its cells differ or their records do not say."""
    used = set(timings["allocator"].fillna("")) if "allocator" in timings else {""}
    if used == {"steady"}:
        return f"This run held glibc's thresholds (`measure.allocator: steady`): {STEADY}."
    if used == {"adaptive"}:
        return f"This run left glibc its own thresholds (`measure.allocator: adaptive`): {ADAPTIVE}."
    return (f"With glibc's thresholds held (`measure.allocator: steady`) {STEADY}; with its own (`adaptive`) "
            f"{ADAPTIVE}. These records do not all say which their workers used, or name different ones.")


def pages_lines(timings: pd.DataFrame, page_s: float) -> list[str]:
    """Per op and dtype on the cpu, at its largest size: the fresh pages each variant's call
    maps (its minor page faults), and what they cost where the cost of a page was measured.
    Memory a call takes from the system afresh is zeroed and mapped a page at a time; with
    glibc's own thresholds (measure.allocator: adaptive) its count differs from process to
    process with what each freed before, which no bout cancels."""
    if timings.empty or "faults_per_call" not in timings:
        return []
    ok = timings[(timings["status"] == "ok") & (timings["device"] == "cpu") & timings["faults_per_call"].map(finite)]
    if ok.empty:
        return ["- No fresh pages were counted in these records (they are older than page counts)."]
    lines = []
    for (op, dtype), group in report_groups(ok, ["op", "dtype"]):
        largest = group[group["size"] == group["size"].max()]
        parts = []
        for variant, rows in largest.groupby(largest.apply(variant_of, axis=1), sort=False):
            pages = float(rows["faults_per_call"].median())
            if pages < MANY_PAGES:
                parts.append(f"{variant} {fmt_count(pages)}")
                continue
            cost = (f", about {fmt_time(pages * page_s)} of its {fmt_time(float(rows['median_s'].median()))}"
                    if finite(page_s) else "")
            parts.append(f"{variant} {fmt_count(pages)} ({format_bytes(pages * PAGE_BYTES)}{cost})")
        if any(float(r) >= MANY_PAGES for r in largest["faults_per_call"]):
            lines.append(f"- {op} ({dtype}) at n = {int(largest['size'].iloc[0])}: fresh pages per call: "
                         + "; ".join(parts) + ".")
    if not lines:
        return [f"- No call maps {MANY_PAGES} fresh pages or more: the allocators reuse what earlier calls freed."]
    priced = f" One fresh page costs {fmt_time(page_s)} here (roofs.csv)." if finite(page_s) else ""
    intro = (f"Fresh pages a call maps (its minor page faults, in `faults_per_call`): memory taken from the system "
             f"afresh on every call, zeroed and mapped a page at a time.{priced} {allocator_text(ok)}")
    return [intro, "", *lines]


def fit_section(memory: pd.DataFrame, timings: pd.DataFrame, page_s: float) -> list[str]:
    headroom = memory["headroom"].iloc[0] if memory is not None and not memory.empty else 0.1
    pages = pages_lines(timings, page_s)
    return ["## Does it fit?", "",
            (f"Peak extra memory of one call, measured in an untimed call after the sampling (host memory with NumPy "
             f"arrays in and out on the cpu; device memory of the device-resident call on a GPU), and the largest "
             f"size n whose inputs, results and temporaries fit the device's memory with {fmt_percent(headroom)} "
             "kept free. A kernel's inputs and extra memory are each fitted to the sizes measured as a polynomial "
             "in n (the fewest of the powers 0 to 3 that fit)."),
            "", *fit_lines(memory), *model_line(memory), "", *([*pages, ""] if pages else [])]
