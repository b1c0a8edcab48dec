"""Records on disk: the one builder of a cell's record, and every reader of the files a
run writes (cell records, environment.json, rounds' and the settling's records, copy
sweeps and roofs), each file bounded, checked against its schema and turned into its
typed object (types.py) once, older versions included.

A cell record holds one cell measured in one process (one round of the run). Version 2
records (measured alone, before bouts) and version 1 records (one process per cell,
`raw/<op>/<stem>.json`) stay readable: the version shims live here and in types.py.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from ..bundles import unpacked_from
from ..cells import Cell
from ..errors import one_line, shown
from ..layout import ROUNDS_DIR, round_relpath
from ..reading import UnreadableFile, read_regular
from ..verdicts import MAX_CONFIDENCE, Judging
from .documents import bounds_problem, parse_json
from .schemas import (
    CELL_SCHEMA,
    ENVIRONMENT_SCHEMA,
    ROUND_SCHEMA,
    SETTLE_SCHEMA,
    MalformedRecord,
    fit_text,
    validate_record,
)
from .types import CellRecord, Check, DeviceRecord, Environment, RoundRecord, SettleRecord

SCHEMA_VERSION = 4  # of a cell's record; 3 added the bouts (each sample's cycle and page faults), 4 typed flags
READABLE_VERSIONS = (1, 2, 3, 4)
DOCUMENT_VERSION = 2  # of the other files a run writes (environment.json, copy sweeps, roofs)
# Bounds on what a file from elsewhere may hold, so that reading it costs bounded time and
# memory. The largest record this pipeline writes (max_samples at its ceiling, five phases)
# is about 12 MB of JSON; environment.json is a few KB, a round's record tens of KB.
MAX_JSON_BYTES = 64 * 2**20
MAX_ENVIRONMENT_BYTES = 2**20
MAX_ROUND_BYTES = 16 * 2**20  # a round's record, or settle.json (a list of cells)
MAX_SAMPLES_CEILING = 100_000  # the config schema's maximum of measure.max_samples
# perf_counter_ns counts nanoseconds: a per-call time below that was never measured.
TIMER_RESOLUTION_S = 1e-9
FAILED = ("oom", "error", "timeout")
# Measure settings that change what a record holds; the others (processes, timeout_s) do not.
MEASUREMENT_KEYS = (
    "target_rel_ci", "budget_s", "warmup_budget_s", "min_samples", "min_cycles", "min_sampling_s",
    "max_samples", "min_sample_s", "random_state", "check_rows", "pinned_memory", "allow_tf32", "turn_s", "pairing",
    "allocator",
)


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
    errors = fit_text(record, CELL_SCHEMA)
    if errors:
        raise ValueError(f"bug: record of {cell.key} breaks the record schema: {errors[0]}")
    return record


def settings_differ(recorded: dict, current: dict) -> list[str]:
    """Measure settings under which a record was taken that differ from the current ones."""
    return [key for key in MEASUREMENT_KEYS if key in current and recorded.get(key) != current[key]]


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
    if record["status"] == "ok" and Check(rel_err, tol, check.get("passed")).failed:
        return {**record, "status": "error",
                "reason": f"the record says ok, but its result failed the correctness check "
                          f"(relative error {rel_err:.3g} over the tolerance {tol:.3g})"
                          if rel_err is not None and tol is not None else
                          "the record says ok, but its result failed the correctness check"}
    return record


def recovery_hint(path: str | os.PathLike) -> str:
    """The whole way back from a bad cell record: of a results folder, delete it with its
    round's record, so that the next run measures that round's missing cells and nothing
    else; of a bundle, make the bundle again where it was measured."""
    path = Path(path)
    parts = path.parts
    if "raw" in parts:
        raw = Path(*parts[: len(parts) - parts[::-1].index("raw")])
        bundle = unpacked_from(raw.parent)
        if bundle is not None:
            return (f"; it came from the bundle {shown(bundle)}, which is damaged: make the bundle again where it "
                    "was measured (make bundle) and bring it here")
        if re.fullmatch(r"p\d+\.json", path.name) and path.parent.parent.parent == raw:
            k = int(path.stem[1:])
            for manifest in (raw / round_relpath(k), raw / ROUNDS_DIR / f"p{k}.json"):  # the name before rounds
                if manifest.exists():
                    return f"; delete it and {manifest}, then run again: that round measures only what is missing"
    return "; delete it and run again to measure it anew"


def read_json(path: str | os.PathLike, hint: bool = True, limit: int = MAX_JSON_BYTES) -> dict:
    """Read a JSON object of bounded size, from a regular file only (reading.read_regular),
    within the bounds of `documents.bounds_problem`; raise MalformedRecord naming the file and, for
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
    problem = bounds_problem(data)
    if problem:
        raise MalformedRecord(f"{shown(path)}: {problem}{after}")
    if not isinstance(data, dict):
        raise MalformedRecord(f"{shown(path)}: malformed record: expected an object{after}")
    return data


def _checked(path: str | os.PathLike, schema_path: Path, hint: bool) -> dict:
    """A record's document, read within its bounds, of a version this one reads, valid."""
    record = read_json(path, hint=hint)
    after = recovery_hint(path) if hint else ""
    version = record.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise MalformedRecord(
            f"{shown(path)}: record format version {one_line(repr(version), 40)} is not one this version reads "
            f"({', '.join(map(str, READABLE_VERSIONS))}); measure it again or use the matching offloadbench"
        )
    return validate_record(record, str(path), schema_path, after)


def load_record(path: str | os.PathLike) -> CellRecord:
    """Read one cell record, of any version this one reads, as its typed object."""
    record = check_cell_content(_checked(path, CELL_SCHEMA, hint=True), str(path), recovery_hint(path))
    return CellRecord.from_json(record, str(path), samples_held(record))


def load_device_record(path: str | os.PathLike, schema_path: Path) -> DeviceRecord:
    """Read a copy sweep's or the roofs' record of one device, stored under its name."""
    record = _checked(path, schema_path, hint=False)
    if not str(path).endswith(f"/{record['device']}.json"):
        raise MalformedRecord(f"{path}: record is for device {record['device']}, not for this file name")
    return DeviceRecord.from_json(record)


def device_samples(path: str | os.PathLike, schema_path: Path) -> int:
    """The samples a copy sweep's or the roofs' record holds (checked as it is read)."""
    return samples_held(_checked(path, schema_path, hint=False))


def load_document(path: str | os.PathLike, schema_path: Path, what: str, limit: int = MAX_JSON_BYTES) -> dict:
    """Read and validate a machine-level file (environment.json, a round's record)."""
    return validate_record(read_json(path, hint=False, limit=limit), str(path), schema_path, what=what)


def load_judging(path: str | os.PathLike) -> Judging:
    """judging.json beside a machine's tables: the policy they were judged with."""
    data = read_json(path, hint=False, limit=MAX_ENVIRONMENT_BYTES)
    min_effect, confidence = data.get("min_effect"), data.get("confidence")
    number = lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)  # JSON's true is no 1
    if not (number(min_effect) and 0 < min_effect <= 1):
        raise MalformedRecord(f"{shown(path)}: malformed judging policy: min_effect must be a number in (0, 1]")
    if not (number(confidence) and 0.5 < confidence <= MAX_CONFIDENCE):
        raise MalformedRecord(f"{shown(path)}: malformed judging policy: confidence must be a number in "
                              f"(0.5, {MAX_CONFIDENCE:g}]")
    method = data.get("method", {})  # older tables recorded none
    if not (isinstance(method, dict) and len(method) <= 50
            and all(isinstance(k, str) and len(k) <= 100 and number(v) and math.isfinite(v) for k, v in method.items())):
        raise MalformedRecord(f"{shown(path)}: malformed judging policy: method must map at most 50 names to numbers")
    return Judging(float(min_effect), float(confidence), tuple(sorted(method.items())))


def load_environment(path: str | os.PathLike) -> Environment:
    return Environment.from_json(load_document(path, ENVIRONMENT_SCHEMA, "environment.json", MAX_ENVIRONMENT_BYTES))


def load_round(path: str | os.PathLike) -> RoundRecord:
    return RoundRecord.from_json(load_document(path, ROUND_SCHEMA, "round record", MAX_ROUND_BYTES))


def load_settle(path: str | os.PathLike) -> SettleRecord:
    return SettleRecord.from_json(load_document(path, SETTLE_SCHEMA, "settle record", MAX_ROUND_BYTES))


def check_record_path(record: CellRecord) -> Cell:
    """The cell a record holds, refusing a record stored under another cell's name."""
    path, cell = Path(record.source), record.cell
    if record.version == 1:
        where = (path.parent.name, path.stem)
        expected = (cell.op, cell.stem)
    else:
        where = (path.parent.parent.name, path.parent.name, path.stem)
        expected = (cell.op, cell.stem, f"p{record.round}")
    if where != expected:
        raise MalformedRecord(f"{shown(path)}: record is for {'/'.join(expected)}, not for this file name")
    return cell
