"""Figures of a comparison of machines: speedup curves overlaid, the time ratio per cell,
break-even sizes and copy bandwidth, each machine in one colour throughout (`colours_of` the labels, in order).

Machine A, the first label, is the reference; every ratio is time on B ÷ time on A.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D

from ...analysis.breakeven import FROM_SMALLEST, NOT_REACHED
from ...analysis.columns import weak_cells
from ...analysis.compare import MachineComparison
from ...layout import COMPARE_FIGURE_NAMES
from ...verdicts import FASTER, SAME, SLOWER, UNDECIDED
from ..captions import size_label
from ..escape import literal_frame
from ..format import dtype_sort_key, fmt_rate, format_bytes, reasons_of, thread_sort_key, verdict_counts
from .style import (
    GPU_ADVICE,
    PAGE_WIDTH_IN,
    SMALL_PT,
    WEAK_NOTE,
    Grid,
    Page,
    colours_of,
    header,
    log_y,
    markers_of,
    message_figure,
    op_grid,
    panel_title,
    save_figure,
    series_order,
    size_axis,
    with_series,
    y_errors,
)

# Line style of a speedup series: solid on a GPU, then one per CPU thread count.
CPU_LINESTYLES = [(0, (1, 1.5)), (0, (5, 2)), (0, (6, 2, 1, 2)), (0, (2, 2))]
VERDICT_FILL = {
    FASTER: "filled: B faster or slower by at least the minimum effect",
    SLOWER: "filled: B faster or slower by at least the minimum effect",
    SAME: "grey: the same within the minimum effect",
    UNDECIDED: "pale: undecided (CI too wide, or unstable on a machine)",
}
DIRECTIONS = {"h2d": ("host→device", "-"), "d2h": ("device→host", (0, (5, 2)))}
RATIO_NOTE = ("error bars: {ci} of the ratio from both machines' bootstraps; the points of one size are "
              "spread sideways to stay apart")
MEMORY_MARKERS = {"pageable": "o", "pinned": "s"}
MEMORY_FILLED = {"pageable": False, "pinned": True}  # hollow pageable tells it apart from pinned at a glance


def _names(comparison: MachineComparison) -> str:
    first, *others = comparison.labels
    return f"A = {first} (reference), B = {', '.join(others)}"


def _none_of(labels: list[str]) -> str:
    return f"Neither {labels[0]} nor {labels[1]}" if len(labels) == 2 else f"None of {', '.join(labels)}"


def _legend(page: Page, rows: list[tuple]) -> None:
    """The legend below the panels, its section headers in bold: one section to a column
    where the sections fit side by side (blank rows even them out), else flowing."""
    sections: list[list[tuple]] = []
    for row in rows:
        if row[0].get_gid() == "header" or not sections:
            sections.append([])
        sections[-1].append(row)
    longest = max(len(section) for section in sections)
    widest = max(len(line) for _, label in rows for line in str(label).split("\n"))
    ncol = None  # flowing
    if len(sections) > 1 and len(sections) * (0.6 + widest * 0.5 * SMALL_PT / 72) <= page.width_in:
        blank = (Line2D([], [], linestyle="none"), "")
        rows = [row for section in sections for row in section + [blank] * (longest - len(section))]
        ncol = len(sections)
    page.add_legend(*zip(*rows, strict=True), ncol=ncol, handlelength=2.6)


def _ratio_page(frame: pd.DataFrame, title: str, draw, ylabel: str, rows: list[tuple], notes: list[str]) -> plt.Figure:
    """A grid of ratios against size, one panel per op and dtype, with a line at 1."""
    page = op_grid(frame, title, draw, ylabel=ylabel, suffix="×", line_at_one=True)
    _legend(page, rows)
    page.add_notes(notes)
    return page.finish()


def _series_styles(frame: pd.DataFrame) -> tuple[dict, dict]:
    """Line style and marker per (variant, device, threads): solid on a GPU, patterned on the CPU."""
    # sorted on the whole key, so that each series gets the same style on every run
    keys = sorted({(r.variant, r.device, r.threads) for r in frame.itertuples()},
                  key=lambda k: (k[1] != "cpu", k[1], thread_sort_key(k[2]), k[0]))
    # the cpu's keys come first, so a key's place among them is its place in keys
    styles = {k: "-" if k[1] != "cpu" else CPU_LINESTYLES[i % len(CPU_LINESTYLES)] for i, k in enumerate(keys)}
    return styles, markers_of(keys)


def speedups_figure(comparison: MachineComparison) -> plt.Figure:
    """Every machine's speedup over its own NumPy, overlaid, with CI bands."""
    labels = comparison.labels
    colours = colours_of(labels)
    parts = [with_series(comparison.tables[m]["speedups"].assign(machine=m))
             for m in labels if not comparison.tables[m]["speedups"].empty]
    if not parts:
        return message_figure("Speedup over NumPy", "No machine has a torch cell with a NumPy baseline to compare with.")
    frame = pd.concat(parts, ignore_index=True)
    frame["key"] = list(zip(frame["variant"], frame["device"], frame["threads"], strict=True))
    styles, markers = _series_styles(frame)

    def draw(ax, data: pd.DataFrame):
        for (machine, key), group in data.groupby(["machine", "key"]):
            group = group.sort_values("size")
            colour = colours[machine]
            ax.plot(group["size"], group["speedup"], color=colour, linestyle=styles[key], marker=markers[key],
                    markersize=4, linewidth=1.3)
            ax.fill_between(group["size"], group["speedup_ci_low"], group["speedup_ci_high"], color=colour,
                            alpha=0.15, linewidth=0)
            weak = weak_cells(group)
            if weak.any():
                ax.plot(group.loc[weak, "size"], group.loc[weak, "speedup"], linestyle="none", marker=markers[key],
                        markersize=6, markerfacecolor="white", markeredgecolor=colour, markeredgewidth=1.2)

    rows = []
    for machine in labels:
        series = frame[frame["machine"] == machine]
        rows.append(header(machine if machine != labels[0] else f"{machine} (A)"))
        if series.empty:
            rows.append((Line2D([], [], color=colours[machine], linestyle="none"), "  no torch cell with a baseline"))
        for name in series_order(series):
            key = series.loc[series["series"] == name, "key"].iloc[0]
            rows.append((Line2D([], [], color=colours[machine], linestyle=styles[key], marker=markers[key],
                                markersize=4, linewidth=1.3), name))
    return _ratio_page(frame, "Speedup over NumPy on each machine's own CPU", draw, "speedup over NumPy (×, log)",
                       rows, [WEAK_NOTE] if weak_cells(frame).any() else [])


def _dodge(keys: list, sizes) -> dict:
    """Multiplicative x offsets that spread series apart on a log size axis, within a fraction
    of the gap between neighbouring sizes so that a cell's points stay near its size."""
    sizes = np.sort(np.unique(np.asarray(sizes, dtype=float)))
    gap = float(np.min(sizes[1:] / sizes[:-1])) if len(sizes) > 1 else 2.0
    step = min(1.06, gap ** (0.45 / max(len(keys) - 1, 1)))
    return {key: step ** (i - (len(keys) - 1) / 2) for i, key in enumerate(keys)}


def _verdict_marker(verdict: str, colour) -> dict:
    pale = tuple(0.35 * np.asarray(to_rgb(colour)) + 0.65)  # undecided: a fill between filled and hollow
    return {"markerfacecolor": {FASTER: colour, SLOWER: colour, SAME: "0.55", UNDECIDED: pale}.get(verdict, "white")}


def ratio_figure(comparison: MachineComparison) -> plt.Figure:
    """Time on B ÷ time on A per cell with its CI, one series per machine and library/device/threads."""
    table = comparison.comparison
    if table.empty:
        return message_figure("Time ratio per cell", "No cell was measured with status ok on both machines.")
    colours = colours_of(comparison.labels)
    frame = with_series(table)
    series = series_order(frame)
    markers = markers_of(series)
    others = [m for m in comparison.labels[1:] if m in set(frame["machine_b"])]
    keys = [(m, s) for m in others for s in series if ((frame["machine_b"] == m) & (frame["series"] == s)).any()]
    dodge = _dodge(keys, frame["size"])

    def draw(ax, data: pd.DataFrame):
        for (machine, name), group in data.groupby(["machine_b", "series"]):
            group = group.sort_values("size")
            colour, marker = colours[machine], markers[name]
            x = group["size"] * dodge[(machine, name)]
            ax.errorbar(x, group["ratio"], yerr=y_errors(group, "ratio", "ratio_ci_low", "ratio_ci_high"), fmt="none",
                        ecolor=colour, elinewidth=0.9, capsize=2)
            ax.plot(x, group["ratio"], color=colour, linewidth=0.7, alpha=0.5)
            for verdict, cells in group.groupby("verdict"):
                ax.plot(x[cells.index], cells["ratio"], linestyle="none", marker=marker, markersize=5,
                        markeredgecolor=colour, markeredgewidth=1.0, **_verdict_marker(verdict, colour))

    rows = [header(f"B (colour), against A = {comparison.labels[0]}")]
    for machine in others:
        tally = verdict_counts(frame.loc[frame["machine_b"] == machine, "verdict"], same=SAME)
        rows.append((Line2D([], [], color=colours[machine], linewidth=2.5), f"{machine}: {tally}"))
    rows.append(header("series (marker)"))
    rows += [(Line2D([], [], color="0.3", marker=markers[s], linestyle="none", markersize=5), s) for s in series]
    rows.append(header("verdict (fill)"))
    sample = colours[others[0]]  # in a machine's colour, for pale and grey to look as they do in the panels
    shown = set()
    for verdict in (v for v in VERDICT_FILL if v in set(frame["verdict"])):
        if VERDICT_FILL[verdict] not in shown:  # faster and slower share their fill and their row
            shown.add(VERDICT_FILL[verdict])
            rows.append((Line2D([], [], color=sample, marker="o", linestyle="none", markersize=5,
                                markeredgecolor=sample, **_verdict_marker(verdict, sample)), VERDICT_FILL[verdict]))
    return _ratio_page(frame, f"Time per cell, B against A — {_names(comparison)}", draw,
                       "time on B ÷ time on A (×, log; below 1: B faster)", rows,
                       [RATIO_NOTE.format(ci=comparison.judging.ci)])


def _break_even_rows(comparison: MachineComparison) -> pd.DataFrame:
    """One row per machine and GPU series: where it breaks even and how far its grid went."""
    rows = []
    gpus = {machine: comparison.tables[machine]["speedups"] for machine in comparison.labels}
    gpus = {machine: speedups[speedups["device"] != "cpu"] for machine, speedups in gpus.items()}
    several_variants = len({v for gpu in gpus.values() for v in gpu["variant"]}) > 1
    for machine, gpu in gpus.items():
        for (op, dtype, device, threads, variant), group in gpu.groupby(["op", "dtype", "device", "threads", "variant"]):
            op = f"{op} ({variant})" if several_variants else op
            size = group["break_even_size"].iloc[0]
            status = group["break_even_status"].iloc[0]
            name = group["device_name"].dropna()
            rows.append({"machine": machine, "op": op, "dtype": dtype, "device": device, "threads": threads,
                         "device_name": name.iloc[0] if not name.empty else "", "size": size, "status": status,
                         "smallest": group["size"].min(), "largest": group["size"].max()})
    return pd.DataFrame(rows)


def _why_no_gpu(tables: dict[str, pd.DataFrame]) -> str:
    timings = tables.get("timings")
    if timings is None or timings.empty or not (timings["device"] != "cpu").any():
        return "CPU only"
    failed = timings[(timings["device"] != "cpu") & (timings["status"] != "ok")]
    return reasons_of(failed, 60) or "no NumPy baseline"


def break_even_figure(comparison: MachineComparison) -> plt.Figure:
    """Break-even size (copies counted) of each GPU series, one colour per machine."""
    frame = _break_even_rows(comparison)
    if frame.empty:
        return message_figure(
            "Break-even size",
            f"{_none_of(comparison.labels)} has a GPU series with a NumPy baseline, so no "
            f"break-even size can be compared.\n{GPU_ADVICE}",
        )
    colours = colours_of(comparison.labels)
    several_dtypes = frame["dtype"].nunique() > 1
    categories = sorted({(r.op, r.dtype) for r in frame.itertuples()}, key=lambda c: (c[0], dtype_sort_key(c[1])))
    in_label_order = frame.sort_values("machine", key=lambda column: column.map(comparison.labels.index))
    keys = list(dict.fromkeys((r.machine, r.device, r.threads) for r in in_label_order.itertuples()))
    offsets = {k: (i - (len(keys) - 1) / 2) * min(0.22, 0.7 / len(keys)) for i, k in enumerate(keys)}
    devices = sorted(frame["device"].unique())
    device_markers = markers_of(devices)
    page = Page(1, f"Break-even size of each GPU series — {_names(comparison)}", width_in=PAGE_WIDTH_IN,
                grid=Grid(1, 1, 0.5 + len(categories) * (0.22 + 0.08 * len(keys))))
    ax = page.axes[0]
    ax.set_xscale("log", base=2)
    for r in frame.itertuples():
        y = categories.index((r.op, r.dtype)) + offsets[(r.machine, r.device, r.threads)]
        colour, marker = colours[r.machine], device_markers[r.device]
        arrow = {"arrowstyle": "-|>", "color": colour, "linewidth": 1.2, "shrinkA": 0, "shrinkB": 0}
        if r.status == NOT_REACHED:
            ax.plot(r.largest, y, marker=marker, markersize=6, markerfacecolor="white", markeredgecolor=colour,
                    markeredgewidth=1.3, linestyle="none")
            ax.annotate("", xy=(r.largest * 1.9, y), xytext=(r.largest * 1.12, y), arrowprops=arrow)
        else:
            ax.plot(r.size, y, marker=marker, markersize=6, color=colour, linestyle="none")
            if r.status == FROM_SMALLEST:
                ax.annotate("", xy=(r.size / 1.9, y), xytext=(r.size / 1.12, y), arrowprops=arrow)
    # every machine's sizes (each series' smallest and largest among them)
    sizes = sorted({int(s) for m in comparison.labels for s in comparison.tables[m]["speedups"]["size"]})
    # Room for the arrows beyond the grid; the legend says what an arrow means.
    room_right = 2.5 if (frame["status"] == NOT_REACHED).any() else 1.5
    ax.set_xlim(min(sizes) / (2.5 if (frame["status"] == FROM_SMALLEST).any() else 1.5), max(sizes) * room_right)
    size_axis(ax, sizes)
    ax.set_yticks(range(len(categories)))
    ax.set_yticklabels([f"{op}, {dtype}" if several_dtypes else op for op, dtype in categories])
    ax.set_ylim(len(categories) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
    page.axis_labels(size_label((op for op, *_ in categories), "break-even size n, log")
                     + ": from here on the GPU is faster with the copies counted", "")

    rows = [header("machine (colour)")]
    for machine in comparison.labels:
        mine = frame[frame["machine"] == machine]
        if mine.empty:
            rows.append((Line2D([], [], color=colours[machine], linewidth=2.5),
                         f"{machine}: no GPU series ({_why_no_gpu(comparison.tables[machine])})"))
            continue
        for device, group in mine.groupby("device"):
            name = next((n for n in group["device_name"] if n), "")
            rows.append((Line2D([], [], color=colours[machine], marker=device_markers[device], linestyle="none",
                                markersize=6), f"{machine}: {device}" + (f" ({name})" if name else "")))
    rows.append(header("how to read"))
    rows.append((Line2D([], [], color="0.3", marker="o", linestyle="none", markersize=6),
                 "filled: break-even size (interpolated)"))
    if (frame["status"] == FROM_SMALLEST).any():
        rows.append((Line2D([], [], color="0.3", marker="$\u2190$", linestyle="none", markersize=9),
                     "arrow left: at or below the smallest size"))
    if (frame["status"] == NOT_REACHED).any():
        rows.append((Line2D([], [], color="0.3", marker="o", markerfacecolor="white", linestyle="none", markersize=6),
                     "hollow, arrow right: not reached by the largest size measured"))
    _legend(page, rows)
    return page.finish()


def _memory_marker(memory: str, colour) -> dict:
    return {"marker": MEMORY_MARKERS.get(memory, "D"), "markersize": 4.5, "markeredgecolor": colour,
            "markerfacecolor": colour if MEMORY_FILLED.get(memory, True) else "white", "markeredgewidth": 1.0}


def bandwidth_figure(comparison: MachineComparison) -> plt.Figure:
    """Host↔device copy bandwidth per machine against copy size, with each machine's link rate."""
    colours = colours_of(comparison.labels)
    transfers = {m: comparison.tables[m]["transfer"] for m in comparison.labels}
    ok = {m: t[t["status"] == "ok"] for m, t in transfers.items() if not t.empty}
    ok = {m: t for m, t in ok.items() if not t.empty}

    reasons = {m: reasons_of(t) for m, t in transfers.items()}
    if not ok:
        why = "; ".join(f"{m}: {reasons[m]}" for m in comparison.labels if reasons[m])
        return message_figure(
            "Copy bandwidth",
            f"No host↔device copy was measured on {', '.join(comparison.labels)}" + (f" ({why})" if why else "")
            + f".\n{GPU_ADVICE}",
        )
    frame = pd.concat(ok.values(), ignore_index=True)
    directions = [d for d in DIRECTIONS if d in set(frame["direction"])]
    # A panel per direction: the two directions often run at one rate and would hide each other.
    page = Page(len(directions), f"Host↔device copy bandwidth — {_names(comparison)}", sharey=True)
    links = frame.dropna(subset=["link_gbs"]).drop_duplicates(["machine", "device"])
    ticks = sorted(frame["bytes"].unique())
    for ax, direction in zip(page.axes, directions, strict=True):
        mine = frame[frame["direction"] == direction]
        for (machine, _, memory), group in mine.groupby(["machine", "device", "memory"]):
            group = group.sort_values("bytes")
            ax.errorbar(group["bytes"], group["gbs"], yerr=y_errors(group, "gbs", "gbs_ci_low", "gbs_ci_high"),
                        color=colours[machine],
                        linestyle=DIRECTIONS[direction][1], linewidth=1.2, capsize=2,
                        **_memory_marker(memory, colours[machine]))
        for link in links.itertuples():
            ax.axhline(link.link_gbs, color=colours[link.machine], linestyle=":", linewidth=1.3)
        size_axis(ax, ticks, labels=lambda v: format_bytes(v).replace(" ", ""))
        ax.margins(x=0.08)  # keeps the outermost size labels of neighbouring panels apart
        panel_title(ax, DIRECTIONS[direction][0])
    ax = page.axes[0]
    log_y(ax)
    if not links.empty:
        # No copy beats its link, so a little room above the fastest link is all the plot needs.
        ax.set_ylim(top=max(links["link_gbs"].max(), frame["gbs_ci_high"].max()) * 1.5)
    page.axis_labels("copy size", "bandwidth (GB/s, log)")

    rows = [header("machine (colour; dotted: its link)")]
    for machine in comparison.labels:
        if machine not in ok:
            why = f" ({reasons[machine]})" if reasons[machine] else ""
            rows.append((Line2D([], [], color=colours[machine], linewidth=2.5), f"{machine}: no copy measured{why}"))
            continue
        for device, group in ok[machine].groupby("device"):
            name = next((n for n in group["device_name"].dropna() if n), device)
            link = group.dropna(subset=["link_gbs"])
            text = f"{machine}: {name}"
            if not link.empty:
                kind = link["link"].iloc[0]
                text += f"\n  link{f' {kind},' if isinstance(kind, str) and kind else ''} {fmt_rate(link['link_gbs'].iloc[0])} GB/s"
            rows.append((Line2D([], [], color=colours[machine], linestyle=":" if not link.empty else "none",
                                linewidth=1.3, marker="o", markersize=4), text))
    rows.append(header("direction (line, panel)"))
    rows += [(Line2D([], [], color="0.3", linestyle=DIRECTIONS[d][1], linewidth=1.2), DIRECTIONS[d][0])
             for d in directions]
    rows.append(header("host memory (marker)"))
    rows += [(Line2D([], [], color="0.3", linestyle="none", **_memory_marker(m, "0.3")), m)
             for m in sorted(frame["memory"].unique())]
    _legend(page, rows)
    page.add_notes([f"error bars: {comparison.judging.ci} of the median copy time"])
    return page.finish()


COMPARE_FIGURES: dict[str, Callable[[MachineComparison], plt.Figure]] = {
    "speedups": speedups_figure,
    "ratio": ratio_figure,
    "break_even": break_even_figure,
    "bandwidth": bandwidth_figure,
}


assert tuple(COMPARE_FIGURES) == COMPARE_FIGURE_NAMES, "comparison figures and layout disagree"


def draw_comparison_figure(name: str, comparison: MachineComparison, pdf_path: str, png_path: str) -> None:
    """Draw one comparison figure and save it as vector PDF and 300-dpi PNG; text from data is drawn literally."""
    comparison = replace(
        comparison,
        comparison=literal_frame(comparison.comparison),
        tables={label: {key: literal_frame(frame) for key, frame in tables.items()}
                for label, tables in comparison.tables.items()},
    )
    save_figure(lambda: COMPARE_FIGURES[name](comparison), pdf_path, png_path)
