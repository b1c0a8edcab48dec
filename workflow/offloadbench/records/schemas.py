"""The schemas of every file a run writes and reads back, and what a refusal says: the
first error only, with its field and, for a bound, the bound's name and value."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import UserError, one_line, shown
from .documents import json_safe

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
CELL_SCHEMA = SCHEMAS / "record.schema.yaml"
TRANSFER_SCHEMA = SCHEMAS / "transfer.schema.yaml"
ROOFS_SCHEMA = SCHEMAS / "roofs.schema.yaml"
ENVIRONMENT_SCHEMA = SCHEMAS / "environment.schema.yaml"
ROUND_SCHEMA = SCHEMAS / "round.schema.yaml"
SETTLE_SCHEMA = SCHEMAS / "settle.schema.yaml"


class MalformedRecord(UserError):
    """A raw record that cannot be used; the message names the file and the problem."""


@lru_cache(maxsize=8)
def _validator(schema_path: Path):
    import jsonschema
    import yaml

    with open(schema_path, encoding="utf-8") as handle:
        schema = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 8x faster
    return jsonschema.Draft202012Validator(schema)


def warm_validators(*schema_paths: Path) -> None:
    """Build the validators of these schemas now (a fifth of a second each): a worker does it
    once before it forks its cells' processes, which then check their records at once."""
    for path in schema_paths:
        errors_of({}, path)


_COUNTED = {"maxLength": "characters", "maxItems": "items", "maxProperties": "keys"}


def _problem(error) -> str:
    """A schema error in words, after its field; a bound says the schema's limit by name
    (maxLength of 2000)."""
    where = one_line(".".join(str(p) for p in error.absolute_path), 120) or "(top level)"
    return f"at {where}: {_what(error)}"


def _what(error) -> str:
    if error.validator in _COUNTED:
        return (f"holds {len(error.instance)} {_COUNTED[error.validator]}, over the {error.validator} of "
                f"{error.validator_value} this field may hold")
    if error.validator in ("maximum", "exclusiveMaximum"):
        return f"{one_line(repr(error.instance), 40)} is over the {error.validator} of {error.validator_value:g}"
    return one_line(error.message)


def errors_of(record: dict, schema_path: Path) -> list[str]:
    """The first schema error, as a list (empty when valid). Only the first: the schema puts
    each bound before the items it bounds, so a list of millions is refused at its length,
    not after all its items are checked."""
    for error in _validator(schema_path).iter_errors(json_safe(record)):
        return [_problem(error)]
    return []


def validate_record(record: dict, source: str, schema_path: Path = CELL_SCHEMA, after: str = "",
                    what: str = "record") -> dict:
    """`record` where its schema takes it; else MalformedRecord naming `source`, the kind of
    file (`what`) and the first error, then `after` (the way back from it)."""
    errors = errors_of(record, schema_path)
    if errors:
        raise MalformedRecord(f"{shown(source)}: malformed {what} {errors[0]}{after}")
    return record


def fit_text(record: dict, schema_path: Path) -> list[str]:
    """Cut, in place, every string of a record being written to its schema's maxLength (an
    error message from a library can be long): a reader elsewhere refuses longer ones. In
    the same pass over the record, its first other schema error, as `errors_of` gives it."""
    others = []
    for error in _validator(schema_path).iter_errors(json_safe(record)):
        if error.validator != "maxLength" or not error.absolute_path:
            if not others:
                others.append(_problem(error))
            continue
        *where, last = error.absolute_path
        node = record
        for part in where:
            node = node[part]
        node[last] = node[last][: error.validator_value - 1] + "…"
    return others


