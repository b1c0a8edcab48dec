"""PyTorch: eager on the CPU and on GPUs, compiled with torch.compile (Inductor). Its
runtime also drives every GPU cell, compiles NumPy code, and measures the copies."""

from __future__ import annotations

from .library import Library


def namespace(torch):
    return torch


def kernel_namespace(lib):
    """Torch through array-api-compat, so a kernel written against `xp` runs as written."""
    import array_api_compat.torch as xp

    return xp


def from_host(array, torch):
    return torch.from_numpy(array)  # shares the NumPy array's memory


def is_tensor(value) -> bool:
    """A torch tensor (on any device, of any subclass), known without importing torch."""
    return any(kind.__name__ == "Tensor" and kind.__module__ == "torch" for kind in type(value).__mro__)


def triad(on, b, c, scale: float, torch):
    """a = b + s·c in one fused pass on the device `on` (measure/devices.py)."""
    tb, tc = (on.to_device(torch.from_numpy(x)) for x in (b, c))
    ta = torch.empty_like(tb)
    return (lambda: torch.add(tb, tc, alpha=scale, out=ta)), on.synchronize


def matmul(on, a, b, dtype: str, torch):
    ta, tb = (on.to_device(torch.from_numpy(x).to(dtype=getattr(torch, dtype))) for x in (a, b))
    return (lambda: ta @ tb), on.synchronize


LIBRARY = Library(
    name="torch", label="PyTorch", module_name="torch", baseline=False, compiler="torch",
    devices=("cpu", "cuda", "mps"), unsupported_dtypes={}, runs_plain_numpy=False,
    uses_torch=True, tensors=True, drives_devices=True,
    import_s=2.5, pool_spin_s=0.03,  # OpenMP's pool (torch's, compiled code's) spins briefly after a call
    namespace=namespace, kernel_namespace=kernel_namespace, from_host=from_host, owns=is_tensor,
    triad=triad, matmul=matmul,
    host_peak_method="torch profiler",
    distribution="torch", source="PyPI, by pip in every environment file (CUDA builds: download.pytorch.org)",
)
