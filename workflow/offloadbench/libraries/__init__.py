"""The array libraries offloadbench measures, one file each, and what the rest of the
house asks of them.

Every question that depends on which library a cell runs goes through here: whether it is
the baseline, where and in which dtypes it can run, what its processes import, how its
arrays move, the order in which a user would adopt it. Outside this package no code
compares a library's name (`tools/library-branches.py` counts such branches and a test
holds them at zero), so a new library is a new file here plus its entry in `REGISTERED`.

Imported by the Snakefile through `cells.py`, so nothing here imports numpy or torch at
module level; each library's file imports its own library when a cell first needs it.
"""

from __future__ import annotations

from . import cupy as _cupy
from . import jax as _jax
from . import numpy as _numpy
from . import torch as _torch
from .library import Library

# in order of simplicity: NumPy, then CuPy (NumPy's API on a GPU), torch and JAX (APIs of their own)
REGISTERED: tuple[Library, ...] = (_numpy.LIBRARY, _cupy.LIBRARY, _torch.LIBRARY, _jax.LIBRARY)

_BY_NAME = {library.name: library for library in REGISTERED}
NAMES: tuple[str, ...] = tuple(_BY_NAME)
BASELINE: str = next(library.name for library in REGISTERED if library.baseline)
# the library whose runtime drives GPUs, compiles code and measures copies
DEVICE_RUNTIME: str = next(library.name for library in REGISTERED if library.drives_devices)


def get(name: str) -> Library:
    """The library `name`, or a KeyError that lists the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown library {name!r} (known: {', '.join(NAMES)})") from None


def runtime(library: str, compiled: bool) -> Library:
    """The library whose runtime runs a cell: its own, or for a compiled cell its
    compiler's (numpy compiled is torch compiling NumPy code)."""
    own = get(library)
    if compiled and not own.compiler:
        raise KeyError(f"{library} has no compiled form")
    return get(own.compiler) if compiled else own


def needs_torch(library: str, compiled: bool, device: str) -> bool:
    """Whether a cell's process loads torch: its runtime is torch's, or it runs on a GPU,
    which measure/devices.py names, watches and keeps apart from forks through torch."""
    return runtime(library, compiled).uses_torch or device != "cpu"


def is_baseline(library: str) -> bool:
    """Whether `library` (eager, on the CPU) is what every speedup is measured against."""
    return library in _BY_NAME and _BY_NAME[library].baseline


def simplicity(library: str, compiled: bool) -> int:
    """The order in which a user adopts the variants: the baseline first, then the other
    eager libraries, then the compiled ones (a compiled NumPy function keeps the NumPy
    code, so it comes before other compiled libraries). Lower is simpler."""
    rank = NAMES.index(library) if library in _BY_NAME else len(NAMES)
    return len(NAMES) * compiled + rank


def for_kernel(takes_xp: bool) -> tuple[str, ...]:
    """The libraries a kernel of the user's can run on: those that take plain NumPy code,
    and with an array-namespace parameter `xp` every library."""
    return NAMES if takes_xp else tuple(library.name for library in REGISTERED if library.runs_plain_numpy)


def owns_array(value) -> bool:
    """Whether `value` is an array of one of the libraries (a NumPy array, a tensor, ...)."""
    return any(library.owns(value) for library in REGISTERED)


def device_array(value) -> bool:
    """An array of a library that has no arrays on the host (CuPy's): `.copy()` copies it on
    its device, `.get()` brings it to the host, `x[...] = y` writes into it."""
    return any(library.devices_only and library.owns(value) for library in REGISTERED)


def versions() -> dict[str, str | None]:
    """Each library's installed version (None where it is not), from its package's
    metadata, without importing it; a module this process already holds without a package
    (the stand-in GPU's CuPy) gives its own `__version__`."""
    import sys
    from importlib import metadata

    found = {}
    for library in REGISTERED:
        try:
            found[library.name] = metadata.version(library.distribution)
        except metadata.PackageNotFoundError:
            held = sys.modules.get(library.module_name.split(".")[0])
            found[library.name] = getattr(held, "__version__", None)
    return found


def kernel_namespace(namespace):
    """The `xp` a kernel gets, for the array module the catalogue's ops get."""
    for library in REGISTERED:
        if library.module_name == namespace.__name__:
            return library.kernel_namespace(namespace)
    return namespace
