"""Records as typed, frozen objects: a cell measured in one process (`CellRecord`), a round's
own record (`RoundRecord`), what the settling did (`SettleRecord`), and a machine's
provenance (`Environment`).

Each is built once, from a document the schemas have checked, where records are read
(store.py); the analysis and the report read attributes, never keys, and older record
versions are read here and nowhere else. As in pyperf, a run's values are immutable once
read, and every reader sees the same object.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from ..cells import Cell

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
        cycles = data.get("cycles")
        faults = data.get("faults_per_call")
        return cls(values,
                   tuple(int(c) for c in cycles) if isinstance(cycles, list) and len(cycles) == len(values) else None,
                   tuple(_number(f) for f in faults) if isinstance(faults, list) and len(faults) == len(values)
                   else None,
                   _number(data.get("sampling_s")))


NO_SAMPLES = Samples(())


@dataclass(frozen=True)
class Model:
    """What one call does: FLOP and least bytes moved (None without a model), and the bytes
    that cross the link."""

    flops: float | None = None
    traffic_bytes: float | None = None
    h2d_bytes: float | None = None
    d2h_bytes: float | None = None

    @classmethod
    def from_json(cls, data: dict) -> Model:
        return cls(*(_number(data.get(k)) for k in ("flops", "traffic_bytes", "h2d_bytes", "d2h_bytes")))


@dataclass(frozen=True)
class Check:
    """The result against its float64 reference."""

    rel_err: float | None = None
    tolerance: float | None = None
    passed: bool | None = None

    @classmethod
    def from_json(cls, data: dict) -> Check:
        passed = data.get("passed")
        return cls(_number(data.get("rel_err")), _number(data.get("tolerance")),
                   passed if isinstance(passed, bool) else None)

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

    @classmethod
    def from_json(cls, data: dict) -> Peak:
        return cls(_integer(data.get("peak_bytes")), _text(data.get("method")) or "",
                   _integer(data.get("rss_hwm_bytes")), _text(data.get("reason")) or "")


@dataclass(frozen=True)
class Disturbance:
    """What other processes did to the machine while the cell sampled."""

    disturbed: bool = False
    others_cores: float | None = None
    cpu_pressure: float | None = None

    @classmethod
    def from_json(cls, data: dict) -> Disturbance:
        return cls(data.get("disturbed") is True, _number(data.get("others_cores")), _number(data.get("cpu_pressure")))

    def describe(self) -> str:
        """"disturbed (other processes used 0.90 cores; a task waited for a CPU 50% of the time)"."""
        waited = self.cpu_pressure or 0.0
        return (f"disturbed (other processes used {self.others_cores or 0:.2f} cores"
                + (f"; a task waited for a CPU {waited:.0%} of the time" if waited > 0.1 else "") + ")")


# The kinds of noise flag; those a process's own compute samples show explain its distance
# from the others (a fault of its own, not a state of the function).
FLAG_KINDS = ("not_converged", "bimodal", "drift", "cpu_clock", "gpu_clock", "disturbed")
OWN_FAULT_KINDS = frozenset({"bimodal", "drift", "cpu_clock", "gpu_clock"})
WHOLE_CELL = ""  # the region of a flag about the whole sampling window, not one timed region
_LEGACY_PREFIXES = (("CI not reached", "not_converged"), ("bimodal samples", "bimodal"), ("drift", "drift"),
                    ("CPU clock changed", "cpu_clock"), ("GPU clock changed", "gpu_clock"), ("disturbed", "disturbed"))


@dataclass(frozen=True)
class Flag:
    """A noise flag as it was found: its kind (FLAG_KINDS), the timed region it was found in
    (WHOLE_CELL for the sampling window), its size (a fraction: the drift, the gap between
    modes, the CI reached, the clock's change, the cores others used) and its words."""

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
        if isinstance(data, str):
            return cls._from_words(data)
        size = _number(data.get("size"))
        return cls(data["kind"], _text(data.get("region")) or WHOLE_CELL, math.inf if size is None else size,
                   _text(data.get("text")) or data["kind"])

    @classmethod
    def _from_words(cls, text: str) -> Flag:
        """A flag of a record before version 4, which kept only its words: "[region: ]kind ...
        12.0% ..." (its size the first percentage)."""
        head, _, tail = text.partition(": ")  # "end_to_end: drift: ..." names its region; "drift: ..." does not
        region, rest = (head, tail) if tail and head.isidentifier() and head not in ("drift", "disturbed") else ("", text)
        kind = next((k for prefix, k in _LEGACY_PREFIXES if rest.startswith(prefix)), "")
        found = re.search(r"(\d+(?:\.\d+)?)%", rest)
        return cls(kind, region or ("compute" if kind in ("not_converged", "bimodal", "drift") else WHOLE_CELL),
                   float(found.group(1)) / 100 if found else 0.0, text)


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
    cache_hits: int = 0
    cache_cold: bool = True
    rss_hwm_bytes: int | None = None
    device_peak_bytes: int | None = None

    @classmethod
    def from_json(cls, data: dict) -> CompilePhase:
        cache, memory = _object(data.get("cache")), _object(data.get("memory"))
        return cls(_number(data.get("first_call_s")), _integer(data.get("graphs")) or 0,
                   _integer(data.get("graph_breaks")) or 0, _text(data.get("first_break")) or "",
                   _integer(data.get("recompiles")) or 0, _text(data.get("fallback")) or "",
                   _text(data.get("backend")) or "", _text(data.get("mode")) or "", _integer(cache.get("hits")) or 0,
                   cache.get("cold") is not False, _integer(memory.get("rss_hwm_bytes")),
                   _integer(memory.get("device_peak_bytes")))


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
    group: str
    cycles: int
    workers: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict) -> BoutInfo | None:
        if not isinstance(data.get("id"), str):
            return None
        return cls(data["id"], _text(data.get("group")) or "", _integer(data.get("cycles")) or 0,
                   tuple(w for w in data.get("workers") or () if isinstance(w, str)))


@dataclass(frozen=True)
class CellRecord:
    """One cell measured in one process (round), whatever its status."""

    source: str  # the file it was read from ("" for one built in memory)
    version: int
    cell: Cell
    machine: str
    round: int
    processes: int  # the planned count (measure.processes); extra rounds come on top
    worker: str
    host: str
    slurm_job_id: str
    status: str
    reason: str
    regions: Mapping[str, Samples]  # "compute" and the cell's other timed regions
    calls_per_sample: int | None = None
    warmup_count: int | None = None
    converged: bool | None = None
    flags: tuple[Flag, ...] = ()
    disturbance: Disturbance = field(default_factory=Disturbance)
    shares_cores: bool = False
    threads_effective: int | None = None
    device_name: str | None = None
    model: Model = field(default_factory=Model)
    check: Check = field(default_factory=Check)
    host_peak: Peak = field(default_factory=Peak)
    device_peak: Peak = field(default_factory=Peak)
    compile: CompilePhase | None = None
    compiler_startup_s: float | None = None
    conversion_s: float | None = None  # a torch cpu cell's NumPy<->tensor wrapping per call, timed apart
    import_s: float | None = None
    measure_s: float | None = None  # from its prepare to its record, other cells' turns included
    prepare_s: float | None = None  # getting ready: inputs, check, compile, warm-up
    finish_s: float | None = None  # memory peaks, resident trips, the record
    heavy_modules: tuple[str, ...] = ()  # the heavy libraries its worker had loaded
    family: str | None = None  # a user kernel's, from its record
    kernel_sha256: str | None = None
    resident_reason: str = ""
    settings: Mapping = field(default_factory=lambda: EMPTY)
    fingerprint: Mapping | None = None
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
        version = int(data.get("schema_version") or 1)
        process = _object(data.get("process"))
        planned = process.get("processes", process.get("rounds"))  # version 2 called it rounds
        phases = _object(data.get("phases"))
        regions = {"compute": Samples.from_json(_object(phases.get("compute")), data.get("samples_s"))}
        regions.update({name: Samples.from_json(_object(phase)) for name, phase in phases.items() if name != "compute"})
        provenance, threads, memory = _object(data.get("provenance")), _object(data.get("threads")), \
            _object(data.get("memory"))
        op_info, resident = _object(data.get("op_info")), _object(data.get("resident"))
        compiled = data.get("compile")
        fingerprint = provenance.get("fingerprint")
        return cls(
            source=source, version=version, cell=Cell.from_dict(data["cell"]), machine=_text(data.get("machine")) or "",
            round=_integer(process.get("round")) or 1, processes=_integer(planned) or 1,
            worker=_text(process.get("worker")) or "",
            host=_text(process.get("host")) or _text(provenance.get("hostname")) or "",
            slurm_job_id=_text(process.get("slurm_job_id")) or "",
            status=data["status"], reason=_text(data.get("reason")) or "",
            regions=MappingProxyType(regions),
            calls_per_sample=_integer(data.get("calls_per_sample")),
            warmup_count=_integer(_object(data.get("warmup")).get("count")),
            converged=_object(data.get("stopping")).get("converged"),
            flags=tuple(dict.fromkeys(Flag.from_json(f) for f in _object(data.get("diagnostics")).get("flags") or ()
                                      if isinstance(f, dict) or (isinstance(f, str) and f.strip()))),
            disturbance=Disturbance.from_json(_object(data.get("disturbance"))),
            shares_cores=_object(data.get("sharing")).get("shares_cores_with_orchestrator") is True,
            threads_effective=_integer(threads.get("effective")),
            device_name=_text(_object(data.get("device")).get("name")),
            model=Model.from_json(_object(data.get("model"))),
            check=Check.from_json(_object(data.get("check"))),
            host_peak=Peak.from_json(_object(memory.get("host"))),
            device_peak=Peak.from_json(_object(memory.get("device"))),
            compile=CompilePhase.from_json(compiled) if isinstance(compiled, dict) else None,
            compiler_startup_s=_number(data.get("compiler_startup_s")),
            conversion_s=_number(_object(data.get("conversion")).get("seconds")),
            import_s=_number(data.get("import_s")), measure_s=_number(data.get("measure_s")),
            prepare_s=_number(data.get("prepare_s")), finish_s=_number(data.get("finish_s")),
            heavy_modules=tuple(m for m in data.get("heavy_modules_loaded") or () if isinstance(m, str)),
            family=_text(op_info.get("family")), kernel_sha256=_text(op_info.get("sha256")),
            resident_reason=_text(resident.get("reason")) or "",
            settings=_frozen(_renamed(_object(data.get("settings")))),
            fingerprint=_frozen(fingerprint) if isinstance(fingerprint, dict) else None,
            started_at=_text(data.get("started_at")), finished_at=_text(data.get("finished_at")),
            bout=BoutInfo.from_json(_object(data.get("bout"))),
            turns=_turns(_object(data.get("turns"))), held=held,
        )


RENAMED_SETTINGS = {"seed": "random_state"}  # measure settings named otherwise before version 3


def _renamed(settings: dict) -> dict:
    """A record's measure settings under this version's names."""
    return {RENAMED_SETTINGS.get(key, key): value for key, value in settings.items()}


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
    worker_processes: tuple[Mapping, ...] = ()  # every worker process it started: pid, import_s, warm_s, ...
    split_s: Mapping = field(default_factory=lambda: EMPTY)  # its wall time by what it went to
    launchers: tuple[Mapping, ...] = ()  # what each imported, whether it hid the GPUs, forks it refused
    method: Mapping = field(default_factory=lambda: EMPTY)  # its thresholds (Settings.method); empty before they were recorded

    @classmethod
    def from_json(cls, data: dict) -> RoundRecord:
        workers = [w for w in _object(data.get("workers")).values() if isinstance(w, dict)]
        return cls(
            round=int(data["round"]), extra=data.get("extra") is True,
            processes=_integer(data.get("processes", data.get("rounds"))),  # version 2 called it rounds
            measured_now=_integer(data.get("measured_now")) or 0,
            estimated_s=_number(data.get("estimated_s")), took_s=_number(data.get("took_s")),
            advice=tuple(a for a in data.get("advice") or () if isinstance(a, str)),
            bouts=tuple(_frozen(b) for b in data.get("bouts") or () if isinstance(b, dict)),
            worker_processes=tuple(_frozen(p) for w in workers for p in w.get("processes") or () if isinstance(p, dict)),
            split_s=_frozen({k: v for k, v in _object(data.get("split_s")).items() if _number(v) is not None}),
            launchers=tuple(_frozen(launcher) for launcher in data.get("launchers") or () if isinstance(launcher, dict)),
            method=_frozen({k: v for k, v in _object(data.get("method")).items() if _number(v) is not None}),
        )


@dataclass(frozen=True)
class WouldDecide:
    """What would decide a comparison more processes cannot decide within the cap: the
    processes per cell (None: no number would), and whether its cells share every core
    with the orchestrator (fewer threads than cores would measure them alone)."""

    processes: int | None
    shares_cores: bool

    @classmethod
    def from_json(cls, data) -> WouldDecide:
        if isinstance(data, str):  # a settle record before typed advice kept its words
            found = re.search(r"about (\d+) processes", data)
            return cls(int(found.group(1)) if found else None, "every core" in data)
        data = _object(data)
        return cls(_integer(data.get("processes")), data.get("shares_cores") is True)


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
        texts = lambda key: tuple(t for t in data.get(key) or () if isinstance(t, str))
        return cls(
            planned_rounds=_integer(data.get("planned_rounds")) or 1, max_processes=_integer(data.get("max_processes")) or 1,
            budget_s=_number(data.get("budget_s")) or 0.0, spent_s=_number(data.get("spent_s")) or 0.0,
            comparisons=_integer(data.get("comparisons")) or 0,
            extra_rounds=tuple(_frozen(r) for r in data.get("extra_rounds") or () if isinstance(r, dict)),
            undecided_at_start=texts("undecided_at_start"), undecided_at_end=texts("undecided_at_end"),
            rounds_needed=_frozen(data.get("rounds_needed")),
            cannot_decide=MappingProxyType({str(name): WouldDecide.from_json(what) for name, what
                                            in _object(data.get("cannot_decide")).items()}),
            stopped=_text(data.get("stopped")) or "",
        )


# --- a device's copy sweep or roofs -----------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One point of a copy sweep (direction, memory kind, bytes) or of the roofs (library,
    kind, dtype, size, bytes or FLOP), with its samples."""

    status: str
    reason: str
    samples_s: tuple[float, ...] = ()
    direction: str | None = None
    memory: str | None = None
    bytes: int | None = None
    library: str | None = None
    kind: str | None = None
    dtype: str | None = None
    size: int | None = None
    flops: float | None = None

    @classmethod
    def from_json(cls, data: dict) -> Point:
        return cls(str(data["status"]), _text(data.get("reason")) or "",
                   tuple(float(v) for v in data.get("samples_s") or ()),
                   *(_text(data.get(k)) for k in ("direction", "memory")), _integer(data.get("bytes")),
                   *(_text(data.get(k)) for k in ("library", "kind", "dtype")), _integer(data.get("size")),
                   _number(data.get("flops")))


@dataclass(frozen=True)
class DeviceRecord:
    """A device's copy-bandwidth sweep or roofs (raw/transfer/<device>.json, raw/roofs/...)."""

    device: str
    device_name: str | None
    points: tuple[Point, ...]
    link_kind: str | None = None
    link_gbs: float | None = None

    @classmethod
    def from_json(cls, data: dict) -> DeviceRecord:
        link = _object(data.get("link"))
        return cls(str(data["device"]), _text(data.get("device_name")),
                   tuple(Point.from_json(p) for p in data.get("points") or ()), _text(link.get("kind")),
                   _number(link.get("gbs")))


# --- a machine's provenance ------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    name: str
    total_memory_bytes: float | None = None
    cuda_index: int | None = None  # CUDA's index, within CUDA_VISIBLE_DEVICES
    pci_bus_id: str | None = None
    nvml_index: int | None = None  # NVML's, over every GPU in PCI order

    @classmethod
    def from_json(cls, data: dict) -> Gpu:
        return cls(str(data["name"]), _number(data.get("total_memory_bytes")), _integer(data.get("cuda_index")),
                   _text(data.get("pci_bus_id")), _integer(data.get("nvml_index")))


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
    blas_name: str | None = None
    blas_version: str | None = None
    threadpools: tuple[str, ...] = ()  # "<internal api> <version>" of each BLAS/OpenMP pool
    blas_env: Mapping = field(default_factory=lambda: EMPTY)
    thread_env: Mapping = field(default_factory=lambda: EMPTY)
    devices: Mapping | None = None  # device -> why it cannot be used (None where it can)
    compile_devices: Mapping = field(default_factory=lambda: EMPTY)
    gpus: tuple[Gpu, ...] = ()
    fingerprint: Mapping | None = None
    advice: tuple[str, ...] = ()  # the system check's
    vec_isa_known: bool = False  # Inductor's vector instructions follow from the cpu's flags alone here
    vec_isa: str | None = None  # the vector instructions Inductor's C++ code uses here
    cpu_identity: Mapping = field(default_factory=lambda: EMPTY)  # vendor, family, model, stepping, extensions
    numpy_targets: tuple[str, ...] = ()  # NumPy's SIMD targets in use
    numpy_loops: Mapping = field(default_factory=lambda: EMPTY)  # "sin float32" -> its target
    torch_cpu_capability: str | None = None
    standin_gpu: bool = False

    @classmethod
    def from_json(cls, data: dict) -> Environment:
        blas, isa = _object(data.get("numpy_blas")), _object(data.get("compile_vec_isa"))
        devices = data.get("devices")
        pools = data.get("threadpools") or []
        fingerprint = data.get("fingerprint")
        return cls(
            **{name: _text(data.get(name)) for name in (
                "machine", "captured_at", "hostname", "cpu_model", "os", "python", "numpy_version", "torch_version",
                "torch_cuda_build", "nvidia_driver", "cpu_governor")},
            logical_cores=_integer(data.get("logical_cores")), usable_cores=_integer(data.get("usable_cores")),
            memory_bytes=_number(data.get("memory_bytes")), torch_threads=_integer(data.get("torch_threads")),
            tf32_matmul_default=data.get("tf32_matmul_default") if isinstance(data.get("tf32_matmul_default"), bool)
            else None,
            blas_name=_text(blas.get("name")), blas_version=_text(blas.get("version")),
            threadpools=tuple(sorted({f"{_object(p).get('internal_api')} {_object(p).get('version')}" for p in pools
                                      if isinstance(p, dict)})),
            blas_env=_frozen(data.get("blas_env")), thread_env=_frozen(data.get("thread_env")),
            devices=_frozen(devices) if isinstance(devices, dict) else None,
            compile_devices=_frozen(data.get("compile_devices")),
            gpus=tuple(Gpu.from_json(g) for g in data.get("gpus") or () if isinstance(g, dict) and "name" in g),
            fingerprint=_frozen(fingerprint) if isinstance(fingerprint, dict) else None,
            advice=tuple(a for a in _object(data.get("system")).get("advice") or () if isinstance(a, str)),
            vec_isa_known=bool(_text(isa.get("picked"))) and isa.get("picked") == isa.get("unchecked"),
            vec_isa=_text(isa.get("picked")), cpu_identity=_frozen(_object(data.get("cpu"))),
            numpy_targets=tuple(t for t in _object(data.get("numpy_dispatch")).get("targets") or ()
                                if isinstance(t, str)),
            numpy_loops=_frozen(_object(_object(data.get("numpy_dispatch")).get("loops"))),
            torch_cpu_capability=_text(data.get("torch_cpu_capability")), standin_gpu=data.get("standin_gpu") is True,
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


def finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
