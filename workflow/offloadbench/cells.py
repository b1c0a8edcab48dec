"""A cell of the grid, one (op, library, device, dtype, size, threads, mode) combination,
and the one place that turns it into a file name and back.

Imported by the Snakefile and by every measurement job, so it imports nothing heavy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from . import libraries

GPU_DEVICES = ("cuda", "mps")
DEVICE_ORDER = ("cpu", "cuda", "mps")
LIBRARY_ORDER = libraries.NAMES  # the baseline first, in order of simplicity
DTYPE_ORDER = ("float16", "bfloat16", "float32", "float64")
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}  # bytes per element
ALL_THREADS = "all"
EAGER, COMPILED = "eager", "compiled"
MODES = (EAGER, COMPILED)  # eager: the library as called; compiled: torch.compile of the same code
CELL_COLUMNS = ["op", "library", "device", "dtype", "size", "threads", "mode"]

# Eager cells keep the name they had before modes existed, so older results stay readable;
# a self-comparison's twin (A/A control) adds -aa.
TWIN_SUFFIX = "aa"
_STEM = re.compile(
    r"^(?P<library>[a-z]+)-(?P<device>[a-z]+)-(?P<dtype>[a-z0-9]+)-n(?P<size>\d+)-t(?P<threads>\d+|all)"
    r"(?:-(?P<mode>compiled))?(?:-(?P<twin>aa))?$"
)


def usable_cores() -> int:
    """Cores this process may run on (respects affinity masks set by SLURM or taskset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity API
        return os.cpu_count() or 1


def resolve_threads(label: str | int) -> int:
    """Turn a thread label ("all" or a count) into the count to use on this host."""
    if str(label) == ALL_THREADS:
        return usable_cores()
    return int(label)


def thread_labels(device: str, labels: list[str]) -> list[str]:
    """The thread labels a device's cells get: the grid's on the cpu; on a GPU one, since
    one host thread drives the device (its speedup is against NumPy on all cores)."""
    return list(labels) if device == "cpu" else ["1"]


def host_threads(device: str, label: str | int) -> int:
    """The host threads a cell runs with on this host: its label resolved on the cpu, one
    on a GPU. The one place a label becomes a count."""
    return resolve_threads(label) if device == "cpu" else 1


def thread_label(value) -> str:
    """A thread setting from the config (1, "1", "all") as the label cells carry."""
    return ALL_THREADS if str(value) == ALL_THREADS else str(int(value))


def thread_sort_key(label) -> int:
    """Orders thread labels 1, 2, ..., all."""
    return 10**9 if str(label) == ALL_THREADS else int(label)


def _place_in(order: tuple[str, ...]) -> Callable[[str], int]:
    """A sort key: a value's place in `order`, anything else after it."""
    return lambda value: order.index(value) if value in order else len(order)


dtype_sort_key = _place_in(DTYPE_ORDER)
device_sort_key = _place_in(DEVICE_ORDER)
library_sort_key = _place_in(LIBRARY_ORDER)
mode_sort_key = _place_in(MODES)


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker process measures: a library on a device with a thread count, in one
    mode; a twin's worker is a process of its own, so that a self-comparison compares two
    processes. Fresh in every round."""

    library: str
    device: str
    threads: str  # the label, resolved by `host_threads` on the host that measures
    mode: str = EAGER
    twin: bool = False
    setting: str = ""  # what its cells set for the whole process (Library.process_setting), e.g. JAX's x64

    @property
    def name(self) -> str:
        """`<library>-<device>-t<threads>[-compiled][-<setting>][-aa]`: how records and logs name it."""
        suffix = ("" if self.mode == EAGER else f"-{self.mode}") + (f"-{self.setting}" if self.setting else "")
        suffix += f"-{TWIN_SUFFIX}" if self.twin else ""
        return f"{self.library}-{self.device}-t{self.threads}{suffix}"

    @property
    def host_threads(self) -> int:
        return host_threads(self.device, self.threads)

    @property
    def compiled(self) -> bool:
        return self.mode == COMPILED


@dataclass(frozen=True, order=True)
class Cell:
    op: str
    library: str
    device: str
    dtype: str
    size: int
    threads: str  # a count as text, or "all"; resolved on the host that measures
    mode: str = EAGER
    # A self-comparison's second copy of a cell (an A/A control): measured as one more cell
    # of the grid, with its own processes, and compared with the cell it copies.
    twin: bool = False

    @property
    def stem(self) -> str:
        suffix = ("" if self.mode == EAGER else f"-{self.mode}") + (f"-{TWIN_SUFFIX}" if self.twin else "")
        return f"{self.library}-{self.device}-{self.dtype}-n{self.size}-t{self.threads}{suffix}"

    @property
    def original(self) -> Cell:
        """The cell a twin copies (itself, for a cell that is no twin)."""
        return replace(self, twin=False)

    def twinned(self) -> Cell:
        return replace(self, twin=True)

    @property
    def compiled(self) -> bool:
        return self.mode == COMPILED

    @property
    def variant(self) -> str:
        """"numpy", "torch", "numpy compiled": the library as it was run."""
        return self.library if self.mode == EAGER else f"{self.library} {self.mode}"

    @property
    def key(self) -> str:
        """`<op>/<stem>`: names the cell in paths and messages."""
        return f"{self.op}/{self.stem}"

    @property
    def is_gpu(self) -> bool:
        return self.device in GPU_DEVICES

    @property
    def worker(self) -> WorkerSpec:
        """The worker process that measures it in a round. Compiled cells get workers of
        their own: the compiler's imports and threads never share a process with an eager
        cell, least of all with the NumPy baseline; so do cells that set something else for
        the whole process (JAX's float64 cells, which enable x64)."""
        setting = libraries.get(self.library).process_setting_of(self.dtype)
        return WorkerSpec(self.library, self.device, self.threads, self.mode, self.twin, setting)

    @property
    def group(self) -> tuple[str, str, int]:
        """(op, dtype, size): the cells compared with each other (every variant, device and
        thread count, and a twin), measured in one bout, taking turns."""
        return self.op, self.dtype, self.size

    @property
    def group_name(self) -> str:
        return f"{self.op}-{self.dtype}-n{self.size}"

    @property
    def label(self) -> str:
        return f"{self.op} {self.variant}/{self.device} {self.dtype} n={self.size} t={self.threads}"

    def as_dict(self) -> dict:
        """The cell's fields; `twin` only for a twin, so records and tables of every other
        cell read as before."""
        fields = asdict(self)
        if not self.twin:
            del fields["twin"]
        return fields

    @classmethod
    def from_stem(cls, op: str, stem: str) -> Cell:
        match = _STEM.match(stem)
        if not match:
            raise ValueError(f"not a cell name: {stem!r}")
        parts = match.groupdict()
        return cls(op=op, size=int(parts.pop("size")), mode=parts.pop("mode") or EAGER, twin=bool(parts.pop("twin")),
                   **parts)

    @classmethod
    def from_key(cls, key: str) -> Cell:
        op, _, stem = key.partition("/")
        return cls.from_stem(op, stem)

    @classmethod
    def from_dict(cls, data: dict) -> Cell:
        texts = {name: str(data[name]) for name in ("op", "library", "device", "dtype", "threads")}
        return cls(**texts, size=int(data["size"]), mode=_mode_of(data.get("mode")), twin=data.get("twin") is True)


def _mode_of(value) -> str:
    """Records and tables from before modes have none: they are eager."""
    return value if isinstance(value, str) and value else EAGER
