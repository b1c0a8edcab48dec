"""One table, every format. A table is declared once, as a `Table` of `Column`s: each with its
header, how a row's cell is written, what it means (its legend entry) and the formats it shows
in. The same cells then render as Markdown (the report), a booktabs float (LaTeX) or aligned
plain text (the terminal), and the legend under each is made from the columns it shows.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from ..verdicts import Judging
from .escape import tex_comment, tex_escape

MARKDOWN, LATEX, TERMINAL = "markdown", "latex", "terminal"
EVERY_FORMAT = frozenset({MARKDOWN, LATEX, TERMINAL})
EMPTY = "–"  # a cell with nothing to say


@dataclass(frozen=True)
class Column:
    header: str  # may name the context's values: {ci}, {unit}, ...
    cell: Callable[[pd.Series, dict], str]  # a row's text, given the table's context
    legend: str = ""  # what the column means, for the legend ("" where its header says it)
    optional: bool = False  # left out where no row has anything to say (every cell EMPTY)
    formats: frozenset[str] = EVERY_FORMAT


@dataclass(frozen=True)
class Table:
    """A table's columns, what it says with no rows, the legend's opening (`intro`), which
    rows of a frame it shows (`rows`) and the values its texts name beyond the judging policy
    (`context`, from the whole frame: a time unit, say)."""

    columns: tuple[Column, ...]
    empty: str
    intro: str = ""
    rows: Callable[[pd.DataFrame], pd.DataFrame] = field(default=lambda frame: frame)
    context: Callable[[pd.DataFrame, dict], dict] = field(default=lambda frame, base: {})

    def shown(self, frame: pd.DataFrame, judging: Judging, fmt: str = MARKDOWN, **values) -> Shown:
        """The cells of `frame`'s rows in format `fmt`, with the legend of the columns shown."""
        rows = self.rows(frame) if not frame.empty else frame
        base = {"ci": judging.ci, "delta": judging.delta, "judging": judging, "format": fmt, **values}
        context = {**base, **self.context(frame, base)}
        columns = [c for c in self.columns if fmt in c.formats]
        cells = pd.DataFrame({i: [c.cell(row, context) for _, row in rows.iterrows()] for i, c in enumerate(columns)},
                             columns=range(len(columns)), dtype=object)
        kept = [i for i, c in enumerate(columns) if not (c.optional and (cells[i] == EMPTY).all())]
        cells = cells[kept]
        cells.columns = [columns[i].header.format(**context) for i in kept]
        legend = " ".join(text.format(**context) for text in
                          [self.intro, *(columns[i].legend for i in kept)] if text)
        return Shown(cells.reset_index(drop=True), legend, self.empty.format(**context))


@dataclass(frozen=True)
class Shown:
    cells: pd.DataFrame  # one text per row and header
    legend: str
    empty: str

    def markdown(self) -> str:
        return markdown_table(self.cells) if not self.cells.empty else f"_{self.empty}_"

    def latex(self, caption: str, label: str) -> str:
        return booktabs_table(self.cells, caption, label, self.empty)

    def plain(self, width: int = 100, shrink: str = "op", once: tuple[str, ...] = ()) -> list[str]:
        """Aligned columns at most `width` wide; a column of `once` with one value in every row
        is said once above them; the `shrink` column gives way first where the rest do not fit."""
        if self.cells.empty:
            return [self.empty]
        cells, said = self.cells, []
        for column in once:
            if column in cells and cells[column].nunique() == 1:
                said.append(f"all {cells[column].iloc[0]}:")
                cells = cells.drop(columns=column)
        widths = {c: max(len(c), *(len(v) for v in cells[c])) for c in cells.columns}
        if shrink in widths:
            widths[shrink] = min(widths[shrink], 18)
            while sum(widths.values()) + 2 * (len(widths) - 1) > width and widths[shrink] > 10:
                widths[shrink] -= 1  # a long name gives way before the numbers do

        def line(values) -> str:
            return "  ".join(_fit(str(values[c]), widths[c]) for c in cells.columns).rstrip()[:width]

        return said + [line({c: c for c in cells.columns}), *(line(row) for _, row in cells.iterrows())]


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def wrapped(text: str, width: int = 100) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=False)


def by_size(groups, sizes, names: Callable[[tuple, pd.Series], dict], cell: Callable[[pd.Series], str]
            ) -> pd.DataFrame:
    """A row per group, named by `names` of its keys and first row, and a column per size of
    `sizes`: `cell` of the group's row at that size, EMPTY where it has none."""
    rows = []
    for keys, group in groups:
        at = {int(row["size"]): row for _, row in group.iterrows()}
        cells = {f"n = {n}": cell(at[n]) if n in at else EMPTY for n in sizes}
        rows.append({**names(keys, group.iloc[0]), **cells})
    return pd.DataFrame(rows)


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


_LABEL = re.compile(r"^[A-Za-z0-9:.\-]+$")
_RIGHT = re.compile(r"^(?:[-–]$|(?:[-–≈≤≥<>]\s*)?[0-9])")


def booktabs_table(cells: pd.DataFrame, caption: str, label: str, empty: str = "No rows.") -> str:
    """Text `cells` (their columns the headers) as a booktabs table float: text and headers
    escaped, a column whose every cell starts with a number right-aligned. No rows give one
    row that says `empty`, so a paper that \\input's the file still compiles."""
    if cells.columns.empty:
        raise ValueError("booktabs_table needs at least one column")
    if not _LABEL.match(label):
        raise ValueError(f"LaTeX label {label!r}: use letters, digits, ':', '.' and '-'")
    rows = [[str(v) for v in row] for row in cells.itertuples(index=False)] or \
        [[empty] + [""] * (len(cells.columns) - 1)]
    align = "".join("r" if not cells.empty and all(_RIGHT.match(row[i]) or row[i] == "" for row in rows) else "l"
                    for i in range(len(cells.columns)))
    # Positional column labels: two headers may read the same, which Styler refuses as labels.
    body = pd.DataFrame([[tex_escape(c) for c in row] for row in rows], columns=range(len(cells.columns)))
    names = [tex_escape(h) for h in cells.columns]
    styler = body.style.hide(axis="index").format_index(lambda i: names[i], axis=1)
    tex = styler.to_latex(column_format=align, hrules=True, caption=tex_escape(caption), label=label,
                          position_float="centering")
    note = f"% {tex_comment(empty)}\n" if cells.empty else ""
    return f"% Generated by offloadbench; edits are lost on the next run.\n{note}{tex}"
