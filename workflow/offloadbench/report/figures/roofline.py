"""The roofline figure: every op and size placed by its arithmetic intensity and achieved
GFLOP/s under each device's measured memory and compute roofs."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.lines import Line2D

from ...analysis.columns import weak_cells, without_models
from ...analysis.roofline import device_roofs
from ..format import (
    device_order,
    dtype_sort_key,
    fmt_rate,
    fmt_tick,
    op_order,
    threads_phrase,
    variant_of,
    widest_threads,
)
from .style import (
    SMALL_PT,
    WEAK_NOTE,
    Page,
    colours_of,
    device_title,
    header,
    log_ticks,
    markers_of,
    message_figure,
    unmodelled_note,
    y_errors,
)

TITLE = "Roofline"
PANEL_MAX_HEIGHT_IN = 3.2
ROOF_COLOUR = "0.25"
LINESTYLES = ["-", "--", ":", "-."]
DIRECT_LABELS_FROM = 7  # ops; from there on colours alone no longer tell them apart
NO_ROOFS_NOTE = "The roofs were not measured for these results (older results, or the roofs rule did not run): points only."


def _log_axis(axis, lo: float, hi: float) -> None:
    """Round log ticks, thinned to powers of ten when 1-2-5 steps would crowd the axis."""
    ticks = log_ticks(lo, hi)
    if len(ticks) > 7:
        ticks = [t for t in ticks if math.isclose(10 ** round(math.log10(t)), t)]
    axis.set_major_locator(ticker.FixedLocator(ticks))
    axis.set_minor_locator(ticker.NullLocator())
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _: fmt_tick(value)))


def _marker_sizes(sizes) -> dict[int, float]:
    """Marker size (points) growing with log2 n, so the largest size stands out without hiding others."""
    sizes = sorted({int(s) for s in sizes})
    lo, hi = math.log2(sizes[0]), math.log2(sizes[-1])
    return {s: 4.0 + (5.0 * (math.log2(s) - lo) / (hi - lo) if hi > lo else 2.5) for s in sizes}


def _legend_sizes(sizes: list[int]) -> list[int]:
    """Up to four sizes, evenly spread from the smallest to the largest (all of four or fewer)."""
    picks = np.linspace(0, len(sizes) - 1, 4).round().astype(int)
    return [sizes[i] for i in sorted(set(picks))]


def _draw_roofs(ax, bw: float, peaks: list[tuple[float, str]], xlim: tuple[float, float]) -> None:
    """The memory slope (`bw` GB/s, NaN where not measured) and the compute roofs, (GFLOP/s,
    dtype) highest first."""
    if math.isfinite(bw):
        top = peaks[0][0] / bw if peaks else xlim[1]
        xs = np.geomspace(xlim[0], min(top, xlim[1]), 50)
        ax.plot(xs, bw * xs, color=ROOF_COLOUR, linewidth=1.4, zorder=1)
    for peak, _ in peaks:
        start = peak / bw if math.isfinite(bw) else xlim[0]
        ax.plot([start, xlim[1]], [peak, peak], color=ROOF_COLOUR, linewidth=1.4, zorder=1)


def _label_peaks(ax, peaks: list[tuple[float, str]]) -> None:
    """Compute roof labels above their lines at the right; roofs too close to label apart
    share one block of lines above the highest of them, with head room made for it."""
    points = ax.figure.dpi / 72

    def height(value):
        return ax.transData.transform((1.0, value))[1] / points

    groups: list[list[tuple[float, str]]] = []
    for peak in peaks:
        if groups and height(groups[-1][-1][0]) - height(peak[0]) < 1.8 * SMALL_PT:
            groups[-1].append(peak)
        else:
            groups.append([peak])
    if not groups:
        return
    # Raise the top of the axis until the highest block fits under it.
    bottom, top = (math.log10(v) for v in ax.get_ylim())
    share = (len(groups[0]) * 1.3 + 0.8) * SMALL_PT / (height(10.0**top) - height(10.0**bottom))
    peak = math.log10(groups[0][0][0])
    if share < 0.5 and top - peak < share * (top - bottom):
        ax.set_ylim(top=10.0 ** ((peak - share * bottom) / (1 - share)))
        _log_axis(ax.yaxis, *ax.get_ylim())
    right = ax.get_xlim()[1] / 1.15
    for group in groups:
        text = "\n".join(f"{dtype} peak {fmt_rate(value)} GFLOP/s" for value, dtype in group)
        ax.text(right, group[0][0] * 1.12, text, ha="right", va="bottom", fontsize=SMALL_PT, color=ROOF_COLOUR,
                linespacing=1.15)


def _label_memory(ax, bw: float, ridge: float, points: pd.DataFrame) -> None:
    """The memory roof's label along its slope, above or below it, at the first place between
    the plot's edge and the ridge that hides the fewest points and no other label."""
    (x0, x1), (y0, _) = ax.get_xlim(), ax.get_ylim()
    entry = max(x0, y0 / bw)
    a, b = ax.transData.transform([(entry, bw * entry), (entry * 10, bw * entry * 10)])
    angle = math.atan2(b[1] - a[1], b[0] - a[0])
    along, across = np.array([math.cos(angle), math.sin(angle)]), np.array([-math.sin(angle), math.cos(angle)])
    renderer = ax.figure.canvas.get_renderer()
    scale = ax.figure.dpi / 72  # points to pixels
    taken = [text.get_window_extent(renderer).padded(3 * scale) for text in ax.texts]  # the peak labels
    label = ax.text(entry, bw * entry, f"memory {fmt_rate(bw)} GB/s", fontsize=SMALL_PT, color=ROOF_COLOUR)
    extent = label.get_window_extent(renderer)
    width, height, gap, pad = extent.width, extent.height, 2 * scale, 6 * scale  # pad: a large marker's radius
    marks = ax.transData.transform(points[["intensity", "gflops"]].to_numpy(dtype=float)) if len(points) else []

    def clashes(spot: tuple[float, int]) -> int:
        """Points under the label at this spot, and ten for each other label it touches."""
        x, side = spot
        foot = ax.transData.transform((x, bw * x))
        v_low, v_high = (gap, gap + height) if side > 0 else (-gap - height, -gap)

        def under(point, margin: float) -> bool:  # in the label's own rotated frame
            u, v = (np.asarray(point) - foot) @ along, (np.asarray(point) - foot) @ across
            return -margin <= u <= width + margin and v_low - margin <= v <= v_high + margin

        corners = [foot + u * along + v * across for u in (0, width / 2, width) for v in (v_low, v_high)]
        touched = sum(any(box.contains(*c) for c in corners) or any(under(c, 0) for c in box.corners())
                      for box in taken)
        return sum(under(mark, pad) for mark in marks) + 10 * touched

    room = min(ridge, x1) / 2  # the label's start stays left of the ridge
    first = entry * 1.2
    spots = [(first * 1.25**k, side) for k in range(16) if first * 1.25**k <= room for side in (1, -1)]
    x, side = min(spots, key=clashes) if spots else (first, 1)  # the first of the least crowded
    label.set(rotation=math.degrees(angle), rotation_mode="anchor", ha="left",
              va="bottom" if side > 0 else "top")
    label.set_position(ax.transData.inverted().transform(ax.transData.transform((x, bw * x)) + side * gap * across))


def _label_ops(ax, here: pd.DataFrame) -> None:
    """Name each op beside its largest size, nudged up or down off labels already placed:
    with many ops the colours repeat or grow too alike to tell apart by the legend alone."""
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    placed = [text.get_window_extent(renderer) for text in ax.texts]  # the roof labels
    largest = here[here["size"] == here["op"].map(here.groupby("op")["size"].max())]
    tops = largest.sort_values("gflops").groupby("op").tail(1)  # the higher library at the largest size
    spots = [(side, step) for step in (0, 1, -1, 2, -2) for side in (1, -1)]  # further off, a label loses its point
    for _, row in tops.sort_values("gflops", ascending=False).iterrows():
        label = ax.annotate(row["op"], (row["intensity"], row["gflops"]), xytext=(6, 0), textcoords="offset points",
                            va="center", fontsize=SMALL_PT, color="0.15", zorder=4,
                            bbox={"boxstyle": "square,pad=0.05", "facecolor": "white", "alpha": 0.6, "linewidth": 0})
        for side, step in spots:  # right of the point first, then left, then further up or down
            label.set_position((7 * side, 7 * step))
            label.set_horizontalalignment("left" if side > 0 else "right")
            box = label.get_window_extent(renderer).padded(ax.figure.dpi / 72)  # a point clear of the others
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
        else:
            label.remove()  # no free place near the point: the legend still names it


def roofline_figure(timings: pd.DataFrame, roofs: pd.DataFrame | None, machine: str) -> plt.Figure:
    """One log-log panel per device: achieved GFLOP/s against FLOP/byte under the measured roofs."""
    ok = timings[timings["status"] == "ok"] if "status" in timings else timings
    unmodelled = without_models(ok)
    ok = ok[ok["gflops"].gt(0) & ok["intensity"].gt(0)] if not ok.empty else ok
    if ok.empty:
        return message_figure(TITLE, f"No cell on {machine} finished with status ok and a FLOP and byte model, "
                                     "so there is nothing to place under the roofs." + unmodelled_note(unmodelled, " "))
    cells, label = widest_threads(ok)
    cells = cells.assign(library=[variant_of(row) for _, row in cells.iterrows()])  # markers tell the variants
    threads = threads_phrase(cells, label)
    best = device_roofs(roofs)
    devices = device_order(cells["device"])
    ops = op_order(cells["op"])
    colours = colours_of(ops)
    libraries = sorted(cells["library"].unique())
    markers = markers_of(libraries)
    marker_size = _marker_sizes(cells["size"])
    all_dtypes = sorted(cells["dtype"].unique(), key=dtype_sort_key)
    styles = {d: LINESTYLES[i % len(LINESTYLES)] for i, d in enumerate(all_dtypes)}

    title = f"Roofline — {machine}" + (" (roofs not measured)" if best.empty else "")
    page = Page(len(devices), title, aspect=0.85, max_height_in=PANEL_MAX_HEIGHT_IN)
    notes, labelled = [], []
    for ax, device in zip(page.axes, devices, strict=True):
        here = cells[cells["device"] == device]
        roofs_here = best[best["device"] == device]
        dtypes = sorted(here["dtype"].unique(), key=dtype_sort_key)
        # one compute roof per dtype of the panel's cells (device_roofs keeps one per dtype), highest first
        compute = roofs_here[(roofs_here["kind"] == "compute") & roofs_here["dtype"].isin(dtypes)]
        peaks = sorted(zip(compute["value"].astype(float), compute["dtype"], strict=True), reverse=True)
        memory = roofs_here.loc[roofs_here["kind"] == "memory", "value"]
        bw = float(memory.iloc[0]) if not memory.empty else math.nan
        ridges = compute["value"] / bw if not memory.empty else pd.Series(dtype=float)
        xs = pd.concat([here["intensity"], ridges])
        xlim = (xs.min() / 4, xs.max() * 4)
        low = here["gflops_ci_low"].where(here["gflops_ci_low"] > 0, here["gflops"])
        ylim = (low.min() / 4, max(here["gflops"].max(), peaks[0][0] if peaks else 0) * 4)
        ax.set(xscale="log", yscale="log", xlim=xlim, ylim=ylim)

        for (op, library, dtype), series in here.groupby(["op", "library", "dtype"]):
            series = series.sort_values("size")
            colour = colours[op]
            ax.plot(series["intensity"], series["gflops"], color=colour, linewidth=0.8, alpha=0.5, zorder=2,
                    linestyle=styles[dtype])
            ax.errorbar(series["intensity"], series["gflops"], yerr=y_errors(series, "gflops", "gflops_ci_low",
                        "gflops_ci_high"), fmt="none", ecolor=colour, elinewidth=0.7, zorder=2)
            ax.scatter(series["intensity"], series["gflops"], marker=markers[library], linewidths=1.1,
                       s=[marker_size[int(n)] ** 2 for n in series["size"]], edgecolors=[colour],
                       facecolors=["white" if weak else colour for weak in weak_cells(series)], alpha=0.9, zorder=3)

        if roofs_here.empty and not best.empty:
            ax.text(0.97, 0.03, f"no roofs measured on {device}", transform=ax.transAxes, ha="right",
                    va="bottom", fontsize=SMALL_PT, color=ROOF_COLOUR)
        elif not roofs_here.empty:
            _draw_roofs(ax, bw, peaks, xlim)
            labelled.append((ax, device, bw, float(ridges.min()) if not ridges.empty else xlim[1], peaks))
            missing = [d for d in dtypes if d not in {dtype for _, dtype in peaks}]
            if missing:
                notes.append(f"{device}: no compute roof measured for {', '.join(missing)}.")
        _log_axis(ax.xaxis, *xlim)
        _log_axis(ax.yaxis, *ylim)
        title = device_title(device, here)
        ax.set_title(f"{title}, {threads}" if device == "cpu" and threads else title, fontsize="medium")

    dot = {"linestyle": "none", "markeredgewidth": 1.1}
    rows = [header("op")]
    rows += [(Line2D([], [], marker="o", color=colours[op], markersize=6, **dot), op) for op in ops]
    rows.append(header("library"))
    rows += [(Line2D([], [], marker=markers[lib], color="0.3", markersize=6, **dot), lib) for lib in libraries]
    if len(all_dtypes) > 1:
        rows.append(header("dtype"))
        rows += [(Line2D([], [], color="0.3", linestyle=styles[d], linewidth=1.0), d) for d in all_dtypes]
    rows.append(header("size n"))
    rows += [(Line2D([], [], marker="o", color="0.55", markersize=marker_size[s], **dot), f"n = {s}")
             for s in _legend_sizes(sorted(marker_size))]
    page.axis_labels("arithmetic intensity (FLOP/byte, log)", "achieved throughput (GFLOP/s, log)")
    page.add_legend(*zip(*rows, strict=True), handletextpad=0.4, labelspacing=0.45)
    if best.empty:
        notes.insert(0, NO_ROOFS_NOTE)
    if weak_cells(cells).any():
        notes.append(WEAK_NOTE)
    notes.append(unmodelled_note(unmodelled))  # none where every op has a model
    page.add_notes(notes)
    fig = page.finish()
    for ax, device, bw, ridge, peaks in labelled:  # after the layout: label places depend on its shape
        _label_peaks(ax, peaks)
        if math.isfinite(bw):
            _label_memory(ax, bw, ridge, cells[cells["device"] == device])
    if len(ops) >= DIRECT_LABELS_FROM:
        for ax, device in zip(page.axes, devices, strict=True):
            _label_ops(ax, cells[cells["device"] == device])
    return fig
