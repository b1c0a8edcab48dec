"""What a round takes from the run's earlier records: which cells already have a valid
record, the facts measured once per run (a cell's check against float64, its model and
peak memory, or the wrong result that stops it), the bouts that plan its cycles, and the
memory its series measured, for the out-of-memory check.

A record counts only under the current `measure` settings and, for a user kernel, the
same kernel file: anything else is measured anew.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from .. import layout
from ..cells import Cell
from ..errors import UserError
from ..records import CellRecord, MalformedRecord, load_record, load_round, read_json, settings_differ

WRONG_RESULT = "wrong result"  # how the reason of a cell that failed its check begins (measure/cell.py)


class EarlierRecords:
    """The run's records under `raw`, as round `round_number` (an extra round or a planned
    one) sees them."""

    def __init__(self, raw: Path, round_number: int, extra: bool, settings: dict, kernels: dict):
        self.raw, self.round, self.extra = raw, round_number, extra
        self.settings, self.kernels = settings, kernels
        self.scales: dict[tuple, dict] = {}  # per series: its measured memory scale

    def current(self, record: CellRecord) -> bool:
        """Taken under the current settings and, for a user kernel, the same file (a cell
        skipped for its device never ran the kernel, so its edits do not matter)."""
        info = self.kernels.get(record.cell.op)
        edited = info is not None and record.status != "skipped" and record.kernel_sha256 != info.sha256
        return not edited and not settings_differ(record.settings, self.settings)

    def finished_status(self, *paths: Path) -> str | None:
        """The status of the first current, valid record at one of `paths`, if any."""
        for path in paths:
            with contextlib.suppress(MalformedRecord):
                record = load_record(path) if path.exists() else None
                if record is not None and self.current(record):
                    return record.status
        return None

    def facts(self, cell: Cell) -> dict | None:
        """What an earlier round of this run measured once of the cell: its check, model and
        peak memory, with that round's number, or the wrong result it gave (None: this round
        measures them). The earliest current record counts."""
        folder = self.raw / cell.key
        rounds = {int(p.stem[1:]) for p in folder.glob("p*.json") if p.stem[1:].isdigit()}
        for k in sorted(rounds - {self.round}):
            path = folder / f"p{k}.json"
            try:
                record = load_record(path)
            except MalformedRecord:
                continue
            if not self.current(record):
                continue
            if record.check.failed or (record.status == "error" and record.reason.startswith(WRONG_RESULT)):
                return {"round": k, "failed": record.reason}
            if record.ok and record.check.passed:
                document = read_json(path)
                facts = {name: document.get(name) for name in ("check", "model", "memory")}
                if all(isinstance(value, dict) for value in facts.values()):
                    conversion = document.get("conversion")
                    return {"round": k, **facts, **({"conversion": conversion} if isinstance(conversion, dict) else {})}
        return None

    def bouts(self) -> dict[str, list[dict]]:
        """Each group's bouts in the run's other rounds (their records), for planning its cycles."""
        found: dict[str, list[dict]] = {}
        for kind in ("planned", "extra"):
            for path in layout.round_records(self.raw, kind):
                try:
                    record = load_round(path)
                except MalformedRecord:
                    continue
                if record.round == self.round and record.extra == self.extra:
                    continue
                for bout in record.bouts:
                    found.setdefault(str(bout.get("group")), []).append(dict(bout))
        return found

    def memory_scale(self, cell: Cell) -> dict:
        """What the records of the cell's series (any size) measured of its memory, as
        points (n, bytes): each call's extra bytes on the host and the device, and its
        inputs' bytes (a kernel may make inputs of any shape); the worker's out-of-memory
        check fits them (catalogue.footprint). A run measures a cell's peaks once, so each
        cell's earliest readable record is enough."""
        series = (cell.op, cell.library, cell.device, cell.dtype, cell.mode)
        if series not in self.scales:
            points: dict[str, list] = {"host": [], "device": [], "inputs": []}
            pattern = f"{cell.library}-{cell.device}-{cell.dtype}-n*-t*{'-compiled' if cell.compiled else ''}"
            for folder in sorted((self.raw / cell.op).glob(pattern))[:200]:
                for path in sorted(folder.glob("p*.json"), key=lambda p: (len(p.stem), p.stem)):
                    try:
                        record = load_record(path)
                    except (UserError, OSError):
                        continue
                    found = (("host", record.host_peak.peak_bytes), ("device", record.device_peak.peak_bytes),
                             ("inputs", record.model.h2d_bytes))
                    for where, value in found:
                        if record.ok and value is not None:
                            points[where].append([record.cell.size, value])
                    break
            self.scales[series] = {where: found for where, found in points.items() if found}
        return self.scales[series]
