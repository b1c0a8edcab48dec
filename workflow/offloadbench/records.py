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

from .bundles import unpacked_from
from .cells import Cell
from .errors import UserError, one_line, shown
from .layout import round_relpath
from .reading import UnreadableFile, read_regular

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
# is about 12 MB of JSON; environment.json is a few KB, a round's record tens of KB.
MAX_JSON_BYTES = 64 * 2**20
MAX_ENVIRONMENT_BYTES = 2**20
MAX_ROUND_BYTES = 16 * 2**20  # a round's record, or settle.json (a list of cells)
# Bounds on any JSON document, whatever its schema says: nesting (every reader and the
# escaping walk recurse), the length of one string and of one key, and numbers that are
# finite floats or integers within 64 bits (1e400 parses as infinity, 10**400 as a huge int).
MAX_JSON_DEPTH = 32
MAX_JSON_STRING = 65_536
MAX_JSON_KEY = 1000
MAX_JSON_INT = 2**63 - 1
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
    _fit_text(record, CELL_SCHEMA)
    errors = _errors(record, CELL_SCHEMA)
    if errors:
        raise ValueError(f"bug: record of {cell.key} breaks the record schema: {errors[0]}")
    return record


def _fit_text(record: dict, schema_path: Path) -> None:
    """Cut, in place, every string of a record being written to its schema's maxLength (an
    error message from a library can be long): a reader elsewhere refuses longer ones."""
    for error in _validator(schema_path).iter_errors(record):
        if error.validator != "maxLength" or not error.absolute_path:
            continue
        *where, last = error.absolute_path
        node = record
        for part in where:
            node = node[part]
        node[last] = node[last][: error.validator_value - 1] + "…"


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


_COUNTED = {"maxLength": "characters", "maxItems": "items", "maxProperties": "keys"}


def _problem(error) -> str:
    """A schema error in words; a bound says the schema's limit by name (maxLength of 2000)."""
    if error.validator in _COUNTED:
        return (f"holds {len(error.instance)} {_COUNTED[error.validator]}, over the {error.validator} of "
                f"{error.validator_value} this field may hold")
    if error.validator in ("maximum", "exclusiveMaximum"):
        return f"{one_line(repr(error.instance), 40)} is over the {error.validator} of {error.validator_value:g}"
    return one_line(error.message)


def _errors(record: dict, schema_path: Path) -> list[str]:
    """The first schema error, as a list (empty when valid). Only the first: the schema puts
    each bound before the items it bounds, so a list of millions is refused at its length,
    not after all its items are checked."""
    for error in _validator(schema_path).iter_errors(_json_safe(record)):
        where = one_line(".".join(str(p) for p in error.absolute_path), 120) or "(top level)"
        return [f"at {where}: {_problem(error)}"]
    return []


def validate_record(record: dict, source: str, schema_path: Path = CELL_SCHEMA, after: str = "") -> dict:
    errors = _errors(record, schema_path)
    if errors:
        raise MalformedRecord(f"{shown(source)}: malformed record {errors[0]}{after}")
    return record


def _sample_lists(record: dict):
    """(where, samples) of every timed region of a cell record."""
    yield "samples_s", record.get("samples_s") or []
    for name, phase in (record.get("phases") or {}).items():
        yield f"phases.{name}.samples_s", phase.get("samples_s") or []


def samples_held(record: dict) -> int:
    """Every sample a validated record holds: its regions and warm-up, or its points (copy
    sweeps, roofs); what a source's sample budget counts."""
    lists = [samples for _, samples in _sample_lists(record)]
    lists.append((record.get("warmup") or {}).get("samples_s") or [])
    lists += [point.get("samples_s") or [] for point in record.get("points") or []]
    return sum(map(len, lists))


def check_cell_content(record: dict, source: str, after: str = "") -> dict:
    """What a schema cannot say about a cell record: sample counts within the record's own
    max_samples, no sample below the timer's resolution, and no "ok" with a failed check
    (returned as an error record: a fast wrong answer is never a speedup)."""
    limit = min(int((record.get("settings") or {}).get("max_samples") or MAX_SAMPLES_CEILING), MAX_SAMPLES_CEILING)
    for where, samples in _sample_lists(record):
        if len(samples) > limit:
            raise MalformedRecord(
                f"{shown(source)}: {where} holds {len(samples)} samples, over its max_samples of {limit}{after}")
        low = min(samples, default=TIMER_RESOLUTION_S)
        if low < TIMER_RESOLUTION_S:
            raise MalformedRecord(
                f"{shown(source)}: {where} holds a sample of {low:.3g} s, below the timer's resolution of 1 ns{after}")
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


class _OutOfRange(str):
    """A number JSON spells that is no finite float or 64-bit integer, kept as its text
    until the walk below names the field it is in."""


def _parse_float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _OutOfRange(text)


def _parse_int(text: str):
    if len(text) > 20:  # int() of thousands of digits is slow, and past 64 bits anyway
        return _OutOfRange(text if len(text) <= 24 else text[:24] + "…")
    value = int(text)
    return value if -MAX_JSON_INT - 1 <= value <= MAX_JSON_INT else _OutOfRange(text)


def _field(parts: list) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return one_line(text, 160) or "(top level)"


def _text_problem(text: str) -> str | None:
    if isinstance(text, _OutOfRange):
        return f"is {one_line(text, 40)}, not a finite number within 64 bits"
    if len(text) > MAX_JSON_STRING:
        return f"holds {len(text)} characters, over the {MAX_JSON_STRING} any text may hold"
    return None


def _bounds_problem(data) -> str | None:
    """The first place where a parsed document passes the bounds any JSON from elsewhere
    keeps (depth, string and key length, finite numbers), walked without recursion; plain
    numbers (most of a record: its samples) are passed over in place."""
    stack = [(data, ())] if isinstance(data, (dict, list)) else []
    while stack:
        value, where = stack.pop()
        if len(where) >= MAX_JSON_DEPTH:
            return f"{_field(where[:MAX_JSON_DEPTH])} nests deeper than the {MAX_JSON_DEPTH} levels a record may have"
        mapping, inner = isinstance(value, dict), []
        for key, item in value.items() if mapping else enumerate(value):
            if mapping and len(key) > MAX_JSON_KEY:
                return f"{_field(where)} has a key of {len(key)} characters, over the {MAX_JSON_KEY} a key may hold"
            if isinstance(item, (dict, list)):
                inner.append((item, (*where, key)))
            elif isinstance(item, str) and (problem := _text_problem(item)):
                return f"{_field([*where, key])} {problem}"
        stack.extend(reversed(inner))  # the first problem in the document's order
    return None


def parse_json(data: bytes) -> object:
    """JSON text as Python values: NaN and Infinity are no JSON, and numbers out of range
    stay text (`_OutOfRange`) for `_bounds_problem` to name. Raises ValueError."""
    return json.loads(data.decode("utf-8"), parse_float=_parse_float, parse_int=_parse_int,
                      parse_constant=_OutOfRange)


def recovery_hint(path: str | os.PathLike) -> str:
    """The whole way back from a bad cell record: of a results folder, delete it with its
    round's record, so that the next run measures that round's missing cells and nothing
    else; of a bundle, make the bundle again where it was measured."""
    path = Path(path)
    parts = path.parts
    if "raw" not in parts:
        return "; delete it and run again to measure it anew"
    raw = Path(*parts[: len(parts) - parts[::-1].index("raw")])
    bundle = unpacked_from(raw.parent)
    if bundle is not None:
        return (f"; it came from the bundle {shown(bundle)}, which is damaged: make the bundle again where it "
                "was measured (make bundle) and bring it here")
    if re.fullmatch(r"p\d+\.json", path.name):
        manifest = raw / round_relpath(int(path.stem[1:]))
        if path.parent.parent.parent == raw and manifest.exists():
            return f"; delete it and {manifest}, then run again: that round measures only what is missing"
    return "; delete it and run again to measure it anew"


def read_json(path: str | os.PathLike, hint: bool = True, limit: int = MAX_JSON_BYTES) -> dict:
    """Read a JSON object of bounded size, from a regular file only (reading.read_regular),
    within the bounds of `_bounds_problem`; raise MalformedRecord naming the file and, for
    a cell record, the whole way back (`hint`)."""
    path = Path(path)
    after = recovery_hint(path) if hint else ""
    try:
        data = parse_json(read_regular(path, limit, "a record"))
    except UnreadableFile as error:
        raise MalformedRecord(f"{error}{after}") from None
    except json.JSONDecodeError as error:
        raise MalformedRecord(f"{shown(path)}: not valid JSON ({error.msg} at line {error.lineno}){after}") from None
    except (ValueError, RecursionError) as error:  # bad UTF-8, absurd nesting
        reason = "nested too deeply" if isinstance(error, RecursionError) else one_line(error, 200)
        raise MalformedRecord(f"{shown(path)}: not valid JSON ({reason}){after}") from None
    problem = _bounds_problem(data)
    if problem:
        raise MalformedRecord(f"{shown(path)}: {problem}{after}")
    if not isinstance(data, dict):
        raise MalformedRecord(f"{shown(path)}: malformed record: expected an object{after}")
    return data


def load_record(path: str | os.PathLike, schema_path: Path = CELL_SCHEMA) -> dict:
    """Read and validate one raw record; version 1 cell records become process 1 of 1."""
    record = read_json(path, hint=schema_path == CELL_SCHEMA)
    after = recovery_hint(path) if schema_path == CELL_SCHEMA else ""
    version = record.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise MalformedRecord(
            f"{shown(path)}: record format version {one_line(repr(version), 40)} is not one this version reads "
            f"({', '.join(map(str, READABLE_VERSIONS))}); measure it again or use the matching offloadbench"
        )
    validate_record(record, str(path), schema_path, after)
    if schema_path != CELL_SCHEMA:
        return record
    record = check_cell_content(record, str(path), after)
    if version == 1:
        record = {**record, "process": {"round": 1, "rounds": 1, "format": "version 1: one process per cell"}}
    return record


def load_document(path: str | os.PathLike, schema_path: Path, what: str, limit: int = MAX_JSON_BYTES) -> dict:
    """Read and validate a machine-level file (environment.json, a round's record)."""
    data = read_json(path, hint=False, limit=limit)
    errors = _errors(data, schema_path)
    if errors:
        raise MalformedRecord(f"{shown(path)}: malformed {what} {errors[0]}")
    return data


def load_environment(path: str | os.PathLike) -> dict:
    return load_document(path, ENVIRONMENT_SCHEMA, "environment.json", MAX_ENVIRONMENT_BYTES)


def load_round(path: str | os.PathLike) -> dict:
    return load_document(path, ROUND_SCHEMA, "round record", MAX_ROUND_BYTES)


def load_settle(path: str | os.PathLike) -> dict:
    return load_document(path, SETTLE_SCHEMA, "settle record", MAX_ROUND_BYTES)


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
        raise MalformedRecord(f"{shown(path)}: record is for {'/'.join(expected)}, not for this file name")
    return cell
