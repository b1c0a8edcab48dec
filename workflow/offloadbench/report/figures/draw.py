"""Every figure of one machine, by name, and how it is saved: vector PDF and 300-dpi PNG."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ...layout import FIGURE_NAMES, figure_parts, split_figure_name
from ...verdicts import Judging
from ..escape import literal, literal_frame
from ..format import family_of
from .figures import (
    bandwidth_figure,
    copy_cost_figure,
    memory_figure,
    round_trip_figure,
    speedup_figure,
    throughput_figure,
    transfer_overhead_figure,
)
from .heatmap import heatmap_figure
from .roofline import roofline_figure
from .style import save_figure

FIGURES: dict[str, Callable] = {  # each draws from (tables, machine label, judging policy)
    "heatmap": lambda tables, machine, judging: heatmap_figure(tables["speedups"], machine),
    "speedup": lambda tables, machine, judging: speedup_figure(tables["speedups"], machine),
    "copy_cost": lambda tables, machine, judging: copy_cost_figure(tables["speedups"], machine),
    "transfer_overhead": lambda tables, machine, judging: transfer_overhead_figure(tables["timings"], machine),
    "bandwidth": lambda tables, machine, judging: bandwidth_figure(tables["transfer"], machine, judging),
    # the roofs table may be absent from older results
    "roofline": lambda tables, machine, judging: roofline_figure(tables["timings"], tables.get("roofs"), machine),
    "throughput": lambda tables, machine, judging: throughput_figure(tables["timings"], machine),
    "memory": lambda tables, machine, judging: memory_figure(tables["timings"], tables["memory"], machine),
    "round_trip": lambda tables, machine, judging: round_trip_figure(tables["speedups"], machine),
}

assert tuple(FIGURES) == FIGURE_NAMES, "figures and layout.FIGURE_NAMES disagree"


def page_of(name: str, tables: dict[str, pd.DataFrame], machine: str) -> tuple[dict[str, pd.DataFrame], str]:
    """The tables and title label of one figure file: for a page of a large grid, only its ops."""
    _, page = split_figure_name(name)
    if not page:
        return tables, machine
    timings = tables["timings"]
    parts = figure_parts(timings["op"], timings["dtype"])
    ops = parts.get(page, [])
    families = ", ".join(dict.fromkeys(family_of(op) for op in ops)) or "no op"
    shown = {key: frame[frame["op"].isin(ops)] if "op" in frame else frame for key, frame in tables.items()}
    return shown, f"{machine} (page {page} of {len(parts)}: {families})"


def draw(name: str, tables: dict[str, pd.DataFrame], machine: str, pdf_path: str, png_path: str,
         judging: Judging) -> None:
    """Draw one figure file and save it as vector PDF and 300-dpi PNG; text from data is drawn
    literally, and intervals are labelled at `judging`'s level."""
    tables, label = page_of(name, {key: literal_frame(frame) for key, frame in tables.items()}, literal(machine))
    save_figure(lambda: FIGURES[split_figure_name(name)[0]](tables, label, judging), pdf_path, png_path)
