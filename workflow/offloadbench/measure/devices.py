"""Devices as the measurement sees them: is it there, how to wait for it, what it is.

torch is passed in, never imported here, so numpy cells stay free of it.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable


def unavailable_reason(device: str, torch) -> str | None:
    """Why `device` cannot be used here, or None when it can."""
    if device == "cpu":
        return None
    if torch is None:
        return f"{device} needs torch, which is not installed"
    if device == "cuda":
        if not torch.cuda.is_available():
            built = torch.backends.cuda.is_built()
            why = "no CUDA device is visible" if built else "this torch build has no CUDA support"
            return f"cuda unavailable: {why} (torch {torch.__version__})"
        return None
    if device == "mps":
        if not torch.backends.mps.is_available():
            if sys.platform != "darwin":
                why = f"MPS is Apple's GPU backend, on macOS only, and this host runs {platform.system() or sys.platform}"
            elif not torch.backends.mps.is_built():
                why = "this torch build has no MPS support"
            else:
                why = "MPS is not available on this Mac"
            return f"mps unavailable: {why} (torch {torch.__version__})"
        return None
    return f"unknown device {device!r}"


def synchronizer(device: str, torch) -> Callable[[], None]:
    """A function that returns once all queued work on `device` has finished."""
    if device == "cuda":
        return torch.cuda.synchronize
    if device == "mps":
        return torch.mps.synchronize
    return lambda: None


def describe(device: str, torch) -> dict:
    """Name, memory and, for CUDA, capability and clocks of the device."""
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        return {
            "name": props.name,
            "total_memory_bytes": int(props.total_memory),
            "compute_capability": f"{props.major}.{props.minor}",
            "multiprocessors": int(props.multi_processor_count),
            "cuda_runtime": torch.version.cuda,
            "count": torch.cuda.device_count(),
        }
    if device == "mps":
        return {"name": "Apple MPS", "total_memory_bytes": None}
    return {"name": "cpu"}


def is_out_of_memory(error: BaseException, torch) -> bool:
    if isinstance(error, MemoryError):
        return True
    if torch is not None and isinstance(error, getattr(torch, "OutOfMemoryError", ())):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and (
        "out of memory" in text or "alloc_failed" in text  # e.g. CUBLAS_STATUS_ALLOC_FAILED
    )


def release_memory(device: str, torch) -> None:
    if torch is not None and device == "cuda":
        torch.cuda.empty_cache()
    elif torch is not None and device == "mps":
        torch.mps.empty_cache()
