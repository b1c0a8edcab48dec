"""How every figure looks and fits a page: the house theme, page sizes, the panel grid that
wraps with the grid's size, legends and notes below the panels, and axes whose ticks thin
themselves so that no two labels touch.

A figure is drawn at its print size (at most 7.2 in wide, two paper columns, and one page
tall), so the point sizes here are the sizes on paper; nothing relies on a tight bounding
box at save time, so what the figure holds is what is saved.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import ticker
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D

from ..captions import size_label
from ..format import (
    device_sort_key,
    dtype_order,
    fmt_plain,
    library_sort_key,
    mode_sort_key,
    op_order,
    row_threads,
    thread_sort_key,
    variant_of,
)
from ..page import FIGURE_DPI

PAGE_WIDTH_IN = 7.2  # two columns of a journal page
COLUMN_WIDTH_IN = 3.5  # one column
PAGE_HEIGHT_IN = 9.5  # a page less its caption
TEXT_PT = 8.0
SMALL_PT = 7.0  # the least any text of a figure is, at print size
TITLE_PT = 9.0
BOLD_TITLE_PT = TITLE_PT * 1.12  # what a bold title is as wide as, for wrapping
MIN_PANEL_WIDTH_IN = 1.15
MAX_PANEL_HEIGHT_IN = 2.0
MIN_PANEL_HEIGHT_IN = 1.0
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">"]
WEAK_NOTE = "hollow marker: a weak cell, unstable or sharing its cores with the orchestrator (see report)"
GPU_ADVICE = "Run on a GPU machine (config/paper.yaml) or `make gpu-check`."
PAD_IN = 0.06  # between the blocks of a page, and at its edges


def theme() -> None:
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", rc={
        "font.size": TEXT_PT, "axes.titlesize": TEXT_PT, "axes.labelsize": TEXT_PT,
        "xtick.labelsize": SMALL_PT, "ytick.labelsize": SMALL_PT, "legend.fontsize": SMALL_PT,
        "legend.title_fontsize": SMALL_PT, "figure.titlesize": TITLE_PT, "figure.labelsize": TEXT_PT,
    })
    plt.rcParams.update({"pdf.fonttype": 42, "ps.fonttype": 42, "savefig.bbox": None})


def save_figure(make: Callable[[], plt.Figure], pdf_path: str, png_path: str) -> None:
    """Draw a figure in the house theme and save it as vector PDF and 300-dpi PNG."""
    theme()
    fig = make()
    fig.savefig(pdf_path)
    fig.savefig(png_path, dpi=FIGURE_DPI)
    plt.close(fig)


def wrap(text: str, width_in: float, points: float = SMALL_PT) -> str:
    """Text wrapped to a width in inches (an average glyph is about 0.55 of its point size wide)."""
    chars = max(20, int(width_in * 72 / (0.56 * points)))
    return "\n".join(textwrap.fill(part, width=chars) for part in text.split("\n"))


# --- the page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Grid:
    """Panels wrapped into rows and columns, and the height of one panel in inches (the
    page's width is shared out among the columns)."""

    rows: int
    cols: int
    panel_height_in: float


def panel_grid(count: int, width_in: float = PAGE_WIDTH_IN, aspect: float = 0.72,
               room_in: float = PAGE_HEIGHT_IN - 1.8, max_height_in: float = MAX_PANEL_HEIGHT_IN) -> Grid:
    """Columns and rows for `count` panels on a page `width_in` wide: rows of up to four
    panels, balanced (5 panels: 3 + 2), and up to six across when four would not fit the
    height `room_in` at the least panel height."""
    count = max(count, 1)
    widest = max(1, int(width_in // MIN_PANEL_WIDTH_IN))
    cols = min(4, widest, count)
    if math.ceil(count / cols) * MIN_PANEL_HEIGHT_IN > room_in:
        cols = min(6, widest, count)
    rows = math.ceil(count / cols)
    cols = math.ceil(count / rows)
    # small multiples get a little taller than their aspect, as far as the page allows
    height = min(max_height_in, room_in / rows, max(aspect * width_in / cols, 1.1))
    return Grid(rows, cols, max(height, MIN_PANEL_HEIGHT_IN))


class Page:
    """A figure of a title, a grid of panels laid out by constrained layout inside a box, and
    around that box the axis labels, a legend and notes, each measured, so that the figure
    is exactly as large as what it holds and no two of them meet."""

    def __init__(self, count: int, title: str, *, width_in: float | None = None, aspect: float = 0.72,
                 sharex: bool = False, sharey: bool = False, grid: Grid | None = None,
                 max_height_in: float = MAX_PANEL_HEIGHT_IN):
        if width_in is None:  # one panel: one paper column, a little wider; else both columns
            width_in = COLUMN_WIDTH_IN + 0.5 if count <= 1 else PAGE_WIDTH_IN
        self.grid = grid or panel_grid(count, width_in, aspect, max_height_in=max_height_in)
        self.width_in = width_in
        self.panels_in = self.grid.rows * self.grid.panel_height_in
        self.fig = plt.figure(figsize=(self.width_in, self.panels_in + 1.0), layout="constrained")
        axes = self.fig.subplots(self.grid.rows, self.grid.cols, squeeze=False, sharex=sharex, sharey=sharey)
        self.axes = list(axes.flat[:count])
        for ax in axes.flat[count:]:
            ax.remove()
        if sharex:  # a panel above an empty place shows the size ticks the removed one would have
            for ax in self.axes[-self.grid.cols:]:
                ax.xaxis.set_tick_params(labelbottom=True)
        self.title = self._text(wrap(title, self.width_in - 2 * PAD_IN, BOLD_TITLE_PT), TITLE_PT, fontweight="bold")
        self.xlabel = self.ylabel = self.legend = self.notes = None

    def _text(self, text: str, points: float, **kwargs):
        artist = self.fig.text(0, 0, text, ha="left", va="bottom", fontsize=points, **kwargs)
        artist.set_in_layout(False)
        return artist

    def axis_labels(self, xlabel: str, ylabel: str) -> None:
        """One size label under the grid and one quantity label beside it."""
        self.xlabel = self._text(wrap(xlabel, self.width_in - 2 * PAD_IN, TEXT_PT), TEXT_PT)
        if ylabel:
            self.ylabel = self._text(wrap(ylabel, self.panels_in - 0.1, TEXT_PT), TEXT_PT, rotation=90,
                                     multialignment="center")

    def add_legend(self, handles: Sequence, labels: Sequence[str], ncol: int | None = None, **kwargs) -> None:
        """A legend below the panels, in as many columns as its longest label allows; the
        labels of `header` rows in bold."""
        if not handles:
            return
        # a label longer than the page is wrapped, so that even one column fits
        room = int((self.width_in - 2 * PAD_IN - 0.6) / (0.56 * SMALL_PT / 72))
        labels = ["\n".join(textwrap.fill(line, room, subsequent_indent="  ") for line in str(label).split("\n"))
                  for label in labels]
        widest = max(len(line) for label in labels for line in label.split("\n"))
        fits = max(1, int(self.width_in // (0.45 + widest * 0.5 * SMALL_PT / 72)))
        self.ncol = ncol or min(fits, len(handles))
        options = {"frameon": False, "columnspacing": 1.2, "handletextpad": 0.5, "borderaxespad": 0, "borderpad": 0,
                   **kwargs}
        self.legend = self.fig.legend(handles, labels, loc="lower left", ncol=self.ncol, **options)
        self.legend.set_in_layout(False)
        for handle, text in zip(handles, self.legend.get_texts(), strict=True):
            if handle.get_gid() == "header":
                text.set_fontweight("bold")

    def add_notes(self, notes: Sequence[str], points: float = SMALL_PT) -> None:
        notes = [n for n in notes if n]
        if notes:
            self.notes = self._text("\n".join(wrap(n, self.width_in - 2 * PAD_IN, points) for n in notes), points)

    def finish(self) -> plt.Figure:
        """Size the figure to its blocks and place them: title, panels, x label, legend, notes."""
        fig = self.fig
        renderer = fig.canvas.get_renderer()

        def extent(artist) -> tuple[float, float]:
            box = artist.get_window_extent(renderer)
            return box.width / fig.dpi, box.height / fig.dpi + PAD_IN

        if self.legend is not None:
            while extent(self.legend)[0] > self.width_in - 2 * PAD_IN and self.ncol > 1:
                self.ncol -= 1
                self.legend.set_ncols(self.ncol)
        below = [a for a in (self.notes, self.legend, self.xlabel) if a is not None]  # from the bottom up
        heights = [extent(a)[1] for a in below]
        top = extent(self.title)[1] + PAD_IN
        left = extent(self.ylabel)[0] + PAD_IN if self.ylabel is not None else 0.0
        bottom = sum(heights) + PAD_IN
        total = top + self.panels_in + bottom
        fig.set_size_inches(self.width_in, total)
        fig.get_layout_engine().set(rect=(left / self.width_in, bottom / total, 1 - left / self.width_in,
                                          self.panels_in / total))
        y = PAD_IN
        for artist, height in zip(below, heights, strict=True):
            if artist is self.legend:
                self.legend.set_bbox_to_anchor((PAD_IN / self.width_in, y / total), fig.transFigure)
            else:
                artist.set_position((PAD_IN / self.width_in, y / total))
            y += height
        self.title.set_position((PAD_IN / self.width_in, 1 - (top - PAD_IN) / total))
        if self.ylabel is not None:
            self.ylabel.set_position((PAD_IN / 2 / self.width_in, (bottom + self.panels_in / 2) / total))
            self.ylabel.set(ha="left", va="center")
        fig.canvas.draw()
        fig.set_layout_engine("none")  # what was measured and placed is what is saved
        return fig


def header(text: str) -> tuple[Line2D, str]:
    """A legend row that only names the section below it (`Page.add_legend` sets it in bold)."""
    return Line2D([], [], linestyle="none", gid="header"), text


def op_grid(frame: pd.DataFrame, title: str, draw: Callable, *, ylabel: str, suffix: str = "",
            sharey: bool = False, line_at_one: bool = False) -> Page:
    """One panel per op and dtype in report order, wrapped to the page, sharing the size axis
    (and with `sharey` the y axis): `draw(ax, rows)` draws a panel's rows; the y axis is log
    with round ticks, and with `line_at_one` a dashed line at 1. The caller adds the legend and
    notes, then finishes the page."""
    dtypes = dtype_order(frame["dtype"])
    present = set(zip(frame["op"], frame["dtype"], strict=True))
    panels = [(op, dtype) for op in op_order(frame["op"]) for dtype in dtypes if (op, dtype) in present]
    page = Page(len(panels), title, sharex=True, sharey=sharey)
    for ax, (op, dtype) in zip(page.axes, panels, strict=True):
        draw(ax, frame[(frame["op"] == op) & (frame["dtype"] == dtype)])
        if line_at_one:  # the line of no difference on a ratio axis
            ax.axhline(1.0, color="0.2", linewidth=0.9, linestyle="--", zorder=0)
        log_y(ax, suffix)
        panel_title(ax, f"{op} · {dtype}" if len(dtypes) > 1 else op)
    size_axis(page.axes[0], frame["size"])
    page.axis_labels(size_label(frame["op"]), ylabel)
    return page


def unmodelled_note(ops: list[str], lead: str = "") -> str:
    if not ops:
        return ""
    return (f"{lead}Left out, with no FLOP and byte model: {', '.join(ops)} (give @kernel flops= and bytes= "
            "to place them).")


def message_figure(title: str, message: str) -> plt.Figure:
    """A one-panel figure that states why there is nothing to plot."""
    page = Page(0, title, width_in=COLUMN_WIDTH_IN * 1.5, grid=Grid(1, 1, 0.0))
    page.add_notes([message.replace("`", "")], TEXT_PT)
    return page.finish()


# --- axes whose labels never touch --------------------------------------------------------


def _label_width_px(axis, text: str) -> float:
    size = FontProperties(size=plt.rcParams["xtick.labelsize"]).get_size_in_points()
    return len(text) * 0.66 * size * axis.axes.figure.dpi / 72  # DejaVu's digits are 0.64 em


class SizeLocator(ticker.Locator):
    """The grid's sizes as ticks on a log axis, thinned at draw time so that neighbouring
    labels keep a gap at the axis's actual width: the largest size always stays."""

    def __init__(self, sizes, labels: Callable[[float], str] = lambda v: str(int(v))):
        self.sizes = sorted({float(s) for s in sizes})
        self.labels = labels

    def __call__(self):
        lo, hi = sorted(self.axis.get_view_interval())
        shown = [s for s in self.sizes if lo <= s <= hi] or self.sizes
        transform = self.axis.axes.transData  # size_axis sets it on an x axis
        gap = 0.8 * SMALL_PT * self.axis.axes.figure.dpi / 72  # about a space and a half
        kept = [shown[-1]]
        for size in reversed(shown[:-1]):
            right = transform.transform((kept[-1], 1))[0] - _label_width_px(self.axis, self.labels(kept[-1])) / 2
            left = transform.transform((size, 1))[0] + _label_width_px(self.axis, self.labels(size)) / 2
            if left + gap <= right:
                kept.append(size)
        return sorted(kept)


def size_axis(ax, sizes, labels: Callable[[float], str] = lambda v: str(int(v)), log: bool = True) -> None:
    """A size axis (log2, or linear for bar positions) whose ticks are the grid's sizes, as
    many as fit."""
    ax.set_xscale("log", base=2) if log else ax.set_xscale("linear")
    ax.xaxis.set_major_locator(SizeLocator(sizes, labels))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: labels(v)))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.tick_params(axis="x", labelrotation=0)


def log_ticks(lo: float, hi: float, at_least: int = 3) -> list[float]:
    """Round tick values for a log axis from lo to hi: 1-2-5 steps, finer when the range is narrow."""
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.1, 1.2, 1.3, 1.5, 1.7, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [m * 10.0**e for e in range(-6, 9) for m in mantissas if lo <= m * 10.0**e <= hi]
        if len(ticks) >= at_least:
            return ticks
    # A range narrower than 10%: evenly spaced round numbers read better than log steps.
    return [float(t) for t in ticker.MaxNLocator(nbins=4).tick_values(lo, hi) if lo <= t <= hi]


def y_ticks_that_fit(axis) -> int:
    """How many tick labels fit a y axis with neighbours two lines of text apart (at least two)."""
    axes = axis.axes
    return max(2, int(axes.bbox.height // (2.0 * SMALL_PT * axes.figure.dpi / 72)) + 1)


class NiceLogLocator(ticker.Locator):
    """Round log ticks on a y axis (1-2-5, finer on a narrow range), thinned at draw time to
    powers of ten, then to every other one, until neighbours are two lines of text apart."""

    def __call__(self):
        lo, hi = sorted(self.axis.get_view_interval())
        ticks = log_ticks(lo, hi)
        fits = y_ticks_that_fit(self.axis)
        if len(ticks) > fits:
            decades = [t for t in ticks if math.isclose(10 ** round(math.log10(t)), t)]
            ticks = decades if len(decades) >= 2 else ticks
        return ticks[::max(1, math.ceil(len(ticks) / fits))]  # fits is at least two


class BytesLogLocator(ticker.Locator):
    """Byte ticks on a log y axis at powers of two that read as whole KiB, MiB, GiB (1, 4, 16,
    ... or 1, 32, 1024, ...), the finest step whose neighbours stay two lines of text apart."""

    def __call__(self):
        lo, hi = sorted(self.axis.get_view_interval())
        if not (lo > 0 and math.isfinite(hi)):
            return []
        fits = y_ticks_that_fit(self.axis)
        first, last = math.ceil(math.log2(lo)), math.floor(math.log2(hi))
        for step in (2, 5, 10, 20):
            ticks = [2.0**e for e in range(first, last + 1) if e % step == 0]
            if len(ticks) <= fits:
                return ticks
        return ticks[:: max(1, len(ticks) // fits + 1)]


def log_y(ax, suffix: str = "") -> None:
    """Log axis with plain tick labels (0.5×, 1×, 2×) instead of powers of ten; call after plotting."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(NiceLogLocator())
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{fmt_plain(v)}{suffix}"))


# --- series: one colour and marker per library, mode, device and thread count --------------


def series_label(row) -> str:
    """One legend entry per library and mode, device and thread count."""
    variant = variant_of(row)
    if row["device"] != "cpu":
        name = row.get("device_name")
        return f"{variant} {row['device']}" + (f" ({name})" if isinstance(name, str) and name not in ("", "cpu") else "")
    return f"{variant} cpu, {row_threads(row)}"


def with_series(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(series=frame.apply(series_label, axis=1) if not frame.empty else pd.Series(dtype=str))


def series_order(frame: pd.DataFrame) -> list[str]:
    def key(row):
        return (library_sort_key(row["library"]), mode_sort_key(row.get("mode") or "eager"),
                device_sort_key(row["device"]), thread_sort_key(row["threads"]))

    rows = frame.drop_duplicates("series").to_dict(orient="records")
    return [r["series"] for r in sorted(rows, key=key)]


def colours_of(keys) -> dict:
    """One colour-blind-safe colour per key, in order (they repeat past the palette's ten)."""
    # seaborn cycles the palette to n_colors, so there is one for every key
    return dict(zip(keys, sns.color_palette("colorblind", n_colors=max(len(keys), 3)), strict=False))


def markers_of(keys) -> dict:
    """One marker per key, in order (they repeat past the nine)."""
    return {key: MARKERS[i % len(MARKERS)] for i, key in enumerate(keys)}


def device_title(device: str, rows: pd.DataFrame) -> str:
    """A GPU's name beside its device ("cuda (H100)") where the rows name it; the cpu alone."""
    names = rows["device_name"].dropna().astype(str) if "device_name" in rows else pd.Series(dtype=str)
    return f"{device} ({names.iloc[0]})" if device != "cpu" and not names.empty else device


def panel_title(ax, text: str) -> None:
    """A panel's title at its top left; on one line where it fits the panel, else split at its
    " · " (op above dtype), so neighbouring titles never meet."""
    width_in = ax.get_position().width * ax.figure.get_figwidth()

    def fits(line: str, points: float) -> bool:
        return len(line) * 0.6 * points / 72 <= width_in

    if not fits(text, TEXT_PT):
        text = text.replace(" · ", "\n")
    points = TEXT_PT if all(fits(line, TEXT_PT) for line in text.split("\n")) else SMALL_PT
    ax.set_title(text, loc="left", fontsize=points, pad=5)  # clear of the top y tick label


def y_errors(frame: pd.DataFrame, value: str, low: str, high: str) -> np.ndarray:
    """Error bar lengths below and above each value (never negative)."""
    return np.vstack([(frame[value] - frame[low]).clip(lower=0), (frame[high] - frame[value]).clip(lower=0)])
