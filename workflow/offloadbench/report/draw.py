"""Every figure of one machine, by name, and how it is saved: vector PDF and 300-dpi PNG."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ..layout import FIGURE_NAMES
from .escape import literal, literal_frame
from .figures import (
    bandwidth_figure,
    copy_cost_figure,
    speedup_figure,
    throughput_figure,
    transfer_overhead_figure,
)
from .heatmap import draw_heatmap
from .roofline import draw_roofline
from .style import save_figure

FIGURES: dict[str, Callable] = {
    "heatmap": draw_heatmap,
    "speedup": lambda tables, machine: speedup_figure(tables["speedups"], machine),
    "copy_cost": lambda tables, machine: copy_cost_figure(tables["speedups"], machine),
    "transfer_overhead": lambda tables, machine: transfer_overhead_figure(tables["timings"], machine),
    "bandwidth": lambda tables, machine: bandwidth_figure(tables["transfer"], machine),
    "roofline": draw_roofline,
    "throughput": lambda tables, machine: throughput_figure(tables["timings"], machine),
}

assert tuple(FIGURES) == FIGURE_NAMES, "figures and layout.FIGURE_NAMES disagree"


def draw(name: str, tables: dict[str, pd.DataFrame], machine: str, pdf_path: str, png_path: str) -> None:
    """Draw one figure and save it as vector PDF and 300-dpi PNG; text from data is drawn literally."""
    tables = {key: literal_frame(frame) for key, frame in tables.items()}
    save_figure(lambda: FIGURES[name](tables, literal(machine)), pdf_path, png_path)
