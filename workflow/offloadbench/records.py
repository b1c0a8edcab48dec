"""Raw records on disk: the one builder of a cell's record, validation against the record
schemas when writing and reading, and atomic writes.

A cell record holds one cell measured in one process (one round of the run). Version 1
records (one process per cell, `raw/<op>/<stem>.json`) are read as the only process of
their cell, so older result folders stay usable.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from .cells import Cell
from .errors import UserError

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
CELL_SCHEMA = SCHEMAS / "record.schema.yaml"
TRANSFER_SCHEMA = SCHEMAS / "transfer.schema.yaml"
ROOFS_SCHEMA = SCHEMAS / "roofs.schema.yaml"
FAILED = ("oom", "error", "timeout")
# Measure settings that change what a record holds; the others (processes, timeout_s) do not.
MEASUREMENT_KEYS = (
    "target_rel_ci", "budget_s", "warmup_budget_s", "min_samples", "min_sampling_s",
    "max_samples", "min_sample_s", "seed", "check_rows", "pinned_memory", "allow_tf32",
)


class MalformedRecord(UserError):
    """A raw record that cannot be used; the message names the file and the problem."""


def cell_record(
    cell: Cell,
    machine: str,
    process: dict,
    *,
    status: str,
    reason: str,
    started_at: str,
    finished_at: str,
    provenance: dict,
    settings: dict,
    measured: dict | None = None,
    costs: dict | None = None,
) -> dict:
    """The record of one cell in one process, whatever its status; validated here.

    `measured` holds what run_cell found (samples, phases, check, model, ...), `costs`
    what the job spent around it (imports, lock wait)."""
    record = {
        "schema_version": SCHEMA_VERSION,
        "cell": cell.as_dict(),
        "machine": machine,
        "process": process,
        "status": status,
        "reason": reason,
        "samples_s": [],
        "phases": {},
        "diagnostics": {"unstable": False, "flags": []},
        "settings": settings,
        "provenance": provenance,
        "started_at": started_at,
        "finished_at": finished_at,
        **(measured or {}),
        **(costs or {}),
    }
    errors = _errors(record, CELL_SCHEMA)
    if errors:
        raise ValueError(f"bug: record of {cell.key} breaks the record schema: {errors[0]}")
    return record


def settings_differ(recorded: dict, current: dict) -> list[str]:
    """Measure settings under which a record was taken that differ from the current ones."""
    return [key for key in MEASUREMENT_KEYS if key in current and recorded.get(key) != current[key]]


def _json_safe(value):
    """JSON has no inf or nan: store them as null so every reader can parse the file."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write a file so that readers see the old file or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide results from co-workers
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | os.PathLike, data: dict) -> None:
    """Write JSON atomically; inf and nan are stored as null."""
    text = json.dumps(_json_safe(data), indent=1, allow_nan=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


@lru_cache(maxsize=8)
def _validator(schema_path: Path):
    import jsonschema
    import yaml

    with open(schema_path, encoding="utf-8") as handle:
        schema = yaml.safe_load(handle)
    return jsonschema.Draft202012Validator(schema)


def _errors(record: dict, schema_path: Path) -> list[str]:
    found = sorted(_validator(schema_path).iter_errors(_json_safe(record)), key=lambda e: list(map(str, e.absolute_path)))
    messages = []
    for error in found:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        messages.append(f"at {where}: {error.message}")
    return messages


def validate_record(record: dict, source: str, schema_path: Path = CELL_SCHEMA) -> dict:
    errors = _errors(record, schema_path)
    if errors:
        raise MalformedRecord(f"{source}: malformed record {errors[0]}")
    return record


def read_json(path: str | os.PathLike) -> dict:
    """Read a JSON object; raise MalformedRecord naming the file and how to recover."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as error:
        raise MalformedRecord(
            f"{path}: not valid JSON ({error.msg} at line {error.lineno}); delete it and run again to measure it anew"
        ) from None
    except OSError as error:
        raise MalformedRecord(f"{path}: cannot be read ({error.strerror})") from None
    if not isinstance(data, dict):
        raise MalformedRecord(f"{path}: malformed record: expected an object")
    return data


def load_record(path: str | os.PathLike, schema_path: Path = CELL_SCHEMA) -> dict:
    """Read and validate one raw record; version 1 cell records become process 1 of 1."""
    record = read_json(path)
    version = record.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise MalformedRecord(
            f"{path}: record format version {version!r} is not one this version reads "
            f"({', '.join(map(str, READABLE_VERSIONS))}); measure it again or use the matching offloadbench"
        )
    validate_record(record, str(path), schema_path)
    if schema_path == CELL_SCHEMA and version == 1:
        record = {**record, "process": {"round": 1, "rounds": 1, "format": "version 1: one process per cell"}}
    return record


def check_record_path(path: str | os.PathLike, record: dict) -> Cell:
    """The cell a record holds, refusing a record stored under another cell's name."""
    path = Path(path)
    cell = Cell.from_dict(record["cell"])
    if record.get("schema_version") == 1:
        where = (path.parent.name, path.stem)
        expected = (cell.op, cell.stem)
    else:
        where = (path.parent.parent.name, path.parent.name, path.stem)
        expected = (cell.op, cell.stem, f"p{record['process']['round']}")
    if where != expected:
        raise MalformedRecord(f"{path}: record is for {'/'.join(expected)}, not for this file name")
    return cell
