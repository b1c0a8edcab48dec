"""A machine's results as found on disk: a folder under results/, a folder elsewhere (the
shipped H200 example), or an unpacked bundle. Everything the analysis needs is rebuilt
from the raw records, so results of an older pipeline version are read by this one's code.

Every message about a source says what it is (a bundle, or a folder of results), and the
work it may cost is bounded before any is done: all its records and points together hold
at most `max_samples` samples (config key bundle_limits.max_samples).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from ..bundles import DEFAULT_MAX_SAMPLES, unpacked_from
from ..errors import UserError, shown
from ..layout import JUDGING, NOT_CELL_DIRS, SETTLE_RELPATH, round_records
from ..records import (
    ROOFS_SCHEMA,
    TRANSFER_SCHEMA,
    Environment,
    MalformedRecord,
    RoundRecord,
    SettleRecord,
    device_samples,
    load_environment,
    load_judging,
    load_round,
    load_settle,
)
from ..verdicts import Judging
from .measured import Analysis, MeasuredCell, OverBudget, load_cells
from .tables import build_tables_of


class SourceError(UserError):
    """A results folder or bundle that cannot be compared or rendered; one line says why."""


@dataclass(frozen=True)
class Source:
    label: str
    folder: Path
    max_samples: int = DEFAULT_MAX_SAMPLES  # all its records and points together

    @property
    def raw(self) -> Path:
        return self.folder / "raw"

    @cached_property
    def bundle(self) -> str | None:
        """The bundle its folder was unpacked from, None for a folder of results."""
        return unpacked_from(self.folder)

    @property
    def kind(self) -> str:
        return "results folder" if self.bundle is None else "bundle"

    def refused(self, problem) -> SourceError:
        """`problem`, after what the source is: "bundle x.tar.gz: …" or "results folder y: …"."""
        return SourceError(f"{self.kind} {shown(self.bundle or self.folder)}: {problem}")

    @contextmanager
    def refusing(self):
        """A malformed record read inside, refused in one line that names this source."""
        try:
            yield
        except MalformedRecord as error:
            raise self.refused(error) from None

    def _optional(self, path: Path, load):
        """A record this source may lack (None), validated where it is there."""
        with self.refusing():
            return load(path) if path.exists() or path.is_symlink() else None

    def environment(self) -> Environment:
        return self._environment

    @cached_property
    def _environment(self) -> Environment:
        path = self.folder / "environment.json"
        if not path.exists() and not path.is_symlink():  # anything else there is refused by the reader
            raise self.refused("no environment.json here, so these are no offloadbench results")
        with self.refusing():
            return load_environment(path)

    def judging(self) -> Judging | None:
        """The policy its own tables were judged with (judging.json), None where it has none."""
        return self._optional(self.folder / JUDGING, load_judging)

    def settle(self) -> SettleRecord | None:
        """What the extra rounds did (raw/rounds/settle.json), where there were any."""
        return self._optional(self.raw / SETTLE_RELPATH, load_settle)

    def rounds(self, kinds: tuple[str, ...] = ("planned",)) -> list[RoundRecord]:
        """The rounds' own records (raw/rounds/round-<k>.json; with "extra" in `kinds`, the
        extra rounds' extra-<k>.json too), validated."""
        with self.refusing():
            return [load_round(p) for kind in kinds for p in round_records(self.raw, kind)]

    def record_paths(self) -> list[Path]:
        """Every cell record: raw/<op>/<stem>/p<k>.json, and the older raw/<op>/<stem>.json.
        A folder that is a link is refused: a results folder holds files, never points elsewhere."""
        if not self.raw.is_dir():
            raise self.refused("no raw/ folder with records")
        paths = []
        for op_dir in sorted(p for p in self.raw.iterdir() if p.is_dir() and p.name not in NOT_CELL_DIRS):
            cells = sorted(op_dir.glob("*/p*.json"))
            for link in [op_dir, *{p.parent for p in cells}]:
                if link.is_symlink():
                    raise self.refused(f"{shown(link)} is a symbolic link; only folders and regular files are read")
            paths += cells + sorted(op_dir.glob("*.json"))
        if not paths:
            raise self.refused("raw/ holds no cell records")
        return paths

    def device_records(self, kind: str) -> list[Path]:
        return sorted((self.raw / kind).glob("*.json"))

    def device_samples(self) -> int:
        """The samples of the copy sweeps and roofs (validated, each file within its bounds)."""
        with self.refusing():
            return sum(device_samples(path, schema) for kind, schema in (("transfer", TRANSFER_SCHEMA),
                                                                          ("roofs", ROOFS_SCHEMA))
                       for path in self.device_records(kind))

    def cells(self, analysis: Analysis) -> list[MeasuredCell]:
        """Its cells, refused before any analysis when its samples pass `max_samples`."""
        device = self.device_samples()
        over = f"more than {self.max_samples} samples, over what bundle_limits.max_samples allows one source"
        if device > self.max_samples:
            raise self.refused(f"its copy sweeps and roofs hold {over}")
        try:
            return load_cells(self.record_paths(), self.environment(), analysis, self.label,
                              max_samples=self.max_samples - device)
        except OverBudget as error:
            also = f" and the {device} samples of its copy sweeps and roofs" if device else ""
            raise self.refused(f"{shown(error.path)}: with it, its records{also} hold {over}") from None
        except MalformedRecord as error:
            raise self.refused(error) from None

    def tables(self, analysis: Analysis, cells: list[MeasuredCell] | None = None) -> dict[str, pd.DataFrame]:
        """Every table of one machine, rebuilt from its raw records by this version's code
        (from `cells` where they are loaded already)."""
        with self.refusing():
            return build_tables_of(cells or self.cells(analysis), self.device_records("transfer"),
                                   self.device_records("roofs"), self.label, analysis, self.environment())

