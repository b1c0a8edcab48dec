"""The stand-in GPU: a CUDA device on the CPU, so that the tests take every cuda path of the
measuring code on a machine without a GPU, and fail wherever CUDA would. It is test
equipment, outside the offloadbench package: a process that switches it on has this folder
on PYTHONPATH (make test and make gpu-check STANDIN=1 put it there).

`OFFLOADBENCH_STANDIN_GPU=1` switches it on (2 gives two GPUs, for the index checks);
every process that imports torch through `devices.import_torch` installs it. It stands in:
- for `torch.cuda` itself (is_available, device_count, is_initialized, get_rng_state,
  device properties, synchronize, Event, mem_get_info, the memory statistics, ...), so that
  PyTorch's own probes reach it: Dynamo reads the CUDA random state where a GPU is
  available, which initialises it;
- for NVML (a `pynvml` of its own: the GPUs in PCI order, their addresses and clocks);
- for CuPy (standin_cupy.py: a `cupy` whose arrays live on this device);
- for JAX's GPU: JAX's cuda cells run on XLA's CPU platform, through every path of ours
  (their workers of their own per x64, placement, copies, syncs, regions, the memory
  reading, which XLA's CPU does not give) but the CUDA runtime; what JAX itself does on a
  GPU is checked by `make gpu-check` only;
- as the seam's cuda device (`StandInCuda`): data on it are CPU tensors of a subclass,
  compiled code runs there through Inductor's CPU backend.

Where CUDA fails, it fails:
- after CUDA is initialised in a process, a forked child's first device call raises
  "Cannot re-initialize CUDA in forked subprocess", as torch.cuda does;
- `CUDA_VISIBLE_DEVICES=""`, read when torch is imported, hides it;
- its tensors refuse conversion to NumPy (`np.roll` of one raises TypeError), and an op
  mixing them with host tensors raises "Expected all tensors to be on the same device";
- allocations past its memory (`OFFLOADBENCH_STANDIN_MEMORY` bytes, 8 GiB by default)
  raise torch.OutOfMemoryError; it counts them for the peak statistics;
- matmuls with TF32 allowed read float32 inputs with TF32's 10-bit mantissa, as tensor
  cores do;
- the device is asynchronous: each call adds its time to a stream that only `synchronize`
  (or a copy to pageable host memory) waits for, and copies take time per byte over a
  modelled link, pinned faster than pageable; a non-blocking copy from pinned memory is
  only done at the next synchronisation, so a timed region without a sync at its end
  reads too fast, and a host buffer read before the sync holds stale data; a pageable copy
  takes up to a fifth longer, differently each time;
- its SM clock idles at 345 MHz once no process of the run gave it work for 50 ms, and runs
  at its full clock under load, as an H100's does;
- it compiles only where Inductor would start no pool of compile processes (a GPU host has
  Triton, where that pool is one process per core), and under a CUDA-graph compile mode each
  call overwrites the last one's outputs, which then refuse to be read;
- compiled NumPy code under `torch.device` works on device copies of its arrays: what it
  writes into its arguments stays on the device.
`recording()` logs every device call, so a test can check that each timed region is sync,
calls, sync. Its times are the CPU's plus the modelled ones: they say nothing about a GPU.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import random
import sys
import tempfile
import time
import types
import weakref
from collections.abc import Callable

import torch
from offloadbench.measure import compiled
from offloadbench.measure.devices import Cpu, Cuda
from offloadbench.measure.system import STANDIN_ENV
from torch.overrides import TorchFunctionMode

NAME = "offloadbench stand-in GPU (on the CPU)"
MEMORY_ENV = "OFFLOADBENCH_STANDIN_MEMORY"
DEFAULT_MEMORY_BYTES = 8 * 2**30
# The modelled device: what each call and copy adds to its stream.
LAUNCH_S = 5e-6
COPY_LATENCY_S = 10e-6
PAGEABLE_BYTES_PER_S = 1.5e9
PINNED_BYTES_PER_S = 4e9
# A pageable copy is staged through the driver's buffers: it takes 10-30% longer than the
# link allows, in spells of STAGING_SPELL_S, and only now and then (1 spell in 50) runs at the
# link's rate, so that few blocks of copies come within 5% of the best one, as on CUDA.
PAGEABLE_STAGING = (0.1, 0.3)
PAGEABLE_UNSTAGED = 0.02
STAGING_SPELL_S = 0.002
# One GPU per NVML index: its PCI address and clocks under load (each differs, so a reading
# says whose it is). Like an H100 or H200, its SM clock idles near 345 MHz once no process has
# given it work for IDLE_AFTER_S: the device is shared by the run's processes, so its last work
# is a file's time (BUSY_ENV names it; one per user by default), not one process's.
BUSES = (0x19, 0x3B, 0x5D, 0x7F)
SM_MHZ = (1980, 1755, 1530, 1305)
IDLE_SM_MHZ = 345
IDLE_AFTER_S = 0.05
MEM_MHZ = 2619
BUSY_ENV = "OFFLOADBENCH_STANDIN_BUSY_FILE"

REINIT = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use "
          "the 'spawn' start method")
TO_NUMPY = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
            "memory first.")
MIXED = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
OVERWRITTEN = ("Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. To prevent "
               "overwriting, clone the tensor outside of torch.compile() or call torch.compiler.cudagraph_mark_step_begin() "
               "before each model invocation.")


def _one_compile_process() -> None:
    """Where Triton is, as on every GPU host, Inductor compiles with a pool of one process per
    core unless told otherwise: the stand-in refuses to compile where a real host would start
    that pool (devices.ONE_COMPILE_THREAD), rather than hide it."""
    from torch._inductor import config

    if config.compile_threads != 1:
        raise RuntimeError(f"Inductor would start a pool of {config.compile_threads} compile processes here, as on a "
                           "GPU host with Triton (TORCHINDUCTOR_COMPILE_THREADS is not 1)")


def _gpu_count() -> int:
    value = os.environ.get(STANDIN_ENV, "1")
    return max(1, min(len(BUSES), int(value))) if value.isdigit() else 1


def _visible(count: int) -> list[int]:
    """The NVML indices CUDA sees, in CUDA's order (CUDA_VISIBLE_DEVICES, as CUDA reads it)."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return list(range(count))
    parts = (part.strip() for part in value.split(","))
    # CUDA reads up to the first invalid entry
    valid = itertools.takewhile(lambda part: part.isdigit() and int(part) < count, parts)
    return [int(part) for part in valid]


def _memory_bytes() -> int:
    value = os.environ.get(MEMORY_ENV, "")
    return int(value) if value.isdigit() else DEFAULT_MEMORY_BYTES


def _wait_until(deadline: float) -> None:
    """Wait for the modelled device: sleep the long part, spin the last half millisecond."""
    left = deadline - time.perf_counter()
    if left > 1e-3:
        time.sleep(left - 5e-4)
    while time.perf_counter() < deadline:
        pass


class State:
    """The stand-in device of this process: initialised or not, its memory, its stream."""

    def __init__(self):
        self.count = _gpu_count()
        self.visible = _visible(self.count)
        self.capacity = _memory_bytes()
        self.initialized = False
        self.bad_fork = False
        self.reset()

    def reset(self) -> None:
        self.busy_file = os.environ.get(BUSY_ENV) or os.path.join(
            tempfile.gettempdir(), f"offloadbench-standin-busy-{os.getuid() if hasattr(os, 'getuid') else 0}")
        self.told_busy = 0.0  # when this process last wrote the busy file (at most every 10 ms)
        self.clock_scale = 1.0  # a test's throttle: what the loaded clock is multiplied by
        self.random = random.Random(0)  # the pageable copies' staging
        self.spell = (0.0, 0.0)  # (until when, share longer) of the pageable copies' staging
        # by id, looked up with `is`: a tensor's == is elementwise (and would dispatch here)
        self.graph_outputs = weakref.WeakValueDictionary()  # the last CUDA-graph call's outputs
        self.overwritten = weakref.WeakValueDictionary()  # earlier calls' outputs, which the graph has overwritten
        self.allocated = self.peak = 0
        self.live: dict[int, list[int]] = {}  # storage address -> [bytes, tensors holding it]
        self.pinned = collections.Counter()  # host storage address -> tensors holding it
        self.free_at = 0.0  # when the stream has done all that was queued
        self.pending: list[tuple] = []  # non-blocking copies, done at the next synchronisation
        self.log: list | None = None

    def forked(self) -> None:
        """In a forked child: as in torch.cuda, a child of a process with CUDA up cannot use it."""
        if self.initialized:
            self.bad_fork = True
        self.initialized = False
        self.reset()

    def note(self, *entry) -> None:
        if self.log is not None:
            self.log.append(entry)

    def init(self) -> None:
        if self.initialized:
            return
        if self.bad_fork:
            raise RuntimeError(REINIT)
        if not self.visible:
            raise RuntimeError("No CUDA GPUs are available")
        self.initialized = True
        self.note("init")

    # the stream
    def enqueue(self, seconds: float, since: float | None = None) -> None:
        start = max(self.free_at, time.perf_counter() if since is None else since)
        self.free_at = start + seconds
        self.busy(self.free_at - time.perf_counter())

    def busy(self, more_s: float) -> None:
        """Tell the run's processes the device works until `more_s` from now: the busy
        file's time, written at most every 10 ms (a device call costs no syscall more)."""
        now = time.time()
        if now - self.told_busy < 0.01:
            return
        self.told_busy = now
        with contextlib.suppress(OSError):
            with open(self.busy_file, "a"):
                pass
            os.utime(self.busy_file, (now + max(0.0, more_s),) * 2)

    def graph_step(self) -> None:
        """A compiled call begins: a CUDA graph's replay overwrites the last call's outputs."""
        self.overwritten.update(self.graph_outputs)
        self.graph_outputs = weakref.WeakValueDictionary()

    def readable(self, tensor) -> None:
        """Raise as CUDA graphs do on a read of an output that a later replay overwrote."""
        if self.overwritten.get(id(tensor)) is tensor:
            raise RuntimeError(OVERWRITTEN)

    def sm_mhz(self, index: int) -> int:
        """The SM clock NVML reads: the loaded clock while the device worked within the last
        IDLE_AFTER_S (in any process of the run), else the idle clock."""
        try:
            last = max(os.path.getmtime(self.busy_file), self.told_busy)
        except OSError:
            last = self.told_busy
        if time.time() - last > IDLE_AFTER_S:
            return IDLE_SM_MHZ
        return round(SM_MHZ[index] * self.clock_scale)

    def flush(self) -> None:
        """Do the non-blocking copies queued so far (their time is already on the stream)."""
        pending, self.pending = self.pending, []
        for destination, source in pending:
            destination.copy_(source)

    def synchronize(self) -> None:
        self.init()
        self.note("sync")
        self.flush()
        _wait_until(self.free_at)

    def wait(self) -> None:
        """Wait for what the stream holds, as a blocking copy does (no sync in the log)."""
        _wait_until(self.free_at)

    # memory
    def adopt(self, value):
        """Results of device work as device tensors, new storage counted (past the device's
        memory: out of memory, as on CUDA)."""
        if isinstance(value, tuple | list):
            return type(value)(self.adopt(v) for v in value)
        if not isinstance(value, torch.Tensor):
            return value
        tensor = value if isinstance(value, DeviceTensor) else value.as_subclass(DeviceTensor)
        if getattr(tensor, "_standin_counted", False):  # an output written in place: counted already
            return tensor
        tensor._standin_counted = True
        storage = tensor.untyped_storage()
        address, nbytes = storage.data_ptr(), storage.nbytes()
        if address == 0 or nbytes == 0:
            return tensor
        if address not in self.live:
            if self.allocated + nbytes > self.capacity:
                free = self.capacity - self.allocated
                raise torch.OutOfMemoryError(
                    f"CUDA out of memory. Tried to allocate {nbytes / 2**20:.2f} MiB. GPU 0 has a total capacity of "
                    f"{self.capacity / 2**30:.2f} GiB of which {free / 2**20:.2f} MiB is free. (stand-in GPU)")
            self.live[address] = [nbytes, 0]
            self.allocated += nbytes
            self.peak = max(self.peak, self.allocated)
        self.live[address][1] += 1
        weakref.finalize(tensor, self.drop, address)
        return tensor

    def drop(self, address: int) -> None:
        entry = self.live.get(address)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del self.live[address]
            self.allocated -= entry[0]

    def pin(self, tensor):
        """A pinned copy of a host tensor (the stand-in's page-locked memory)."""
        return self.mark_pinned(tensor.as_subclass(torch.Tensor).clone())

    def mark_pinned(self, tensor):
        address = tensor.untyped_storage().data_ptr()
        self.pinned[address] += 1
        weakref.finalize(tensor, self.unpin, address)
        return tensor

    def unpin(self, address: int) -> None:
        self.pinned[address] -= 1
        if self.pinned[address] <= 0:
            del self.pinned[address]

    def is_pinned(self, tensor) -> bool:
        return tensor.untyped_storage().data_ptr() in self.pinned

    # copies
    def copied(self, direction: str, nbytes: int, pinned: bool = False, asynchronous: bool = False) -> None:
        """A copy's log entry, and its time on the stream over the modelled link; a pageable
        copy goes through the driver's staging buffers (PAGEABLE_STAGING)."""
        memory, mode = "pinned" if pinned else "pageable", "async" if asynchronous else "sync"
        self.note("copy", direction, nbytes, memory, mode)
        rate = PINNED_BYTES_PER_S if pinned else PAGEABLE_BYTES_PER_S / (1 + self.staging())
        self.enqueue(COPY_LATENCY_S + nbytes / rate)

    def staging(self) -> float:
        """The share a pageable copy takes longer than the link allows, in this spell."""
        now = time.perf_counter()
        if now >= self.spell[0]:
            low, high = PAGEABLE_STAGING
            share = 0.0 if self.random.random() < PAGEABLE_UNSTAGED else low + (high - low) * self.random.random()
            self.spell = (now + STAGING_SPELL_S, share)
        return self.spell[1]

    def transfer(self, direction: str, source, destination, pinned: bool, non_blocking: bool):
        """`source` copied into `destination`, which it must fit. A non-blocking copy from
        pinned memory is only done at the next synchronisation: read before it, the buffer is
        stale; from pageable memory, CUDA copies before it returns."""
        # what copy_ checks before it queues anything: the source fits the destination
        if torch.broadcast_shapes(destination.shape, source.shape) != destination.shape:
            raise RuntimeError(f"The size of tensor a ({tuple(destination.shape)}) must match the size of tensor b "
                               f"({tuple(source.shape)})")
        nbytes = source.numel() * source.element_size()
        asynchronous = non_blocking and pinned
        if asynchronous:
            self.pending.append((_plain(destination), source))
        else:
            self.flush()
            _plain(destination).copy_(source)
        self.copied(direction, nbytes, pinned, asynchronous)
        if not asynchronous:
            _wait_until(self.free_at)
        return destination

    def h2d(self, host, destination=None, non_blocking: bool = False):
        """A host tensor copied to the device (into `destination`, or new memory)."""
        self.init()
        host = _plain(host)
        target = self.adopt(torch.empty_like(host)) if destination is None else destination
        return self.transfer("h2d", host, target, self.is_pinned(host), non_blocking)

    def d2h(self, tensor, destination=None, non_blocking: bool = False):
        """A device tensor copied to the host (into `destination`, or new pageable memory)."""
        self.init()
        self.readable(tensor)
        source = _plain(tensor)
        pinned = destination is not None and self.is_pinned(destination)
        target = torch.empty_like(source) if destination is None else destination
        return self.transfer("d2h", source, target, pinned, non_blocking)

    # calls
    def call(self, fn: Callable, args: tuple, kwargs: dict, name: str, unwrap: bool = False):
        """One piece of device work: the inputs must all be on the device, the stream's order
        is kept, the result is device memory, and the time goes on the stream. `unwrap`:
        `fn` takes plain CPU tensors (compiled code, which must not trace the subclass)."""
        self.init()
        if _holds_host_tensor((args, kwargs)):
            raise RuntimeError(MIXED)
        for tensor in _tensors((args, kwargs)):
            self.readable(tensor)
        self.flush()
        self.note("call", name)
        if unwrap:
            args = tuple(_plain(a) for a in args)
        elif fn in MATMULS and torch.backends.cuda.matmul.allow_tf32:
            args = tuple(_tf32(a) for a in args)
        began = time.perf_counter()
        with contextlib.nullcontext() if unwrap else torch._C.DisableTorchFunctionSubclass():
            result = fn(*args, **kwargs)
        took = time.perf_counter() - began
        self.enqueue(took + LAUNCH_S, since=began)
        return self.adopt(result)


STATE: State | None = None


def state() -> State:
    if STATE is None:
        raise RuntimeError("the stand-in GPU is not installed (OFFLOADBENCH_STANDIN_GPU, devices.import_torch)")
    return STATE


MATMULS = {torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm, torch.Tensor.__matmul__,
           torch.Tensor.__rmatmul__, torch.Tensor.matmul, torch.Tensor.mm, torch.Tensor.bmm}


def _tf32(tensor):
    """A float32 input as a TF32 tensor core reads it, with 10 of its 23 mantissa bits
    (rounded to nearest), as CUDA matmuls do where TF32 is allowed."""
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.float32:
        return tensor
    with torch._C.DisableTorchFunctionSubclass():
        bits = tensor.contiguous().view(torch.int32)
        return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _plain(tensor):
    return tensor.as_subclass(torch.Tensor) if isinstance(tensor, DeviceTensor) else tensor


def _tensors(value):
    """Every tensor in a call's arguments, however nested in tuples, lists and dicts (torch's
    own tree walker is private)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _tensors(item)


def _holds_host_tensor(value) -> bool:
    """A host tensor with data (not a 0-dim one, which CUDA takes as a number) among device data."""
    return any(not isinstance(t, DeviceTensor) and t.dim() > 0 for t in _tensors(value))


def _target(args: tuple, kwargs: dict) -> str | None:
    """The device a `Tensor.to` call moves to ("cpu", "cuda"), or None."""
    for value in (*args[1:], kwargs.get("device")):
        if isinstance(value, str | torch.device):
            return torch.device(value).type
    return None


class DeviceTensor(torch.Tensor):
    """Data on the stand-in GPU: CPU memory that behaves as CUDA's does."""

    @property
    def device(self):
        return torch.device("cuda", 0)

    @property
    def is_cuda(self):
        return True

    @classmethod
    def __torch_function__(cls, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if func in (torch.Tensor.numpy, torch.Tensor.__array__):
            raise TypeError(TO_NUMPY)
        for tensor in _tensors((args, kwargs)):
            state().readable(tensor)
        if name == "__get__" or func in (torch.Tensor.__repr__, torch.Tensor.__format__, torch.Tensor.dim,
                                         torch.Tensor.size, torch.Tensor.element_size, torch.Tensor.numel,
                                         torch.Tensor.untyped_storage, torch.Tensor.data_ptr):
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        device = state()
        if func is torch.Tensor.cpu or (func is torch.Tensor.to and _target(args, kwargs) == "cpu"):
            return device.d2h(args[0])
        if func is torch.Tensor.cuda or (func is torch.Tensor.to and _target(args, kwargs) == "cuda"):
            return args[0]
        if func is torch.Tensor.copy_:
            destination, source = args[0], args[1]
            non_blocking = bool(kwargs.get("non_blocking", args[2] if len(args) > 2 else False))
            if not isinstance(source, DeviceTensor) and source.dim() > 0:
                return device.h2d(source, destination, non_blocking)
            if not isinstance(destination, DeviceTensor):
                return device.d2h(source, destination, non_blocking)
        if func in (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__float__,
                    torch.Tensor.__int__, torch.Tensor.__index__):  # CUDA reads these back to the host
            device.synchronize()
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        return device.call(func, args, kwargs, name)


class OnDevice(TorchFunctionMode):
    """While device code runs: tensors it makes on cuda (`device=x.device`) are made on the
    stand-in, and host tensors it moves there (`.to("cuda")`) are copied."""

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == "cuda":
            return state().adopt(func(*args, **{**kwargs, "device": "cpu"}))
        if func in (torch.Tensor.to, torch.Tensor.cuda) and args and not isinstance(args[0], DeviceTensor) \
                and (func is torch.Tensor.cuda or _target(args, kwargs) == "cuda"):
            return state().h2d(args[0])
        return func(*args, **kwargs)


class Event:
    """torch.cuda.Event on the stand-in's stream: it stamps when the stream reaches it."""

    def __init__(self, enable_timing: bool = False, **_):
        self.stamp: float | None = None

    def record(self, stream=None) -> None:
        device = state()
        device.init()
        device.note("event")
        self.stamp = max(device.free_at, time.perf_counter())

    def query(self) -> bool:
        return self.stamp is not None and time.perf_counter() >= self.stamp

    def synchronize(self) -> None:
        state().flush()
        if self.stamp is not None:
            _wait_until(self.stamp)

    def elapsed_time(self, end: Event) -> float:
        if self.stamp is None or end.stamp is None:
            raise RuntimeError("CUDA error: both events must be recorded before calculating elapsed time")
        if not end.query():
            raise RuntimeError("CUDA error: device not ready")
        return (end.stamp - self.stamp) * 1e3


def _properties(nvml: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        name=NAME, major=9, minor=0, multi_processor_count=132, total_memory=_memory_bytes(),
        pci_domain_id=0, pci_bus_id=BUSES[nvml], pci_device_id=0, uuid=f"00000000-0000-0000-0000-00000000000{nvml}",
        is_integrated=0, warp_size=32, L2_cache_size=50 * 2**20)


def _torch_cuda(device: State) -> dict:
    """The stand-in's torch.cuda functions."""

    def initialised(fn):
        def run(*args, **kwargs):
            device.init()
            return fn(*args, **kwargs)

        return run

    def properties(index=None):
        device.init()
        index = 0 if index is None else int(getattr(index, "index", index) or 0)
        if not 0 <= index < len(device.visible):
            raise AssertionError("Invalid device id")
        return _properties(device.visible[index])

    def set_peak():
        device.peak = device.allocated

    return {
        "is_available": lambda: bool(device.visible),
        "device_count": lambda: len(device.visible),
        "is_initialized": lambda: device.initialized and not device.bad_fork,
        "_is_in_bad_fork": lambda: device.bad_fork,
        "init": device.init,
        "_lazy_init": device.init,
        "current_device": initialised(lambda: 0),
        "set_device": initialised(lambda index: None),
        "get_device_properties": properties,
        "get_device_name": lambda index=None: properties(index).name,
        "get_device_capability": lambda index=None: (properties(index).major, properties(index).minor),
        "synchronize": lambda device_=None: device.synchronize(),
        "Event": Event,
        "mem_get_info": initialised(lambda device_=None: (device.capacity - device.allocated, device.capacity)),
        "memory_allocated": lambda device_=None: device.allocated,
        "max_memory_allocated": lambda device_=None: device.peak,
        "reset_peak_memory_stats": initialised(lambda device_=None: set_peak()),
        "empty_cache": initialised(lambda: None),
        "get_rng_state": initialised(lambda device_="cuda": torch.zeros(16, dtype=torch.uint8)),
        "set_rng_state": initialised(lambda new_state, device_="cuda": None),
    }


def _nvml_module(device: State) -> types.ModuleType:
    """A `pynvml` for the stand-in's GPUs, in NVML's (PCI) order."""
    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = type("NVMLError", (Exception,), {})
    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM, nvml.NVML_TEMPERATURE_GPU = 1, 2, 0

    def handle(index):
        if not 0 <= index < device.count:
            raise nvml.NVMLError("Invalid Argument")
        return index

    def pci(index):
        bus_id = f"00000000:{BUSES[index]:02X}:00.0"
        return types.SimpleNamespace(domain=0, bus=BUSES[index], device=0, busId=bus_id.encode())

    vars(nvml).update({
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: device.count,
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetPciInfo": pci,
        "nvmlDeviceGetName": lambda index: NAME,
        "nvmlDeviceGetUUID": lambda index: f"GPU-00000000-0000-0000-0000-00000000000{index}",
        "nvmlDeviceGetPersistenceMode": lambda index: 1,
        "nvmlDeviceGetClockInfo": lambda index, kind: device.sm_mhz(index) if kind == nvml.NVML_CLOCK_SM else MEM_MHZ,
        "nvmlDeviceGetMaxClockInfo": lambda index, kind: SM_MHZ[0] if kind == nvml.NVML_CLOCK_SM else MEM_MHZ,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda index: 0,
        "nvmlDeviceGetTemperature": lambda index, sensor: 40,
        "nvmlDeviceGetPowerUsage": lambda index: 100_000,
    })
    return nvml


def install(torch_module=None) -> State:
    """Put the stand-in in place of torch.cuda and NVML in this process (once)."""
    global STATE
    if STATE is not None:
        return STATE
    STATE = device = State()
    for name, fn in _torch_cuda(device).items():
        setattr(torch.cuda, name, fn)
    torch.version.cuda = "stand-in"
    sys.modules["pynvml"] = _nvml_module(device)
    import standin_cupy  # CuPy on the same device, in place of a real one only here

    sys.modules.update(standin_cupy.modules())
    # JAX's cuda cells run on XLA's CPU: every path of ours (their workers, placement, copies,
    # syncs, regions, the memory reading) but the CUDA runtime, which this host lacks
    from offloadbench.libraries import jax as jax_library

    jax_library.PLATFORMS["cuda"] = "cpu"
    os.register_at_fork(after_in_child=device.forked)
    return device


@contextlib.contextmanager
def recording():
    """Every device call of the block, in order: ("init",), ("call", name), ("copy",
    direction, bytes, memory, "sync"/"async"), ("sync",), ("event",), and what `note` adds."""
    device = state()
    before, device.log = device.log, []
    try:
        yield device.log
    finally:
        device.log = before


def note(*entry) -> None:
    """Add an entry of the caller's to the log being recorded (a clock read, say)."""
    state().note(*entry)


class StandInCuda(Cuda):
    """The seam's cuda device on the stand-in: data moved as on CUDA, with its costs;
    compiled code through Inductor's CPU backend, on the device tensors' data."""

    def to_device(self, tensor, non_blocking: bool = False):
        return state().h2d(tensor, None, non_blocking)

    def to_host(self, tensor, pinned: bool = False):
        if not pinned:
            return state().d2h(tensor)
        host = state().mark_pinned(torch.empty(tensor.shape, dtype=tensor.dtype))
        state().d2h(tensor, host, non_blocking=True)
        self.synchronize()
        return host

    def pin(self, tensor):
        return state().pin(tensor)

    def host_buffer(self, nbytes: int, pinned: bool = False):
        buffer = torch.empty(nbytes, dtype=torch.uint8)
        return state().mark_pinned(buffer) if pinned else buffer

    def device_buffer(self, nbytes: int):
        state().init()
        return state().adopt(torch.empty(nbytes, dtype=torch.uint8))

    def run(self, fn: Callable, *args):
        with OnDevice():
            return fn(*args)

    def compile_mode(self, mode: str) -> str:
        # the stand-in's tensors live on the host, where Inductor's CUDA-graph trees would reach
        # for the real CUDA allocator; `compiled` models the graphs' overwritten outputs instead
        return "default" if mode in compiled.CUDA_GRAPH_MODES else mode

    def compiled(self, fn: Callable, graphs: bool = False) -> Callable:
        """Compiled code run on the device's data; under CUDA graphs (`graphs`) each call's
        outputs are overwritten by the next call, and reading one afterwards raises."""
        _one_compile_process()
        device = state()

        def run(*args):
            device.graph_step()
            result = device.call(fn, args, {}, "compiled", unwrap=True)
            if graphs:
                device.graph_outputs.update((id(t), t) for t in _tensors(result))
            return result

        return run

    def under_device(self, fn: Callable) -> Callable:
        _one_compile_process()
        device = state()

        def run(*args):  # host arrays in, copied by the compiled code, computed, copied back
            device.init()
            for array in args:
                device.copied("h2d", int(getattr(array, "nbytes", 0)))
            _wait_until(device.free_at)
            # the code works on device copies: what it writes into its arguments stays there, as under CUDA
            args = tuple(array.copy() if hasattr(array, "nbytes") and hasattr(array, "copy") else array
                         for array in args)
            result = device.call(fn, args, {}, "compiled", unwrap=True)
            parts = result if isinstance(result, tuple) else (result,)
            device.copied("d2h", sum(int(getattr(part, "nbytes", 0)) for part in parts))
            _wait_until(device.free_at)
            return result

        return run

    compile_reason = Cpu.compile_reason  # Inductor's CPU backend compiles the stand-in's code

    def link(self) -> dict:
        return {"kind": "stand-in link (modelled)", "gbs": PINNED_BYTES_PER_S / 1e9,
                "source": "offloadbench's stand-in GPU"}
