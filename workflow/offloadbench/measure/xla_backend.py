"""The measuring backend of libraries that run on XLA (JAX): its arrays, its calls, its jit.

It gives a cell what measure/backend.py's `Backend` gives a torch or NumPy cell, so the
regions, the check and the memory reading are built the same way (`build_regions`):

- compute: the call on JAX arrays already made, until its result is ready
  (`block_until_ready` on the last result ends every timed block: JAX dispatches
  asynchronously, so a call returns before its work is done);
- end_to_end: NumPy arrays in, the NumPy result out, as NumPy code calling JAX does: on the
  CPU too, since making a JAX array of a NumPy one copies it;
- on a GPU also h2d and d2h (`device_put` onto the GPU, NumPy's array of the result) and the
  resident trips, as for torch. A copy from NumPy is asynchronous too: every timed block
  waits for what it placed. JAX copies from and to NumPy's own (pageable) memory:
  `measure.pinned_memory` does not apply to its cells.

jit is the compiled mode: its first call traces and compiles, timed as the compile phase.
JAX arrays cannot be changed, so a kernel that updates its arguments is skipped (found by
NumPy's own call on copies); one that does not trace under jit (boolean masks, shapes or
`if`s that depend on the values) is skipped for jit, with the tracer's reason.
"""

from __future__ import annotations

from ..cells import Cell
from ..libraries import jax as jax_library
from . import arguments, compiled, devices, memory
from .backend import Backend, NotForLibrary, Unavailable
from .ops import Op
from .settings import Settings

# What jax raises where traced code needs concrete values (jax.errors), by class name, so
# that this module imports jax only when a cell runs.
TRACE_ERRORS = ("ConcretizationTypeError", "NonConcreteBooleanIndexError", "TracerBoolConversionError",
                "TracerIntegerConversionError", "TracerArrayConversionError", "UnexpectedTracerError")


class XlaDevice:
    """The seam's cuda device (its name, memory, clocks) as JAX's work sees it: waiting for
    JAX's work, and a peak read from XLA's allocator, which torch's statistics miss. XLA's
    peak cannot be reset: a call's peak is known where it rose above the process's earlier
    one, else it is not measured (memory.device_peak says why)."""

    peak_method = "XLA's allocator (peak_bytes_in_use above what it held before)"

    def __init__(self, seam, xla_device, wait):
        self.seam, self.xla_device, self.wait = seam, xla_device, wait
        self.name = seam.name
        self.peak_before: int | None = None

    def __getattr__(self, name: str):
        return getattr(self.seam, name)

    def synchronize(self) -> None:
        self.wait()
        self.seam.synchronize()

    def _stats(self) -> dict:
        return self.xla_device.memory_stats() or {}

    def reset_peak(self) -> int | None:
        stats = self._stats()
        self.peak_before = stats.get("peak_bytes_in_use")
        return stats.get("bytes_in_use")

    def peak_since(self, before: int | None) -> int | None:
        peak = self._stats().get("peak_bytes_in_use")
        if peak is None or before is None or self.peak_before is None or peak <= self.peak_before:
            return None
        return int(peak - before)


class XlaBackend(Backend):
    """How JAX moves data and runs the op on the CPU or a GPU, eager (op by op) or jitted."""

    def __init__(self, cell: Cell, op: Op, settings: Settings, torch=None):
        import jax

        jax_library.configure(cell.dtype, cell.device)  # before any array of the cell is made
        self.jax = jax
        # what a block waits for: the arrays placed since the last wait, and the last result
        # (a device runs its calls in order, so the last one done means every one is; keeping
        # every result of a block would keep them alive and make each wait walk them all)
        self._placed: list = []
        self._last = None
        # a GPU cell's arrays are placed on it; a CPU cell's where JAX puts them (its CPU)
        try:
            self.place = jax_library.device_of(cell.device) if cell.is_gpu else None
        except Exception as error:  # noqa: BLE001 - XLA has no such platform here (JAX raises RuntimeError or AssertionError)
            said = str(error).strip() and devices.first_line(error)[:200] or f"XLA has no {jax_library.PLATFORMS[cell.device]} platform here"
            raise Unavailable(f"{cell.device} unavailable to jax {jax.__version__}: {said}; "
                              f'a GPU needs a CUDA jaxlib: pip install "jax[cuda13]=={jax.__version__}"') from None
        super().__init__(cell, op, settings, torch)
        self.sync = self.wait  # JAX's work is waited for through what it returned, on every device

    def watched(self, seam):
        return XlaDevice(seam, self.place, self.wait) if self.cell.is_gpu else seam

    def _compile(self) -> None:
        op, lib = self.op, self.lib

        def code(*inputs):
            return op.compute(lib, *inputs)

        self.compiled_fn = self.jax.jit(code)

    def wait(self) -> None:
        """Wait for the copies and calls since the last wait: JAX returns before they are done."""
        if self._placed:
            self.jax.block_until_ready(self._placed)
            self._placed.clear()
        if self._last is not None:
            self.jax.block_until_ready(self._last)
            self._last = None

    def to_device(self, host):
        """An argument as a JAX array on the cell's device (scalars and other values unchanged)."""
        if not arguments.is_array(host):
            return host
        placed = self.jax.device_put(host, self.place)
        self._placed.append(placed)
        return placed

    def to_host(self, result):
        """The result as NumPy arrays (tuples stay tuples, numbers as they are)."""
        import numpy as np

        if isinstance(result, tuple):
            return tuple(self.to_host(part) for part in result)
        return np.asarray(result) if isinstance(result, self.jax.Array) else result

    def as_numpy(self, host):
        return self.to_host(host)

    def call(self, inputs):
        function = self.compiled_fn if self.compiled_fn is not None else self._eager
        self._last = function(*inputs)
        return self._last

    def _eager(self, *inputs):
        return self.op.compute(self.lib, *inputs)

    def eager_call(self, host_inputs: list) -> tuple[object, tuple[int, ...]]:
        """The kernel's eager code on JAX copies of the inputs: its result, and no changed
        argument (JAX's cannot change; measure/cell.py has skipped a kernel whose NumPy
        call changes one)."""
        try:
            returned = self._last = self._eager(*[self.to_device(x) for x in arguments.fresh(host_inputs)])
            self.sync()
        except TypeError as error:
            raise self._refusal(error, "") or error from None
        return returned, ()

    def _refusal(self, error: Exception, mode: str) -> NotForLibrary | None:
        """The skip for code JAX cannot run as written, or None for any other failure."""
        said = compiled.short_reason(str(error))
        if isinstance(error, TypeError) and "immutable" in said:
            return NotForLibrary(f"not for {self.cell.library}: the code assigns into an array (x[i] = y), and JAX "
                                 "arrays cannot be changed")
        if mode and (type(error).__name__ in TRACE_ERRORS or "Tracer" in said):
            return NotForLibrary(f"not for {self.cell.library} {mode}: the code does not trace ({said[:160]})")
        return None

    def first_calls(self, host_inputs: list) -> dict:
        """jit's first call, timed: the trace and the compile, and one run."""
        inputs = [self.to_device(x) for x in arguments.fresh(host_inputs)]
        try:
            with memory.watching_first_call(self.device) as peak:
                first = compiled.timed_first_call(self.call, [inputs], self.sync)
        except Exception as error:  # noqa: BLE001 - only what JAX cannot trace or change is a skip
            raise self._refusal(error, "jit") or error from None
        return {"first_call_s": first, "memory": peak, "graphs": 1, "graph_breaks": 0, "first_break": "",
                "fallback": "", "backend": "xla", "mode": "jit", "compiler_version": self.jax.__version__,
                "cache": {"cold": True, "hits": 0, "misses": 1, "warm": False}}

    def recompiles(self) -> int:
        """Traces after the first: calls whose shapes or dtypes differed."""
        size = getattr(self.compiled_fn, "_cache_size", None)
        return max(0, size() - 1) if callable(size) else 0

    def pin(self, host_inputs: list) -> list:
        return host_inputs
