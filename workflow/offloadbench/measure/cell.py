"""Measure one cell: build its timed regions, check the result, time them, diagnose.

The regions of a cell:
- compute: the op on inputs already where it runs (device-resident time);
- h2d / d2h (cuda, mps): inputs host->device, result device->host;
- finish (ops with host work, e.g. plotting): that work on the host result;
- end_to_end: host inputs in, host result out (and finished), as one region.
numpy cells have no copies, and their end-to-end region is the compute region when the op
has no host finish; torch cells on the cpu wrap and unwrap numpy arrays without copying.
Compiled cells (measure.compiled) time the same regions with the compiled code, after a
compile phase of their own: the first calls, which are never samples.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..catalogue import MEMORY_HEADROOM, call_bytes, working_set_bytes
from ..cells import ITEMSIZE, Cell
from ..kernels import kernel_tolerance
from ..records import write_bytes_atomic
from . import compiled, correctness, devices, diagnostics, disturbance, memory, system
from .ops import Op, get_op
from .provenance import cpu_clocks_mhz
from .timing import BlockRule, Measurement, Region, StopRule, WarmupRule, sample_until_stable, warm_up

TORCH_ONLY_DTYPES = ("bfloat16",)
PHASES = ("h2d", "compute", "d2h", "finish", "end_to_end")


@dataclass(frozen=True)
class Settings:
    """Measurement settings; `from_config` reads the `measure` section of the config."""

    stop: StopRule = field(default_factory=StopRule)
    warmup: WarmupRule = field(default_factory=WarmupRule)
    block: BlockRule = field(default_factory=BlockRule)
    seed: int = 0
    check_rows: int = 32
    pinned_memory: bool = False
    allow_tf32: bool = False
    memory_headroom: float = MEMORY_HEADROOM
    compile_backend: str = "inductor"
    compile_mode: str = "default"
    cold_cache: bool = True
    resident_calls: tuple[int, ...] = (1, 16)  # the k of each resident trip (GPU cells that chain)

    @classmethod
    def from_config(cls, section: dict, compile_section: dict | None = None) -> Settings:
        compile_section = compile_section or {}
        return cls(
            stop=StopRule(
                target_rel_ci=float(section["target_rel_ci"]),
                min_samples=int(section["min_samples"]),
                min_sampling_s=float(section["min_sampling_s"]),
                max_samples=int(section["max_samples"]),
                budget_s=float(section["budget_s"]),
            ),
            warmup=WarmupRule(budget_s=float(section["warmup_budget_s"])),
            block=BlockRule(min_sample_s=float(section["min_sample_s"])),
            seed=int(section["seed"]),
            check_rows=int(section["check_rows"]),
            pinned_memory=bool(section["pinned_memory"]),
            allow_tf32=bool(section["allow_tf32"]),
            compile_backend=str(compile_section.get("backend", "inductor")),
            compile_mode=str(compile_section.get("mode", "default")),
            cold_cache=bool(compile_section.get("cold_cache", True)),
            resident_calls=tuple(int(k) for k in section.get("resident_calls", (1, 16))),
        )


@dataclass
class Progress:
    """What the cell is doing now; the supervisor reads it to explain a timeout."""

    report: Callable[[str], None] = lambda message: None
    phase: str = "starting"

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.report(phase)


@dataclass
class CellOutcome:
    """What measuring a cell found: a status, and the record fields it filled in."""

    status: str = "ok"
    reason: str = ""
    measured: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)  # what the cell set up (TF32, memory kind)


class CellFailed(Exception):
    """Ends a cell early with a status other than ok (skipped, oom, error)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _available_host_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _np_dtype(dtype: str):
    return np.dtype(dtype) if dtype not in TORCH_ONLY_DTYPES else np.dtype("float32")


def make_host_inputs(op: Op, cell: Cell, seed: int, torch=None) -> list:
    """The op's random inputs on the host, rounded to the cell's dtype: numpy arrays, or
    CPU tensors for bfloat16."""
    arrays = [a.astype(_np_dtype(cell.dtype)) for a in op.make_inputs(np.random.default_rng(seed), cell.size)]
    if cell.dtype in TORCH_ONLY_DTYPES:
        return [torch.from_numpy(a).to(getattr(torch, cell.dtype)) for a in arrays]
    return arrays


def as_float64(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x if x.dtype in (np.float64, np.complex128) else x.astype(np.float64)
    return x.detach().to("cpu").double().numpy()


class Backend:
    """How a library moves data and runs the op on one device, eager or compiled."""

    def __init__(self, cell: Cell, op: Op, settings: Settings, torch=None):
        self.cell, self.op, self.settings, self.torch = cell, op, settings, torch
        self.lib = torch if cell.library == "torch" else np
        self.sync = devices.synchronizer(cell.device, torch)
        # numpy compiled on a GPU moves its data as torch does: device tensors in the
        # device-resident form, host arrays copied by the compiled code end to end.
        self.tensors = cell.library == "torch" or (cell.compiled and cell.is_gpu)
        self.compiled_fn = self.end_to_end_fn = None
        self.watch, self.graphs_at_compile = None, 0  # set by first_calls
        self.resident_reason: str | None = None  # why the cell has no resident trips (set by build_regions)
        if cell.compiled:
            self._compile()

    def _compile(self) -> None:
        torch, op, lib = self.torch, self.op, self.lib

        def code(*inputs):
            return op.compute(lib, *inputs)

        if self.cell.library == "numpy" and self.cell.is_gpu:
            self.compiled_fn = compiled.compile_function(compiled.numpy_on_device(code, torch), torch, self.settings)
            plain = compiled.compile_function(code, torch, self.settings)
            self.end_to_end_fn = compiled.under_device(plain, self.cell.device, torch)
        else:
            self.compiled_fn = compiled.compile_function(code, torch, self.settings)

    def to_device(self, host):
        if not self.tensors:
            return host
        torch = self.torch
        tensor = host if isinstance(host, torch.Tensor) else torch.from_numpy(host)
        if self.cell.device == "cpu":
            return tensor
        return tensor.to(self.cell.device, non_blocking=self.settings.pinned_memory)

    def to_host(self, result):
        """The result on the host: numpy arrays (CPU tensors for bfloat16); tuples stay tuples."""
        if isinstance(result, tuple):
            return tuple(self.to_host(part) for part in result)
        if not self.tensors or isinstance(result, np.ndarray | np.generic):
            return result
        if self.cell.device == "cpu":
            host = result
        elif self.settings.pinned_memory and self.cell.device == "cuda":
            host = self.torch.empty(result.shape, dtype=result.dtype, pin_memory=True)
            host.copy_(result, non_blocking=True)
            self.sync()
        else:
            host = result.to("cpu")
        return host if host.dtype == self.torch.bfloat16 else host.numpy()

    def as_numpy(self, host):
        """A host result as numpy arrays (bfloat16 is widened)."""
        if isinstance(host, tuple):
            return tuple(self.as_numpy(part) for part in host)
        if isinstance(host, np.ndarray | np.generic):
            return np.asarray(host)
        return host.float().numpy() if host.dtype == self.torch.bfloat16 else host.numpy()

    def compute(self, inputs):
        if self.compiled_fn is not None:
            return self.compiled_fn(*inputs)
        return self.op.compute(self.lib, *inputs)

    def round_trip(self, host_inputs: list):
        """Host inputs in, the host result out: what a user's code does."""
        if self.end_to_end_fn is not None:
            return self.end_to_end_fn(*host_inputs)
        return self.to_host(self.compute([self.to_device(x) for x in host_inputs]))

    def first_calls(self, host_inputs: list) -> dict:
        """The compile phase: the first call of each compiled form, timed, and what Dynamo
        did meanwhile."""
        watch = compiled.CompileWatch(self.torch)
        self.torch._dynamo.reset()  # nothing of an earlier cell's compiles serves this one
        watch.begin()
        device_inputs = [self.to_device(x) for x in host_inputs]
        with memory.watching_first_call(self.cell.device, self.torch) as peak:  # reset before, read after
            phase = {"first_call_s": compiled.timed_first_call(self.compiled_fn, device_inputs, self.sync)}
        phase["memory"] = peak
        found = watch.since()  # of the device-resident form, which every compiled cell has
        if self.end_to_end_fn is not None:
            try:
                phase["end_to_end_first_call_s"] = compiled.timed_first_call(self.end_to_end_fn, host_inputs, self.sync)
                phase["end_to_end_form"] = "the NumPy function under torch.device, host arrays in and out"
            except Exception as error:  # noqa: BLE001 - some torch versions fail here; the copies still count
                self.end_to_end_fn = None
                phase["end_to_end_form"] = ("host arrays copied around the device-resident code: under torch.device "
                                            f"the compiled NumPy function failed ({compiled.short_reason(str(error))})")
        self.watch = watch
        self.graphs_at_compile = watch.since()["graphs"]
        settings = self.settings
        return {
            **phase, **found, "fallback": compiled.fallback_of(found),
            "backend": settings.compile_backend, "mode": settings.compile_mode, "dynamic": False,
            "torch_version": self.torch.__version__,
            "cache": {"cold": settings.cold_cache, "hits": found["cache_hits"], "misses": found["cache_misses"],
                      "warm": found["cache_hits"] > 0},
        }

    def recompiles(self) -> int:
        """Graphs compiled after the compile phase: guards that failed while sampling."""
        return max(0, self.watch.since()["graphs"] - self.graphs_at_compile)

    def pin(self, host_inputs: list) -> list:
        """With pinned_memory, the inputs live in pinned memory from the start, as when an
        application allocates its buffers pinned; copying them there is not timed."""
        if not (self.settings.pinned_memory and self.cell.device == "cuda"):
            return host_inputs
        torch = self.torch
        return [(x if isinstance(x, torch.Tensor) else torch.from_numpy(x)).pin_memory() for x in host_inputs]


def build_regions(backend: Backend, host_inputs: list) -> dict[str, Region]:
    """The timed regions of the cell, keyed by phase name, in phase order."""
    op, cell, sync = backend.op, backend.cell, backend.sync
    device_inputs = [backend.to_device(x) for x in host_inputs]
    sync()
    result = backend.compute(device_inputs)
    host_array = backend.as_numpy(backend.to_host(result)) if op.finish else None

    def compute():
        return backend.compute(device_inputs)

    def end_to_end():
        out = backend.round_trip(host_inputs)
        if op.finish:
            op.finish(backend.as_numpy(out))
        return out

    regions = {"compute": Region("compute", compute, sync)}
    if cell.is_gpu:
        regions["h2d"] = Region("h2d", lambda: [backend.to_device(x) for x in host_inputs], sync)
        regions["d2h"] = Region("d2h", lambda: backend.to_host(result), sync)
    if op.finish:
        regions["finish"] = Region("finish", lambda: op.finish(host_array))
    if backend.tensors or op.finish:
        regions["end_to_end"] = Region("end_to_end", end_to_end, sync)
    ordered = {name: regions[name] for name in PHASES if name in regions}
    backend.resident_reason = resident_reason(backend, device_inputs, result)
    if backend.resident_reason is None:
        for k in backend.settings.resident_calls:
            ordered[f"resident_{k}"] = Region(f"resident_{k}", resident_trip(backend, host_inputs, k), sync)
    return ordered


CHAINED_FAMILIES = ("elementwise",)  # ops whose output can be the next call's input, as a time loop's


def resident_reason(backend: Backend, device_inputs: list, result) -> str | None:
    """Why a cell has no resident trips, or None: they need a GPU, an op that chains (an
    elementwise op or a kernel of yours) and a result shaped and typed like its first input."""
    op, cell = backend.op, backend.cell
    if not cell.is_gpu:
        return "no device to keep the data on: the data are always on the host"
    if op.kernel is None and op.spec.family not in CHAINED_FAMILIES:
        return f"{cell.op} does not chain (only elementwise ops and kernels of yours do)"
    first = device_inputs[0] if device_inputs else None
    same = (first is not None and not isinstance(result, tuple) and getattr(result, "shape", None) == first.shape
            and getattr(result, "dtype", None) == first.dtype)
    return None if same else "its result is not shaped and typed like its first input, so calls cannot chain"


def resident_trip(backend: Backend, host_inputs: list, calls: int) -> Callable[[], object]:
    """One copy in, `calls` calls chained on the device (each output the next call's first
    input, the rest kept), one copy out: a time loop that keeps its field on the device."""
    def trip():
        inputs = [backend.to_device(x) for x in host_inputs]
        for _ in range(calls):
            inputs = [backend.compute(inputs), *inputs[1:]]
        return backend.to_host(inputs[0])

    return trip


def check_result(backend: Backend, host_inputs: list) -> tuple[dict, object]:
    """The op's error against a float64 reference from the same inputs, its verdict, and
    the host result."""
    op, cell, settings = backend.op, backend.cell, backend.settings
    rows = correctness.check_rows(cell.size, settings.check_rows, np.random.default_rng(settings.seed + 1))
    result = backend.as_numpy(backend.round_trip(host_inputs))
    inputs = [as_float64(x) for x in host_inputs]
    if op.kernel is not None:  # a kernel's result must also have the cell's precision
        error = op.error(inputs, result, rows, precision=_np_dtype(cell.dtype))
    else:
        error = op.error(inputs, result, rows)
    tf32 = settings.allow_tf32 and backend.tensors and cell.device == "cuda"
    checked = len(rows) if op.checks_sampled_rows else None
    own = kernel_tolerance(op.kernel, cell.dtype) if op.kernel is not None else None
    return correctness.verdict(error, cell.dtype, op.spec.error_growth(cell.size), tf32, checked, own), result


def configure_torch(torch, settings: Settings) -> dict:
    """TF32 for CUDA matmuls only, as configured. set_float32_matmul_precision would also let
    oneDNN lower the precision of CPU matmuls, which the CPU tolerance does not allow for."""
    torch.backends.cuda.matmul.allow_tf32 = settings.allow_tf32
    torch.backends.cudnn.allow_tf32 = settings.allow_tf32
    return {"tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32)}


def _nbytes(values) -> int:
    if isinstance(values, tuple | list):
        return sum(_nbytes(v) for v in values)
    if isinstance(values, np.ndarray | np.generic):
        return int(np.asarray(values).nbytes)
    return int(values.element_size() * values.numel())  # a torch tensor (bfloat16 on the host)


def _memory_precheck(op: Op, cell: Cell, settings: Settings, scale: dict | None = None, torch=None) -> None:
    """Refuse a cell that would not fit before measuring it: the working-set model, its
    results and temporaries calibrated by what earlier records of the series measured
    (`scale`, from the round job) where there are any."""
    scale = scale or {}
    itemsize = ITEMSIZE[cell.dtype]
    need = working_set_bytes(op.spec, cell.size, itemsize, scale.get("host"))
    how = "measured" if scale.get("host") is not None else "modelled"
    available = _available_host_memory()
    if available is not None and need > settings.memory_headroom * available:
        raise CellFailed(
            "oom", f"needs about {need / 2**30:.1f} GiB of host memory ({how}), {available / 2**30:.1f} GiB available"
        )
    if cell.device == "cuda" and scale.get("device") is not None:
        free, _ = torch.cuda.mem_get_info()
        device_need = call_bytes(op.spec, cell.size, itemsize, scale["device"])
        if device_need > settings.memory_headroom * free:
            raise CellFailed("oom", f"needs about {device_need / 2**30:.1f} GiB of cuda memory (measured), "
                                    f"{free / 2**30:.1f} GiB free")


def model_of(op: Op, cell: Cell, host_inputs: list, host_result) -> dict:
    """The FLOP and byte model of the cell (None where the op has none, as a user kernel
    without models), and the bytes that cross the link, from the arrays themselves."""
    spec, itemsize = op.spec, ITEMSIZE[cell.dtype]
    return {
        "flops": float(spec.flops(cell.size)) if spec.flops else None,
        "traffic_bytes": float(spec.traffic(cell.size, itemsize)) if spec.traffic else None,
        "h2d_bytes": _nbytes(host_inputs),
        "d2h_bytes": _nbytes(host_result),
        "itemsize": itemsize,
    }


def warm_process(library: str, torch=None, seconds: float = 0.5) -> float:
    """Bring a fresh worker to a steady state before its first cell: its thread pool awake,
    its allocator holding reusable memory, its clocks up. Without this a worker's first
    cells ran about 15% slower than its later ones on our 2-core test machine."""
    lib = torch if library == "torch" else np
    rng = np.random.default_rng(0)
    square = rng.random((256, 256)).astype("float32")
    vector = rng.random(1 << 20).astype("float32")
    if library == "torch":
        square, vector = torch.from_numpy(square), torch.from_numpy(vector)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        square @ square
        lib.exp(vector) * 1.5 + vector
    return time.perf_counter() - start


def run_cell(cell: Cell, settings: Settings, torch=None, progress: Progress | None = None,
             artifact_path: str | None = None, kernels: dict | None = None,
             memory_scale: dict | None = None) -> CellOutcome:
    """Measure `cell`; failures become outcomes, not exceptions. `kernels` holds the user
    kernels by name (kernels.Kernel), for cells of a kernel; `memory_scale` what earlier
    records of its series measured of its memory (the out-of-memory check calibrates on it).

    For ops with a host finish (plotting), the last rendering is saved to `artifact_path`."""
    progress = progress or Progress()
    outcome = CellOutcome()
    try:
        _measure_into(outcome, cell, settings, torch, progress, artifact_path, kernels, memory_scale)
    except CellFailed as failure:
        outcome.status, outcome.reason = failure.status, failure.reason
    except correctness.WrongResult as wrong:
        outcome.status, outcome.reason = "error", f"wrong result: {wrong}"
    except Exception as error:  # noqa: BLE001 - any failure of a cell becomes its record
        oom = devices.is_out_of_memory(error, torch)
        outcome.status = "oom" if oom else "error"
        what = "out of memory" if oom else type(error).__name__
        outcome.reason = f"{what} during {progress.phase}: {_first_line(error)}{_user_frame(error, kernels)}"
        with contextlib.suppress(Exception):  # a broken device must not hide the reason above
            devices.release_memory(cell.device, torch)
    return outcome


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


def _user_frame(error: BaseException, kernels: dict | None) -> str:
    """Where in the user's kernels file an exception was raised: " (at my_kernels.py:12)"."""
    import traceback

    files = {getattr(k.fn, "__code__", None) and k.fn.__code__.co_filename for k in (kernels or {}).values()}
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in files]
    return f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""


def _prepare(outcome: CellOutcome, cell: Cell, settings: Settings, torch, kernels: dict | None,
             memory_scale: dict | None = None) -> Op:
    op = get_op(cell.op, kernels)
    uses_torch = cell.library == "torch" or cell.compiled
    reason = devices.unavailable_reason(cell.device, torch) if uses_torch else None
    if not reason and cell.compiled:
        reason = compiled.unavailable_reason(cell.device, torch)
    if reason:
        raise CellFailed("skipped", reason)
    if uses_torch:
        outcome.settings.update(configure_torch(torch, settings))
        outcome.measured["device"] = devices.describe(cell.device, torch)
    if op.kernel is not None:
        outcome.measured["op_info"] = {"kind": "kernel", "takes_xp": op.kernel.takes_xp, "n_means": op.spec.n_means}
    _memory_precheck(op, cell, settings, memory_scale, torch)
    return op


def _measure_into(outcome: CellOutcome, cell: Cell, settings: Settings, torch, progress: Progress,
                  artifact_path: str | None, kernels: dict | None, memory_scale: dict | None = None) -> None:
    op = _prepare(outcome, cell, settings, torch, kernels, memory_scale)
    gpu_index = torch.cuda.current_device() if cell.device == "cuda" else None
    if gpu_index is not None:  # NVML's first call is slow: make it before warm-up, not after
        system.gpu_clocks(gpu_index)

    progress.enter("inputs")
    backend = Backend(cell, op, settings, torch)
    host_inputs = backend.pin(make_host_inputs(op, cell, settings.seed, torch))

    if cell.compiled:
        progress.enter("compile")
        outcome.measured["compile"] = backend.first_calls(host_inputs)

    progress.enter("check")
    check, result = check_result(backend, host_inputs)
    outcome.measured["check"] = check
    outcome.measured["model"] = model_of(op, cell, host_inputs, result)
    if not check["passed"]:
        raise CellFailed(
            "error",
            f"wrong result: relative error {check['rel_err']:.2e} exceeds the {cell.dtype} "
            f"tolerance {check['tolerance']:.2e}",
        )

    warmed = []
    for name, region in build_regions(backend, host_inputs).items():
        progress.enter(f"warm-up {name}")
        warmed.append((region, warm_up(region, settings.block, settings.warmup)))

    if cell.is_gpu and backend.resident_reason:
        outcome.measured["resident"] = {"reason": backend.resident_reason}
    progress.enter("sampling")
    clocks_before = (cpu_clocks_mhz(), system.gpu_clocks(gpu_index) if gpu_index is not None else None)
    watched = disturbance.read()  # around the sampling, never inside a timed region
    sampled = sample_until_stable(warmed, settings.stop)
    seen = disturbance.between(watched, disturbance.read())
    clocks_after = (cpu_clocks_mhz(), system.gpu_clocks(gpu_index) if gpu_index is not None else None)

    outcome.measured.update(_sampling_fields(sampled, settings))
    outcome.measured["disturbance"] = seen
    outcome.measured["diagnostics"] = _diagnose(sampled.measurements, settings, clocks_before, clocks_after, seen)
    if cell.compiled:
        outcome.measured["compile"]["recompiles"] = backend.recompiles()
    progress.enter("memory")
    outcome.measured["memory"] = peak_memory(backend, host_inputs)
    if op.finish and artifact_path:
        progress.enter("saving the rendering")
        rendered = op.finish(backend.as_numpy(backend.round_trip(host_inputs)))
        write_bytes_atomic(artifact_path, rendered)
        outcome.measured["artifact"] = os.path.basename(artifact_path)


def peak_memory(backend: Backend, host_inputs: list) -> dict:
    """Peak memory of one call, untimed, after the sampling (measure/memory.py): on the host,
    what a call with NumPy arrays in and out allocates; on a GPU, what the device-resident
    call allocates there."""
    cell, torch = backend.cell, backend.torch
    torch_based = cell.library == "torch" or cell.compiled  # compiled NumPy runs torch underneath
    found = {"host": memory.host_peak(lambda: backend.round_trip(host_inputs), torch_based, torch)}
    if cell.is_gpu:
        device_inputs = [backend.to_device(x) for x in host_inputs]
        try:
            found["device"] = memory.device_peak(lambda: backend.compute(device_inputs), cell.device, torch,
                                                 backend.sync)
        except Exception as error:  # noqa: BLE001 - an unavailable reading is said, never a failed cell
            found["device"] = {"peak_bytes": None, "method": "not measured", "reason": _first_line(error)}
        del device_inputs
    return found


def _phase_fields(m: Measurement) -> dict:
    return {
        "samples_s": list(m.samples_s),
        "calls_per_sample": m.calls_per_sample,
        "warmup_s": list(m.warmup.blocks_s),
        "rel_ci": m.rel_ci,
        "converged": m.converged,
        "stop_reason": m.stop_reason,
        "sampling_s": m.sampling_s,
    }


def _sampling_fields(sampled, settings: Settings) -> dict:
    compute = sampled.measurements["compute"]
    return {
        "samples_s": list(compute.samples_s),
        "calls_per_sample": compute.calls_per_sample,
        "warmup": {
            "count": len(compute.warmup.blocks_s),
            "samples_s": list(compute.warmup.blocks_s),
            "first_call_s": compute.warmup.first_call_s,
        },
        "phases": {name: _phase_fields(m) for name, m in sampled.measurements.items()},
        "stopping": {
            "stop_reason": sampled.stop_reason,
            "converged": all(m.converged for m in sampled.measurements.values()),
            "rel_ci": compute.rel_ci,
            "n_samples": len(compute.samples_s),
            "elapsed_s": sampled.elapsed_s,
            "sweeps": sampled.sweeps,
            "target_rel_ci": settings.stop.target_rel_ci,
        },
    }


def _diagnose(measurements: dict[str, Measurement], settings: Settings, before, after,
              seen: dict | None = None) -> dict:
    flags = [flag for flag in [disturbance.flag_for(seen or {})] if flag]
    for name, m in measurements.items():
        reason = "ci" if m.converged else m.stop_reason
        for flag in diagnostics.flags_for_samples(m.samples_s, reason, m.rel_ci, settings.stop.target_rel_ci):
            flags.append(flag if name == "compute" else f"{name}: {flag}")
    for flag in (diagnostics.clock_change(before[0], after[0], "CPU"), diagnostics.clock_change(before[1], after[1], "GPU")):
        if flag:
            flags.append(flag)
    return {
        "unstable": bool(flags),
        "flags": flags,
        "cpu_clocks": {"before": before[0], "after": after[0]},
        "gpu_clocks": {"before": before[1], "after": after[1]},
    }
