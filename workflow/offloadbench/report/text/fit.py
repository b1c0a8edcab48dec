"""Does the problem fit? The section of the report that says how much memory one call of
each variant needs, how far the model was from the measurement, and the largest size that
fits each device (analysis/memory_fit.py makes the table)."""

from __future__ import annotations

import pandas as pd

from ..format import finite, fmt_percent, fmt_size, format_bytes, report_groups, where_phrase


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
                         f"({row['scale']:.2g} outputs of results and temporaries), {fits}")
        where = "host memory" if device == "cpu" else f"{device} memory"
        total = group["memory_bytes"].dropna()
        of = f" of {format_bytes(total.iloc[0])}" if not total.empty else ""
        lines.append(f"- {op} {where_phrase(device)} ({dtype}, {where}{of}): " + "; ".join(parts) + ".")
    return lines


def no_fit(row) -> str:
    """Why a row has no largest size (analysis/memory_fit.py leaves it empty): the device's
    memory was not recorded, no peak gave a scale to fit, or not even n = 1 fits."""
    if not finite(row.get("memory_bytes")):
        return "its fit is unknown: the device's memory was not recorded"
    if not finite(row.get("scale")):
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
             f"{memory['model_scale'].iloc[0]:.0f} outputs; against the measurements that is "
             f"{fmt_percent(error.min())} to {fmt_percent(error.max())} too much (less than 0: too little). "
             "The next run's out-of-memory check uses the measured scale of each series.")]


def fit_section(memory: pd.DataFrame) -> list[str]:
    headroom = memory["headroom"].iloc[0] if memory is not None and not memory.empty else 0.1
    return ["## Does it fit?", "",
            (f"Peak extra memory of one call, measured in an untimed call after the sampling (host memory with NumPy "
             f"arrays in and out on the cpu; device memory of the device-resident call on a GPU), and the largest "
             f"size n whose inputs, results and temporaries fit the device's memory with {fmt_percent(headroom)} "
             "kept free."), "", *fit_lines(memory), *model_line(memory), ""]
