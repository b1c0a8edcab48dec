"""JSON documents of results, read and written safely: numbers that are no finite float or
64-bit integer, nesting past 32 levels and texts past their bounds are named by field
before any schema or analysis sees the document; writes are atomic."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from ..errors import key_path, one_line

MAX_JSON_DEPTH = 32
MAX_JSON_STRING = 65_536
MAX_JSON_KEY = 1000
MAX_JSON_INT = 2**63 - 1


def json_safe(value):
    """JSON has no inf or nan: store them as null so every reader can parse the file."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
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
    text = json.dumps(json_safe(data), indent=1, allow_nan=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


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
    return one_line(key_path(parts), 160) or "(top level)"


def _text_problem(text: str) -> str | None:
    if isinstance(text, _OutOfRange):
        return f"is {one_line(text, 40)}, not a finite number within 64 bits"
    if len(text) > MAX_JSON_STRING:
        return f"holds {len(text)} characters, over the {MAX_JSON_STRING} any text may hold"
    return None


def bounds_problem(data) -> str | None:
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
    stay text (`_OutOfRange`) for `bounds_problem` to name. Raises ValueError."""
    return json.loads(data.decode("utf-8"), parse_float=_parse_float, parse_int=_parse_int,
                      parse_constant=_OutOfRange)


