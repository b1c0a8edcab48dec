"""Measure one cell in one process: prepared once, sampled one turn at a time, finished.

`CellRun` is what a cell's process holds for the cell of the current bout:
- `prepare`: the op's inputs, the compile phase of a compiled cell (its first calls, never
  samples), and every timed region warmed up until its time per call has settled and its
  block sized (backend.py builds the regions);
- `turn`: one turn of the bout: each region sampled for at least `turn_s` (one sample at
  least, each sample a block of calls timed as one), after a few untimed calls that bring
  back the steady state another worker's turn disturbed (caches, an idle thread pool);
  each sample's minor page faults are counted around it;
- `finish`: the correctness check against float64 and one untimed call's peak memory
  (once per run: a later round carries them over from the first, `carried`), the noise
  checks, and the record's fields.
The check comes after the sampling, not before: its float64 arrays would otherwise be
allocated and freed in the process before the first sample, and where malloc then puts the
function's temporaries can change its speed by several times (docs/measuring.md). A cell
whose check fails is an error, its samples never used.
Failures become the outcome's status (skipped, oom, error), never exceptions. `run_cell`
measures a cell alone: its turns follow each other until its stopping rule ends them.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np

from .. import libraries
from ..catalogue import footprint, shapes_known, working_set_bytes
from ..cells import ITEMSIZE, Cell
from ..footprint import fit
from ..kernels import kernel_tolerance
from ..records import write_bytes_atomic
from ..records.types import Turn
from ..stats import median_ci_rel_halfwidth
from . import arguments, correctness, devices, diagnostics, disturbance, memory
from .backend import (
    Backend,
    NotForLibrary,
    Unavailable,
    build_regions,
    configure_torch,
    conversion_seconds,
    make_host_inputs,
    np_dtype,
)
from .cupy_backend import CupyBackend
from .ops import Op, get_op
from .provenance import cpu_clocks_mhz
from .settings import Settings
from .timing import Region, Warmup, collector_off, rewarm, warm_up
from .xla_backend import XlaBackend

# The measuring backends, by the name a library gives (Library.backend): torch's moves
# NumPy and torch arrays (and runs numpy compiled), XLA's JAX arrays, CuPy's its own.
BACKENDS = {"torch": Backend, "xla": XlaBackend, "cupy": CupyBackend}


def make_backend(cell: Cell, op: Op, settings: Settings, torch=None) -> Backend:
    """The backend of the library that runs the cell (its compiler's, compiled)."""
    backend = BACKENDS[libraries.runtime(cell.library, cell.compiled).backend]
    return backend(cell, op, settings, torch)


SAMPLING, WAITING = "sampling", "waiting"  # a bout's to count: its turns, and the others' preparation
MAX_CLOCK_READINGS = 1000  # two a turn at most; a record holds them


@dataclass
class Progress:
    """What the cell is doing now (the supervisor reads it to explain a timeout), and the
    seconds each phase took: the round's record splits its time by them."""

    report: Callable[[str], None] = lambda message: None
    phase: str = "starting"
    clock: Callable[[], float] = time.perf_counter
    began: float = field(default_factory=time.perf_counter)
    seconds: dict[str, float] = field(default_factory=dict)

    def enter(self, phase: str) -> None:
        now = self.clock()
        self.seconds = self.until(now)
        self.phase, self.began = phase, now
        self.report(phase)

    def until(self, now: float) -> dict[str, float]:
        """Seconds per kind of phase until `now`, the current one included: "warm-up compute"
        counts as "warm-up", since the split counts kinds of phases, not regions."""
        kind = "warm-up" if self.phase.startswith("warm-up") else self.phase
        return {**self.seconds, kind: self.seconds.get(kind, 0.0) + now - self.began}

    def spent(self) -> dict[str, float]:
        """Seconds per kind of phase so far; sampling and the wait for the bout's first turn,
        which take the other cells' time too, are the bout's to count."""
        return {kind: s for kind, s in self.until(self.clock()).items() if kind not in (SAMPLING, WAITING)}


@dataclass
class CellOutcome:
    """What measuring a cell found: a status, and the record fields it filled in."""

    status: str = "ok"
    reason: str = ""
    measured: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)  # what the cell set up (TF32, memory kind)


class Interrupted(BaseException):
    """SIGINT reached the cell's process (jobs/worker.py): the run is being stopped, which
    no cell's record may tell as its own failure."""


class CellFailed(Exception):
    """Ends a cell early with a status other than ok (skipped, oom, error)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def check_result(backend: Backend, original: list, result) -> dict:
    """The op's error against a float64 reference from the inputs the call started from
    (`original`), and its verdict; `result` is what one call gave back on the host (NumPy
    arrays): a kernel's result followed by the arguments it changed."""
    op, cell, settings = backend.op, backend.cell, backend.settings
    tf32 = settings.allow_tf32 and backend.tensors and cell.device == "cuda"
    if op.kernel is not None:
        found = op.error(original, result, backend.changes, np_dtype(cell.dtype))
        own = kernel_tolerance(op.kernel, cell.dtype)
        return {**correctness.verdict(found.pop("rel_err"), cell.dtype, op.spec.error_growth(cell.size), tf32, None,
                                      own), **found}
    rows = correctness.check_rows(cell.size, settings.check_rows, np.random.default_rng(settings.random_state + 1))
    error = op.error([arguments.float64_value(x) for x in original], result, rows)
    checked = len(rows) if op.checks_sampled_rows else None
    return correctness.verdict(error, cell.dtype, op.spec.error_growth(cell.size), tf32, checked)


def input_points(op: Op, cell: Cell, random_state: int) -> list[tuple[int, int]]:
    """A kernel that makes its own inputs: their bytes at up to four small sizes, drawn and
    dropped (cheap), so that the out-of-memory check and the fit know how they grow before
    the cell's own are drawn. Empty for an op whose spec knows its shapes, below those sizes,
    or where the kernel's inputs fail to draw there."""
    if shapes_known(op.spec):
        return []
    first = max(op.spec.min_size, 4)
    points = []
    for size in (first, 2 * first, 4 * first, 8 * first):
        if size >= cell.size:
            break
        try:
            values = op.make_inputs(np.random.default_rng(random_state), size)
        except Exception:  # noqa: BLE001 - the cell's own draw says what is wrong, with its line
            return []
        points.append((size, arguments.array_bytes([arguments.host_value(v, np_dtype(cell.dtype)) for v in values])))
    return points


def _memory_precheck(op: Op, cell: Cell, settings: Settings, seen: dict | None, device: devices.Cpu,
                     points: list) -> None:
    """Refuse a cell that would not fit before measuring it: what one measurement holds
    (catalogue.working_set_bytes), from the call's footprint fitted to what earlier records
    of the series measured (`seen`, from the round job: peaks and inputs at each size) and,
    for a kernel that makes its own inputs, their bytes at small sizes (`points`)."""
    seen = seen or {}
    itemsize = ITEMSIZE[cell.dtype]
    host = footprint(op.spec, itemsize, seen.get("host", ()), [*seen.get("inputs", ()), *points])
    if host is not None:
        need = working_set_bytes(op.spec, cell.size, itemsize, host)
        how = "measured" if seen.get("host") else "modelled"
        available = memory.available_host_memory()
        if available is not None and need > settings.memory_headroom * available:
            raise CellFailed("oom", f"needs about {need / 2**30:.1f} GiB of host memory ({how}), "
                                    f"{available / 2**30:.1f} GiB available")
    on_device = footprint(op.spec, itemsize, seen.get("device", ()), [*seen.get("inputs", ()), *points])
    if cell.device == "cuda" and seen.get("device") and on_device is not None:
        free = device.free_bytes()
        device_need = on_device.bytes(cell.size)
        if device_need > settings.memory_headroom * free:
            raise CellFailed("oom", f"needs about {device_need / 2**30:.1f} GiB of cuda memory (measured), "
                                    f"{free / 2**30:.1f} GiB free")


def model_of(op: Op, cell: Cell, host_inputs: list, host_result, changes: tuple[int, ...] = (),
             points: list = ()) -> dict:
    """The FLOP and byte model of the cell (None where the op has none, as a user kernel
    without models), and the bytes of the arrays themselves: those that cross the link (the
    input arrays in; the result and the arguments a call changed out), those a call returns
    (new arrays), and for a kernel how its inputs grow with n (from `points` at small
    sizes and its own)."""
    spec, itemsize = op.spec, ITEMSIZE[cell.dtype]
    inputs = arguments.array_bytes(host_inputs)
    changed = arguments.array_bytes([host_inputs[i] for i in changes])
    growth = fit([*points, (cell.size, inputs)]) if op.kernel is not None else None
    return {
        "flops": float(spec.flops(cell.size)) if spec.flops else None,
        "traffic_bytes": float(spec.traffic(cell.size, itemsize)) if spec.traffic else None,
        "h2d_bytes": inputs,
        "d2h_bytes": arguments.array_bytes(host_result),
        "result_bytes": max(0, arguments.array_bytes(host_result) - changed),
        "inputs_degree": growth.degree if growth is not None else 2 if op.kernel is not None else None,
        "itemsize": itemsize,
    }


def warm_process(library: str, torch=None, seconds: float = 0.2) -> float:
    """Bring a fresh worker to a steady state before its first cell: its thread pool awake,
    its allocator holding reusable memory, its clocks up. Without this a worker's first
    cells ran about 15% slower than its later ones on our 2-core test machine. A fifth of a
    second is enough since each cell also warms its own regions and every turn starts with
    untimed calls; the cells it compares then take turns, so what is left hits both sides."""
    own = libraries.get(library)
    lib = own.namespace(torch)
    rng = np.random.default_rng(0)
    square, vector = (own.from_host(x, torch) for x in (rng.random((256, 256)).astype("float32"),
                                                        rng.random(1 << 20).astype("float32")))
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        square @ square
        lib.exp(vector) * 1.5 + vector
    return time.perf_counter() - start


@dataclass(frozen=True)
class Place(Turn):
    """Where a turn stood in its bout, as its record keeps it (records.types.Turn), and the
    pids of the bout's other workers, whose disturbance is read around it."""

    siblings: tuple[int, ...] = ()


@dataclass
class RegionState:
    """A region's samples so far, with each sample's cycle and page faults."""

    region: Region
    warmup: Warmup
    samples: list[float] = field(default_factory=list)
    faults: list[float | None] = field(default_factory=list)
    cycles: list[int] = field(default_factory=list)
    spent_s: float = 0.0
    rel_ci: float = math.inf
    turn_from: int = 0  # where the last turn's samples begin
    preroll_s: list[float] = field(default_factory=list)  # each turn's untimed pre-roll
    best_s: float = field(init=False)  # the fastest block so far, warm-up's included: what a pre-roll waits for

    def __post_init__(self):
        self.best_s = min(self.warmup.blocks_s, default=self.warmup.first_call_s)

    def turn_median(self) -> float | None:
        """The median of the last turn's samples: the value the bout pairs (None: no turn)."""
        taken = self.samples[self.turn_from:]
        return float(np.median(taken)) if taken else None

    def take(self, turn_s: float, cycle: int, max_samples: int, rel_tol: float,
             now: Callable[[], float] = time.perf_counter, loaded: Callable[[], object] | None = None) -> None:
        """One turn of this region: the untimed pre-roll (timing.rewarm), then samples until
        `turn_s` has passed. Short turns and many cycles resolve a ratio best here: the
        machine's speed wanders at every time scale, so a longer turn averages little of it
        and leaves fewer pairs. `loaded` is called where the device has just worked, outside
        every timed block: after a pre-roll that ran, and after the samples."""
        self.preroll_s.append(rewarm(self.region, self.warmup.calls_per_sample, self.best_s, rel_tol, now))
        if loaded is not None and self.preroll_s[-1] > 0:
            loaded()
        began = now()
        self.turn_from = len(self.samples)
        while len(self.samples) < max_samples:
            sample = self.region.sample(self.warmup.calls_per_sample)
            self.samples.append(sample.seconds)
            self.best_s = min(self.best_s, sample.seconds)
            self.faults.append(sample.faults_per_call)
            self.cycles.append(cycle)
            if now() - began >= turn_s:
                break
        self.spent_s += now() - began
        if loaded is not None:
            loaded()

    def update_ci(self, confidence: float) -> None:
        if len(self.samples) >= 2:
            self.rel_ci = median_ci_rel_halfwidth(self.samples, confidence)

    def stop_reason(self, stop) -> str | None:
        """Why this region could stop: its CI, the sample cap, or its budget (None: go on)."""
        converged = (len(self.samples) >= stop.min_samples and self.spent_s >= stop.min_sampling_s
                     and self.rel_ci <= stop.target_rel_ci)
        return stop.reason(len(self.samples), self.spent_s, converged)

    def phase_fields(self, stop) -> dict:
        """The region's phase in the record: its samples and how its sampling ended."""
        return {
            "samples_s": list(self.samples),
            "cycles": list(self.cycles),
            "faults_per_call": list(self.faults),
            "calls_per_sample": self.warmup.calls_per_sample,
            "warmup_s": list(self.warmup.blocks_s),
            "rel_ci": self.rel_ci,
            "converged": self.rel_ci <= stop.target_rel_ci,
            "stop_reason": self.stop_reason(stop) or "budget",
            "sampling_s": self.spent_s,
            "preroll_s": list(self.preroll_s),
        }


class CellRun:
    """One cell measured in this process: `prepare`, then `turn` as often as its bout (or
    `sample_alone`) asks, then `finish`. A failure at any step ends it with its status."""

    def __init__(self, cell: Cell, settings: Settings, torch=None, progress: Progress | None = None,
                 artifact_path: str | None = None, kernels: dict | None = None, memory_scale: dict | None = None,
                 carried: dict | None = None):
        self.cell, self.settings, self.torch = cell, settings, torch
        self.progress = progress or Progress()
        self.artifact_path, self.kernels, self.memory_scale = artifact_path, kernels, memory_scale
        self.carried = carried or {}  # the check, model and memory peaks an earlier round measured
        self.outcome = CellOutcome()
        self.states: list[RegionState] = []
        self.places: list[Place] = []
        self.windows: list[tuple] = []  # (before, after) disturbance readings around each turn
        self.clocks_before = None  # the CPU's clocks at the first turn
        # a GPU's clocks, read only where it has just worked (an idle GPU's clock drops to a
        # fifth of its loaded one, which says nothing of the timed calls): after a pre-roll of
        # the compute region and after its samples, in every turn
        self.gpu_clocks: list[dict] = []
        self.backend: Backend | None = None
        self.host_inputs: list = []
        self.restorer: arguments.Restorer | None = None  # what a call changes, as it was before
        self.input_points: list = []  # a kernel's input bytes at small sizes (input_points)
        self.op: Op | None = None
        self.device: devices.Cpu | None = None  # the seam's device, once the cell is known to run
        self.failed = False

    @property
    def ready(self) -> bool:
        return bool(self.states) and not self.failed

    def prepare(self) -> bool:
        """Inputs, compile and warm-up; True when the cell is ready to be sampled."""
        with self.failures():
            self._prepare()
        self.progress.enter(WAITING)
        return self.ready

    def _prepare(self) -> None:
        # the op, once its device, compiler and memory are known to suffice
        cell, settings, torch, outcome = self.cell, self.settings, self.torch, self.outcome
        self.op = op = get_op(cell.op, self.kernels)
        device = devices.get(cell.device, torch)
        uses_torch = libraries.runtime(cell.library, cell.compiled).uses_torch
        seam = libraries.needs_torch(cell.library, cell.compiled, cell.device)
        reason = device.unavailable_reason() if seam else None
        if not reason and cell.compiled and uses_torch:  # torch.compile's needs (a C++ compiler, Triton)
            reason = device.compile_reason()
        if reason:
            raise CellFailed("skipped", reason)
        if uses_torch:
            outcome.settings.update(configure_torch(torch, settings))
        if seam:
            outcome.measured["device"] = device.describe()
        if op.kernel is not None:
            outcome.measured["op_info"] = {"kind": "kernel", "takes_xp": op.kernel.takes_xp, "n_means": op.spec.n_means}
        self.input_points = input_points(op, cell, settings.random_state)
        _memory_precheck(op, cell, settings, self.memory_scale, device, self.input_points)
        self.device = device if cell.is_gpu else None
        if self.device is not None:  # NVML's first call is slow: make it before warm-up, not after
            self.device.clocks()
        self.progress.enter("inputs")
        self.backend = backend = make_backend(cell, op, settings, torch)
        self.host_inputs = backend.pin(make_host_inputs(op, cell, settings.random_state, torch))
        if op.kernel is not None:  # its first call, eager, on copies: what it returns and changes
            self.progress.enter("warm-up compute")
            backend.changes = _first_kernel_call(op, backend, self.host_inputs)
        if cell.compiled:
            self.progress.enter("compile")
            outcome.measured["compile"] = backend.first_calls(self.host_inputs)
        self.restorer = arguments.Restorer(self.host_inputs, backend.changes)
        states = []
        self.progress.enter("warm-up")  # building the regions makes the first call
        for name, region in build_regions(backend, self.host_inputs, self.restorer).items():
            self.progress.enter(f"warm-up {name}")
            states.append(RegionState(region, warm_up(region, settings.block, settings.warmup)))
        if op.kernel is not None:
            outcome.measured["timing"] = _timing_of(op, backend, next(s.region for s in states
                                                                      if s.region.name == "compute"))
        if cell.is_gpu and backend.resident_reason:
            outcome.measured["resident"] = {"reason": backend.resident_reason}
        self.states = states

    def turn(self, place: Place | None = None, pending_only: bool = False) -> bool:
        """One turn: every region (every unfinished one, `pending_only`) sampled for at least
        turn_s; True when every region has met its CI target. The collector stays off."""
        if not self.ready:
            return False
        place = place or Place(cycle=len(self.places))
        if self.clocks_before is None:
            self.progress.enter("sampling")
            self.clocks_before = self.cpu_clocks()
        stop = self.settings.stop
        with self.failures():
            with collector_off():
                before = disturbance.read(place.siblings)  # around the turn, never inside a timed region
                for state in self.states:
                    if pending_only and state.stop_reason(stop) is not None:
                        continue
                    loaded = self.read_gpu_clocks if self.device is not None and state.region.name == "compute" \
                        else None
                    state.take(self.settings.turn_s, place.cycle, stop.max_samples, self.settings.warmup.rel_tol,
                               loaded=loaded)
                self.windows.append((before, disturbance.read(place.siblings)))
            self.places.append(place)
            for state in self.states:
                state.update_ci(stop.confidence)
        return self.ready and all(s.stop_reason(stop) == "ci" for s in self.states)

    def turn_medians(self) -> dict[str, float]:
        """Each region's median over the last turn, for the bout's judging of its pairs."""
        return {s.region.name: m for s in self.states if (m := s.turn_median()) is not None} if self.ready else {}

    def sample_alone(self) -> None:
        """Turns one after the other until every region may stop (its CI, budget or cap)."""
        while self.ready and any(s.stop_reason(self.settings.stop) is None for s in self.states):
            self.turn(pending_only=True)

    def cpu_clocks(self):
        """The CPU's clocks (a GPU's are read under load only: read_gpu_clocks)."""
        return cpu_clocks_mhz()

    def read_gpu_clocks(self) -> None:
        if len(self.gpu_clocks) < MAX_CLOCK_READINGS:
            reading = self.device.clocks()
            if reading:
                self.gpu_clocks.append(reading)

    def finish(self, stop_reason: str | None = None) -> CellOutcome:
        """The noise checks, the peak memory of one untimed call, the rendering of an op that
        plots, and every field of the record; `stop_reason` is why its bout ended."""
        if self.ready:
            with self.failures():
                self._finish(stop_reason)
        self.release()
        return self.outcome

    def _finish(self, stop_reason: str | None) -> None:
        cell, settings, backend = self.cell, self.settings, self.backend
        self.progress.enter("check")
        self.check()
        states = {s.region.name: s for s in self.states}
        phases = {name: state.phase_fields(settings.stop) for name, state in states.items()}
        seen = disturbance.across(self.windows)
        measured = self.outcome.measured
        measured.update(_sampling_fields(phases, states["compute"].warmup, settings, stop_reason))
        # each turn's place in its bout, in the order taken (a sample's `cycles` entry finds it)
        measured["turns"] = {f.name: [getattr(p, f.name) for p in self.places] for f in fields(Turn)}
        measured["disturbance"] = seen
        measured["diagnostics"] = _diagnose(phases, settings, self.clocks_before or self.cpu_clocks(),
                                            self.cpu_clocks(), self.gpu_clocks, seen)
        if cell.compiled:
            measured["compile"]["recompiles"] = backend.recompiles()
        self.progress.enter("memory")
        measured["memory"] = self.carried.get("memory") or peak_memory(backend, self.untouched_inputs())
        if self.op.finish and self.artifact_path:
            self.progress.enter("saving the rendering")
            rendered = self.op.finish(backend.as_numpy(backend.round_trip(self.host_inputs)))
            write_bytes_atomic(self.artifact_path, rendered)
            measured["artifact"] = os.path.basename(self.artifact_path)
        self.progress.enter("record")

    def check(self) -> None:
        """The result against float64 and the cell's FLOP and byte model, from one untimed
        call; or, where an earlier round of this run checked the cell (`carried`), its
        findings, with the round they come from."""
        cell, backend, measured, carried = self.cell, self.backend, self.outcome.measured, self.carried
        if carried.get("check") and carried.get("model"):
            measured["check"] = {**carried["check"], "from_round": carried["round"]}
            measured["model"] = carried["model"]
            measured["conversion"] = carried.get("conversion") or {"seconds": None}
            return
        original = self.original_inputs()
        result = backend.as_numpy(backend.round_trip(self.untouched_inputs()))
        check = check_result(backend, original, result)
        measured["check"] = check
        measured["model"] = model_of(self.op, cell, original, result, backend.changes, self.input_points)
        measured["conversion"] = {"seconds": conversion_seconds(backend, self.host_inputs)}
        if not check["passed"]:
            where = f" in {check['worst']}" if check.get("worst") else ""
            raise CellFailed("error", f"wrong result: relative error {check['rel_err']:.2e}{where} exceeds the "
                                      f"{cell.dtype} tolerance {check['tolerance']:.2e}")

    def original_inputs(self) -> list:
        """The inputs as the first call saw them, never arguments the timed calls changed."""
        return self.restorer.original(self.host_inputs) if self.restorer is not None else self.host_inputs

    def untouched_inputs(self) -> list:
        """Inputs for an untimed call (the check, a peak reading): copies of the original ones
        where a call changes them, so that the call leaves them as they were."""
        return arguments.fresh(self.original_inputs()) if self.restorer else self.host_inputs

    @contextlib.contextmanager
    def failures(self):
        """A failure of the cell becomes its outcome (skipped, oom, error), never an exception."""
        try:
            yield
        except CellFailed as failure:
            self._fail(failure.status, failure.reason)
        except Unavailable as missing:
            self._fail("skipped", str(missing))
        except NotForLibrary as refusal:  # the reason in words, and the fact as a value
            self._fail("skipped", str(refusal))
            self.outcome.measured["not_for"] = {"library": self.cell.library, "mode": self.cell.mode}
        except correctness.WrongResult as wrong:
            self._fail("error", f"wrong result: {wrong}")
        except Exception as error:  # noqa: BLE001 - any failure of a cell becomes its record
            oom = devices.is_out_of_memory(error, self.torch)
            what = "out of memory" if oom else type(error).__name__
            frame = _user_frame(error, self.kernels)
            self._fail("oom" if oom else "error",
                       f"{what} during {self.progress.phase}: {devices.first_line(error)}{frame}")
            with contextlib.suppress(Exception):  # a broken device must not hide the reason above
                devices.release_memory(self.cell.device, self.torch)
        except Interrupted:
            raise
        except BaseException as error:  # noqa: BLE001 - sys.exit() or KeyboardInterrupt of a kernel: the cell's end
            self._fail("error", f"{_base_exception_words(error)} during {self.progress.phase}"
                                f"{_user_frame(error, self.kernels)}")

    def _fail(self, status: str, reason: str) -> None:
        self.failed = True
        self.outcome.status, self.outcome.reason = status, reason

    def release(self) -> None:
        """Drop the cell's arrays and compiled code before the next cell of this worker."""
        self.states, self.host_inputs, self.backend, self.restorer = [], [], None, None


def run_cell(cell: Cell, settings: Settings, torch=None, artifact_path: str | None = None,
             kernels: dict | None = None, memory_scale: dict | None = None) -> CellOutcome:
    """Measure `cell` alone in this process; failures become outcomes, not exceptions.
    `kernels` holds the user kernels by name (kernels.Kernel), for cells of a kernel;
    `memory_scale` what earlier records of its series measured of its memory (the
    out-of-memory check calibrates on it). For ops with a host finish (plotting), the last
    rendering is saved to `artifact_path`."""
    run = CellRun(cell, settings, torch, artifact_path=artifact_path, kernels=kernels, memory_scale=memory_scale)
    if run.prepare():
        run.sample_alone()
    return run.finish()


RETURNED_TYPES = (np.ndarray, np.generic, int, float, complex, bool)  # a kernel may return numbers too


def _first_kernel_call(op: Op, backend: Backend, host_inputs: list) -> tuple[int, ...]:
    """A user kernel's first call, eager, untimed and on copies of its inputs: the arguments
    it changes (the outputs it writes in place). It must return arrays or numbers (or a
    tuple of them), or nothing where it changes an argument; else the cell ends here naming
    the kernel's file and line, rather than with an AttributeError deep in the copies or the
    check. A library whose arrays cannot be changed (JAX) cannot run a kernel that NumPy's
    own call shows updating its arguments: the cell is skipped, saying which."""
    library = libraries.get(backend.cell.library)
    if not library.mutable_arrays:
        changed = _numpy_changes(op, backend, host_inputs)
        if changed:
            names = ", ".join(op.argument_name(i) for i in changed)
            which = f"argument {names}" if len(changed) == 1 else f"arguments {names}"
            raise NotForLibrary(f"not for {library.name}: the kernel updates its {which} in place, and "
                                f"{library.label} arrays cannot be changed")
    returned, changes = backend.eager_call(host_inputs)
    parts = () if returned is None else returned if isinstance(returned, tuple) else (returned,)
    wrong = [type(part).__name__ for part in parts
             if not (isinstance(part, RETURNED_TYPES) or libraries.owns_array(part))]
    code = op.kernel.fn.__code__
    where = f"(at {os.path.basename(code.co_filename)}:{code.co_firstlineno})"
    if wrong:
        raise CellFailed("error", f"kernel {op.kernel.name} returned {wrong[0]}, not an array {where}")
    if not parts and not changes and backend.lib is not np:
        # NumPy's code may update what this library's leaves alone: those arguments are the
        # outputs, and the check says which this variant got wrong
        changes = _numpy_changes(op, backend, host_inputs)
    if not parts and not changes:
        raise CellFailed("error", f"kernel {op.kernel.name} returned nothing and changed none of its arguments, so "
                                  f"there is nothing to check {where}")
    return changes


def _numpy_changes(op: Op, backend: Backend, host_inputs: list) -> tuple[int, ...]:
    """The arguments NumPy's own code changes, called on copies of the inputs."""
    copies = arguments.fresh([backend.as_numpy(x) for x in host_inputs])
    op.compute(np, *copies)
    return arguments.changed(host_inputs, copies)


def _timing_of(op: Op, backend: Backend, compute: Region, repeats: int = 5) -> dict:
    """How a kernel's calls were timed: the arguments a call changes, whether each call was
    timed alone after they were put back (`per_call`), and what putting them back costs
    (the median of a few restores, outside every timed region)."""
    restore_s = None
    if compute.restore is not None:
        took = []
        for _ in range(repeats):
            began = time.perf_counter()
            compute.restore()
            compute.sync()
            took.append(time.perf_counter() - began)
        restore_s = float(np.median(took))
    return {"changes": [op.argument_name(i) for i in backend.changes], "per_call": compute.per_call,
            "restore_s": restore_s}


def _base_exception_words(error: BaseException) -> str:
    """What a BaseException that is no Exception means: "the kernel called sys.exit(0)"."""
    if isinstance(error, SystemExit):
        return f"the kernel called sys.exit({error.code!r})"[:200]
    return f"the kernel raised {type(error).__name__}"


def _user_frame(error: BaseException, kernels: dict | None) -> str:
    """Where in the user's kernels file an exception was raised: " (at my_kernels.py:12)"."""
    import traceback

    files = {getattr(k.fn, "__code__", None) and k.fn.__code__.co_filename for k in (kernels or {}).values()}
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in files]
    return f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""


def peak_memory(backend: Backend, host_inputs: list) -> dict:
    """Peak memory of one call, untimed, after the sampling (measure/memory.py): on the host,
    what a call with NumPy arrays in and out allocates; on a GPU, what the device-resident
    call allocates there."""
    cell, torch = backend.cell, backend.torch
    method = libraries.runtime(cell.library, cell.compiled).host_peak_method  # compiled NumPy runs torch
    found = {"host": memory.host_peak(lambda: backend.round_trip(host_inputs), method, torch)}
    if cell.is_gpu:
        device_inputs = [backend.to_device(x) for x in host_inputs]
        try:
            found["device"] = memory.device_peak(lambda: backend.compute(device_inputs), backend.device)
        except Exception as error:  # noqa: BLE001 - an unavailable reading is said, never a failed cell
            found["device"] = {"peak_bytes": None, "method": "not measured", "reason": devices.first_line(error)}
        del device_inputs
    return found


def _sampling_fields(phases: dict[str, dict], warmup: Warmup, settings: Settings,
                     stop_reason: str | None) -> dict:
    compute = phases["compute"]
    reasons = {phase["stop_reason"] for phase in phases.values()}
    own = "ci" if reasons == {"ci"} else ("max_samples" if "max_samples" in reasons else "budget")
    return {
        "samples_s": list(compute["samples_s"]),
        "calls_per_sample": compute["calls_per_sample"],
        "warmup": {"count": len(warmup.blocks_s), "samples_s": list(warmup.blocks_s),
                   "first_call_s": warmup.first_call_s},
        "phases": phases,
        "stopping": {
            "stop_reason": stop_reason or own,
            "converged": all(phase["converged"] for phase in phases.values()),
            "rel_ci": compute["rel_ci"],
            "n_samples": len(compute["samples_s"]),
            "elapsed_s": sum(phase["sampling_s"] for phase in phases.values()),
            "sweeps": len({cycle for phase in phases.values() for cycle in phase["cycles"]}),
            "target_rel_ci": settings.stop.target_rel_ci,
        },
    }


def _diagnose(phases: dict[str, dict], settings: Settings, before, after, gpu_clocks: list[dict],
              seen: dict) -> dict:
    flags = [disturbance.flag_for(seen)]
    for name, phase in phases.items():
        reason = "ci" if phase["converged"] else phase["stop_reason"]
        flags += diagnostics.flags_for_samples(phase["samples_s"], reason, phase["rel_ci"],
                                               settings.stop.target_rel_ci, name)
    flags += [diagnostics.clock_change(before, after, "CPU"), diagnostics.clock_spread(gpu_clocks, "GPU")]
    flags = [flag for flag in flags if flag]
    return {
        "unstable": bool(flags),
        "flags": [flag.to_json() for flag in flags],
        "cpu_clocks": {"before": before, "after": after},
        "gpu_clocks": {"under_load": gpu_clocks},
    }
