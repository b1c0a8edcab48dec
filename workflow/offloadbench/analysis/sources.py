"""A machine's results as found on disk: a folder under results/, a folder elsewhere (the
shipped H200 example), or an unpacked bundle. Everything the analysis needs is rebuilt
from the raw records, so results of an older pipeline version are read by this one's code.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from ..errors import UserError
from ..layout import NOT_CELL_DIRS, ROUNDS_DIR, SETTLE_RELPATH
from ..records import MalformedRecord, load_environment, load_round, load_settle
from .measured import Analysis, MeasuredCell, load_cells
from .tables import build_tables_of


class SourceError(UserError):
    """A results folder or bundle that cannot be compared or rendered; one line says why."""


@dataclass(frozen=True)
class Source:
    label: str
    folder: Path

    @property
    def raw(self) -> Path:
        return self.folder / "raw"

    def environment(self) -> dict:
        return self._environment

    @cached_property
    def _environment(self) -> dict:
        path = self.folder / "environment.json"
        if not path.is_file():
            raise SourceError(f"{self.folder}: no environment.json here, so these are no offloadbench results")
        try:
            return load_environment(path)
        except MalformedRecord as error:
            raise SourceError(str(error)) from None

    def settle(self) -> dict | None:
        """What the extra rounds did (raw/rounds/settle.json), where there were any."""
        path = self.raw / SETTLE_RELPATH
        try:
            return load_settle(path) if path.is_file() else None
        except MalformedRecord as error:
            raise SourceError(str(error)) from None

    def rounds(self) -> list[dict]:
        """The rounds' own records (raw/rounds/p<k>.json), validated."""
        try:
            return [load_round(p) for p in sorted((self.raw / ROUNDS_DIR).glob("p*.json"))]
        except MalformedRecord as error:
            raise SourceError(str(error)) from None

    def record_paths(self) -> list[Path]:
        """Every cell record: raw/<op>/<stem>/p<k>.json, and the older raw/<op>/<stem>.json."""
        if not self.raw.is_dir():
            raise SourceError(f"{self.folder}: no raw/ folder with records")
        paths = []
        for op_dir in sorted(p for p in self.raw.iterdir() if p.is_dir() and p.name not in NOT_CELL_DIRS):
            paths += sorted(op_dir.glob("*/p*.json")) + sorted(op_dir.glob("*.json"))
        if not paths:
            raise SourceError(f"{self.folder}: raw/ holds no cell records")
        return paths

    def device_records(self, kind: str) -> list[Path]:
        return sorted((self.raw / kind).glob("*.json"))

    def cells(self, analysis: Analysis) -> list[MeasuredCell]:
        try:
            return load_cells(self.record_paths(), self.environment(), analysis, self.label)
        except MalformedRecord as error:
            raise SourceError(str(error)) from None

    def tables(self, analysis: Analysis, cells: list[MeasuredCell] | None = None) -> dict[str, pd.DataFrame]:
        """Every table of one machine, rebuilt from its raw records by this version's code
        (from `cells` where they are loaded already)."""
        try:
            return build_tables_of(cells or self.cells(analysis), self.device_records("transfer"),
                                   self.device_records("roofs"), self.label, analysis)
        except MalformedRecord as error:
            raise SourceError(str(error)) from None

