"""NumPy: the baseline. Every speedup is against NumPy eager on the CPU; compiled, it is
torch.compile of the NumPy function itself (TorchDynamo traces NumPy calls)."""

from __future__ import annotations

from .library import Library

BLOCK_ELEMENTS = 1 << 17  # 1 MiB of float64: stays in L2/L3 while the block is added


def namespace(torch=None):
    import numpy

    return numpy


def kernel_namespace(lib):
    return lib


def from_host(array, torch=None):
    return array


def owns(value) -> bool:
    """A NumPy array, of any subclass."""
    return any(kind.__module__ == "numpy" and kind.__name__ == "ndarray" for kind in type(value).__mro__)


def triad(on, b, c, scale: float, torch=None):
    """a = b + s·c in cache-sized blocks: NumPy has no fused form, and blocks whose scaled
    copy stays in cache keep the memory traffic at three arrays, as STREAM counts it."""
    import numpy as np

    a = np.empty_like(b)
    scratch = np.empty(min(BLOCK_ELEMENTS, a.size), dtype=a.dtype)

    def run():
        for start in range(0, a.size, BLOCK_ELEMENTS):
            stop = min(start + BLOCK_ELEMENTS, a.size)
            part = scratch[: stop - start]
            np.multiply(c[start:stop], scale, out=part)
            np.add(b[start:stop], part, out=a[start:stop])

    return run, on.synchronize  # the CPU's: nothing to wait for


def matmul(on, a, b, dtype: str, torch=None):
    return (lambda: a @ b), on.synchronize


LIBRARY = Library(
    name="numpy", label="NumPy", module_name="numpy", baseline=True, compiler="torch",
    devices=("cpu",), unsupported_dtypes={"bfloat16": "NumPy has no bfloat16"}, runs_plain_numpy=True,
    uses_torch=False, tensors=False, drives_devices=False,
    import_s=0.3, pool_spin_s=0.15,  # OpenBLAS's pool spins after a call for a while
    namespace=namespace, kernel_namespace=kernel_namespace, from_host=from_host, owns=owns,
    triad=triad, matmul=matmul,
    distribution="numpy", source="PyPI wheels (pip), conda-forge (conda)",
)
