"""What the house needs to know of one array library: a library's file fills one in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Library:
    """One array library as offloadbench measures it.

    The callables take the imported torch module (or None) where they need it, since the
    processes that measure import it once and hand it on; they import their own library
    when first called."""

    name: str  # as configs, records and tables spell it
    label: str  # as the report writes it
    module_name: str  # the array module its ops call (`lib.__name__`)
    baseline: bool  # every speedup is against it, eager on the CPU
    compiler: str  # the library whose compiler compiles its code (the mode "compiled"); "": none
    devices: tuple[str, ...]  # where its eager form runs
    unsupported_dtypes: Mapping[str, str]  # dtype -> why it cannot hold it
    runs_plain_numpy: bool  # runs a kernel that takes NumPy arrays and no `xp`
    uses_torch: bool  # its processes import torch (its arrays are tensors, or torch runs it)
    tensors: bool  # its arrays are torch tensors
    drives_devices: bool  # its runtime drives the GPUs, compiles, and measures copies
    import_s: float  # what importing it costs a worker, for the estimate (seconds)
    pool_spin_s: float  # how long the thread pool that runs its calls may spin after one (schedule.py)
    namespace: Callable  # (torch) -> the array module the catalogue's ops get as `lib`
    kernel_namespace: Callable  # (lib) -> the `xp` a kernel of the user's gets
    from_host: Callable  # (NumPy array, torch) -> the library's array on the CPU, sharing memory
    owns: Callable  # (value) -> whether it is one of the library's arrays (known without importing it)
    # the roofs' calls, on host arrays placed on the device `on` (measure/devices.py): each
    # gives (the call, how to wait for it)
    triad: Callable  # (on, b, c, scale, torch): a = b + scale*c
    matmul: Callable  # (on, a, b, dtype, torch): a @ b
    distribution: str  # the package it is installed as, whose version every record keeps
    source: str  # where its packages come from
    requirements: str = ""  # the pip requirements file of an extra ("": requirements.txt has it)
    mutable_arrays: bool = True  # a kernel may update its arguments in place
    devices_only: bool = False  # its arrays live on a device only (`.get()` brings them to the host)
    copies_from_numpy: bool = False  # its array of a NumPy array is a copy: its CPU cells time NumPy in and out apart
    backend: str = "torch"  # the measuring backend that moves its arrays and runs its calls (measure/)
    host_peak_method: str = "tracemalloc"  # how a call's peak host memory is seen (measure/memory.py)
    limit_threads: Callable | None = None  # (count), before its runtime starts -> what it set
    # (dtype) -> what a cell of that dtype sets for its whole process ("": nothing); cells
    # that set different things get workers of their own (a worker measures several cells)
    process_setting: Callable[[str], str] | None = None

    def process_setting_of(self, dtype: str) -> str:
        return self.process_setting(dtype) if self.process_setting else ""

    def runs_on(self, device: str) -> bool:
        return device in self.devices

    def dtype_reason(self, dtype: str) -> str | None:
        """Why the library cannot hold `dtype`, or None."""
        return self.unsupported_dtypes.get(dtype)
