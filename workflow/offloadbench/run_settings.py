"""The run's settings file, `results/<machine>/settings.json`: the config's `measure` and
`compile` sections, validated and with the schema's defaults filled in, written once per
run by the `settings` rule and read by every job that measures (the round, its workers and
bouts, the extra rounds, the estimate) and by the report's Method section.

One typed object, one file: nothing downstream parses the sections again from a command
line or restates a default. The fields are the schema's keys (a test holds them equal), and
the schema is the type check of a file read back.

Pure Python: the round job and the Snakefile read it without numpy.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from .config import load_schema
from .errors import UserError, one_line
from .reading import UnreadableFile, read_regular

SETTINGS_VERSION = 1
MAX_SETTINGS_BYTES = 2**16  # two sections of scalars: a few hundred bytes


class SettingsFileError(UserError):
    """A settings file that cannot be read back; the message is one line naming the file."""


@dataclass(frozen=True)
class MeasureSection:
    """The config's `measure` section (config/README.md and the schema describe each key)."""

    processes: int
    target_rel_ci: float
    budget_s: float
    resident_calls: tuple[int, ...]
    warmup_budget_s: float
    min_samples: int
    min_cycles: int
    min_sampling_s: float
    turn_s: float
    pairing: str
    allocator: str
    pause_s: float | None
    max_samples: int
    min_sample_s: float
    timeout_s: float
    max_processes: int
    extra_time_fraction: float
    lock_timeout_s: float
    random_state: int
    check_rows: int
    pinned_memory: bool
    allow_tf32: bool

    def recorded(self) -> dict:
        """The section as every cell record holds it (its `settings`), JSON's types."""
        return {**dataclasses.asdict(self), "resident_calls": list(self.resident_calls)}


@dataclass(frozen=True)
class CompileSection:
    """The config's `compile` section: torch.compile's backend and mode, and whether each
    compiled worker starts with a cold cache of its own."""

    backend: str
    mode: str
    cold_cache: bool


@dataclass(frozen=True)
class RunSettings:
    measure: MeasureSection
    compile: CompileSection

    @classmethod
    def from_config(cls, config: dict) -> RunSettings:
        """From a validated config (every key present: the schema gave the defaults)."""
        return cls.from_sections(config["measure"], config["compile"])

    @classmethod
    def from_sections(cls, measure: dict, compile_section: dict) -> RunSettings:
        section = {**measure, "resident_calls": tuple(int(k) for k in measure["resident_calls"])}
        return cls(MeasureSection(**section), CompileSection(**compile_section))

    def as_json(self) -> dict:
        return {"settings_version": SETTINGS_VERSION, "measure": self.measure.recorded(),
                "compile": dataclasses.asdict(self.compile)}

    def write(self, path: str | os.PathLike) -> None:
        from .records import write_json_atomic  # records load the record schemas: only here

        write_json_atomic(path, self.as_json())

    @classmethod
    def read(cls, path: str | os.PathLike) -> RunSettings:
        """A settings file read back within its bounds and checked against the config
        schema's two sections; SettingsFileError names the file and what is wrong."""
        path = Path(path)
        try:
            data = json.loads(read_regular(path, MAX_SETTINGS_BYTES, "a settings file"))
        except UnreadableFile as error:
            raise SettingsFileError(str(error)) from None
        except (ValueError, RecursionError) as error:
            raise SettingsFileError(f"{path}: not valid JSON ({one_line(error, 200)})") from None
        if not isinstance(data, dict) or data.get("settings_version") != SETTINGS_VERSION:
            raise SettingsFileError(f"{path}: not a settings file of version {SETTINGS_VERSION}: "
                                    "run the pipeline again to write it")
        schema = load_schema()["properties"]
        for name in ("measure", "compile"):
            try:
                jsonschema.validate(data.get(name), schema[name])
            except jsonschema.ValidationError as error:
                where = ".".join(str(part) for part in error.absolute_path)
                raise SettingsFileError(f"{path}: {name}.{where}: {one_line(error.message, 200)}".replace(
                    f"{name}.: ", f"{name}: ")) from None
        for name, kind in (("measure", MeasureSection), ("compile", CompileSection)):
            if set(data[name]) != {f.name for f in dataclasses.fields(kind)}:
                raise SettingsFileError(f"{path}: its {name} section does not hold the keys of this version: "
                                        "run the pipeline again to write it")
        return cls.from_sections(data["measure"], data["compile"])
