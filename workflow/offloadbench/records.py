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
import re
import tempfile
from functools import lru_cache
from pathlib import Path

from .cells import Cell
from .errors import UserError, one_line
from .layout import round_relpath

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
CELL_SCHEMA = SCHEMAS / "record.schema.yaml"
TRANSFER_SCHEMA = SCHEMAS / "transfer.schema.yaml"
ROOFS_SCHEMA = SCHEMAS / "roofs.schema.yaml"
ENVIRONMENT_SCHEMA = SCHEMAS / "environment.schema.yaml"
ROUND_SCHEMA = SCHEMAS / "round.schema.yaml"
SETTLE_SCHEMA = SCHEMAS / "settle.schema.yaml"
# Bounds on what a file from elsewhere may hold, so that reading it costs bounded time and
# memory. The largest record this pipeline writes (max_samples at its ceiling, five phases)
# is about 12 MB of JSON.
MAX_JSON_BYTES = 64 * 2**20
MAX_SAMPLES_CEILING = 100_000  # the config schema's maximum of measure.max_samples
# perf_counter_ns counts nanoseconds: a per-call time below that was never measured.
TIMER_RESOLUTION_S = 1e-9
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
        where = one_line(".".join(str(p) for p in error.absolute_path), 120) or "(top level)"
        messages.append(f"at {where}: {one_line(error.message)}")
    return messages


def validate_record(record: dict, source: str, schema_path: Path = CELL_SCHEMA, after: str = "") -> dict:
    errors = _errors(record, schema_path)
    if errors:
        raise MalformedRecord(f"{source}: malformed record {errors[0]}{after}")
    return record


def _sample_lists(record: dict):
    """(where, samples) of every timed region of a cell record."""
    yield "samples_s", record.get("samples_s") or []
    for name, phase in (record.get("phases") or {}).items():
        yield f"phases.{name}.samples_s", phase.get("samples_s") or []


def check_cell_content(record: dict, source: str, after: str = "") -> dict:
    """What a schema cannot say about a cell record: sample counts within the record's own
    max_samples, no sample below the timer's resolution, and no "ok" with a failed check
    (returned as an error record: a fast wrong answer is never a speedup)."""
    limit = min(int((record.get("settings") or {}).get("max_samples") or MAX_SAMPLES_CEILING), MAX_SAMPLES_CEILING)
    for where, samples in _sample_lists(record):
        if len(samples) > limit:
            raise MalformedRecord(f"{source}: {where} holds {len(samples)} samples, over its max_samples of {limit}{after}")
        low = min(samples, default=TIMER_RESOLUTION_S)
        if low < TIMER_RESOLUTION_S:
            raise MalformedRecord(
                f"{source}: {where} holds a sample of {low:.3g} s, below the timer's resolution of 1 ns{after}")
    check = record.get("check") or {}
    rel_err, tol = check.get("rel_err"), check.get("tolerance")
    failed = check.get("passed") is False or (rel_err is not None and tol is not None and rel_err > tol)
    if record["status"] == "ok" and failed:
        return {**record, "status": "error",
                "reason": f"the record says ok, but its result failed the correctness check "
                          f"(relative error {rel_err:.3g} over the tolerance {tol:.3g})"
                          if rel_err is not None and tol is not None else
                          "the record says ok, but its result failed the correctness check"}
    return record


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows (this pipeline stores it as null)")


def recovery_hint(path: str | os.PathLike) -> str:
    """The whole way back from a bad cell record of a results folder: delete it with its
    round's record, so that the next run measures that round's missing cells and nothing else."""
    path = Path(path)
    parts = path.parts
    if "raw" in parts and re.fullmatch(r"p\d+\.json", path.name):
        raw = Path(*parts[: len(parts) - parts[::-1].index("raw")])
        manifest = raw / round_relpath(int(path.stem[1:]))
        if path.parent.parent.parent == raw and manifest.exists():
            return f"; delete it and {manifest}, then run again: that round measures only what is missing"
    return "; delete it and run again to measure it anew"


def read_json(path: str | os.PathLike, hint: bool = True) -> dict:
    """Read a JSON object of bounded size; raise MalformedRecord naming the file and, for
    a cell record, the whole way back (`hint`)."""
    path = Path(path)
    after = recovery_hint(path) if hint else ""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise MalformedRecord(f"{path}: {size / 2**20:.0f} MiB, over the {MAX_JSON_BYTES // 2**20} MiB a record may hold{after}")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle, parse_constant=_refuse_constant)
    except MalformedRecord:
        raise
    except json.JSONDecodeError as error:
        raise MalformedRecord(f"{path}: not valid JSON ({error.msg} at line {error.lineno}){after}") from None
    except (ValueError, RecursionError) as error:  # NaN, Infinity, bad UTF-8, absurd nesting
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error).splitlines()[0][:200]
        raise MalformedRecord(f"{path}: not valid JSON ({reason}){after}") from None
    except OSError as error:
        raise MalformedRecord(f"{path}: cannot be read ({error.strerror})") from None
    if not isinstance(data, dict):
        raise MalformedRecord(f"{path}: malformed record: expected an object{after}")
    return data


def load_record(path: str | os.PathLike, schema_path: Path = CELL_SCHEMA) -> dict:
    """Read and validate one raw record; version 1 cell records become process 1 of 1."""
    record = read_json(path, hint=schema_path == CELL_SCHEMA)
    after = recovery_hint(path) if schema_path == CELL_SCHEMA else ""
    version = record.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise MalformedRecord(
            f"{path}: record format version {version!r} is not one this version reads "
            f"({', '.join(map(str, READABLE_VERSIONS))}); measure it again or use the matching offloadbench"
        )
    validate_record(record, str(path), schema_path, after)
    if schema_path != CELL_SCHEMA:
        return record
    record = check_cell_content(record, str(path), after)
    if version == 1:
        record = {**record, "process": {"round": 1, "rounds": 1, "format": "version 1: one process per cell"}}
    return record


def load_document(path: str | os.PathLike, schema_path: Path, what: str) -> dict:
    """Read and validate a machine-level file (environment.json, a round's record)."""
    data = read_json(path, hint=False)
    errors = _errors(data, schema_path)
    if errors:
        raise MalformedRecord(f"{path}: malformed {what} {errors[0]}")
    return data


def load_environment(path: str | os.PathLike) -> dict:
    return load_document(path, ENVIRONMENT_SCHEMA, "environment.json")


def load_round(path: str | os.PathLike) -> dict:
    return load_document(path, ROUND_SCHEMA, "round record")


def load_settle(path: str | os.PathLike) -> dict:
    return load_document(path, SETTLE_SCHEMA, "settle record")


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
