"""One table spec, every format: the same cells, headers and legend in Markdown, LaTeX and
the terminal, from one declaration (report/table.py)."""

from __future__ import annotations

import pandas as pd
from offloadbench.report.table import EMPTY, LATEX, MARKDOWN, TERMINAL, Column, Table
from offloadbench.report.text.tables import SPEEDUPS, TIMINGS
from offloadbench.verdicts import Judging

SPEC = Table(
    (
        Column("name", lambda row, context: str(row["name"])),
        Column("time ({unit}), {ci}", lambda row, context: f"{row['t'] / context['scale']:g}",
               legend="time: in {unit}."),
        Column("note", lambda row, context: row["note"] or EMPTY, optional=True, legend="note: what is odd."),
        Column("detail", lambda row, context: "d", formats=frozenset({MARKDOWN}), legend="detail: report only."),
    ),
    empty="Nothing ran.",
    intro="Rows of a test.",
    rows=lambda frame: frame[frame["t"] > 0],
    context=lambda frame, base: {"unit": "ms", "scale": 1e-3},
)
FRAME = pd.DataFrame({"name": ["a", "b", "gone"], "t": [0.002, 0.004, 0.0], "note": ["", "", ""]})


def test_the_headers_cells_and_legend_follow_the_spec_and_the_policy():
    shown = SPEC.shown(FRAME, Judging(confidence=0.9))
    assert list(shown.cells.columns) == ["name", "time (ms), 90% CI", "detail"]  # note: nothing to say
    assert shown.cells.to_numpy().tolist() == [["a", "2", "d"], ["b", "4", "d"]]  # row "gone" is left out
    assert shown.legend == "Rows of a test. time: in ms. detail: report only."
    noted = SPEC.shown(FRAME.assign(note=["", "odd", ""]), Judging())
    assert "note" in noted.cells and noted.legend.endswith("note: what is odd. detail: report only.")


def test_every_format_shows_the_same_cells():
    judging = Judging()
    markdown = SPEC.shown(FRAME, judging, MARKDOWN).markdown()
    latex = SPEC.shown(FRAME, judging, LATEX).latex("Caption", "tab:x")
    plain = SPEC.shown(FRAME, judging, TERMINAL).plain()
    assert "| a | 2 | d |" in markdown and "detail" not in latex and "detail" not in "\n".join(plain)
    assert r"a & 2 \\" in latex and r"\caption{Caption}" in latex
    assert plain == ["name  time (ms), 95% CI", "a     2", "b     4"]


def test_an_empty_table_says_so_in_every_format():
    empty = SPEC.shown(FRAME.iloc[0:0], Judging())
    assert empty.markdown() == "_Nothing ran._" and empty.plain() == ["Nothing ran."]
    assert "Nothing ran." in SPEC.shown(FRAME.iloc[0:0], Judging(), LATEX).latex("c", "tab:x")


def test_a_column_said_once_and_a_long_name_that_gives_way():
    shown = SPEC.shown(pd.DataFrame({"name": ["x" * 40, "y"], "t": [0.001, 0.001], "note": ["", ""]}), Judging(),
                       TERMINAL)
    lines = shown.plain(width=30, shrink="name", once=("time (ms), 95% CI",))
    assert lines[0] == "all 1:" and all(len(line) <= 30 for line in lines)
    assert lines[2].startswith("x" * 17 + "…")


def test_the_report_tables_render_text_in_every_format(gpu_tables):
    judging = Judging()
    for spec, frame in ((TIMINGS, gpu_tables["timings"]), (SPEEDUPS, gpu_tables["speedups"])):
        for fmt in (MARKDOWN, LATEX, TERMINAL):
            shown = spec.shown(frame, judging, fmt)
            assert not shown.cells.empty and shown.legend.startswith(spec.intro.split("{")[0])
            assert all(isinstance(v, str) for v in shown.cells.to_numpy().ravel())
