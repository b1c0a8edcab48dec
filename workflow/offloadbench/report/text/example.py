"""The example page's text: what a results folder answers, as a Markdown page readable on
GitHub, with the figures it names beside it (report/publish.py writes both; `make example`
writes docs/example/ from the shipped H200 results)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ...records import Environment
from ...verdicts import Judging
from ..escape import md_frame, md_text
from .decisions import decision_table
from .summary import summary_lines

FIGURES = {  # the figures the page shows, and what each answers
    "heatmap": "Every op and size at a glance: the end-to-end speedup over NumPy (red faster, blue slower).",
    "copy_cost": "What the copies cost on the GPU: the speedup with the data already on the device (solid) and "
                 "with the copies counted (dashed).",
}


def environment_line(env: Environment) -> str:
    """"NVIDIA H200, 16 CPU cores (…), torch 2.11.0+cu130, numpy 2.5.2"."""
    gpu = env.gpus[0].name if env.gpus else "no GPU"
    return md_text(f"{gpu}, {env.usable_cores or '?'} CPU cores ({env.cpu_model or 'CPU'}), "
                   f"torch {env.torch_version or '?'}, numpy {env.numpy_version or '?'}")


def page_text(tables: dict[str, pd.DataFrame], judging: Judging, env: Environment, label: str) -> str:
    """The page: where the results come from, the decision table as the terminal prints it and
    as the report shows it (`tables`: decisions and controls), then the figures with what
    each shows."""
    decisions = tables["decisions"]
    table = decision_table(decisions, judging)
    terminal = summary_lines(tables, judging, label, None)
    lines = [
        f"# An example answer: {md_text(label)}",
        "",
        (f"Real results of one machine: {environment_line(env)}. They cover the seed experiment (a float32 "
        "matmul up to n = 10000) and a compute-then-plot workflow, on the CPU and the GPU, one process per cell, so "
        "their intervals hold the variance within a process only. `make example` writes this page from "
        "the shipped results; a test checks that it is current."),
        "",
        "## The answer, as the terminal prints it",
        "",
        "```",
        *terminal,
        "```",
        "",
        "## The decision table, as the report shows it",
        "",
        replace(table, cells=md_frame(table.cells)).markdown(),
        "",
        table.legend,
        "",
    ]
    for name, caption in FIGURES.items():
        lines += [f"## {name.replace('_', ' ')}", "", f"![{caption}]({name}.png)", "", caption, ""]
    lines += ["How to read every part of a report: [reading the report](../reading-the-report.md).", ""]
    return "\n".join(lines)
