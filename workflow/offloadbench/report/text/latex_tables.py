"""Booktabs tables of one machine's results and of a comparison of machines, for papers:
the timings, the speedups, the copy bandwidth and the decisions (`tables/*.tex`), each from
its one spec (tables.py, decisions.py), its caption the spec's legend. Every text cell, header
and caption goes through `escape.tex_escape` (report/table.py); every interval is labelled at
the level of the run's judging policy."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from ...verdicts import Judging
from ..table import LATEX, Table
from .decisions import decision_table
from .tables import SPEEDUPS, TIMINGS, TRANSFER, comparison_table

NA = "n/a"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "x"


def machine_of(frame: pd.DataFrame) -> str:
    """The machine a table is of ("" where it does not say)."""
    return str(frame["machine"].iloc[0]) if "machine" in frame.columns and not frame.empty else ""


def table_tex(table: Table, frame: pd.DataFrame, judging: Judging, title: str, name: str, **values) -> str:
    """One table of `table`'s spec as a booktabs float: its caption the title, then its legend."""
    shown = table.shown(frame, judging, LATEX, **values)
    return shown.latex(f"{title}: {shown.legend}" if shown.legend else f"{title}.", name)


MACHINE_TABLES = {  # a machine's tables: their spec and title
    "timings": (TIMINGS, "Timings"), "speedups": (SPEEDUPS, "Speedups"), "transfer": (TRANSFER, "Copies")}


def machine_tex(name: str, frame: pd.DataFrame, judging: Judging, machine: str = "") -> str:
    """The table `name` of MACHINE_TABLES (timings, speedups or transfer) of one machine."""
    machine = machine or machine_of(frame)
    table, title = MACHINE_TABLES[name]
    return table_tex(table, frame, judging, f"{title} on {machine}", f"tab:{slug(machine)}-{name}")


def decisions_tex(decisions: pd.DataFrame, judging: Judging, machine: str = "", warning: str = "") -> str:
    """The answer: one decision per op (or kernel), place and dtype, as the report leads with;
    `warning` is the self-comparisons' where they were called faster or slower too often."""
    machine = machine or machine_of(decisions)
    shown = decision_table(decisions, judging, LATEX)
    caption = " ".join(part for part in (f"What to use on {machine}:", shown.legend, warning) if part)
    return shown.latex(caption, f"tab:{slug(machine)}-decisions")


def with_machines(comparison: pd.DataFrame, machines: Sequence[str]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The comparison with its machine columns, filled from `machines` when it has none, and
    its pairs of machines (a, b): its rows', or with no rows, the first of `machines` with each other."""
    frame = comparison.copy()
    for column, k in (("machine_a", 0), ("machine_b", 1)):
        if column not in frame.columns:
            if len(machines) < 2 and not frame.empty:
                raise ValueError("the comparison has no machine columns: name both machines in `machines`")
            frame[column] = str(machines[k]) if len(machines) > k else ""
    if not frame.empty:
        pairs = frame[["machine_a", "machine_b"]].astype(str).drop_duplicates()
        return frame, list(pairs.itertuples(index=False, name=None))
    machines = [str(m) for m in machines]
    return frame, [(machines[0], m) for m in machines[1:]]


def comparison_tex(comparison: pd.DataFrame, judging: Judging, machines: Sequence[str] = ()) -> str:
    """Each cell's median on two machines, the ratio b/a with its CI, and the verdict."""
    frame, pairs = with_machines(comparison, machines)
    a, b = pairs[0] if pairs else ("a", "b")
    title = f"{b} against {a}" if len(pairs) == 1 else "each machine b against its reference a"
    label = "tab:comparison" + "".join(f"-{slug(a)}-{slug(b)}" for a, b in pairs[:1])
    return table_tex(comparison_table(len(pairs) == 1), frame, judging, f"Machine comparison, {title}", label,
                     a=a, b=b)
