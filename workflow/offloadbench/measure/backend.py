"""How a library moves data and runs one cell's op on one device, eager or compiled, and
the regions a cell times with it.

The regions of a cell:
- compute: the op on inputs already where it runs (device-resident time);
- h2d / d2h (cuda, mps): inputs host->device, result device->host;
- finish (ops with host work, e.g. plotting): that work on the host result;
- end_to_end: host inputs in, host result out (and finished), as one region;
- resident_<k> (GPU cells of ops that chain): one copy in, k calls on the device, one copy out.
A CPU cell has no copies, so without a host finish its compute region is its end to end:
torch on the cpu wraps NumPy's arrays and unwraps its result without copying, so a torch
cpu cell times that, NumPy arrays in and out, as a program calling torch from NumPy code
does (the wrapping costs about a microsecond). One region per CPU cell also keeps its
process doing one thing over and over, as the function alone does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import libraries
from ..cells import Cell
from . import arguments, compiled, devices, memory
from .ops import Op
from .settings import Settings
from .timing import BlockRule, Region, StopRule, WarmupRule, measure_region

TORCH_ONLY_DTYPES = ("bfloat16",)
PHASES = ("h2d", "compute", "d2h", "finish", "end_to_end")


def np_dtype(dtype: str):
    """The NumPy dtype that holds a cell's inputs on the host (float32 for bfloat16)."""
    return np.dtype(dtype) if dtype not in TORCH_ONLY_DTYPES else np.dtype("float32")


def make_host_inputs(op: Op, cell: Cell, random_state: int, torch=None) -> list:
    """The op's random inputs on the host, as real code has them (measure/arguments.py): the
    floating arrays rounded to the cell's dtype (CPU tensors for bfloat16), everything else
    (integer and boolean arrays, Python scalars) unchanged."""
    values = [arguments.host_value(v, np_dtype(cell.dtype))
              for v in op.make_inputs(np.random.default_rng(random_state), cell.size)]
    if cell.dtype in TORCH_ONLY_DTYPES:
        return [torch.from_numpy(v).to(getattr(torch, cell.dtype))
                if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for v in values]
    return values


class NotForLibrary(Exception):
    """Code a library cannot run as written (a kernel that updates its arguments, for JAX):
    the cell is skipped with the reason."""


class Unavailable(Exception):
    """The library cannot reach the cell's device here (a jaxlib without CUDA): the cell is
    skipped with the reason and the way to it."""


class Backend:
    """How a library moves data and runs the op on one device, eager or compiled.

    A kernel that updates its arguments has them as outputs too: once `changes` names
    them (measure/cell.py finds them in the first calls), every call returns its results
    followed by the arguments it changed, so that they are copied back from a GPU, checked,
    and chained by resident trips like results."""

    def __init__(self, cell: Cell, op: Op, settings: Settings, torch=None):
        self.cell, self.op, self.settings, self.torch = cell, op, settings, torch
        self.library = libraries.get(cell.library)
        self.lib = self.library.namespace(torch)
        self.device = self.watched(devices.get(cell.device, torch))
        self.sync = self.device.synchronize
        runtime = libraries.runtime(cell.library, cell.compiled)
        # numpy compiled on a GPU moves its data as torch does: device tensors in the
        # device-resident form, host arrays copied by the compiled code end to end.
        self.tensors = runtime.tensors and (self.library.tensors or cell.is_gpu)
        self.compiled_fn = self.end_to_end_fn = None
        self.after_compile: compiled.CompileWatch | None = None  # set by first_calls
        self.resident_reason: str | None = None  # why the cell has no resident trips (set by build_regions)
        self.changes: tuple[int, ...] = ()  # the arguments a call updates in place
        # the next call overwrites this one's outputs (CUDA graphs): what is kept is cloned
        self.graphs = (cell.compiled and runtime.uses_torch and cell.device == "cuda"
                       and settings.compile_mode in compiled.CUDA_GRAPH_MODES)
        if cell.compiled:
            self._compile()

    def watched(self, seam):
        """The device whose syncs and memory readings time the cell: the seam's, where torch
        sees the library's work; a library whose work or memory torch does not see wraps it."""
        return seam

    def _compile(self) -> None:
        torch, op, lib, device = self.torch, self.op, self.lib, self.device

        def code(*inputs):
            return op.compute(lib, *inputs)

        if not self.library.tensors and self.cell.is_gpu:  # NumPy code compiled for the device
            self.compiled_fn = device.compiled(compiled.compile_function(device.wrap_numpy(code), torch, self.settings, device),
                                               self.graphs)
            self.end_to_end_fn = device.under_device(compiled.compile_function(code, torch, self.settings, device))
        else:
            self.compiled_fn = device.compiled(compiled.compile_function(code, torch, self.settings, device), self.graphs)

    def kept(self, result):
        """A result kept past the next call: cloned where that call would overwrite it (CUDA
        graphs), as a program that keeps one must."""
        if not self.graphs:
            return result
        if isinstance(result, tuple):
            return tuple(self.kept(part) for part in result)
        return result.clone() if arguments.is_tensor(result) else result

    def to_device(self, host):
        """An argument where the cell's code takes it: arrays on the device (as tensors for
        torch), NumPy scalars as Python numbers for torch, other values unchanged."""
        if not self.tensors:
            return host
        if isinstance(host, np.generic):
            return host.item()
        if not arguments.is_array(host):
            return host
        tensor = host if arguments.is_tensor(host) else self.torch.from_numpy(host)
        return self.device.to_device(tensor, non_blocking=self.settings.pinned_memory)

    def to_host(self, result):
        """The result on the host: numpy arrays (CPU tensors for bfloat16); tuples stay tuples,
        numbers and None as they are."""
        if isinstance(result, tuple):
            return tuple(self.to_host(part) for part in result)
        if not self.tensors or not arguments.is_tensor(result):
            return result
        host = self.device.to_host(result, pinned=self.settings.pinned_memory and self.cell.device == "cuda")
        return host if host.dtype == self.torch.bfloat16 else host.numpy()

    def as_numpy(self, host):
        """A host result as numpy arrays (bfloat16 is widened)."""
        if isinstance(host, tuple):
            return tuple(self.as_numpy(part) for part in host)
        if isinstance(host, np.ndarray | np.generic):
            return np.asarray(host)
        if not arguments.is_tensor(host):
            return host
        return host.float().numpy() if host.dtype == self.torch.bfloat16 else host.numpy()

    def outputs(self, returned, inputs):
        """What a call gives back: its result, and after it the arguments it changed (a
        tuple of both where it changed any)."""
        if not self.changes:
            return returned
        parts = () if returned is None else returned if isinstance(returned, tuple) else (returned,)
        return (*parts, *(inputs[i] for i in self.changes))

    def call(self, inputs):
        """One call of the op's code on data where it runs, its result as written."""
        if self.compiled_fn is not None:
            return self.compiled_fn(*inputs)
        if self.cell.is_gpu:  # eager code on device data (the stand-in makes its new tensors there)
            return self.device.run(self.op.compute, self.lib, *inputs)
        return self.op.compute(self.lib, *inputs)

    def compute(self, inputs):
        return self.outputs(self.call(inputs), inputs)

    def round_trip(self, host_inputs: list):
        """Host inputs in, the host result out: what a user's code does."""
        if self.end_to_end_fn is not None:
            return self.outputs(self.end_to_end_fn(*host_inputs), host_inputs)
        return self.to_host(self.compute([self.to_device(x) for x in host_inputs]))

    def eager_call(self, host_inputs: list) -> tuple[object, tuple[int, ...]]:
        """The op's eager code in its own library, on copies of the inputs: NumPy on host
        arrays (numpy compiled on a GPU too, whose compiled forms take device data), torch on
        the cell's device. Its result as written, and the arguments it changed."""
        copies = arguments.fresh(host_inputs)
        if self.lib is np:
            returned = self.op.compute(np, *copies)
            return returned, arguments.changed(host_inputs, copies)
        placed = [self.to_device(x) for x in copies]
        returned = self.device.run(self.op.compute, self.lib, *placed) if self.cell.is_gpu \
            else self.op.compute(self.lib, *placed)
        self.sync()
        return returned, arguments.changed(host_inputs, placed)

    def first_calls(self, host_inputs: list) -> dict:
        """The compile phase: the first call of each compiled form, timed, on copies of the
        inputs, and what Dynamo did meanwhile; the arguments the compiled code changes join
        `changes`."""
        self.torch._dynamo.reset()  # nothing of an earlier cell's compiles serves this one
        watch = compiled.CompileWatch()
        device_inputs = [self.to_device(x) for x in arguments.fresh(host_inputs)]
        with memory.watching_first_call(self.device) as peak:  # reset before, read after
            phase = {"first_call_s": compiled.timed_first_call(self.compiled_fn, device_inputs, self.sync)}
        phase["memory"] = peak
        found = watch.since()  # of the device-resident form, which every compiled cell has
        if self.op.kernel is not None:
            mine = arguments.changed(host_inputs, [self.to_host(x) if arguments.is_tensor(x) else x
                                                   for x in device_inputs])
            self.changes = tuple(sorted({*self.changes, *mine}))
        del device_inputs
        if self.end_to_end_fn is not None:
            phase.update(self._end_to_end_first_call(host_inputs))
        self.after_compile = compiled.CompileWatch()
        settings = self.settings
        return {
            **phase, **found, "fallback": compiled.fallback_of(found),
            "backend": settings.compile_backend, "mode": settings.compile_mode, "dynamic": False,
            "torch_version": self.torch.__version__,
            "cache": {"cold": settings.cold_cache, "hits": found["cache_hits"], "misses": found["cache_misses"],
                      "warm": found["cache_hits"] > 0},
        }

    def _end_to_end_first_call(self, host_inputs: list) -> dict:
        """numpy compiled on a GPU: the first call of its end-to-end form (the NumPy function
        under torch.device, host arrays in and out), on copies; where it fails, or does not
        give back the changes the device-resident code makes to its arguments, the copies
        are made around the device-resident code instead."""
        copies = arguments.fresh(host_inputs)
        try:
            first = compiled.timed_first_call(self.end_to_end_fn, copies, self.sync)
        except Exception as error:  # noqa: BLE001 - some torch versions fail here; the copies still count
            self.end_to_end_fn = None
            return {"end_to_end_form": "host arrays copied around the device-resident code: under torch.device "
                                       f"the compiled NumPy function failed ({compiled.short_reason(str(error))})"}
        missed = sorted(set(self.changes) - set(arguments.changed(host_inputs, copies)))
        if missed:
            self.end_to_end_fn = None
            return {"end_to_end_first_call_s": first,
                    "end_to_end_form": "host arrays copied around the device-resident code: under torch.device "
                                       "the compiled NumPy function did not write its changes back into argument "
                                       f"{', '.join(self.op.argument_name(i) for i in missed)}"}
        return {"end_to_end_first_call_s": first,
                "end_to_end_form": "the NumPy function under torch.device, host arrays in and out"}

    def recompiles(self) -> int:
        """Graphs compiled after the compile phase: guards that failed while sampling."""
        return max(0, self.after_compile.since()["graphs"])

    def pin(self, host_inputs: list) -> list:
        """With pinned_memory, the input arrays live in pinned memory from the start, as when
        an application allocates its buffers pinned; copying them there is not timed."""
        if not (self.settings.pinned_memory and self.cell.device == "cuda"):
            return host_inputs
        return [self.device.pin(self.torch.as_tensor(x)) if arguments.is_array(x) else x for x in host_inputs]


def build_regions(backend: Backend, host_inputs: list,
                  restorer: arguments.Restorer | None = None) -> dict[str, Region]:
    """The timed regions of the cell, keyed by phase name, in phase order. `restorer` puts
    back the host arguments a call changes (a kernel that updates its arguments): a region
    whose calls change the arrays they read times each call alone, after putting them back."""
    op, cell, sync = backend.op, backend.cell, backend.sync
    device_inputs = [backend.to_device(x) for x in host_inputs]
    sync()
    on_host = restorer if restorer else None
    # on a GPU the device-resident calls change device copies, put back from copies there
    on_device = arguments.Restorer(device_inputs, backend.changes) if cell.is_gpu and backend.changes else on_host
    # a result to copy back, finish or chain from; a CPU cell without host work needs none,
    # and its warm-up makes the first call
    result = backend.kept(backend.compute(device_inputs)) if cell.is_gpu or op.finish else None
    if on_device is not None and result is not None:
        on_device()
    host_array = backend.as_numpy(backend.to_host(result)) if op.finish else None

    def end_to_end():
        out = backend.round_trip(host_inputs)
        if op.finish:
            op.finish(backend.as_numpy(out))
        return out

    # a CPU cell of torch: NumPy arrays in and out, no copy either way
    compute = (host_call(backend, host_inputs) if not cell.is_gpu and backend.tensors
               else lambda: backend.compute(device_inputs))
    regions = {"compute": Region("compute", compute, sync, restore=on_device)}
    if cell.is_gpu:
        regions["h2d"] = Region("h2d", lambda: [backend.to_device(x) for x in host_inputs], sync)
        regions["d2h"] = Region("d2h", lambda: backend.to_host(result), sync)
    if op.finish:
        regions["finish"] = Region("finish", lambda: op.finish(host_array))
    # a library whose arrays copy NumPy's (JAX) times NumPy in and out apart, on the CPU too
    copies_on_cpu = libraries.runtime(cell.library, cell.compiled).copies_from_numpy
    if cell.is_gpu and backend.tensors or op.finish or copies_on_cpu:
        # the end-to-end form of numpy compiled writes into the host arrays; copies in do not
        writes_host = backend.end_to_end_fn is not None or not cell.is_gpu
        regions["end_to_end"] = Region("end_to_end", end_to_end, sync, restore=on_host if writes_host else None)
    ordered = {name: regions[name] for name in PHASES if name in regions}
    backend.resident_reason = resident_reason(backend, device_inputs, result)
    if backend.resident_reason is None:
        for k in backend.settings.resident_calls:
            ordered[f"resident_{k}"] = Region(f"resident_{k}", resident_trip(backend, host_inputs, k), sync)
    return ordered


def host_call(backend: Backend, host_inputs: list) -> Callable[[], object]:
    """A torch cell on the cpu as NumPy code calls it: its NumPy arrays wrapped as tensors
    (no copy), the function, its result unwrapped (no copy). Built once, so that a call
    is the function and the two conversions and no layer of ours: for a 5 µs sum over
    256² floats the conversions cost 1.9 µs and the backend's general round trip 1.4 µs
    more, a fifth of the call, which no program calling torch pays. Arguments that are no
    arrays (scalars) are passed as torch takes them; arrays a call changes are the host's
    own, so nothing is copied back."""
    torch = backend.torch
    if any(arguments.is_tensor(x) for x in host_inputs):  # bfloat16: CPU tensors in and out
        return lambda: backend.round_trip(host_inputs)
    from_numpy, tensor, inputs = torch.from_numpy, torch.Tensor, tuple(host_inputs)
    if backend.compiled_fn is not None:
        function = backend.compiled_fn
    else:
        op, lib = backend.op, backend.lib

        def function(*tensors):
            return op.compute(lib, *tensors)

    if all(isinstance(x, np.ndarray) for x in inputs):
        def call():
            result = function(*[from_numpy(x) for x in inputs])
            return result.numpy() if type(result) is tensor else backend.to_host(result)
    else:
        given = tuple((x, True) if isinstance(x, np.ndarray) else (backend.to_device(x), False) for x in inputs)

        def call():
            result = function(*[from_numpy(x) if array else x for x, array in given])
            return result.numpy() if type(result) is tensor else backend.to_host(result)

    return call


def conversion_seconds(backend: Backend, host_inputs: list, budget_s: float = 0.02) -> float | None:
    """What a torch cell on the cpu spends per call wrapping its NumPy arrays as tensors and
    its result back (torch.from_numpy of each input array, .numpy() of one result), timed
    apart from its region, whose process then keeps doing one thing over and over; the rest
    of the cell's time is the function's own. None for other cells."""
    arrays = tuple(x for x in host_inputs if isinstance(x, np.ndarray))
    if backend.cell.is_gpu or not backend.tensors or not arrays or any(arguments.is_tensor(x) for x in host_inputs):
        return None
    from_numpy, result = backend.torch.from_numpy, backend.torch.from_numpy(arrays[0])

    def convert():
        [from_numpy(x) for x in arrays]
        return result.numpy()

    measured = measure_region(Region("conversion", convert), BlockRule(), WarmupRule(budget_s=budget_s / 2),
                              StopRule(budget_s=budget_s, min_sampling_s=budget_s / 2))
    return float(np.median(measured.samples_s))


CHAINED_FAMILIES = ("elementwise",)  # ops whose output can be the next call's input, as a time loop's


def resident_reason(backend: Backend, device_inputs: list, result) -> str | None:
    """Why a cell has no resident trips, or None: they need a GPU, and an op that chains: a
    kernel that updates its arguments (a time loop calls it again on the same arrays), or an
    elementwise op or kernel whose result is shaped and typed like its first input."""
    op, cell = backend.op, backend.cell
    if not cell.is_gpu:
        return "no device to keep the data on: the data are always on the host"
    if backend.changes:
        return None
    if op.kernel is None and op.spec.family not in CHAINED_FAMILIES:
        return f"{cell.op} does not chain (only elementwise ops and kernels of yours do)"
    first = device_inputs[0] if device_inputs else None
    same = (first is not None and not isinstance(result, tuple) and getattr(result, "shape", None) == first.shape
            and getattr(result, "dtype", None) == first.dtype)
    return None if same else "its result is not shaped and typed like its first input, so calls cannot chain"


def resident_trip(backend: Backend, host_inputs: list, calls: int) -> Callable[[], object]:
    """One copy in, `calls` calls chained on the device, one copy out: a time loop that keeps
    its data on the device. Each output is the next call's first input (the rest kept;
    cloned under CUDA graphs, whose next call overwrites it); a kernel that updates its
    arguments is called again on the same arrays, as its own time loop would, and what it
    changed is copied out."""
    in_place = bool(backend.changes)

    def trip():
        inputs = [backend.to_device(x) for x in host_inputs]
        out = None
        for _ in range(calls):
            if in_place:
                out = backend.compute(inputs)
            else:
                inputs = [backend.kept(backend.compute(inputs)), *inputs[1:]]
        return backend.to_host(out if in_place else inputs[0])

    return trip


def configure_torch(torch, settings: Settings) -> dict:
    """TF32 for CUDA matmuls only, as configured. set_float32_matmul_precision would also let
    oneDNN lower the precision of CPU matmuls, which the CPU tolerance does not allow for."""
    torch.backends.cuda.matmul.allow_tf32 = settings.allow_tf32
    torch.backends.cudnn.allow_tf32 = settings.allow_tf32
    return {"tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32)}
