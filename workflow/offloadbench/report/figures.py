"""Paper-ready figures from the tidy tables (seaborn, colour-blind palette, units on axes).

Each figure is a function of the tables that returns a matplotlib Figure, so tests can
draw them without Snakemake. A figure with nothing to show says why in one panel.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import ticker

from ..cells import device_sort_key, dtype_sort_key, library_sort_key, mode_sort_key, thread_sort_key
from ..units import format_bytes
from .captions import size_label
from .findings import threads_text, variant_of, weak_cells, without_models

PANEL_HEIGHT_IN = 2.4
PANEL_ASPECT = 1.25
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">"]
PHASE_LABELS = {"h2d": "copy in (host→device)", "compute": "compute", "d2h": "copy out (device→host)", "finish": "plot on host"}
WEAK_NOTE = "hollow marker: a weak cell, unstable or sharing its cores with the orchestrator (see report)"


def theme() -> None:
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.0)
    plt.rcParams.update({"pdf.fonttype": 42, "ps.fonttype": 42, "savefig.bbox": "tight"})


def save_figure(make: Callable[[], plt.Figure], pdf_path: str, png_path: str) -> None:
    """Draw a figure in the house theme and save it as vector PDF and 300-dpi PNG."""
    theme()
    fig = make()
    fig.savefig(pdf_path)
    fig.savefig(png_path, dpi=300)
    plt.close(fig)


def series_label(row) -> str:
    """One legend entry per library and mode, device and thread count."""
    variant = variant_of(row)
    if row["device"] != "cpu":
        name = row.get("device_name")
        return f"{variant} {row['device']}" + (f" ({name})" if isinstance(name, str) and name not in ("", "cpu") else "")
    return f"{variant} cpu, {threads_text(row['threads'], row.get('threads_effective'))}"


def _series_order(frame: pd.DataFrame) -> list[str]:
    def key(label_row):
        return (library_sort_key(label_row["library"]), mode_sort_key(label_row.get("mode") or "eager"),
                device_sort_key(label_row["device"]), thread_sort_key(label_row["threads"]))

    rows = frame.drop_duplicates("series").to_dict(orient="records")
    return [r["series"] for r in sorted(rows, key=key)]


def _styles(series: list[str]) -> tuple[dict, dict]:
    palette = sns.color_palette("colorblind", n_colors=max(len(series), 3))
    colours = {s: palette[i % len(palette)] for i, s in enumerate(series)}
    markers = {s: MARKERS[i % len(MARKERS)] for i, s in enumerate(series)}
    return colours, markers


def _with_series(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame["series"] = frame.apply(series_label, axis=1)
    return frame


def unmodelled_note(ops: list[str], lead: str = "") -> str:
    if not ops:
        return ""
    return (f"{lead}Left out, with no FLOP and byte model: {', '.join(ops)} (give @kernel flops= and bytes= "
            "to place them).")


def message_figure(title: str, message: str) -> plt.Figure:
    """A one-panel figure that states why there is nothing to plot."""
    fig, ax = plt.subplots(figsize=(5.0, 2.0))
    ax.axis("off")
    ax.set_title(title, loc="left", fontweight="bold")
    text = "\n".join(textwrap.fill(part, width=75) for part in message.replace("`", "").split("\n"))
    ax.text(0.0, 0.5, text, ha="left", va="center", transform=ax.transAxes)
    return fig


def log_ticks(lo: float, hi: float, at_least: int = 3) -> list[float]:
    """Round tick values for a log axis from lo to hi: 1-2-5 steps, finer when the range is narrow."""
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.1, 1.2, 1.3, 1.5, 1.7, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [m * 10.0**e for e in range(-6, 9) for m in mantissas if lo <= m * 10.0**e <= hi]
        if len(ticks) >= at_least:
            return ticks
    # A range narrower than 10%: evenly spaced round numbers read better than log steps.
    return [float(t) for t in ticker.MaxNLocator(nbins=4).tick_values(lo, hi) if lo <= t <= hi]


def _log_y(ax, suffix: str = "") -> None:
    """Log axis with plain tick labels (0.5×, 1×, 2×) instead of powers of ten; call after plotting."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ax.yaxis.set_major_locator(ticker.FixedLocator(log_ticks(lo, hi)))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}{suffix}"))


def _size_axis(ax, sizes) -> None:
    ax.set_xscale("log", base=2)
    sizes = sorted({int(s) for s in sizes})
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(s) for s in sizes], rotation=45 if len(sizes) > 6 else 0)
    ax.minorticks_off()


def _facets(frame: pd.DataFrame, series: list[str], sharey: bool = True) -> sns.FacetGrid:
    rows = "op" if frame["op"].nunique() > 1 else None
    return sns.FacetGrid(
        frame, col="dtype", row=rows, hue="series", hue_order=series,
        col_order=sorted(frame["dtype"].unique(), key=dtype_sort_key),
        height=PANEL_HEIGHT_IN, aspect=PANEL_ASPECT, sharey=sharey, margin_titles=True,
        despine=False,
    )


def _line_with_band(data: pd.DataFrame, y: str, lo: str, hi: str, colours: dict, markers: dict, band: bool = True,
                    dodge: dict | None = None, **_):
    ax = plt.gca()
    data = data.sort_values("size")
    name = data["series"].iloc[0]
    colour, marker = colours[name], markers[name]
    # Error bars of neighbouring series are nudged apart on the log size axis to stay visible.
    x = data["size"] * (dodge or {}).get(name, 1.0)
    ax.plot(x, data[y], color=colour, marker=marker, markersize=4, linewidth=1.2, label=name)
    if band:
        ax.fill_between(x, data[lo], data[hi], color=colour, alpha=0.25, linewidth=0)
    else:
        yerr = np.vstack([(data[y] - data[lo]).clip(lower=0), (data[hi] - data[y]).clip(lower=0)])
        ax.errorbar(x, data[y], yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.8, capsize=2)
    weak = weak_cells(data)
    if weak.any():
        ax.plot(x[weak], data.loc[weak, y], linestyle="none", marker=marker, markersize=6,
                markerfacecolor="white", markeredgecolor=colour, markeredgewidth=1.2)


def _finish_grid(g: sns.FacetGrid, ylabel: str, frame: pd.DataFrame, title: str,
                 notes: tuple[str, ...] | None = None) -> plt.Figure:
    """Size axes, titles, legend; `notes` under the figure (by default the weak-cell note
    where a hollow marker was drawn)."""
    for ax in g.axes.flat:
        _size_axis(ax, frame["size"])
    g.set_axis_labels(size_label(frame["op"]), ylabel)
    g.set_titles(col_template="{col_name}", row_template="{row_name}")
    g.figure.subplots_adjust(wspace=0.12)  # keep the size labels of neighbouring panels apart
    g.add_legend(title="")
    if notes is None:
        notes = (WEAK_NOTE,) if weak_cells(frame).any() else ()
    g.figure.suptitle(title, x=0.01, ha="left", y=1.02, fontsize="medium", fontweight="bold")
    if notes:
        g.figure.text(0.01, -0.04, "\n".join(notes), ha="left", va="top", fontsize="small")
    return g.figure


def _series_grid(frame: pd.DataFrame, y: str, band: bool, suffix: str = "") -> sns.FacetGrid:
    """One line per library/device/threads series, faceted by dtype, log-log, with CIs."""
    frame = _with_series(frame)
    series = _series_order(frame)
    colours, markers = _styles(series)
    dodge = None if band else {name: 1.04 ** (i - (len(series) - 1) / 2) for i, name in enumerate(series)}
    g = _facets(frame, series)
    g.map_dataframe(_line_with_band, y=y, lo=f"{y}_ci_low", hi=f"{y}_ci_high", colours=colours, markers=markers,
                    band=band, dodge=dodge)
    for ax in g.axes.flat:
        _log_y(ax, suffix)
    return g


def speedup_figure(speedups: pd.DataFrame, machine: str) -> plt.Figure:
    """Device-resident speedup over numpy on the cpu, with 95% CI bands and a line at 1."""
    if speedups.empty:
        return message_figure("Speedup over NumPy", f"No cell on {machine} has both a result and a NumPy baseline.")
    g = _series_grid(speedups, "speedup", band=True, suffix="×")
    for ax in g.axes.flat:
        ax.axhline(1.0, color="0.2", linewidth=0.9, linestyle="--", zorder=0)
    return _finish_grid(g, "speedup over NumPy (×, log)", speedups, f"Speedup over NumPy on the CPU — {machine}")


def throughput_figure(timings: pd.DataFrame, machine: str) -> plt.Figure:
    """Achieved GFLOP/s against size, with the 95% CI of the median as error bars."""
    ok = timings[timings["status"] == "ok"]
    unmodelled = without_models(ok)
    ok = ok[ok["gflops"].gt(0)]
    if ok.empty:
        return message_figure("Throughput", f"No cell on {machine} finished with status ok and a FLOP model."
                              + unmodelled_note(unmodelled, " "))
    g = _series_grid(ok, "gflops", band=False)
    notes = ((WEAK_NOTE,) if weak_cells(ok).any() else ()) + ((unmodelled_note(unmodelled),) if unmodelled else ())
    return _finish_grid(g, "throughput (GFLOP/s, log)", ok, f"Throughput — {machine}", notes=notes)


def transfer_overhead_figure(timings: pd.DataFrame, machine: str) -> plt.Figure:
    """Share of the time in each phase (copy in, compute, copy out) per size, device cells."""
    device = timings[(timings["status"] == "ok") & (timings["device"] != "cpu")]
    if device.empty:
        skipped = timings[timings["device"] != "cpu"]
        reasons = "; ".join(sorted(skipped["reason"].dropna().astype(str).unique()))
        why = (
            f" {len(skipped)} GPU cells were not measured ({reasons})."
            if not skipped.empty else " The grid has no cuda or mps cells."
        )
        return message_figure(
            "Transfer overhead",
            f"No GPU cell was measured on {machine}, so there are no copies to show.{why}\n"
            "Run on a GPU machine (config/paper.yaml) or `make gpu-check`.",
        )
    phases = [p for p in ("h2d", "compute", "d2h", "finish") if device[f"{p}_s"].notna().any()]
    long = device.melt(
        id_vars=["op", "device", "dtype", "size"], value_vars=[f"{p}_s" for p in phases],
        var_name="phase", value_name="seconds",
    )
    long["phase"] = long["phase"].str.removesuffix("_s")
    total = long.groupby(["op", "device", "dtype", "size"])["seconds"].transform("sum")
    long["share"] = long["seconds"] / total * 100
    palette = dict(zip(phases, sns.color_palette("colorblind", n_colors=len(phases))))
    rows = "device" if long["device"].nunique() > 1 else ("op" if long["op"].nunique() > 1 else None)
    g = sns.FacetGrid(
        long, col="dtype", row=rows, col_order=sorted(long["dtype"].unique(), key=dtype_sort_key),
        height=PANEL_HEIGHT_IN, aspect=PANEL_ASPECT, sharey=True, margin_titles=True, despine=False,
    )

    def stacked(data: pd.DataFrame, **_):
        ax = plt.gca()
        table = data.pivot_table(index="size", columns="phase", values="share", aggfunc="median").reindex(columns=phases)
        positions = np.arange(len(table.index))
        bottom = np.zeros(len(table.index))
        for phase in phases:
            values = table[phase].fillna(0).to_numpy()
            ax.bar(positions, values, bottom=bottom, color=palette[phase], label=PHASE_LABELS[phase], width=0.75, edgecolor="white", linewidth=0.5)
            bottom += values
        ax.set_xticks(positions)
        ax.set_xticklabels([str(s) for s in table.index], rotation=45 if len(positions) > 6 else 0)
        ax.set_ylim(0, 100)

    g.map_dataframe(stacked)
    g.set_axis_labels(size_label(device["op"]), "share of the phase times (%)")
    g.set_titles(col_template="{col_name}", row_template="{row_name}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[p]) for p in phases]
    g.figure.legend(handles, [PHASE_LABELS[p] for p in phases], loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    g.figure.suptitle(f"Where the time goes on the device — {machine}", x=0.01, ha="left", y=1.02, fontsize="medium", fontweight="bold")
    return g.figure


def copy_cost_figure(speedups: pd.DataFrame, machine: str) -> plt.Figure:
    """Device-resident and end-to-end speedup of GPU cells: the gap is what the copies cost."""
    gpu = speedups[speedups["device"] != "cpu"]
    if gpu.empty:
        return message_figure(
            "What the copies cost",
            f"No GPU cell on {machine} has a result and a NumPy baseline, so there is no copy cost to show.\n"
            "Run on a GPU machine (config/paper.yaml) or `make gpu-check`.",
        )
    long = pd.concat([
        gpu.assign(kind="data on the device", value=gpu["speedup"], lo=gpu["speedup_ci_low"], hi=gpu["speedup_ci_high"]),
        gpu.assign(kind="copies counted (end to end)", value=gpu["end_to_end_speedup"],
                   lo=gpu["end_to_end_speedup_ci_low"], hi=gpu["end_to_end_speedup_ci_high"]),
    ])
    long["series"] = long["device"] + ": " + long["kind"]
    series = sorted(long["series"].unique(), key=lambda s: (s.split(":")[0], "copies" in s))
    colours = {name: sns.color_palette("colorblind")[(i // 2) % 10] for i, name in enumerate(series)}
    markers = {name: ("o" if "device" in name.split(": ")[1] else "s") for name in series}
    g = _facets(long, series)

    def draw_series(data: pd.DataFrame, **_):
        ax = plt.gca()
        data = data.sort_values("size")
        name = data["series"].iloc[0]
        dashed = "copies" in name
        ax.plot(data["size"], data["value"], color=colours[name], marker=markers[name], markersize=4,
                linewidth=1.2, linestyle="--" if dashed else "-", label=name)
        ax.fill_between(data["size"], data["lo"], data["hi"], color=colours[name], alpha=0.15, linewidth=0)
        for size in data["break_even_size"].dropna().unique()[:1] if dashed else []:
            ax.axvline(size, color=colours[name], linewidth=0.8, linestyle=":")

    g.map_dataframe(draw_series)
    for ax in g.axes.flat:
        _log_y(ax, "×")
        ax.axhline(1.0, color="0.2", linewidth=0.9, linestyle="--", zorder=0)
    return _finish_grid(g, "speedup over NumPy (×, log)", long, f"What the copies cost — {machine}",
                        notes=("dotted vertical line: break-even size with the copies counted (CI above 1 from there on)",))


def bandwidth_figure(transfer: pd.DataFrame, machine: str) -> plt.Figure:
    """Copy bandwidth against copy size, per direction and host memory kind, with the link rate."""
    ok = transfer[transfer["status"] == "ok"] if not transfer.empty else transfer
    if ok.empty:
        reasons = "; ".join(sorted(transfer["reason"].dropna().astype(str).unique())) if not transfer.empty else ""
        why = f" ({reasons})" if reasons else " (the sweep is off: transfer.devices is empty)"
        return message_figure(
            "Copy bandwidth",
            f"No host↔device copy was measured on {machine}{why}.\n"
            "Run on a GPU machine (config/paper.yaml) or `make gpu-check`.",
        )
    frame = ok.assign(series=ok["direction"].map({"h2d": "host→device", "d2h": "device→host"}) + ", " + ok["memory"])
    series = sorted(frame["series"].unique())
    # Colour tells the memory kind, line style the direction, so overlapping lines stay apart.
    memory_colour = dict(zip(("pageable", "pinned"), sns.color_palette("colorblind", 2)))
    g = sns.FacetGrid(frame, col="device", hue="series", hue_order=series, height=PANEL_HEIGHT_IN + 0.3,
                      aspect=PANEL_ASPECT + 0.2, sharey=True, despine=False)

    def draw_series(data: pd.DataFrame, **_):
        ax = plt.gca()
        data = data.sort_values("bytes")
        name, memory, direction = data["series"].iloc[0], data["memory"].iloc[0], data["direction"].iloc[0]
        yerr = np.vstack([(data["gbs"] - data["gbs_ci_low"]).clip(lower=0), (data["gbs_ci_high"] - data["gbs"]).clip(lower=0)])
        ax.errorbar(data["bytes"], data["gbs"], yerr=yerr, color=memory_colour[memory],
                    marker="o" if direction == "h2d" else "s", markersize=4, linewidth=1.2,
                    linestyle="-" if direction == "h2d" else "--", capsize=2, label=name)

    g.map_dataframe(draw_series)
    for ax, (_, group) in zip(g.axes.flat, frame.groupby("device", sort=True)):
        ax.set_xscale("log", base=2)
        ticks = sorted(group["bytes"].unique())
        ax.set_xticks(ticks)
        ax.set_xticklabels([format_bytes(t).replace(" ", "") for t in ticks], rotation=45)
        ax.minorticks_off()
        _log_y(ax)
        link = group["link_gbs"].dropna()
        if not link.empty:
            ax.axhline(link.iloc[0], color="0.2", linestyle=":", linewidth=1.0)
            # No copy beats the link's theoretical rate, so the space above its line is free.
            ax.text(0.02, link.iloc[0] * 1.04, f"link: {group['link'].iloc[0]}, {link.iloc[0]:.0f} GB/s",
                    transform=ax.get_yaxis_transform(), ha="left", va="bottom", fontsize="small", color="0.2")
            ax.set_ylim(top=link.iloc[0] * 1.4)
    g.set_axis_labels("copy size", "bandwidth (GB/s, log)")
    g.set_titles(col_template="{col_name}")
    g.add_legend(title="")
    g.figure.suptitle(f"Host↔device copy bandwidth — {machine}", x=0.01, ha="left", y=1.02, fontsize="medium", fontweight="bold")
    return g.figure
