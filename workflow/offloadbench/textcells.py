"""Every text cell of a table changed in one pass: the one way the CSV writer and reader
(csvsafe) and the report's escapes (report.escape) rewrite a table's text.

The tables are wide and short, so a pass column by column spends its time building pandas
Series; this one changes the text columns as a single object array and writes back only
the columns that changed."""

from __future__ import annotations

import numpy as np
import pandas as pd


def _is_text(dtype) -> bool:
    return dtype == object or pd.api.types.is_string_dtype(dtype)


def _changed(value, change):
    """`change` applied to a text value, and to the text inside the tuples of rows a decision
    carries in memory (analysis.tables.with_series_rows)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, tuple):
        return tuple(_changed(item, change) for item in value)
    if isinstance(value, dict):
        return {key: _changed(item, change) for key, item in value.items()}
    return value


def map_text(frame: pd.DataFrame | None, change, names: bool = False) -> pd.DataFrame | None:
    """A copy of `frame` with `change` applied to every text cell (numbers and missing values
    as they are), and to every text column name when `names`."""
    if frame is None:
        return None
    out = frame.rename(columns=lambda c: change(c) if isinstance(c, str) else c) if names else frame.copy()
    text = [position for position, dtype in enumerate(out.dtypes) if _is_text(dtype)]
    if not text or out.empty:
        return out
    before = out.iloc[:, text].to_numpy(dtype=object)
    after = np.frompyfunc(lambda value: _changed(value, change), 1, 1)(before)
    changed = np.frompyfunc(lambda old, new: isinstance(old, (str, tuple)) and old != new, 2, 1)(before, after)
    for column in np.flatnonzero(changed.astype(bool).any(axis=0)):
        out.isetitem(text[column], after[:, column])
    return out
