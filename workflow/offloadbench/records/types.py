"""Records as typed, frozen objects: a cell measured in one process (`CellRecord`), a round's
own record (`RoundRecord`), what the settling did (`SettleRecord`), and a machine's
provenance (`Environment`).

Each is built once, from a document the schemas have checked, where records are read
(store.py); the analysis and the report read attributes, never keys. What older record
versions wrote is brought up to date in legacy.py, the one module that knows it. As in
pyperf, a run's values are immutable once read, and every reader sees the same object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from types import MappingProxyType

from .. import libraries
from ..cells import Cell
from . import legacy

EMPTY: Mapping = MappingProxyType({})


def _frozen(value) -> Mapping:
    """A mapping that cannot change (nested mappings too), for what stays loosely typed."""
    if not isinstance(value, dict):
        return EMPTY
    return MappingProxyType({str(k): _frozen(v) if isinstance(v, dict) else v for k, v in value.items()})


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _integer(value) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def _list(value, item, keep=lambda v: True) -> tuple | None:
    return tuple(item(v) for v in value if keep(v)) if isinstance(value, list) else None


# How a document's value becomes a field of each annotated type; None: missing or mistyped.
_READERS = {
    "float": _number,
    "int": _integer,
    "str": _text,
    "bool": lambda value: value if isinstance(value, bool) else None,
    "Mapping": lambda value: _frozen(value) if isinstance(value, dict) else None,
    "Mapping[str, float]": lambda value: _frozen({k: v for k, v in value.items() if _number(v) is not None})
    if isinstance(value, dict) else None,
    "tuple[str, ...]": lambda value: _list(value, str, lambda v: isinstance(v, str)),
    "tuple[float, ...]": lambda value: _list(value, float),
    "tuple[Mapping, ...]": lambda value: _list(value, _frozen, lambda v: isinstance(v, dict)),
}


def _at(*keys: str, default=None):
    """A field read from these nested keys of the document, not from the key of its name."""
    return field(default_factory=lambda: default, metadata={"at": keys})


def _read(cls, data: dict, **given):
    """`cls` from a document the schemas have checked: each field not `given` from the key of
    its name (or its `_at` keys), read as its annotated type; where that value is missing or
    of another type, an optional field (`X | None`) is None and any other keeps its default.
    A field of a type `_READERS` does not name (a nested record, a cell) must be `given`."""
    values = dict(given)
    for f in fields(cls):
        if f.name in given:
            continue
        value = data
        for key in f.metadata.get("at", (f.name,)):
            value = _object(value).get(key)
        value = _READERS[f.type.removesuffix(" | None")](value)
        if value is not None or f.type.endswith(" | None"):
            values[f.name] = value
    return cls(**values)


def seconds_between(started: str | None, finished: str | None) -> float:
    """Seconds from one ISO 8601 time to another (0 where either is missing or unreadable)."""
    try:
        return max(0.0, (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds())
    except (TypeError, ValueError):
        return 0.0


# --- a cell's record ----------------------------------------------------------------------


@dataclass(frozen=True)
class Samples:
    """One timed region of one process: seconds per call of each sample in the order taken,
    the bout's cycle each was taken in (None: measured before bouts) and its fresh pages
    mapped per call (None: not counted)."""

    seconds: tuple[float, ...]
    cycles: tuple[int, ...] | None = None
    faults_per_call: tuple[float | None, ...] | None = None
    sampling_s: float | None = None  # the time spent taking them

    @classmethod
    def from_json(cls, data: dict, seconds=None) -> Samples:
        values = tuple(float(v) for v in (seconds if seconds is not None else data.get("samples_s")) or ())

        def per_sample(key: str, item) -> tuple | None:  # None where the column does not hold one per sample
            column = data.get(key)
            return tuple(map(item, column)) if isinstance(column, list) and len(column) == len(values) else None

        return cls(values, per_sample("cycles", int), per_sample("faults_per_call", _number),
                   _number(data.get("sampling_s")))


NO_SAMPLES = Samples(())


@dataclass(frozen=True)
class Model:
    """What one call does: FLOP and least bytes moved (None without a model), and the bytes
    of its arguments as given (its input arrays), of what it returns (new arrays, which its
    peak must hold) and the power of n its inputs grow with (a kernel's)."""

    flops: float | None = None
    traffic_bytes: float | None = None
    h2d_bytes: float | None = None
    result_bytes: float | None = None
    inputs_degree: int | None = None


@dataclass(frozen=True)
class Check:
    """The result against its float64 reference."""

    rel_err: float | None = None
    tolerance: float | None = None
    passed: bool | None = None

    @property
    def failed(self) -> bool:
        return self.passed is False or (self.rel_err is not None and self.tolerance is not None
                                        and self.rel_err > self.tolerance)


@dataclass(frozen=True)
class Peak:
    """One reading of the peak memory of a call, or why there is none."""

    peak_bytes: int | None = None
    method: str = ""
    rss_hwm_bytes: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Disturbance:
    """What other processes did to the machine while the cell sampled."""

    disturbed: bool = False
    others_cores: float | None = None
    cpu_pressure: float | None = None


# The kinds of noise flag a process's own compute samples show: they explain its distance
# from the others (a fault of its own, not a state of the function).
OWN_FAULT_KINDS = frozenset({"bimodal", "drift", "cpu_clock", "gpu_clock"})
WHOLE_CELL = ""  # the region of a flag about the whole sampling window, not one timed region


@dataclass(frozen=True)
class Flag:
    """A noise flag as it was found: its kind (not_converged, bimodal, drift, cpu_clock,
    gpu_clock or disturbed), the timed region it was found in (WHOLE_CELL for the sampling
    window), its size (a fraction: the drift, the gap between modes, the CI reached, the
    clock's change, the cores others used) and its words."""

    kind: str
    region: str
    size: float
    text: str

    @property
    def own_fault(self) -> bool:
        return self.kind in OWN_FAULT_KINDS and self.region in ("compute", WHOLE_CELL)

    def to_json(self) -> dict:
        return {"kind": self.kind, "region": self.region, "size": self.size if math.isfinite(self.size) else None,
                "text": self.text}

    @classmethod
    def from_json(cls, data) -> Flag:
        if isinstance(data, str):  # before version 4
            data = legacy.flag(data)
        size = _number(data.get("size"))
        return cls(data["kind"], _text(data.get("region")) or WHOLE_CELL, math.inf if size is None else size,
                   _text(data.get("text")) or data["kind"])


@dataclass(frozen=True)
class CompilePhase:
    """A compiled cell's compile: its first call, what Dynamo captured, broke on and
    recompiled, the compiler's settings and cache, and the compile's own memory peak."""

    first_call_s: float | None = None
    graphs: int = 0
    graph_breaks: int = 0
    first_break: str = ""
    recompiles: int = 0
    fallback: str = ""
    backend: str = ""
    mode: str = ""
    cache_hits: int = _at("cache", "hits", default=0)
    cache_cold: bool = _at("cache", "cold", default=True)
    rss_hwm_bytes: int | None = _at("memory", "rss_hwm_bytes")
    device_peak_bytes: int | None = _at("memory", "device_peak_bytes")


@dataclass(frozen=True)
class Turn:
    """One turn of a cell in its bout: its cycle and position, the worker whose turn came
    just before (with its threads) and the pause left after it."""

    cycle: int
    position: int = 0
    after: str | None = None
    after_threads: int | None = None
    pause_s: float = 0.0

    @property
    def after_openmp_pool(self) -> bool:
        """Right after a worker whose OpenMP pool ran several threads (torch, or code
        torch.compile made; cells.WorkerSpec.name: "<library>-<device>-t<threads>[-compiled]…"):
        the pool most likely still spinning."""
        after = self.after or ""
        return (after.startswith("torch-") or "-compiled" in after) and (self.after_threads or 0) > 1


def _turns(data: dict) -> tuple[Turn, ...]:
    cycles = data.get("cycle") or []
    columns = [data.get(name) or [None] * len(cycles) for name in ("position", "after", "after_threads", "pause_s")]
    if not all(isinstance(c, list) and len(c) == len(cycles) for c in columns):
        return ()
    return tuple(Turn(int(c), _integer(p) or 0, _text(a), _integer(t), _number(s) or 0.0)
                 for c, p, a, t, s in zip(cycles, *columns, strict=True))


@dataclass(frozen=True)
class BoutInfo:
    """The bout a record's cell was measured in; samples of two records pair only within one."""

    id: str
    group: str = ""
    cycles: int = 0
    workers: tuple[str, ...] = ()


@dataclass(frozen=True)
class CellRecord:
    """One cell measured in one process (round), whatever its status."""

    source: str  # the file it was read from ("" for one built in memory)
    version: int
    cell: Cell
    status: str
    regions: Mapping[str, Samples]  # "compute" and the cell's other timed regions
    round: int = _at("process", "round", default=1)
    processes: int = 1  # the planned count (measure.processes); extra rounds come on top
    host: str = ""
    slurm_job_id: str = _at("process", "slurm_job_id", default="")
    reason: str = ""
    calls_per_sample: int | None = None
    warmup_count: int | None = _at("warmup", "count")
    converged: bool | None = None
    flags: tuple[Flag, ...] = ()
    disturbance: Disturbance = field(default_factory=Disturbance)
    shares_cores: bool = _at("sharing", "shares_cores_with_orchestrator", default=False)
    threads_effective: int | None = _at("threads", "effective")
    device_name: str | None = _at("device", "name")
    model: Model = field(default_factory=Model)
    check: Check = field(default_factory=Check)
    host_peak: Peak = field(default_factory=Peak)
    device_peak: Peak = field(default_factory=Peak)
    compile: CompilePhase | None = None
    compiler_startup_s: float | None = None
    # a torch cpu cell's NumPy<->tensor wrapping per call, timed apart
    conversion_s: float | None = _at("conversion", "seconds")
    import_s: float | None = None
    measure_s: float | None = None  # from its prepare to its record, other cells' turns included
    # the heavy libraries its worker had loaded
    heavy_modules: tuple[str, ...] = _at("heavy_modules_loaded", default=())
    family: str | None = _at("op_info", "family")  # a user kernel's, from its record
    kernel_sha256: str | None = _at("op_info", "sha256")
    resident_reason: str = _at("resident", "reason", default="")
    not_for: str = _at("not_for", "library", default="")  # the library that cannot run the code as written
    # a kernel: the floating dtypes of what it returns other than the cell's, the arguments a
    # call changes, whether each call was timed alone after they were put back, and what that cost
    returns: tuple[str, ...] = _at("check", "returns", default=())
    changes: tuple[str, ...] = _at("timing", "changes", default=())
    per_call: bool = _at("timing", "per_call", default=False)
    restore_s: float | None = _at("timing", "restore_s")
    settings: Mapping = field(default_factory=lambda: EMPTY)
    fingerprint: Mapping | None = _at("provenance", "fingerprint")
    started_at: str | None = None
    finished_at: str | None = None
    bout: BoutInfo | None = None
    turns: tuple[Turn, ...] = ()
    held: int = 0  # samples the file held (regions and warm-up), what a source's budget counts

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def seconds(self) -> float:
        """How long the process spent on the cell, from its record's times."""
        return seconds_between(self.started_at, self.finished_at)

    def samples(self, phase: str) -> Samples:
        """A region's samples; a CPU cell without host work is its own end to end (a torch
        one's compute region takes NumPy arrays in and out; older records timed both)."""
        if phase in self.regions:
            return self.regions[phase]
        if phase == "end_to_end" and self.cell.device == "cpu" and "finish" not in self.regions:
            return self.regions.get("compute", NO_SAMPLES)
        return NO_SAMPLES

    def resident_calls(self) -> list[int]:
        """The k of each resident trip the record timed."""
        return sorted(int(name.split("_", 1)[1]) for name in self.regions
                      if name.startswith("resident_") and name.split("_", 1)[1].isdigit())

    @classmethod
    def from_json(cls, data: dict, source: str = "", held: int = 0) -> CellRecord:
        """From a document the record schema has checked, of any version this one reads."""
        process, memory = _object(data.get("process")), _object(data.get("memory"))
        phases = _object(data.get("phases"))
        regions = {"compute": Samples.from_json(_object(phases.get("compute")), data.get("samples_s"))}
        regions.update({name: Samples.from_json(_object(phase)) for name, phase in phases.items() if name != "compute"})
        compiled, bout = data.get("compile"), _object(data.get("bout"))
        return _read(
            cls, data, source=source, version=int(data.get("schema_version") or 1), cell=Cell.from_dict(data["cell"]),
            status=data["status"], regions=MappingProxyType(regions),
            processes=_integer(legacy.processes(process)) or 1,
            host=_text(process.get("host")) or _text(_object(data.get("provenance")).get("hostname")) or "",
            converged=_object(data.get("stopping")).get("converged"),  # the schema leaves `stopping` untyped
            flags=tuple(dict.fromkeys(Flag.from_json(f) for f in _object(data.get("diagnostics")).get("flags") or ()
                                      if isinstance(f, dict) or (isinstance(f, str) and f.strip()))),
            disturbance=_read(Disturbance, _object(data.get("disturbance"))),
            model=_read(Model, _object(data.get("model"))), check=_read(Check, _object(data.get("check"))),
            host_peak=_read(Peak, _object(memory.get("host"))), device_peak=_read(Peak, _object(memory.get("device"))),
            compile=_read(CompilePhase, compiled) if isinstance(compiled, dict) else None,
            settings=_frozen(legacy.settings(_object(data.get("settings")))),
            bout=_read(BoutInfo, bout) if isinstance(bout.get("id"), str) else None,
            turns=_turns(_object(data.get("turns"))), held=held,
        )


# --- a round's record and the settling's ----------------------------------------------------


@dataclass(frozen=True)
class RoundRecord:
    """A round's own record: how long it took against the estimate, what the system check
    advised, and its bouts."""

    round: int
    extra: bool = False
    processes: int | None = None
    measured_now: int = 0
    estimated_s: float | None = None
    took_s: float | None = None
    advice: tuple[str, ...] = ()
    bouts: tuple[Mapping, ...] = ()
    split_s: Mapping[str, float] = field(default_factory=lambda: EMPTY)  # its wall time by what it went to
    launchers: tuple[Mapping, ...] = ()  # what each imported, whether it hid the GPUs, forks it refused
    # its thresholds (Settings.method); empty before they were recorded
    method: Mapping[str, float] = field(default_factory=lambda: EMPTY)

    @classmethod
    def from_json(cls, data: dict) -> RoundRecord:
        return _read(cls, data, round=int(data["round"]), processes=_integer(legacy.processes(data)))


@dataclass(frozen=True)
class WouldDecide:
    """What would decide a comparison more processes cannot decide within the cap: the
    processes per cell (None: no number would), and whether its cells share every core
    with the orchestrator (fewer threads than cores would measure them alone)."""

    processes: int | None
    shares_cores: bool = False

    @classmethod
    def from_json(cls, data) -> WouldDecide:
        if isinstance(data, str):  # a settle record from before typed advice
            data = legacy.would_decide(data)
        return _read(cls, _object(data))


@dataclass(frozen=True)
class SettleRecord:
    """What the extra rounds after the planned ones did, and why they stopped."""

    planned_rounds: int = 1
    max_processes: int = 1
    budget_s: float = 0.0
    spent_s: float = 0.0
    comparisons: int = 0
    extra_rounds: tuple[Mapping, ...] = ()
    undecided_at_start: tuple[str, ...] = ()
    undecided_at_end: tuple[str, ...] = ()
    rounds_needed: Mapping = field(default_factory=lambda: EMPTY)
    cannot_decide: Mapping[str, WouldDecide] = field(default_factory=lambda: EMPTY)
    stopped: str = ""

    @classmethod
    def from_json(cls, data: dict) -> SettleRecord:
        return _read(cls, data, cannot_decide=MappingProxyType({
            str(name): WouldDecide.from_json(what) for name, what in _object(data.get("cannot_decide")).items()}))


# --- a device's copy sweep or roofs -----------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One point of a copy sweep (direction, memory kind, bytes) or of the roofs (library,
    kind, dtype, size, bytes or FLOP), with its samples."""

    status: str
    reason: str = ""
    samples_s: tuple[float, ...] = ()
    direction: str | None = None
    memory: str | None = None
    bytes: int | None = None
    library: str | None = None
    kind: str | None = None
    dtype: str | None = None
    size: int | None = None
    flops: float | None = None


@dataclass(frozen=True)
class DeviceRecord:
    """A device's copy-bandwidth sweep or roofs (raw/transfer/<device>.json, raw/roofs/...)."""

    device: str
    points: tuple[Point, ...]
    device_name: str | None = None
    link_kind: str | None = _at("link", "kind")
    link_gbs: float | None = _at("link", "gbs")

    @classmethod
    def from_json(cls, data: dict) -> DeviceRecord:
        return _read(cls, data, device=str(data["device"]), points=tuple(
            _read(Point, p, status=str(p["status"])) for p in data.get("points") or ()))


# --- a machine's provenance ------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    name: str
    total_memory_bytes: float | None = None
    cuda_index: int | None = None  # CUDA's index, within CUDA_VISIBLE_DEVICES
    pci_bus_id: str | None = None
    nvml_index: int | None = None  # NVML's, over every GPU in PCI order


@dataclass(frozen=True)
class Environment:
    """environment.json: the machine a results folder was measured on."""

    machine: str | None = None
    captured_at: str | None = None
    hostname: str | None = None
    cpu_model: str | None = None
    logical_cores: int | None = None
    usable_cores: int | None = None
    memory_bytes: float | None = None
    os: str | None = None
    python: str | None = None
    numpy_version: str | None = None
    torch_version: str | None = None
    torch_cuda_build: str | None = None
    nvidia_driver: str | None = None
    cpu_governor: str | None = None
    torch_threads: int | None = None
    tf32_matmul_default: bool | None = None
    blas_name: str | None = _at("numpy_blas", "name")
    blas_version: str | None = _at("numpy_blas", "version")
    threadpools: tuple[str, ...] = ()  # "<internal api> <version>" of each BLAS/OpenMP pool
    blas_env: Mapping = field(default_factory=lambda: EMPTY)
    thread_env: Mapping = field(default_factory=lambda: EMPTY)
    devices: Mapping | None = None  # device -> why it cannot be used (None where it can)
    compile_devices: Mapping = field(default_factory=lambda: EMPTY)
    libraries_missing: Mapping = field(default_factory=lambda: EMPTY)  # library -> how to install it
    library_versions: Mapping = field(default_factory=lambda: EMPTY)  # library -> its installed version
    gpus: tuple[Gpu, ...] = ()
    fingerprint: Mapping | None = None
    advice: tuple[str, ...] = _at("system", "advice", default=())  # the system check's
    vec_isa_known: bool = False  # Inductor's vector instructions follow from the cpu's flags alone here
    vec_isa: str | None = _at("compile_vec_isa", "picked")  # the vector instructions Inductor's C++ code uses here
    cpu_identity: Mapping = _at("cpu", default=EMPTY)  # vendor, family, model, stepping, extensions
    numpy_targets: tuple[str, ...] = _at("numpy_dispatch", "targets", default=())  # NumPy's SIMD targets in use
    numpy_loops: Mapping = _at("numpy_dispatch", "loops", default=EMPTY)  # "sin float32" -> its target
    torch_cpu_capability: str | None = None
    standin_gpu: bool = False

    @classmethod
    def from_json(cls, data: dict) -> Environment:
        isa = _object(data.get("compile_vec_isa"))
        pools = [p for p in data.get("threadpools") or () if isinstance(p, dict)]
        return _read(
            cls, data, threadpools=tuple(sorted({f"{p.get('internal_api')} {p.get('version')}" for p in pools})),
            gpus=tuple(_read(Gpu, g, name=str(g["name"])) for g in data.get("gpus") or ()
                       if isinstance(g, dict) and "name" in g),
            vec_isa_known=bool(_text(isa.get("picked"))) and isa.get("picked") == isa.get("unchecked"),
            library_versions={name: data[name] for name in libraries.NAMES if isinstance(data.get(name), str)},
        )

    def numpy_loops_of(self, dtype: str) -> dict[str, str]:
        """The SIMD target of each NumPy loop recorded for `dtype` (its key: "<ufunc> <dtype>")."""
        return {key.rsplit(" ", 1)[0]: str(target) for key, target in self.numpy_loops.items()
                if key.rsplit(" ", 1)[-1] == dtype}

    @property
    def usable_devices(self) -> set[str] | None:
        """The devices this machine can measure on (None: not known)."""
        return None if self.devices is None else {name for name, why in self.devices.items() if why is None}

    def device_reason(self, device: str) -> str | None:
        return (self.devices or EMPTY).get(device)

    def compile_reason(self, device: str) -> str | None:
        return self.compile_devices.get(device)

    def library_reason(self, library: str) -> str | None:
        return self.libraries_missing.get(library)
