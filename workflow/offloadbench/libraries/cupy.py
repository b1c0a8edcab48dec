"""CuPy: NumPy's API on a CUDA GPU, eager (op by op), with the copies to and from the
device counted as torch's are. No compiled mode here, and no CPU: its cells run on cuda
only. The measuring side is measure/cupy_backend.py.

The process of a CuPy cell also imports torch, whose runtime describes the GPU, reads its
clocks and keeps every cuda cell's process apart from CUDA before it forks; both libraries
use the device's primary context, so neither pays for another. CuPy keeps the memory its
arrays free in a pool of its own, which torch's statistics do not see: a cell's device
peak is read from that pool (from empty, the bytes it holds after the call).
"""

from __future__ import annotations

from .library import Library


def namespace(torch=None):
    import cupy

    return cupy


def kernel_namespace(lib):
    """CuPy through array-api-compat, as torch: a kernel written against `xp` with NumPy 2's
    array-API names (`xp.astype`, `xp.cumulative_sum`, `device=`) runs as written."""
    import array_api_compat.cupy as xp

    return xp


def from_host(array, torch=None):
    import cupy

    return cupy.asarray(array)  # a copy to the device: CuPy has no arrays on the host


def owns(value) -> bool:
    """A CuPy array, known without importing cupy."""
    return any(kind.__module__.split(".")[0] == "cupy" and kind.__name__ == "ndarray" for kind in type(value).__mro__)


def synchronize() -> None:
    """Wait for the device's work: CuPy returns before it is done."""
    import cupy

    cupy.cuda.Device().synchronize()


def triad(on, b, c, scale: float, torch=None):
    """a = b + c in one pass: the triad's bytes (two arrays read, one written). CuPy fuses
    no expression unasked, so b + s·c would take two passes and measure less than the
    memory allows; the multiply costs nothing next to the bytes."""
    import cupy

    cb, cc = cupy.asarray(b), cupy.asarray(c)
    ca = cupy.empty_like(cb)
    return (lambda: cupy.add(cb, cc, out=ca)), synchronize


def matmul(on, a, b, dtype: str, torch=None):
    import cupy

    ca, cb = (cupy.asarray(x, dtype=dtype) for x in (a, b))
    return (lambda: ca @ cb), synchronize


LIBRARY = Library(
    name="cupy", label="CuPy", module_name="cupy", baseline=False, compiler="",
    devices=("cuda",), runs_plain_numpy=False,
    unsupported_dtypes={"bfloat16": "CuPy has no bfloat16"},
    uses_torch=True, tensors=False, drives_devices=False,
    import_s=1.0, pool_spin_s=0.0,  # no host thread pool: the GPU runs its calls
    namespace=namespace, kernel_namespace=kernel_namespace, from_host=from_host, owns=owns,
    triad=triad, matmul=matmul,
    distribution="cupy-cuda12x", source="PyPI (cupy-cuda12x, for CUDA 12 and 13 drivers), an extra: requirements-cupy.txt",
    requirements="requirements-cupy.txt",
    devices_only=True, copies_from_numpy=True, backend="cupy", host_peak_method="tracemalloc",
)
