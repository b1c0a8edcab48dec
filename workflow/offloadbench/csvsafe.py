"""Every CSV the pipeline writes, with each text cell from data inert in a spreadsheet.

A reason, a flag, a CPU model or a provenance value can come from another machine. A
spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula
(`=HYPERLINK(…)`, `+cmd|' /C calc'!A0`), and a bare carriage return is written unquoted,
so a reader sees an extra row. Each text cell is therefore written as OWASP advises for
CSV injection: control characters become a space (so no CR or LF is left in a field), and
a cell that then starts with one of `= + - @`, or started with a tab or CR, and is not a
number, gets a leading `'`. Numbers and missing values are written as they are; reading
a table back (`read_csv_text`) takes that `'` off again.
"""

from __future__ import annotations

import io
import os
import re

import pandas as pd

from .textcells import map_text

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(text: str) -> str:
    """One text cell as a spreadsheet shows it without running it (see the module docstring)."""
    clean = _CONTROL.sub(" ", text)
    starts = text.startswith(_FORMULA_START) or clean.lstrip().startswith(_FORMULA_START)
    return "'" + clean if starts and not _NUMBER.fullmatch(clean.strip()) else clean


def _unquoted(text: str) -> str:
    """A cell as it was before csv_cell quoted it (control characters stay spaces)."""
    return text[1:] if text.startswith("'") and csv_cell(text[1:]) == text else text


def write_csv(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """The one way a table becomes a CSV file: every text cell, and every column name,
    through csv_cell; no index."""
    map_text(frame, csv_cell, names=True).to_csv(path, index=False)


def read_csv_text(data: bytes, **options) -> pd.DataFrame:
    """A CSV that write_csv wrote, parsed by pandas (`options` as for read_csv), with the
    `'` that csv_cell put before formula-like cells taken off."""
    return map_text(pd.read_csv(io.BytesIO(data), **options), _unquoted, names=True)
