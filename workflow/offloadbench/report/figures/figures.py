"""Paper-ready figures from the tidy tables (seaborn's colour-blind palette, units on axes),
laid out by `style`: one panel per op and dtype, wrapped to the page.

Each figure is a function of the tables that returns a matplotlib Figure, so tests can
draw them without Snakemake. A figure with nothing to show says why in one panel.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from ...analysis.columns import interval_frame, weak_cells, without_models
from ...verdicts import Judging
from ..captions import size_label
from ..format import device_order, dtype_order, fmt_rate, format_bytes, op_order, reasons_of, variant_of
from .style import (
    GPU_ADVICE,
    SMALL_PT,
    WEAK_NOTE,
    BytesLogLocator,
    Page,
    colours_of,
    device_title,
    log_y,
    markers_of,
    message_figure,
    op_grid,
    panel_title,
    series_order,
    size_axis,
    unmodelled_note,
    with_series,
    y_errors,
)

PHASE_LABELS = {"h2d": "copy in (host→device)", "compute": "compute", "d2h": "copy out (device→host)",
                "finish": "plot on host"}


def _series_handles(series: list[str], colours: dict, markers: dict) -> tuple[list, list]:
    handles = [Line2D([], [], color=colours[s], marker=markers[s], markersize=4, linewidth=1.2) for s in series]
    return handles, series


def _series_figure(frame: pd.DataFrame, y: str, title: str, ylabel: str, band: bool, suffix: str = "",
                   notes: tuple[str, ...] = (), line_at_one: bool = False) -> plt.Figure:
    """One line per library/mode/device/threads series in each op and dtype panel, log-log,
    with CI bands (or error bars, nudged apart on the size axis to stay visible)."""
    frame = with_series(frame)
    series = series_order(frame)
    colours, markers = colours_of(series), markers_of(series)
    dodge = {name: 1.04 ** (i - (len(series) - 1) / 2) for i, name in enumerate(series)}
    estimate = interval_frame(frame, y)

    def draw(ax, rows: pd.DataFrame) -> None:
        for name, data in rows.groupby("series", sort=False):
            data = data.sort_values("size")
            ci = estimate.loc[data.index]
            colour, marker = colours[name], markers[name]
            x = data["size"] * (1.0 if band else dodge[name])
            ax.plot(x, ci["value"], color=colour, marker=marker, markersize=3.5, linewidth=1.1)
            if band:
                ax.fill_between(x, ci["lo"], ci["hi"], color=colour, alpha=0.25, linewidth=0)
            else:
                ax.errorbar(x, ci["value"], yerr=y_errors(ci, "value", "lo", "hi"), fmt="none", ecolor=colour,
                            elinewidth=0.8, capsize=1.5)
            weak = weak_cells(data).to_numpy()
            if weak.any():
                ax.plot(x[weak], ci["value"][weak], linestyle="none", marker=marker, markersize=5,
                        markerfacecolor="white", markeredgecolor=colour, markeredgewidth=1.1)

    page = op_grid(frame, title, draw, ylabel=ylabel, suffix=suffix, line_at_one=line_at_one)
    page.add_legend(*_series_handles(series, colours, markers))
    page.add_notes(((WEAK_NOTE,) if weak_cells(frame).any() else ()) + notes)
    return page.finish()


def speedup_figure(speedups: pd.DataFrame, machine: str) -> plt.Figure:
    """Device-resident speedup over numpy on the cpu, with CI bands and a line at 1."""
    if speedups.empty:
        return message_figure("Speedup over NumPy", f"No cell on {machine} has both a result and a NumPy baseline.")
    return _series_figure(speedups, "speedup", f"Speedup over NumPy on the CPU — {machine}",
                          "speedup over NumPy (×, log)", band=True, suffix="×", line_at_one=True)


def throughput_figure(timings: pd.DataFrame, machine: str) -> plt.Figure:
    """Achieved GFLOP/s against size, with the CI of the median as error bars."""
    ok = timings[timings["status"] == "ok"]
    unmodelled = without_models(ok)
    ok = ok[ok["gflops"].gt(0)]
    if ok.empty:
        return message_figure("Throughput", f"No cell on {machine} finished with status ok and a FLOP model."
                              + unmodelled_note(unmodelled, " "))
    return _series_figure(ok, "gflops", f"Throughput — {machine}", "throughput (GFLOP/s, log)", band=False,
                          notes=(unmodelled_note(unmodelled),))


def transfer_overhead_figure(timings: pd.DataFrame, machine: str) -> plt.Figure:
    """Share of the time in each phase (copy in, compute, copy out) per size: one panel per
    op, device and dtype of the device cells."""
    device = timings[(timings["status"] == "ok") & (timings["device"] != "cpu")]
    if device.empty:
        skipped = timings[timings["device"] != "cpu"]
        why = f" {len(skipped)} GPU cells were not measured ({reasons_of(skipped, 300)})." if not skipped.empty \
            else " The grid has no cuda or mps cells."
        return message_figure("Transfer overhead", f"No GPU cell was measured on {machine}, so there are no copies "
                              f"to show.{why}\n{GPU_ADVICE}")
    phases = [p for p in ("h2d", "compute", "d2h", "finish") if device[f"{p}_s"].notna().any()]
    palette = colours_of(phases)
    device = device.assign(variant=[variant_of(row) for _, row in device.iterrows()])
    several_devices = device["device"].nunique() > 1
    several_dtypes = device["dtype"].nunique() > 1
    several_variants = device["variant"].nunique() > 1
    # a panel per op, variant (torch, torch compiled), device and dtype: one bar per size
    present = set(zip(device["op"], device["variant"], device["device"], device["dtype"], strict=True))
    keys = [(op, v, d, t) for op in op_order(device["op"]) for v in sorted(set(device["variant"]))
            for d in device_order(device["device"]) for t in dtype_order(device["dtype"]) if (op, v, d, t) in present]
    page = Page(len(keys), f"Where the time goes on the device — {machine}", sharey=True, aspect=0.62)
    for ax, (op, variant, dev, dtype) in zip(page.axes, keys, strict=True):
        rows = device[(device["op"] == op) & (device["variant"] == variant) & (device["device"] == dev)
                      & (device["dtype"] == dtype)].sort_values("size")
        times = rows[[f"{p}_s" for p in phases]].fillna(0).to_numpy()
        shares = times / times.sum(axis=1, keepdims=True) * 100
        positions = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for k, phase in enumerate(phases):
            ax.bar(positions, shares[:, k], bottom=bottom, color=palette[phase], width=0.75, edgecolor="white",
                   linewidth=0.5)
            bottom += shares[:, k]
        sizes = rows["size"].astype(int).tolist()
        size_axis(ax, positions, labels=lambda p, sizes=sizes: str(sizes[round(p)]), log=False)
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_ylim(0, 100)
        panel_title(ax, " · ".join([op, *([variant] if several_variants else []),
                                    *([dev] if several_devices else []), *([dtype] if several_dtypes else [])]))
    page.axis_labels(size_label(device["op"]), "share of the phase times (%)")
    page.add_legend([Rectangle((0, 0), 1, 1, color=palette[p]) for p in phases], [PHASE_LABELS[p] for p in phases])
    return page.finish()


def copy_cost_figure(speedups: pd.DataFrame, machine: str) -> plt.Figure:
    """Device-resident and end-to-end speedup of GPU cells: the gap is what the copies cost."""
    gpu = speedups[speedups["device"] != "cpu"]
    if gpu.empty:
        return message_figure(
            "What the copies cost",
            f"No GPU cell on {machine} has a result and a NumPy baseline, so there is no copy cost to show.\n"
            + GPU_ADVICE,
        )
    gpu = with_series(gpu)
    resident, counted = interval_frame(gpu, "speedup"), interval_frame(gpu, "end_to_end_speedup")
    series = series_order(gpu)
    colours = colours_of(series)

    def draw(ax, rows: pd.DataFrame) -> None:
        for name, data in rows.groupby("series", sort=False):
            data = data.sort_values("size")
            for ci, dashed in ((resident.loc[data.index], False), (counted.loc[data.index], True)):
                ax.plot(data["size"], ci["value"], color=colours[name], marker="s" if dashed else "o", markersize=3.5,
                        linewidth=1.1, linestyle="--" if dashed else "-")
                ax.fill_between(data["size"], ci["lo"], ci["hi"], color=colours[name], alpha=0.15, linewidth=0)
            for size in data["break_even_size"].dropna().unique()[:1]:
                ax.axvline(size, color=colours[name], linewidth=0.8, linestyle=":")

    handles = [Line2D([], [], color=colours[s], linewidth=2.0) for s in series]
    handles += [Line2D([], [], color="0.3", marker="o", markersize=3.5, linewidth=1.1),
                Line2D([], [], color="0.3", marker="s", markersize=3.5, linewidth=1.1, linestyle="--")]
    labels = [*series, "data on the device", "copies counted (end to end)"]
    page = op_grid(gpu, f"What the copies cost — {machine}", draw, ylabel="speedup over NumPy (×, log)", suffix="×",
                   line_at_one=True)
    page.add_legend(handles, labels)
    page.add_notes(["dotted vertical line: break-even size with the copies counted (CI above 1 from there on)"])
    return page.finish()


def bandwidth_figure(transfer: pd.DataFrame, machine: str, judging: Judging) -> plt.Figure:
    """Copy bandwidth against copy size, per direction and host memory kind, with the link rate."""
    ok = transfer[transfer["status"] == "ok"] if not transfer.empty else transfer
    if ok.empty:
        reasons = reasons_of(transfer)
        why = f" ({reasons})" if reasons else " (the sweep is off: transfer.devices is empty)"
        return message_figure("Copy bandwidth", f"No host↔device copy was measured on {machine}{why}.\n{GPU_ADVICE}")
    directions = {"h2d": ("host→device", "o", "-"), "d2h": ("device→host", "s", "--")}
    # Colour tells the memory kind, line style the direction, so overlapping lines stay apart.
    memory_colour = colours_of(("pageable", "pinned"))
    devices = device_order(ok["device"])
    page = Page(len(devices), f"Host↔device copy bandwidth — {machine}", sharey=True)
    seen = []
    for ax, device in zip(page.axes, devices, strict=True):
        here = ok[ok["device"] == device]
        for (direction, memory), data in here.groupby(["direction", "memory"]):
            data = data.sort_values("bytes")
            name, marker, style = directions[direction]
            ax.errorbar(data["bytes"], data["gbs"], yerr=y_errors(data, "gbs", "gbs_ci_low", "gbs_ci_high"),
                        color=memory_colour[memory], marker=marker, markersize=3.5, linewidth=1.1, linestyle=style,
                        capsize=1.5)
            seen.append((f"{name}, {memory}", memory_colour[memory], marker, style))
        size_axis(ax, here["bytes"], labels=lambda v: format_bytes(v).replace(" ", ""))
        log_y(ax)
        link = here["link_gbs"].dropna()
        if not link.empty:
            ax.axhline(link.iloc[0], color="0.2", linestyle=":", linewidth=1.0)
            # No copy beats the link's theoretical rate, so the space above its line is free.
            ax.text(0.02, link.iloc[0] * 1.04, f"link: {here['link'].iloc[0]}, {fmt_rate(link.iloc[0])} GB/s",
                    transform=ax.get_yaxis_transform(), ha="left", va="bottom", fontsize=SMALL_PT, color="0.2")
            ax.set_ylim(top=link.iloc[0] * 1.6)
        panel_title(ax, device_title(device, here))
    page.axis_labels("copy size", "bandwidth (GB/s, log)")
    entries = dict.fromkeys(seen)
    page.add_legend([Line2D([], [], color=c, marker=m, markersize=3.5, linestyle=s) for _, c, m, s in entries],
                    [label for label, *_ in entries])
    page.add_notes([f"error bars: {judging.ci} of the median copy time"])
    return page.finish()


def memory_figure(timings: pd.DataFrame, memory: pd.DataFrame, machine: str) -> plt.Figure:
    """Peak memory of one call against size (host peak on the cpu, device peak on a GPU),
    one line per variant and place, with each device's memory as a dotted line."""
    ok = timings[(timings["status"] == "ok")] if "peak_host_bytes" in timings else timings.iloc[0:0]
    ok = ok.assign(peak=ok["peak_device_bytes"].where(ok["device"] != "cpu", ok["peak_host_bytes"])) \
        if not ok.empty else ok
    ok = ok[ok["peak"].gt(0)] if not ok.empty else ok
    if ok.empty:
        return message_figure("Peak memory", f"No cell on {machine} has a peak memory reading (results measured "
                                             "before peaks were recorded, or every reading failed).")
    ok = with_series(ok)
    series = series_order(ok)
    colours, markers = colours_of(series), markers_of(series)
    devices = {} if memory is None or memory.empty else \
        memory.dropna(subset=["memory_bytes"]).groupby("device")["memory_bytes"].first().to_dict()
    device_styles = dict(zip(devices, [(0, (1, 1.5)), (0, (4, 2)), (0, (6, 2, 1, 2))], strict=False))

    def draw(ax, rows: pd.DataFrame) -> None:
        for name, data in rows.groupby("series", sort=False):
            data = data.sort_values("size")
            ax.plot(data["size"], data["peak"], color=colours[name], marker=markers[name], markersize=3.5,
                    linewidth=1.1)
        for device in sorted(set(rows["device"]) & set(devices)):
            ax.axhline(devices[device], color="0.25", linewidth=0.9, linestyle=device_styles[device])

    page = op_grid(ok, f"Peak memory of one call — {machine}", draw, ylabel="peak extra memory (log)", sharey=True)
    for ax in page.axes:
        ax.yaxis.set_major_locator(BytesLogLocator())
        ax.yaxis.set_minor_locator(ticker.NullLocator())
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: format_bytes(v) if v >= 1 else ""))
    handles, labels = _series_handles(series, colours, markers)
    for device, memory_bytes in devices.items():
        handles.append(Line2D([], [], color="0.25", linewidth=0.9, linestyle=device_styles[device]))
        labels.append(f"{'host' if device == 'cpu' else device} memory, {format_bytes(memory_bytes)}")
    page.add_legend(handles, labels)
    page.add_notes([("cpu: host memory a call with NumPy arrays in and out allocates; GPU: device memory the "
                    "device-resident call allocates; each measured in an untimed call")])
    return page.finish()


def round_trip_figure(speedups: pd.DataFrame, machine: str) -> plt.Figure:
    """k*, the calls per round trip that make the copies pay, against size for the GPU cells."""
    gpu = speedups[(speedups["device"] != "cpu")] if "calls_per_round_trip" in speedups else speedups.iloc[0:0]
    gpu = gpu[gpu["calls_per_round_trip"].map(np.isfinite) & gpu["calls_per_round_trip"].gt(0)] \
        if not gpu.empty else gpu
    if gpu.empty:
        return message_figure(
            "Calls per round trip",
            f"No GPU cell on {machine} has its copies and a faster compute measured, so there is no round trip to "
            f"show.\n{GPU_ADVICE}")
    return _series_figure(gpu, "calls_per_round_trip", f"How long the data must stay on the device — {machine}",
                          "calls per round trip k* (log)", band=False, line_at_one=True,
                          notes=(("k* = (h2d + d2h) ÷ (NumPy's time − the device's compute time): below the dashed "
                                 "line at 1, a copy on every call pays; above it, the data must stay on the "
                                 "device for k* calls"),))
