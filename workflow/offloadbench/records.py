"""Raw records on disk: atomic writes, and loads that reject a malformed file by name."""

from __future__ import annotations

import json
import math
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from .errors import UserError

STATUSES = ("ok", "skipped", "oom", "error", "timeout")
SCHEMA_VERSION = 1
SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
CELL_SCHEMA = SCHEMAS / "record.schema.yaml"
TRANSFER_SCHEMA = SCHEMAS / "transfer.schema.yaml"


def base_record(cell: dict, machine: str, settings: dict, started_at: str, facts: dict) -> dict:
    """A record with every required field, before any measurement fills it in."""
    return {
        "schema_version": SCHEMA_VERSION,
        "cell": cell,
        "machine": machine,
        "status": "ok",
        "reason": "",
        "samples_s": [],
        "calls_per_sample": None,
        "warmup": {"count": 0, "samples_s": []},
        "phases": {},
        "stopping": None,
        "diagnostics": {"unstable": False, "flags": []},
        "model": None,
        "check": None,
        "device": {"name": "cpu"},
        "threads": None,
        "settings": settings,
        "provenance": facts,
        "started_at": started_at,
        "finished_at": None,
    }


class MalformedRecord(UserError):
    """A raw record that cannot be used; the message names the file and the problem."""


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


@lru_cache(maxsize=4)
def _validator(schema_path: Path):
    import jsonschema
    import yaml

    with open(schema_path, encoding="utf-8") as handle:
        schema = yaml.safe_load(handle)
    return jsonschema.Draft202012Validator(schema)


def validate_record(record: dict, source: str, schema_path: Path = CELL_SCHEMA) -> dict:
    errors = sorted(_validator(schema_path).iter_errors(record), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        error = errors[0]
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise MalformedRecord(f"{source}: malformed record at {where}: {error.message}")
    if record.get("status") == "ok" and not record.get("samples_s"):
        raise MalformedRecord(f"{source}: malformed record: status ok but no samples")
    return record


def load_record(path: str | os.PathLike, schema_path: Path = CELL_SCHEMA) -> dict:
    """Read and validate one raw record; raise MalformedRecord naming the file."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except json.JSONDecodeError as error:
        raise MalformedRecord(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from None
    except OSError as error:
        raise MalformedRecord(f"{path}: cannot be read ({error.strerror})") from None
    if not isinstance(record, dict):
        raise MalformedRecord(f"{path}: malformed record: expected an object")
    return validate_record(record, str(path), schema_path)
