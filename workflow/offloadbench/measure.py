"""Measure one cell: build its timed regions, check the result, time, and write the record.

The regions of a cell (DESIGN.md section 5):
- compute: the op on inputs already where it runs (device-resident time);
- h2d / d2h (cuda, mps): inputs host->device, result device->host;
- finish (ops with host work, e.g. plotting): that work on the host result;
- end_to_end: host inputs in, host result out (and finished), as one region.
numpy cells have no copies, and their end-to-end region is the compute region when the op
has no host finish; torch cells on the cpu wrap and unwrap numpy arrays without copying.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import correctness, devices, diagnostics
from .cells import Cell
from .ops import Op, get_op
from .provenance import cpu_clocks_mhz, fingerprint, host_facts, utc_now
from .records import base_record, write_bytes_atomic
from .timing import BlockRule, Region, StopRule, WarmupRule, sample_until_stable, warm_up

TORCH_ONLY_DTYPES = ("bfloat16",)
PHASE_ORDER = ("h2d", "compute", "d2h", "finish", "end_to_end")


@dataclass(frozen=True)
class Settings:
    """Measurement settings; `from_config` reads the `measure` section of the config."""

    stop: StopRule = StopRule()
    warmup: WarmupRule = WarmupRule()
    block: BlockRule = BlockRule()
    seed: int = 0
    check_rows: int = 32
    pinned_memory: bool = False
    allow_tf32: bool = False
    timeout_s: float = 600.0
    memory_headroom: float = 0.8

    @classmethod
    def from_config(cls, section: dict) -> "Settings":
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
            timeout_s=float(section["timeout_s"]),
        )

    def as_dict(self) -> dict:
        """Flat, with the config's key names, as stored in every record."""
        return {
            "target_rel_ci": self.stop.target_rel_ci,
            "min_samples": self.stop.min_samples,
            "min_sampling_s": self.stop.min_sampling_s,
            "max_samples": self.stop.max_samples,
            "budget_s": self.stop.budget_s,
            "warmup_budget_s": self.warmup.budget_s,
            "min_sample_s": self.block.min_sample_s,
            "seed": self.seed,
            "check_rows": self.check_rows,
            "pinned_memory": self.pinned_memory,
            "allow_tf32": self.allow_tf32,
            "timeout_s": self.timeout_s,
        }


@dataclass
class Progress:
    """What the cell is doing now; the supervisor reads it to explain a timeout."""

    report: Callable[[str], None] = lambda message: None
    phase: str = "starting"

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.report(phase)


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


def itemsize_of(dtype: str) -> int:
    return 2 if dtype in ("float16", "bfloat16") else np.dtype(dtype).itemsize


def _np_dtype(dtype: str):
    return np.dtype(dtype) if dtype not in TORCH_ONLY_DTYPES else np.dtype("float32")


def make_host_inputs(op: Op, cell: Cell, seed: int, torch=None) -> list:
    """Random inputs in [-1, 1) on the host: numpy arrays, or CPU tensors for bfloat16."""
    rng = np.random.default_rng(seed)
    shape = op.input_shape(cell.size)
    arrays = []
    for _ in range(op.n_inputs):
        values = rng.random(shape, dtype=np.float64) * 2.0 - 1.0
        arrays.append(values.astype(_np_dtype(cell.dtype)))
        del values
    if cell.dtype in TORCH_ONLY_DTYPES:
        return [torch.from_numpy(a).to(getattr(torch, cell.dtype)) for a in arrays]
    return arrays


def as_float64(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.astype(np.float64, copy=False)
    return x.detach().to("cpu").double().numpy()


class Backend:
    """How a library moves data and runs the op on one device."""

    def __init__(self, cell: Cell, op: Op, settings: Settings, torch=None):
        self.cell, self.op, self.settings, self.torch = cell, op, settings, torch
        self.lib = torch if cell.library == "torch" else np
        self.sync = devices.synchronizer(cell.device, torch)

    # host <-> where the op runs
    def to_device(self, host):
        if self.cell.library == "numpy":
            return host
        torch = self.torch
        tensor = host if isinstance(host, torch.Tensor) else torch.from_numpy(host)
        if self.cell.device == "cpu":
            return tensor
        return tensor.to(self.cell.device, non_blocking=self.settings.pinned_memory)

    def to_host(self, result):
        """The result on the host: a numpy array (a CPU tensor for bfloat16)."""
        if self.cell.library == "numpy":
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
        """The host result as a numpy array for the finish step (bfloat16 is widened)."""
        if isinstance(host, np.ndarray):
            return host
        if host.dtype == self.torch.bfloat16:
            return host.float().numpy()
        return host.numpy()

    def compute(self, inputs):
        return self.op.compute(self.lib, *inputs)

    def pin(self, host_inputs: list) -> list:
        """With pinned_memory, the inputs live in pinned memory from the start, as when an
        application allocates its buffers pinned; copying them there is not timed."""
        if not (self.settings.pinned_memory and self.cell.device == "cuda"):
            return host_inputs
        torch = self.torch
        return [
            (x if isinstance(x, torch.Tensor) else torch.from_numpy(x)).pin_memory()
            for x in host_inputs
        ]


def build_regions(backend: Backend, host_inputs: list) -> dict[str, Region]:
    """The timed regions of the cell, keyed by phase name."""
    op, cell, sync = backend.op, backend.cell, backend.sync
    device_inputs = [backend.to_device(x) for x in host_inputs]
    sync()
    result = backend.compute(device_inputs)
    host_array = backend.as_numpy(backend.to_host(result)) if op.finish else None

    def compute():
        return backend.compute(device_inputs)

    def end_to_end():
        out = backend.to_host(backend.compute([backend.to_device(x) for x in host_inputs]))
        if op.finish:
            op.finish(backend.as_numpy(out))
        return out

    regions = {"compute": Region("compute", compute, sync)}
    if cell.is_gpu:
        regions["h2d"] = Region("h2d", lambda: [backend.to_device(x) for x in host_inputs], sync)
        regions["d2h"] = Region("d2h", lambda: backend.to_host(result), sync)
    if op.finish:
        regions["finish"] = Region("finish", lambda: op.finish(host_array))
    if cell.library == "torch" or op.finish:
        regions["end_to_end"] = Region("end_to_end", end_to_end, sync)
    return {name: regions[name] for name in PHASE_ORDER if name in regions}


def check_result(backend: Backend, host_inputs: list) -> dict:
    """Compare sampled output rows against a float64 reference from the same inputs."""
    op, cell, settings = backend.op, backend.cell, backend.settings
    rng = np.random.default_rng(settings.seed + 1)
    rows = correctness.check_rows(cell.size, settings.check_rows, rng)
    result = backend.to_host(backend.compute([backend.to_device(x) for x in host_inputs]))
    result_rows = as_float64(result[rows] if isinstance(result, np.ndarray) else result[rows.tolist()])
    reference = op.reference_rows([as_float64(x) for x in host_inputs], rows)
    tf32 = settings.allow_tf32 and cell.library == "torch" and cell.device == "cuda"
    return correctness.check(result_rows, reference, cell.dtype, op.inner_dimension(cell.size), tf32, len(rows))


def _configure_torch(torch, settings: Settings) -> dict:
    """TF32 for CUDA matmuls only, as configured. set_float32_matmul_precision would also let
    oneDNN lower the precision of CPU matmuls, which the CPU tolerance does not allow for."""
    torch.backends.cuda.matmul.allow_tf32 = settings.allow_tf32
    torch.backends.cudnn.allow_tf32 = settings.allow_tf32
    return {"tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32)}


def _memory_precheck(op: Op, cell: Cell, settings: Settings) -> None:
    need = op.working_set_bytes(cell.size, itemsize_of(cell.dtype))
    available = _available_host_memory()
    if available is not None and need > settings.memory_headroom * available:
        raise CellFailed(
            "oom",
            f"needs about {need / 2**30:.1f} GiB of host memory, "
            f"{available / 2**30:.1f} GiB available",
        )


def _phase_summary(region: Region) -> dict:
    return {
        "samples_s": region.samples_s,
        "calls_per_sample": region.calls_per_sample,
        "warmup_s": region.warmup_s,
        "rel_ci": region.rel_ci,
        "converged": region.converged,
        "stop_reason": region.stop_reason,
        "sampling_s": region.spent_s,
    }


def run_cell(
    cell: Cell,
    machine: str,
    settings: Settings,
    torch=None,
    progress: Progress | None = None,
    extra: dict | None = None,
    artifact_path: str | None = None,
) -> dict:
    """Measure `cell` and return its record; failures become records, not exceptions.

    For ops with a host finish (plotting), the last rendering is saved to `artifact_path`."""
    progress = progress or Progress()
    started = utc_now()
    facts = host_facts()
    record = base_record(
        cell.as_dict(), machine, settings.as_dict(), started, {**facts, "fingerprint": fingerprint(facts)}
    )
    record.update(extra or {})
    try:
        _measure_into(record, cell, settings, torch, progress, artifact_path)
    except CellFailed as failure:
        record["status"], record["reason"] = failure.status, failure.reason
    except Exception as error:  # noqa: BLE001 - any failure of a cell becomes its record
        if devices.is_out_of_memory(error, torch):
            record["status"] = "oom"
            record["reason"] = f"out of memory during {progress.phase}: {_first_line(error)}"
        else:
            record["status"] = "error"
            record["reason"] = f"{type(error).__name__} during {progress.phase}: {_first_line(error)}"
        with contextlib.suppress(Exception):  # a broken device must not hide the reason above
            devices.release_memory(cell.device, torch)
    record["finished_at"] = utc_now()
    return record


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


def _measure_into(record: dict, cell: Cell, settings: Settings, torch, progress: Progress, artifact_path: str | None) -> None:
    op = get_op(cell.op)
    reason = devices.unavailable_reason(cell.device, torch) if cell.library == "torch" else None
    if reason:
        raise CellFailed("skipped", reason)
    if cell.library == "torch":
        record["settings"].update(_configure_torch(torch, settings))
        record["device"] = devices.describe(cell.device, torch)
        if cell.is_gpu:
            record["provenance"]["fingerprint"] = fingerprint(record["provenance"], [record["device"]["name"]])
    itemsize = itemsize_of(cell.dtype)
    record["model"] = {
        "flops": op.flops(cell.size),
        "h2d_bytes": op.input_bytes(cell.size, itemsize),
        "d2h_bytes": op.result_bytes(cell.size, itemsize),
        "memory_bytes": op.input_bytes(cell.size, itemsize) + op.result_bytes(cell.size, itemsize),
        "itemsize": itemsize,
    }
    _memory_precheck(op, cell, settings)

    # NVML's first call is slow; make it before warm-up, not between warm-up and sampling.
    devices.gpu_clocks(cell.device, torch)

    progress.enter("inputs")
    backend = Backend(cell, op, settings, torch)
    host_inputs = backend.pin(make_host_inputs(op, cell, settings.seed, torch))

    progress.enter("check")
    record["check"] = check_result(backend, host_inputs)
    if not record["check"]["passed"]:
        c = record["check"]
        raise CellFailed(
            "error",
            f"wrong result: relative error {c['rel_err']:.2e} exceeds the {cell.dtype} "
            f"tolerance {c['tolerance']:.2e}",
        )

    regions = build_regions(backend, host_inputs)
    for name, region in regions.items():
        progress.enter(f"warm-up {name}")
        warm_up(region, settings.block, settings.warmup)

    progress.enter("sampling")
    cpu_before = cpu_clocks_mhz()
    gpu_before = devices.gpu_clocks(cell.device, torch)
    outcome = sample_until_stable(list(regions.values()), settings.stop)
    cpu_after = cpu_clocks_mhz()
    gpu_after = devices.gpu_clocks(cell.device, torch)

    compute = regions["compute"]
    record["samples_s"] = compute.samples_s
    record["calls_per_sample"] = compute.calls_per_sample
    record["warmup"] = {
        "count": len(compute.warmup_s),
        "samples_s": compute.warmup_s,
        "first_call_s": compute.first_call_s,
    }
    record["phases"] = {name: _phase_summary(region) for name, region in regions.items()}
    record["stopping"] = {
        "stop_reason": outcome.stop_reason,
        "converged": all(r.converged for r in regions.values()),
        "rel_ci": compute.rel_ci,
        "n_samples": len(compute.samples_s),
        "elapsed_s": outcome.elapsed_s,
        "rounds": outcome.rounds,
        "target_rel_ci": settings.stop.target_rel_ci,
    }
    record["diagnostics"] = _diagnose(regions, settings, (cpu_before, cpu_after), (gpu_before, gpu_after))
    if op.finish and artifact_path:
        progress.enter("saving the rendering")
        rendered = op.finish(backend.as_numpy(backend.to_host(backend.compute([backend.to_device(x) for x in host_inputs]))))
        write_bytes_atomic(artifact_path, rendered)
        record["artifact"] = os.path.basename(artifact_path)


def _diagnose(regions: dict[str, Region], settings: Settings, cpu, gpu) -> dict:
    flags = []
    for name, region in regions.items():
        reason = "ci" if region.converged else region.stop_reason
        for flag in diagnostics.flags_for_samples(region.samples_s, reason, region.rel_ci, settings.stop.target_rel_ci):
            flags.append(flag if name == "compute" else f"{name}: {flag}")
    for flag in (
        diagnostics.clock_change(*cpu, "CPU"),
        diagnostics.clock_change(*gpu, "GPU"),
    ):
        if flag:
            flags.append(flag)
    return {
        "unstable": bool(flags),
        "flags": flags,
        "cpu_clocks": {"before": cpu[0], "after": cpu[1]},
        "gpu_clocks": {"before": gpu[0], "after": gpu[1]},
    }
