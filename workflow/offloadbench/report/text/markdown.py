"""The report: what was found on this machine, the answer first.

It leads with a paragraph that answers the question for this machine, the decision table
and the heatmap; then the findings, thread scaling, a section per operation, and the
details (what compiling costs, how the measurement went, the copies, the seed's claims,
every figure and table, the method and the machine). Built as Markdown from the tables and
environment.json, then rendered to one self-contained HTML page that people navigate: a
table of contents, the decision table's rows linked to each op's section, figures with
captions, the long sections folded (page.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ... import libraries
from ...analysis.columns import unstable_cells
from ...analysis.roofline import page_cost_s
from ...cells import Cell
from ...layout import TABLES, machine_figures
from ...logs import stage
from ...records import Environment, RoundRecord, SettleRecord
from ...run_settings import MeasureSection, RunSettings
from ...verdicts import Judging
from ..captions import caption_of
from ..escape import md_data, md_frame, safe_html
from ..format import and_list, format_bytes, op_order, ratio_of
from ..page import anchors, markdown_headings, slug, unescaped
from ..table import Shown, Table, by_size, markdown_table
from .compile_findings import compile_section
from .conditions import conditions_section, controls_line, controls_warning, flags_phrase, rows_by_cell
from .decisions import WEAK_MARK, WEAK_NOTE, answer, decision_table, lead_paragraph, where_cell
from .findings import (
    caveat,
    gpu_findings,
    no_gpu_reason,
    offload_section,
    scaling_table,
    speedup_findings,
    stability_findings,
)
from .fit import fit_section
from .kernel_findings import kernel_lines
from .method import method_section, processes_held, recorded_method
from .ops_findings import bound_lines, bound_notes, missing_baseline_lines, payoff_lines, unplaced_line
from .seed import SEED_CLAIM, check_seed_claims
from .tables import SPEEDUPS, TIMINGS, TRANSFER


@dataclass
class Inputs:
    machine: str
    environment: Environment
    tables: dict[str, pd.DataFrame]  # layout.TABLES
    measure: MeasureSection  # what the run was asked to measure with (settings.json)
    analysis: dict  # the config's analysis section (the bootstrap)
    judging: Judging  # the policy the tables were judged with (judging.json): every label's level
    rounds: list[RoundRecord] = field(default_factory=list)  # raw/rounds/round-<k>.json
    settle: SettleRecord | None = None  # raw/rounds/settle.json: the extra rounds
    rejudged: str = ""  # where a bundle's own policy differed from the one its tables were built with

    def table(self, name: str) -> pd.DataFrame:
        return self.tables.get(name, pd.DataFrame())

    def escaped(self) -> Inputs:
        """The same inputs with every string from data made literal Markdown (escape.md_text)."""
        return replace(self, environment=md_data(self.environment), rounds=md_data(self.rounds),
                       settle=md_data(self.settle),
                       tables={name: md_frame(frame) for name, frame in self.tables.items()})


def machine_section(env: Environment, machine: str) -> list[str]:
    gpu = ", ".join(f"{g.name} ({format_bytes(g.total_memory_bytes)})" if g.total_memory_bytes else g.name
                    for g in env.gpus) or "none visible to torch"
    return [
        "### Machine",
        "",
        f"- Label: `{machine}` (host `{env.hostname}`), {env.os}",
        (f"- CPU: {env.cpu_model}, {env.logical_cores} logical cores ({env.usable_cores} usable), "
        f"governor {env.cpu_governor or 'not readable'}"),
        f"- GPU: {gpu}" + (f", driver {env.nvidia_driver}" if env.nvidia_driver else ""),
        f"- Software: Python {env.python}, NumPy {env.numpy_version} ({env.blas_name or 'BLAS unknown'} "
        f"{env.blas_version or ''}), PyTorch {env.torch_version or 'not installed'}"
        + (f" (CUDA {env.torch_cuda_build})" if env.torch_cuda_build else "")
        + "".join(f", {libraries.get(name).label} {version}" for name, version in env.library_versions.items()
                  if name in libraries.NAMES and libraries.get(name).requirements),  # the extras installed
        (f"- TF32 for float32 matmuls: {'allowed' if env.tf32_matmul_default else 'off'} by default; cells record "
        "their own setting"),
        f"- BLAS/OpenMP environment: {', '.join(f'{k}={v}' for k, v in env.blas_env.items()) or 'nothing set'}",
        f"- Captured at {env.captured_at}",
        "",
    ]


def status_section(timings: pd.DataFrame, flags: pd.DataFrame) -> list[str]:
    counts = timings["status"].value_counts()
    lines = ["## Cells", "", "Cells per status: " + ", ".join(f"{status} {counts[status]}" for status in counts.index) + ".", ""]
    bad = timings[timings["status"] != "ok"]
    if not bad.empty:
        lines += ["### Skipped or failed cells", ""]
        for (status, reason), group in bad.groupby(["status", "reason"], dropna=False):
            names = ", ".join(f"`{Cell.from_dict(r).key}`" for _, r in group.iterrows())
            lines.append(f"- **{status}** ({len(group)}): {reason}. Cells: {names}")
        lines.append("")
    unstable = rows_by_cell(timings[(timings["status"] == "ok") & unstable_cells(timings)], flags, left_out=False)
    if unstable:
        lines += ["### Unstable cells", "", *(f"- `{key}`: {flags_phrase(rows)}" for key, rows in unstable), ""]
    return lines


def table_section(title: str, table: Table, frame: pd.DataFrame, judging: Judging) -> list[str]:
    """A table of the report under its heading, with its legend."""
    shown = table.shown(frame, judging)
    return [f"## {title}", "", shown.markdown(), "", *([shown.legend, ""] if not shown.cells.empty else [])]


QUESTION = ("*When does moving NumPy work to {contenders} pay off on this machine, and what do the copies to and "
            "from the GPU cost?*")


def contenders(timings: pd.DataFrame) -> str:
    """"PyTorch", "PyTorch and JAX": the libraries this run compares with NumPy."""
    present = set(timings["library"]) if "library" in timings else set()
    labels = [libraries.get(name).label for name in libraries.NAMES
              if name in present and not libraries.is_baseline(name)]
    return and_list(labels) if labels else libraries.get(libraries.DEVICE_RUNTIME).label
ANSWER = "The answer, per operation"
AT_A_GLANCE = "At a glance"
PER_OP = "Per operation"
# The sections a reader opens when they want them (report.html folds them, each op's too).
FOLDED = ("Cells", "Speedups", "Timings", "Copy bandwidth, every size", "Method")
ANCHOR = "\x00anchor:{}\x00"  # an op's section anchor, filled in once every heading is known


def folded(level: int, text: str, section: str) -> bool:
    return (level == 2 and text in FOLDED) or (level == 3 and section == PER_OP)


def decisions_markdown(shown: Shown) -> str:
    """The decision table, each op linked to its section under Per operation."""
    if shown.cells.empty:
        return shown.markdown()
    return replace(shown, cells=shown.cells.assign(op=[f"[{op}]({ANCHOR.format(op)})" for op in shown.cells["op"]])
                   ).markdown()


def op_section(op: str, inputs: Inputs) -> list[str]:
    """What the report knows of one op: its decisions in full, from which size a GPU variant
    pays (where its table cannot show it), what bounds it, and its end-to-end speedups at
    every size."""
    t, s, d = (frame[frame["op"] == op] if "op" in frame else frame
               for frame in map(inputs.table, ("timings", "speedups", "decisions")))
    lines = [f"### {op}", ""]
    # each line names its op, as the section's other lines do: read alone, it still says which
    lines += [f"- {op} ({where_cell(r)}, {r['dtype']}): {answer(r, inputs.judging)}" for _, r in d.iterrows()]
    if not s.empty:
        lines += payoff_lines(s, inputs.judging)
    lines += bound_lines(t, inputs.table("roofs")) or unplaced_line(op, t, inputs.table("roofs"))
    lines += kernel_lines(t) + missing_baseline_lines(t)
    table = op_speedups_table(s, inputs.judging)
    if table:
        lines += ["", table]
    return lines + [""]


def op_speedups_table(speedups: pd.DataFrame, judging: Judging) -> str:
    """One op's end-to-end speedups: a row per variant and place, a column per size; a weak
    cell carries the mark."""
    if speedups.empty:
        return ""
    groups = speedups.groupby(["variant", "device", "threads", "dtype"], sort=True)
    table = by_size(groups, sorted({int(n) for n in speedups["size"]}),
                    lambda keys, first: {"variant": keys[0], "where": where_cell(first), "dtype": keys[3]},
                    lambda cell: f"{ratio_of(cell, 'end_to_end_speedup')}{caveat(cell)}, {cell['end_to_end_verdict']}")
    op = speedups["op"].iloc[0]  # named, so that no two ops' tables open with the same sentence
    return f"{op}, end-to-end speedup over NumPy ({judging.ci}), verdict:\n\n" + markdown_table(table)


def build_markdown(inputs: Inputs) -> str:
    inputs = inputs.escaped()
    names = ("timings", "speedups", "decisions", "controls", "transfer")
    t, s, d, controls, transfer = map(inputs.table, names)
    figures = {name: caption_of(name, inputs.judging) for name in machine_figures(inputs.tables)}
    glance = {name: text for name, text in figures.items() if name.startswith("heatmap")}
    judging = inputs.judging
    with stage("the key findings"):
        findings = speedup_findings(s, judging) + gpu_findings(t, s) + controls_line(controls, judging) + \
            stability_findings(t)
        warning = controls_warning(controls, judging)
    with stage("the decision table"):
        answer_table = decision_table(d, judging)
        legend = answer_table.legend
        lead = lead_paragraph(d, no_gpu_reason(t), judging)
    with stage("the thread scaling table"):
        scaling = scaling_table(inputs.table("thread_scaling"))
    ops = op_order(pd.concat([t["op"], d["op"]]) if not d.empty else t["op"])
    lines = [
        f"# NumPy vs {contenders(t)} on `{inputs.machine}`",
        "",
        QUESTION.format(contenders=contenders(t)),
        "",
        lead,
        "",
        *([f"**{warning}**", ""] if warning else []),
        f"## {ANSWER}",
        "",
        decisions_markdown(answer_table),
        "",
        legend,
        "",
        f"## {AT_A_GLANCE}",
        "",
        *figure_lines(glance),
        "## Key findings",
        "",
        *findings,
        "",
        "## Thread scaling",
        "",
        (f"How much faster each CPU library runs on its most threads than on one, with the {judging.ci}:\n\n"
         f"{markdown_table(scaling)}" if not scaling.empty else "_No CPU series was measured at one thread and more._"),
        "",
        f"## {PER_OP}",
        "",
        *bound_notes(t, inputs.table("roofs")),
        "",
    ]
    for op in ops:
        with stage(f"the section of op {op}"):
            lines += op_section(op, inputs)
    details = [
        ("what compiling costs", lambda: compile_section(t, s, judging)),
        ("how the measurement went", lambda: conditions_section(
            inputs.environment, inputs.rounds, t, inputs.settle,
            {name: inputs.table(name) for name in ("speedups", "thread_scaling", "controls")}, inputs.table("flags"))),
        ("does offloading pay", lambda: offload_section(t, s, transfer, inputs.table("resident"), judging)),
        ("does it fit", lambda: fit_section(inputs.table("memory"), t, page_cost_s(inputs.table("roofs")))),
        ("the seed claims", lambda: ["## Seed claims checked", "", f"> {SEED_CLAIM}", "", *check_seed_claims(t, s, judging), ""]),
        ("the figures", lambda: ["## Figures", "", *figure_lines(
            {name: text for name, text in figures.items() if name not in glance})]),
        ("the cells", lambda: status_section(t, inputs.table("flags"))),
        ("the tables", lambda: [
            *table_section("Speedups", SPEEDUPS, s, judging), *table_section("Timings", TIMINGS, t, judging),
            *table_section("Copy bandwidth, every size", TRANSFER, transfer, judging)]),
        ("the method", lambda: method_section(inputs.measure, inputs.analysis, processes_held(t), recorded_method(inputs.rounds, judging),
                                              judging, inputs.rejudged)),
        ("the machine", lambda: machine_section(inputs.environment, inputs.machine)),
    ]
    for name, section in details:
        with stage(name):
            lines += section()
    text = "\n".join(lines)
    if WEAK_MARK in text and WEAK_NOTE not in legend:  # the mark is explained once, under its first table
        text = text.replace(legend, f"{legend}\n\n{WEAK_NOTE}", 1)
    return link_anchors(text, ops)


def link_anchors(text: str, ops: list[str]) -> str:
    """Fill each op's link with the anchor its heading under Per operation gets (GitHub's
    rule, which report.html follows), whatever other heading shares its name."""
    headings = markdown_headings(text)
    start = headings.index(PER_OP) if PER_OP in headings else 0
    section: dict[str, str] = {}
    for heading, anchor in list(zip(headings, anchors(headings), strict=True))[start:]:
        section.setdefault(heading, anchor)
    for op in ops:
        text = text.replace(ANCHOR.format(op), "#" + section.get(unescaped(op), slug(unescaped(op))))
    return text


def write_page(text: str, md_path: str, html_path: str, title: str, figures: tuple[str, ...],
               fold=None, table_classes: dict[str, str] | None = None) -> None:
    """A report as Markdown, and as HTML with its figures embedded: only `figures`, the
    names of the figures this run drew beside it under figures/."""
    Path(md_path).write_text(text, encoding="utf-8")
    out = Path(md_path).parent
    embedded = {f"figures/{name}.png": out / "figures" / f"{name}.png" for name in figures}
    Path(html_path).write_text(safe_html(text, embedded, f"offloadbench — {title}", fold, table_classes),
                               encoding="utf-8")


def figure_lines(captions: dict[str, str]) -> list[str]:
    """Each figure's PNG, its alt text the caption's first sentence, then its caption and
    where its vector version is."""
    lines = []
    for name, caption in captions.items():
        alt = caption.split(". ")[0].rstrip(".").replace("[", "(").replace("]", ")")
        lines += [f"![{name}: {alt}](figures/{name}.png)", "",
                  f"*{name}*: {caption} Vector version: `figures/{name}.pdf`.", ""]
    return lines


def write_report(inputs: Inputs, md_path: str, html_path: str) -> None:
    write_page(build_markdown(inputs), md_path, html_path, inputs.machine, tuple(machine_figures(inputs.tables)),
               folded, {ANSWER: "decisions"})


def load_inputs(paths, machine: str, analysis: dict) -> Inputs:
    """Read the tables, the policy they were judged with, environment.json, the run's
    settings and the round records named by `paths` (an object with attributes, as
    Snakemake's input)."""
    from ...analysis.tables import read_tables
    from ...records import load_environment, load_judging, load_round, load_settle

    tables = read_tables({name: getattr(paths, name) for name in TABLES})
    settle = getattr(paths, "settle", None)
    judging = load_judging(paths.judging)  # the one source of δ and the confidence level
    measure = RunSettings.read(paths.settings).measure
    return Inputs(machine, load_environment(paths.environment), tables, measure, analysis, judging,
                  [load_round(p) for p in getattr(paths, "rounds", [])], load_settle(settle) if settle else None)
