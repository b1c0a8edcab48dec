"""The one-glance heatmap: end-to-end speedup over NumPy for every op and size, one panel
per device and dtype, on a log colour scale centred at 1×."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import colors, ticker
from matplotlib.patches import Rectangle
from matplotlib.transforms import blended_transform_factory

from ...verdicts import SAME, UNDECIDED
from ..format import (
    device_order,
    dtype_sort_key,
    family_of,
    fmt_factor,
    fmt_speedup,
    op_order,
    row_threads,
    threads_phrase,
    variant_of,
    widest_threads,
)
from .style import BOLD_TITLE_PT, PAGE_HEIGHT_IN, PAGE_WIDTH_IN, SMALL_PT, device_title, message_figure, wrap

TITLE = "End-to-end speedup at a glance"
CMAP = sns.color_palette("vlag", as_cmap=True)
COLOURBAR_LABEL = "end-to-end speedup over NumPy (×, log scale)"
CELL_IN = (0.46, 0.18)  # wide enough for "=0.94×" at 7 pt, and for a size label under it
MIN_CELL_IN = (0.36, 0.14)  # the least that still holds a label
CHAR_IN = 0.5 * SMALL_PT / 72  # an average glyph at 7 pt
ROW_CHROME_IN, BAR_IN, TITLE_IN = 0.55, 0.95, 0.35  # a panel's titles and size labels; the colour bar; the title
MAX_SPAN = 6  # colours saturate beyond 64× either way, so one outlier does not wash out the rest


def speedup_norm(values) -> colors.LogNorm:
    """A log norm symmetric about 1 (1× maps to the palette's centre), spanning whole powers of 2."""
    finite = [abs(math.log2(v)) for v in values if v > 0 and math.isfinite(v)]
    span = min(MAX_SPAN, max(1, math.ceil(max(finite, default=1.0) - 1e-9)))
    return colors.LogNorm(vmin=2.0**-span, vmax=2.0**span, clip=False)


class FactorLocator(ticker.Locator):
    """Powers of two from 1/2^span to 2^span on the colour bar, every k-th so that the labels
    ("1/16×") keep apart at the bar's drawn width; 1× is always one of them."""

    def __init__(self, span: int):
        self.span = span

    def __call__(self):
        bar = self.axis.axes
        room = bar.bbox.width / (bar.figure.dpi / 72)  # points
        fits = max(3, int(room // (6.5 * 0.62 * SMALL_PT)))
        step = next(k for k in range(1, 2 * self.span + 2) if 2 * self.span // k + 1 <= fits)
        return [2.0**k for k in range(-self.span, self.span + 1) if k % step == 0]


def _text_colour(rgba) -> str:
    luminance = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2]
    return "white" if luminance < 0.5 else "0.1"


def _device_line(device: str, rows: pd.DataFrame, threads: str) -> str:
    """What a row of panels compares, said once above its first panel."""
    if device == "cpu":
        return f"cpu: on the cpu, {threads}, vs numpy"
    return f"{device_title(device, rows)}: copies counted, vs numpy on all cores"


def _draw_panel(ax, rows: pd.DataFrame, ops: list[str], families: list[str], sizes: list[int], norm,
                fontsize: float = SMALL_PT) -> None:
    values = np.full((len(ops), len(sizes)), np.nan)
    values[rows["row"].map(ops.index), rows["size"].astype(int).map(sizes.index)] = rows["end_to_end_speedup"]
    ax.pcolormesh(np.ma.masked_invalid(values), cmap=CMAP, norm=norm, edgecolors="white", linewidth=0.8)
    for _, row in rows.iterrows():
        i, j = ops.index(row["row"]), sizes.index(int(row["size"]))
        value = row["end_to_end_speedup"]
        if not math.isfinite(value):
            continue
        said = row["end_to_end_verdict"]
        unsure = said == UNDECIDED
        if unsure:  # no number for a ratio that is no result: "?" on hatching
            ax.add_patch(Rectangle((j, i), 1, 1, fill=False, hatch="////", edgecolor="0.6", linewidth=0,
                                   hatch_linewidth=0.5))
            label = "?"
        else:
            label = ("=" + fmt_speedup(value)) if said == SAME else fmt_speedup(value, decided=True)
        ax.text(j + 0.5, i + 0.5, label, ha="center", va="center",
                fontsize=fontsize, color="0.3" if unsure else _text_colour(CMAP(norm(value))),
                fontstyle="italic" if unsure else "normal")
    ax.set_xlim(0, len(sizes))
    ax.set_ylim(len(ops), 0)  # first op on top
    long_labels = max(len(str(s)) for s in sizes) > 5
    ax.set_xticks(np.arange(len(sizes)) + 0.5, [str(s) for s in sizes], rotation=45 if long_labels else 0)
    ax.set_yticks(np.arange(len(ops)) + 0.5, ops)  # "op · variant" where the grid has several variants
    ax.tick_params(length=0)
    ax.tick_params(axis="y", labelsize=fontsize)
    ax.grid(False)
    for side in ax.spines.values():
        side.set_visible(False)
    for i in range(1, len(ops)):
        if families[i] != families[i - 1]:  # a rule between families
            ax.axhline(i, color="0.45", linewidth=0.9)


def _label_families(ax, ops: list[str], families: list[str]) -> None:
    where = blended_transform_factory(ax.transAxes, ax.transData)
    start = 0
    for i in range(1, len(ops) + 1):
        if i == len(ops) or families[i] != families[start]:
            ax.text(1.03, (start + i) / 2, families[start], transform=where, ha="left", va="center",
                    fontsize=SMALL_PT, color="0.35", fontstyle="italic")
            start = i


def heatmap_figure(speedups: pd.DataFrame, machine: str) -> plt.Figure:
    """Facets per device (rows) and dtype (columns); rows of a panel are ops, columns sizes."""
    usable = speedups[np.isfinite(speedups["end_to_end_speedup"].astype(float))] if not speedups.empty else speedups
    if usable.empty:
        return message_figure(TITLE, f"No PyTorch cell on {machine} has both a result and a NumPy baseline, "
                                     "so there is no speedup to show.")
    frame, label = widest_threads(usable)
    threads = threads_phrase(frame, label)
    # a variant shown at another thread count than the panel's says which
    variants = pd.Series([variant_of(row) + ("" if row["device"] != "cpu" or str(row["threads"]) == label else
                                             f" ({row_threads(row)})")
                          for _, row in frame.iterrows()], index=frame.index, dtype=str)
    several = variants.nunique() > 1
    frame = frame.assign(row=frame["op"] + (" · " + variants if several else ""))
    devices = device_order(frame["device"])
    dtypes = sorted(frame["dtype"].unique(), key=dtype_sort_key)
    norm = speedup_norm(frame["end_to_end_speedup"])
    rank = {op: i for i, op in enumerate(op_order(frame["op"]))}
    op_of = dict(zip(frame["row"], frame["op"], strict=True))  # each row label's op
    per_device = {}
    for device in devices:
        rows = frame[frame["device"] == device]
        ops = sorted(rows["row"].unique(), key=lambda r: (rank[op_of[r]], r))
        per_device[device] = (ops, sorted(rows["size"].astype(int).unique()), [family_of(op_of[r]) for r in ops])
    widest = max(len(sizes) for _, sizes, _ in per_device.values())
    heights = [len(ops) for ops, _, _ in per_device.values()]
    labels_in = CHAR_IN * max(len(r) for r in frame["row"]) + 0.15
    families_in = CHAR_IN * max(len(family_of(op)) for op in frame["op"]) + 0.2
    room_in = PAGE_WIDTH_IN - labels_in - families_in - 0.2
    # dtypes side by side where their cells keep the least width, else stacked, each panel the page's width
    side_by_side = room_in / (widest * len(dtypes)) >= MIN_CELL_IN[0]
    cols, stacked = (len(dtypes), 1) if side_by_side else (1, len(dtypes))  # panels across, dtypes stacked
    cell_w = min(CELL_IN[0], room_in / (widest * cols))
    chrome = ROW_CHROME_IN * len(heights) * stacked + BAR_IN + TITLE_IN  # titles and size labels, colour bar, title
    fitting_h = (PAGE_HEIGHT_IN - chrome) / (sum(heights) * stacked)
    cell_h = max(MIN_CELL_IN[1], min(CELL_IN[1], fitting_h))
    fontsize = SMALL_PT
    if fitting_h < MIN_CELL_IN[1]:  # more rows than a page holds at the least height: smaller rows and type
        cell_h = fitting_h
        fontsize = max(4.0, SMALL_PT * fitting_h / MIN_CELL_IN[1])
    device_lines = {d: _device_line(d, frame[frame["device"] == d], threads) for d in devices}
    lines_in = CHAR_IN * max(len(line) for line in device_lines.values())
    width = min(PAGE_WIDTH_IN, max(labels_in + families_in + cols * widest * cell_w + 0.25 * cols,
                                   labels_in + lines_in + 0.3))
    # One subfigure per device, titled with what its panels compare, and one for the colour bar.
    row_heights = [(h * cell_h + ROW_CHROME_IN) * stacked for h in heights]
    fig = plt.figure(figsize=(width, sum(row_heights) + BAR_IN + TITLE_IN), layout="constrained")
    *device_figs, bar_fig = fig.subfigures(len(devices) + 1, 1, height_ratios=[*row_heights, BAR_IN])
    for device, sub in zip(devices, device_figs, strict=True):
        ops, sizes, families = per_device[device]
        grid = sub.subplots(stacked, cols, squeeze=False)
        sub.suptitle(device_lines[device], x=0.0, ha="left", fontsize=SMALL_PT)
        for c, (dtype, ax) in enumerate(zip(dtypes, grid.flat, strict=True)):
            rows = frame[(frame["device"] == device) & (frame["dtype"] == dtype)]
            if rows.empty:
                ax.axis("off")
                ax.text(0.5, 0.5, f"{device} · {dtype}: not measured", ha="center", va="center",
                        transform=ax.transAxes, color="0.4")
                continue
            _draw_panel(ax, rows, ops, families, sizes, norm, fontsize)
            ax.set_title(dtype, fontsize=SMALL_PT, loc="left")
            ax.set_xlabel("size n")
            if side_by_side and c:  # one set of op labels per row of panels
                ax.set_yticklabels([])
            if not side_by_side or c == len(dtypes) - 1:
                _label_families(ax, ops, families)
    mappable = plt.cm.ScalarMappable(norm=norm, cmap=CMAP)
    values = frame["end_to_end_speedup"]
    beyond = {(True, True): "both", (True, False): "min", (False, True): "max"}.get(
        ((values < norm.vmin).any(), (values > norm.vmax).any()), "neither")
    holder = bar_fig.subplots()
    holder.axis("off")
    share = min(0.9, 3.2 / width + 0.3)
    cax = holder.inset_axes(((1 - share) / 2, 0.55, share, 0.25))
    bar = bar_fig.colorbar(mappable, cax=cax, orientation="horizontal", extend=beyond)
    bar.ax.xaxis.set_major_locator(FactorLocator(round(math.log2(norm.vmax))))
    bar.ax.xaxis.set_minor_locator(ticker.NullLocator())
    bar.ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: fmt_factor(v)))
    bar.set_label(COLOURBAR_LABEL, fontsize=SMALL_PT)
    fig.suptitle(wrap(f"{TITLE} — {machine}", width - 0.2, BOLD_TITLE_PT), x=0.01, ha="left", fontweight="bold")
    bar_fig.supxlabel(wrap("=: the same as NumPy within the minimum effect; hatched ?: undecided; blank: not "
                           "measured", width - 0.2), x=0.01, ha="left", fontsize=SMALL_PT)
    return fig
