"""The one seam every device operation goes through: is the device there, moving data to
it and back, pinning, waiting for it, events, its memory, which GPU it is, its clocks,
running code on it (eager and compiled) and whether the compiler can target it.

`get(name, torch)` gives a `Device`: `Cpu` (data are where they run; nothing to copy or
wait for), `Cuda`, `Mps`, or, where `OFFLOADBENCH_STANDIN_GPU` is set, the stand-in GPU
(tests/standin/standin_gpu.py), which takes the cuda paths on a machine without one. Every process
imports torch through `import_torch`, which installs the stand-in into `torch.cuda` and
NVML first where it is switched on, so that PyTorch's own probes (Dynamo's) reach it too.

torch is passed in, never imported at module level, so numpy cells stay free of it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import sys
from collections.abc import Callable

from . import system
from .system import STANDIN_ENV, standin_requested

GPUS = ("cuda", "mps")
# The stand-in GPU is test equipment and lives outside this package (tests/standin/); a run
# that switches it on has its folder on PYTHONPATH (make test and make gpu-check STANDIN=1 do).
STANDIN_MODULE = "standin_gpu"


def standin():
    """The stand-in GPU's module, or a one-line error that says how to make it importable."""
    try:
        return importlib.import_module(STANDIN_MODULE)
    except ImportError as error:
        raise RuntimeError(f"{STANDIN_ENV} is set, but the stand-in GPU cannot be imported ({error}): put the "
                           "repository's tests/standin on PYTHONPATH, or unset the variable") from None


# Inductor compiles with a pool of one process per core by default: on a 16-core GPU host
# that is 16 processes and gigabytes per measuring worker, and activity during a turn. Every
# process of a run compiles in itself; a pool's processes would not cross a worker's fork
# either. Read when torch's Inductor config is first imported.
ONE_COMPILE_THREAD = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}


def import_torch():
    """torch, or None where it is not installed; Inductor set to compile in this process
    (ONE_COMPILE_THREAD), and the stand-in GPU installed first where it is switched on.
    Every process of a run that needs torch imports it here."""
    os.environ.update(ONE_COMPILE_THREAD)
    try:
        import torch
    except ImportError:
        return None
    if standin_requested():
        standin().install(torch)
    return torch


def hide_gpus(env: dict[str, str]) -> dict[str, str]:
    """The environment of a process that serves CPU cells only: no GPU visible, so nothing in
    it (Dynamo's probes included) can initialise CUDA before it forks."""
    return {**env, "CUDA_VISIBLE_DEVICES": ""}


class ForkRefused(RuntimeError):
    """A process that forks found CUDA initialised in itself."""


def check_fork_safe(torch, who: str) -> None:
    """Refuse to fork from a process with CUDA up: the child's first CUDA call would fail
    ("Cannot re-initialize CUDA in forked subprocess"), deep inside a cell."""
    initialised = False
    with contextlib.suppress(Exception):
        initialised = torch is not None and bool(torch.cuda.is_initialized())
    if initialised:
        raise ForkRefused(f"the {who} has CUDA initialised and cannot fork a working child; it must hide the GPUs "
                          "(CUDA_VISIBLE_DEVICES='') before torch is imported")


def is_out_of_memory(error: BaseException, torch) -> bool:
    if isinstance(error, MemoryError):
        return True
    if torch is not None and isinstance(error, getattr(torch, "OutOfMemoryError", ())):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and (
        "out of memory" in text or "alloc_failed" in text  # e.g. CUBLAS_STATUS_ALLOC_FAILED
    )


class Cpu:
    """The cpu: data are where they run, nothing to copy, wait for or count on a device."""

    name = "cpu"
    is_gpu = False

    def __init__(self, torch=None):
        self.torch = torch

    def unavailable_reason(self) -> str | None:
        return None

    # data
    def to_device(self, tensor, non_blocking: bool = False):
        return tensor

    def to_host(self, tensor, pinned: bool = False):
        return tensor

    def host_buffer(self, nbytes: int, pinned: bool = False):
        return self.torch.empty(nbytes, dtype=self.torch.uint8)

    def device_buffer(self, nbytes: int):
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.name)

    def copy(self, destination, source, non_blocking: bool = False):
        return destination.copy_(source, non_blocking=non_blocking)

    # waiting, memory, identity
    def synchronize(self) -> None:
        return None

    def model_name(self) -> str:
        return "cpu"

    def describe(self, index: int | None = None) -> dict:
        return {"name": self.model_name()}

    def clocks(self) -> dict | None:
        return None

    def link(self) -> dict | None:
        """The host<->device link and its theoretical rate, where it can be read."""
        return None

    # code
    def run(self, fn: Callable, *args):
        """Call eager code on data of this device."""
        return fn(*args)

    def compile_mode(self, mode: str) -> str:
        """The torch.compile mode this device compiles with, for the configured one."""
        return mode

    def compiled(self, fn: Callable, graphs: bool = False) -> Callable:
        """A compiled function as called with this device's data (`graphs`: it records CUDA
        graphs, whose next call overwrites its outputs)."""
        return fn

    def wrap_numpy(self, fn: Callable) -> Callable:
        """A NumPy function that takes and returns this device's tensors (compiled NumPy)."""
        return self.torch.compiler.wrap_numpy(fn)

    def compile_reason(self) -> str | None:
        """Why torch.compile cannot generate code for this device here, or None (a GPU's is
        asked only where torch is installed: without it the GPU is unavailable)."""
        if self.torch is None:
            return "compiled cells need torch, which is not installed"
        try:
            from torch._inductor import cpp_builder

            cpp_builder.get_cpp_compiler()
        except Exception as error:  # noqa: BLE001 - InvalidCxxCompiler and its kin
            return (f"no C++ compiler: Inductor compiles to C++ on the CPU ({first_line(error, 200)}); "
                    "install g++ or set CXX")
        return None


class Gpu(Cpu):
    """What cuda and mps do alike through torch: data moved with `.to`, waits, events and the
    cache through `torch.cuda` or `torch.mps` (`api`), code run under `torch.device`."""

    is_gpu = True

    def __init__(self, torch=None):
        super().__init__(torch)
        self.api = getattr(torch, self.name, None)

    def to_device(self, tensor, non_blocking: bool = False):
        return tensor.to(self.name)

    def to_host(self, tensor, pinned: bool = False):
        return tensor.to("cpu")

    def synchronize(self) -> None:
        self.api.synchronize()

    def event(self):
        return self.api.Event(enable_timing=True)

    def release(self) -> None:
        self.api.empty_cache()

    def under_device(self, fn: Callable) -> Callable:
        """A compiled NumPy function run by the device, host arrays in and out."""
        torch, name = self.torch, self.name

        def run(*args):
            with torch.device(name):
                return fn(*args)

        return run


class Cuda(Gpu):
    """An NVIDIA GPU through torch.cuda; the GPU of the process's current device."""

    name = "cuda"
    peak_method = "torch.cuda.max_memory_allocated"

    def unavailable_reason(self) -> str | None:
        torch = self.torch
        if torch is None:
            return "cuda needs torch, which is not installed"
        if not torch.cuda.is_available():
            built = torch.backends.cuda.is_built() or standin_requested()
            why = "no CUDA device is visible" if built else "this torch build has no CUDA support"
            return f"cuda unavailable: {why} (torch {torch.__version__})"
        return None

    def to_device(self, tensor, non_blocking: bool = False):
        return tensor.to("cuda", non_blocking=non_blocking)

    def to_host(self, tensor, pinned: bool = False):
        if not pinned:
            return tensor.to("cpu")
        host = self.torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        host.copy_(tensor, non_blocking=True)
        self.synchronize()
        return host

    def pin(self, tensor):
        return tensor.pin_memory()

    def host_buffer(self, nbytes: int, pinned: bool = False):
        return self.torch.empty(nbytes, dtype=self.torch.uint8, pin_memory=pinned)

    def reset_peak(self) -> int | None:
        """Start counting the device's peak allocation; what is allocated now."""
        self.torch.cuda.reset_peak_memory_stats()
        return int(self.torch.cuda.memory_allocated())

    def peak_since(self, before: int | None) -> int | None:
        return int(max(0, self.torch.cuda.max_memory_allocated() - (before or 0)))

    def free_bytes(self) -> int | None:
        return int(self.torch.cuda.mem_get_info()[0])

    def pci_bus_id(self, index: int) -> str | None:
        """The GPU's PCI address (domain:bus:device.0), as NVML and nvidia-smi name it."""
        props = self.torch.cuda.get_device_properties(index)
        try:
            return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        except (AttributeError, TypeError):  # a torch without the PCI fields
            return None

    def nvml_index(self, index: int | None = None) -> int | None:
        """NVML's index of this GPU (the current one by default): NVML lists every GPU in PCI
        order, while CUDA's index counts within CUDA_VISIBLE_DEVICES, so the two are matched
        by PCI address."""
        index = self.torch.cuda.current_device() if index is None else index
        return system.nvml_index_of(self.pci_bus_id(index))

    def model_name(self) -> str:
        return str(self.torch.cuda.get_device_name(self.torch.cuda.current_device()))

    def describe(self, index: int | None = None) -> dict:
        """Name, memory, capability and where it sits: CUDA's index, PCI address, NVML's index."""
        index = int(self.torch.cuda.current_device()) if index is None else index
        props = self.torch.cuda.get_device_properties(index)
        return {
            "name": props.name,
            "total_memory_bytes": int(props.total_memory),
            "compute_capability": f"{props.major}.{props.minor}",
            "multiprocessors": int(props.multi_processor_count),
            "cuda_runtime": self.torch.version.cuda,
            "count": self.torch.cuda.device_count(),
            "cuda_index": index,
            "pci_bus_id": self.pci_bus_id(index),
            "nvml_index": self.nvml_index(index),
        }

    def clocks(self) -> dict | None:
        return system.gpu_clocks(self.nvml_index())

    def link(self) -> dict | None:
        return system.pcie_link()

    def compile_reason(self) -> str | None:
        try:
            from torch.utils._triton import has_triton

            if not has_triton():
                return "no Triton for this GPU: Inductor generates CUDA kernels with Triton"
        except Exception as error:  # noqa: BLE001 - a broken Triton install
            return f"Triton cannot be loaded: {first_line(error, 200)}"
        return None


class Mps(Gpu):
    """Apple's GPU through torch.mps."""

    name = "mps"
    peak_method = "torch.mps.driver_allocated_memory (no peak)"

    def unavailable_reason(self) -> str | None:
        torch = self.torch
        if torch is None:
            return "mps needs torch, which is not installed"
        if not torch.backends.mps.is_available():
            if sys.platform != "darwin":
                why = f"MPS is Apple's GPU backend, on macOS only, and this host runs {platform.system() or sys.platform}"
            elif not torch.backends.mps.is_built():
                why = "this torch build has no MPS support"
            else:
                why = "MPS is not available on this Mac"
            return f"mps unavailable: {why} (torch {torch.__version__})"
        return None

    def reset_peak(self) -> int | None:
        return int(self.torch.mps.driver_allocated_memory())  # mps keeps no peak: after minus before

    def peak_since(self, before: int | None) -> int | None:
        return int(max(0, self.torch.mps.driver_allocated_memory() - (before or 0)))

    def model_name(self) -> str:
        return "Apple MPS"

    def describe(self, index: int | None = None) -> dict:
        return {"name": self.model_name(), "total_memory_bytes": None}

    def compile_reason(self) -> str | None:
        return None  # Inductor's Metal backend ships with torch; the environment job's probe compile tells


def get(name: str, torch=None) -> Cpu:
    """The device `name` of this process (the stand-in for cuda, where it is switched on)."""
    if name == "cuda" and standin_requested():
        return standin().StandInCuda(torch)
    kinds = {"cpu": Cpu, "cuda": Cuda, "mps": Mps}
    if name not in kinds:
        raise ValueError(f"unknown device {name!r}")
    return kinds[name](torch)


def unavailable_reason(name: str, torch) -> str | None:
    """Why `name` cannot be used here, or None when it can."""
    if name not in ("cpu", *GPUS):
        return f"unknown device {name!r}"
    return get(name, torch).unavailable_reason()


def release_memory(name: str, torch) -> None:
    if torch is not None and name in GPUS:
        get(name, torch).release()


def first_line(error: BaseException, limit: int = 300) -> str:
    """An error's first line, as a record's reason quotes it (its type where it says nothing)."""
    text = str(error).strip().splitlines()
    return text[0][:limit] if text else type(error).__name__
