"""The measuring backend of CuPy: its arrays on a CUDA GPU, its calls, its memory pool.

It gives a cell what measure/backend.py's `Backend` gives a torch cell on a GPU, so the
regions, the check, the resident trips and the memory reading are built the same way
(`build_regions`):

- h2d / d2h: `cupy.asarray` of the host arrays, `.get()` of the result (into pinned host
  memory with pinned_memory, as `cupyx.empty_pinned` gives);
- compute: the op's code with `cupy` as its namespace, on arrays already on the device;
- end_to_end: NumPy arrays in, the NumPy result out.

Every timed block ends on a synchronisation of the device (CuPy returns before its work is
done). Eager only: CuPy has no compiled mode here.
"""

from __future__ import annotations

import numpy as np

from ..cells import Cell
from . import arguments
from .backend import Backend
from .ops import Op
from .settings import Settings


class CupyDevice:
    """The seam's cuda device (its name, memory, clocks) as CuPy's work sees it: waiting for
    CuPy's work, and a peak read from CuPy's memory pool, which torch's statistics miss."""

    peak_method = "CuPy's memory pool (bytes it holds after the call, from empty)"

    def __init__(self, device, cupy):
        self.seam, self.cupy = device, cupy
        self.name = device.name

    def __getattr__(self, name: str):
        return getattr(self.seam, name)

    def synchronize(self) -> None:
        self.cupy.cuda.Device().synchronize()

    def reset_peak(self) -> int:
        """Give the pool's free blocks back, so that what it holds after a call is the most the
        call held at once (the pool reuses what the call frees)."""
        pool = self.cupy.get_default_memory_pool()
        pool.free_all_blocks()
        return int(pool.total_bytes())

    def peak_since(self, before: int | None) -> int:
        return max(0, int(self.cupy.get_default_memory_pool().total_bytes()) - int(before or 0))


class CupyBackend(Backend):
    """How CuPy moves data and runs the op on a CUDA GPU."""

    def __init__(self, cell: Cell, op: Op, settings: Settings, torch=None):
        import cupy
        import cupyx

        self.cupy, self.cupyx = cupy, cupyx
        super().__init__(cell, op, settings, torch)

    def watched(self, seam):
        return CupyDevice(seam, self.cupy)

    def to_device(self, host):
        """An argument where CuPy's code takes it: arrays copied to the device, the rest
        unchanged."""
        return self.cupy.asarray(host) if isinstance(host, np.ndarray) else host

    def to_host(self, result):
        """The result on the host as NumPy arrays (into pinned memory with pinned_memory);
        tuples stay tuples, numbers and None as they are."""
        if isinstance(result, tuple):
            return tuple(self.to_host(part) for part in result)
        if not isinstance(result, self.cupy.ndarray):
            return result
        if self.settings.pinned_memory:
            return result.get(out=self.cupyx.empty_pinned(result.shape, result.dtype))
        return result.get()

    def call(self, inputs):
        return self.op.compute(self.cupy, *inputs)

    def eager_call(self, host_inputs: list) -> tuple[object, tuple[int, ...]]:
        """The op's code on device copies of the inputs: its result, and the arguments it
        changed (read back from the device)."""
        placed = [self.to_device(x) for x in arguments.fresh(host_inputs)]
        returned = self.call(placed)
        self.sync()
        return returned, arguments.changed(host_inputs, [self.to_host(x) for x in placed])

    def pin(self, host_inputs: list) -> list:
        """With pinned_memory, the input arrays live in pinned memory from the start; copying
        them there is not timed."""
        if not self.settings.pinned_memory:
            return host_inputs
        pinned = []
        for value in host_inputs:
            if isinstance(value, np.ndarray):
                buffer = self.cupyx.empty_pinned(value.shape, value.dtype)
                buffer[...] = value
                value = buffer
            pinned.append(value)
        return pinned
