"""Config validation: the schema's defaults filled in, and one-line errors naming the key."""

from __future__ import annotations

import copy
import difflib
import math
from collections.abc import Collection
from pathlib import Path

import jsonschema
import yaml

from .catalogue import SPECS
from .errors import UserError, key_path, one_line
from .kernels import KernelError, KernelInfo, read_kernel_files
from .machine import machine_label
from .reading import UnreadableFile, read_regular

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


class ConfigError(UserError):
    """An invalid config; the message is one line that names the key."""


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 8x faster


def _schema_of(key: str, schema: dict) -> dict:
    """The sub-schema of an object's key: named in `properties`, or the one for any key
    (`additionalProperties`, e.g. each node type under `cluster:`); empty for a key the
    schema does not know (the schema's check names it)."""
    return _mapping(schema.get("properties", {}).get(key, schema.get("additionalProperties")))


def _mapping(value) -> dict:
    """`value` where it is a mapping, else an empty one: what a step that runs before the
    schema's check reads of a value that may hold anything a user wrote."""
    return value if isinstance(value, dict) else {}


def fill_defaults(data: dict, schema: dict) -> dict:
    """Fill missing keys from the schema's defaults, recursing into objects. A value of
    another type than the schema's is left as it is, for the schema's check to name."""
    for key, sub in schema.get("properties", {}).items():
        if key not in data and isinstance(sub, dict) and "default" in sub:
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
        items = _mapping(schema.get("items"))
        return [coerce_strings(value, items) for value in data]
    if isinstance(data, str):
        return _coerce_scalar(data, schema)
    return data


def describe_error(error: jsonschema.ValidationError) -> str:
    where = key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = ", ".join(sorted(map(str, error.schema.get("properties", {}))))
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})), key=repr)
        return f"config key {where}: unknown key {', '.join(map(repr, unknown))} (allowed: {allowed})"
    if error.validator in ("oneOf", "anyOf"):
        expected = error.schema.get("x-expected") or error.schema.get("description", "a valid value")
        return f"config key {where}: {error.instance!r} is not {expected}"
    return f"config key {where}: {error.message}"


def validate(config: dict, schema: dict | None = None, *, read_kernels: bool = True,
             inherited: Collection[str] = (), notes: list[str] | None = None) -> dict:
    """Return a validated copy of `config` with defaults filled in; raise ConfigError.

    `read_kernels=False` for a config from elsewhere: its kernel files are paths on another
    machine, never read here, so the checks that need them are left out. `inherited` names
    the lists that came from config/config.yaml rather than from the user (`inherited_lists`,
    `narrow_inherited`); what that changes is said in `notes`, one line each."""
    schema = schema or load_schema()
    notes = [] if notes is None else notes
    config = {} if config is None else config
    if not isinstance(config, dict):
        raise ConfigError("config: expected a mapping of keys to values")
    _check_keys(config)
    data = copy.deepcopy(config)
    notes.extend(_renamed_keys(data))
    data = fill_defaults(coerce_strings(data, schema), schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise ConfigError(one_line(describe_error(errors[0]), 500))
    _check_finite(data)
    measure = data["measure"]
    if measure["max_samples"] < measure["min_samples"]:
        raise ConfigError(
            f"config key measure.max_samples: {measure['max_samples']} is below "
            f"measure.min_samples ({measure['min_samples']})"
        )
    if not read_kernels:
        return data
    kernels = kernel_infos(data)
    notes.extend(narrow_inherited(data["grid"], inherited, [*SPECS, *kernels]))
    _check_op_names(data["grid"], kernels)
    _check_sizes(data["grid"], kernels)
    return data


RENAMED = {("analysis", "seed"): "random_state", ("measure", "seed"): "random_state"}  # old name -> new


def _renamed_keys(data: dict) -> list[str]:
    """Keys of earlier versions under their new names, in place; one note per key moved ("seed"
    now names the seed's claims only)."""
    notes = []
    for (section, old), new in RENAMED.items():
        values = data.get(section)
        if isinstance(values, dict) and old in values and new not in values:
            values[new] = values.pop(old)
            notes.append(f"config key {section}.{old} is now {section}.{new}; read as that")
    return notes


def _entries(data, parts: tuple = ()):
    """(mapping or list, path, key, value) of every entry below `data`, depth first."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        yield data, parts, key, value
        yield from _entries(value, (*parts, key))


def _check_keys(data) -> None:
    """Every key of every mapping is a name: YAML reads `1:`, `true:` or `null:` as a number,
    a boolean or None, which no check of the schema sees (its key patterns test text only)."""
    for container, parts, key, _ in _entries(data):
        if isinstance(container, dict) and not isinstance(key, str):
            raise ConfigError(one_line(f"config key {key_path(parts)}: the key {key!r} is not a name "
                                       f"(write it in quotes: '{key}')"))


def _check_finite(data) -> None:
    """No value is nan or infinite (YAML's .nan and .inf, or `--config` text such as 1e999):
    every limit of the schema lets them through."""
    for _, parts, key, value in _entries(data):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"config key {key_path((*parts, key))}: {value!r} is not a finite number")


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
    try:
        data = yaml.load(read_regular(path, MAX_FOREIGN_CONFIG_BYTES, "a config").decode("utf-8"), Loader=_NoAliasLoader)
    except UnreadableFile as error:
        raise ConfigError(f"{error} ({what})") from None
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


def _check_op_names(grid: dict, kernels: dict[str, KernelInfo]) -> None:
    """Every op the grid names is in the catalogue or a kernel. grid.compiled only narrows
    the grid: a value outside the grid's own lists measures nothing (so a command-line
    override of grid.ops keeps the file's narrowing usable), but an op that does not exist
    at all is a typo."""
    known = [*SPECS, *kernels]
    named = [*((f"grid.ops[{i}]", op) for i, op in enumerate(grid["ops"])),
             *((f"grid.op_max_size.{op}", op) for op in grid["op_max_size"]),
             *((f"grid.compiled.ops[{i}]", op) for i, op in enumerate(grid["compiled"].get("ops") or []))]
    for where, name in named:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f" (ops: {', '.join(known)})"
            raise ConfigError(f"config key {where}: unknown op {name!r}: neither in the catalogue nor a kernel of "
                              f"the `kernels` files{hint}")


COMPILED_LISTS = ("ops", "devices", "sizes", "threads")  # each narrows the grid's list of that name
DEFAULT_CONFIG = "config/config.yaml"


def inherited_lists(config: dict, written: dict | None) -> set[str]:
    """The lists a run takes from config/config.yaml (the Snakefile's configfile) because the
    user's own config files and --config set none of them, as `grid.ops` and
    `grid.compiled.<list>`: Snakemake merges the user's settings into that file's, key by
    key. `written` is what the user gave (Snakemake's config_settings.overwrite_config)."""
    # Runs before the schema's check: either side may hold any value of any type (`grid:
    # matmul`), and a section that is no mapping inherits nothing; the check names it next.
    grid = _mapping(_mapping(written).get("grid"))
    ours = _mapping(_mapping(config).get("grid"))
    found = {f"grid.{key}" for key in ("ops", "modes") if key in ours and key not in grid}
    if "compiled" in grid and not isinstance(grid["compiled"], dict):
        return found  # the user replaced the whole section (null: all of the grid)
    mine = _mapping(grid.get("compiled"))
    compiled = _mapping(ours.get("compiled"))
    return found | {f"grid.compiled.{key}" for key in COMPILED_LISTS if key in compiled and key not in mine}


def narrow_inherited(grid: dict, inherited: Collection[str], known_ops: Collection[str]) -> list[str]:
    """Lists inherited from config/config.yaml never fail on names the user did not write:
    an inherited `grid.ops` leaves out what is no op with the user's kernels, and an
    inherited `grid.compiled` list narrows only the cells the user's grid has (a name
    outside the grid's own list is left out). A list left empty stands for all of the grid
    where the user asked for the compiled mode, and for none where the modes are inherited
    too: the default file's compiled ops were its own choice. Returns one note per change;
    names the user wrote are checked as they are."""
    notes = []
    if "grid.ops" in inherited:
        unknown = [op for op in grid["ops"] if op not in known_ops]
        if unknown and len(unknown) == len(grid["ops"]):
            raise ConfigError(f"config key grid.ops from {DEFAULT_CONFIG}: none of its ops is an op with your "
                              f"`kernels` ({', '.join(unknown)}); set grid.ops in your config")
        if unknown:
            grid["ops"] = [op for op in grid["ops"] if op not in unknown]
            notes.append(f"config key grid.ops from {DEFAULT_CONFIG}: {', '.join(unknown)} left out, no op with "
                         "your `kernels`")
    compiled = grid.get("compiled") or {}
    for key in COMPILED_LISTS:
        values = compiled.get(key)
        if f"grid.compiled.{key}" not in inherited or not values:
            continue
        kept = [v for v in values if str(v) in {str(mine) for mine in grid[key]}]
        dropped = [str(v) for v in values if v not in kept]
        if not dropped:
            continue
        asked = "grid.modes" not in inherited  # the user asked for compiled cells themselves
        compiled[key] = kept or (None if asked else [])
        if kept:
            said = f"grid, left out (compiled: {', '.join(map(str, kept))})"
        elif asked:
            said = f"grid's {key}, so all of them are compiled; set grid.compiled in your config to choose"
        else:
            said = f"grid's {key}, so none is compiled; set grid.modes and grid.compiled in your config to compile"
        notes.append(f"config key grid.compiled.{key} from {DEFAULT_CONFIG}: {', '.join(dropped)} not in your {said}")
    return notes


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


def measured_grid(config: dict) -> dict:
    """The grid section as the measuring jobs and the analysis expand it: with the
    self-comparisons that analysis.controls asks for (grid.expand adds their twins)."""
    return {**config["grid"], "controls": config["analysis"]["controls"]}


def resolve_machine(config: dict) -> str:
    label = config["machine"]
    return machine_label() if label == "auto" else label
