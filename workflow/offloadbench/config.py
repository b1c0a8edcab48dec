"""Config validation: the schema's defaults filled in, and one-line errors naming the key."""

from __future__ import annotations

import copy
import difflib
from pathlib import Path

import jsonschema
import yaml

from .catalogue import SPECS
from .errors import UserError, one_line
from .kernels import KernelError, KernelInfo, read_kernel_files
from .machine import machine_label

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


class ConfigError(UserError):
    """An invalid config; the message is one line that names the key."""


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _schema_of(key: str, schema: dict) -> dict:
    """The sub-schema of an object's key: named in `properties`, or the one for any key
    (`additionalProperties`, e.g. each node type under `cluster:`)."""
    named = schema.get("properties", {})
    if key in named:
        return named[key]
    other = schema.get("additionalProperties")
    return other if isinstance(other, dict) else {}


def fill_defaults(data: dict, schema: dict) -> dict:
    """Fill missing keys from the schema's defaults, recursing into objects."""
    for key, sub in schema.get("properties", {}).items():
        if key not in data and "default" in sub:
            data[key] = copy.deepcopy(sub["default"])
    for key, value in data.items():
        sub = _schema_of(key, schema)
        if isinstance(value, dict) and sub.get("type") == "object":
            fill_defaults(value, sub)
    return data


def _coerce_scalar(value: str, schema: dict):
    """A string as the schema's scalar type, when it reads as one (else unchanged)."""
    kinds = [schema.get("type")] + [option.get("type") for option in schema.get("oneOf", [])]
    for kind in kinds:
        try:
            if kind == "integer" and value.strip().lstrip("-").isdigit():
                return int(value)
            if kind == "number":
                return float(value)
            if kind == "boolean" and value.lower() in ("true", "false"):
                return value.lower() == "true"
        except ValueError:
            continue
    return value


def coerce_strings(data, schema: dict):
    """Turn strings into the numbers and booleans the schema asks for.

    `snakemake --config grid='{"sizes": [256, 512]}'` parses nested values with YAML's base
    loader, which keeps every scalar a string; this makes such overrides work."""
    if isinstance(data, dict):
        return {key: coerce_strings(value, _schema_of(key, schema)) for key, value in data.items()}
    if isinstance(data, list):
        items = schema.get("items", {})
        return [coerce_strings(value, items) for value in data]
    if isinstance(data, str):
        return _coerce_scalar(data, schema)
    return data


def key_path(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def describe_error(error: jsonschema.ValidationError) -> str:
    return one_line(_describe_error(error), 500)


def _describe_error(error: jsonschema.ValidationError) -> str:
    where = key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"config key {where}: unknown key {', '.join(map(repr, unknown))} (allowed: {allowed})"
    if error.validator in ("oneOf", "anyOf"):
        expected = error.schema.get("x-expected") or error.schema.get("description", "a valid value")
        return f"config key {where}: {error.instance!r} is not {expected}"
    return f"config key {where}: {error.message}"


def validate(config: dict, schema: dict | None = None, *, read_kernels: bool = True) -> dict:
    """Return a validated copy of `config` with defaults filled in; raise ConfigError.

    `read_kernels=False` for a config from elsewhere: its kernel files are paths on another
    machine, never read here, so the checks that need them are left out."""
    schema = schema or load_schema()
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ConfigError("config: expected a mapping of keys to values")
    data = fill_defaults(coerce_strings(copy.deepcopy(config), schema), schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise ConfigError(describe_error(errors[0]))
    measure = data["measure"]
    if measure["max_samples"] < measure["min_samples"]:
        raise ConfigError(
            f"config key measure.max_samples: {measure['max_samples']} is below "
            f"measure.min_samples ({measure['min_samples']})"
        )
    if not read_kernels:
        return data
    kernels = kernel_infos(data)
    _check_op_names(data["grid"], kernels)
    _check_compiled(data["grid"], kernels)
    _check_sizes(data["grid"], kernels)
    return data


MAX_FOREIGN_CONFIG_BYTES = 2**20


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases: a few hundred bytes of nested aliases expand into gigabytes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} (aliases are refused here)",
                                              event.start_mark)
        return super().compose_node(parent, index)


def load_foreign_config(path: Path, what: str) -> dict:
    """A config written on another machine (a bundle's config.yaml), bounded, without
    aliases or tags, and validated; every error is one line naming the file as `what`."""
    size = path.stat().st_size
    if size > MAX_FOREIGN_CONFIG_BYTES:
        raise ConfigError(f"{path} ({what}): {size} bytes, over the {MAX_FOREIGN_CONFIG_BYTES} a config may hold")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_NoAliasLoader)
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as error:
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path} ({what}): not a config this pipeline reads ({problem}{at})") from None
    try:
        return validate(data, read_kernels=False)
    except ConfigError as error:
        raise ConfigError(f"{path} ({what}): {error}") from None


def kernel_infos(config: dict) -> dict[str, KernelInfo]:
    """The user kernels of a validated config, read from their files without running them."""
    try:
        return read_kernel_files(config.get("kernels") or [], SPECS)
    except KernelError as error:
        raise ConfigError(str(error)) from None


def _unknown_op(where: str, name: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else f" (ops: {', '.join(known)})"
    return ConfigError(f"config key {where}: unknown op {name!r}: neither in the catalogue nor a kernel of the "
                       f"`kernels` files{hint}")


def _check_op_names(grid: dict, kernels: dict[str, KernelInfo]) -> None:
    known = [*SPECS, *kernels]
    for i, op in enumerate(grid["ops"]):
        if op not in known:
            raise _unknown_op(f"grid.ops[{i}]", op, known)
    for op in grid["op_max_size"]:
        if op not in known:
            raise _unknown_op(f"grid.op_max_size.{op}", op, known)


def _check_compiled(grid: dict, kernels: dict[str, KernelInfo]) -> None:
    """grid.compiled only narrows the grid: a value outside the grid's own lists measures
    nothing (so a command-line override of grid.ops keeps the file's narrowing usable), but
    an op that does not exist at all is a typo."""
    known = [*SPECS, *kernels]
    for i, op in enumerate(grid["compiled"].get("ops") or []):
        if op not in known:
            raise _unknown_op(f"grid.compiled.ops[{i}]", op, known)


def _check_sizes(grid: dict, kernels: dict[str, KernelInfo]) -> None:
    """A size that makes no sense for an op (a 5-point stencil on a 2×2 grid) is refused."""
    for op in grid["ops"]:
        for i, size in enumerate(grid["sizes"]):
            if op in SPECS:
                problem = SPECS[op].too_small(size)
            else:
                info = kernels[op]
                problem = (f"kernel {op} needs n ≥ {info.min_size} (its min_size)"
                           if size < info.min_size else None)
            if problem:
                raise ConfigError(f"config key grid.sizes[{i}]: {size} is too small: {problem}")


def resolve_machine(config: dict) -> str:
    label = config["machine"]
    return machine_label() if label == "auto" else label
