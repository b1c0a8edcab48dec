"""The machine's roofs: memory bandwidth from a STREAM-style triad, and compute from a large
matmul per dtype, in each library on each device; and on the cpu what one fresh page
costs (a minor page fault: the kernel maps a zeroed page on first touch), the price a call
pays for every page its allocator gets anew from the system.

The triad a = b + s·c counts three arrays of traffic per call, as STREAM does; each
library's file (libraries/) says how it runs one in as few passes as it can. Arrays are far
larger than the caches.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np

from .. import libraries as registry
from . import devices
from .timing import BlockRule, Region, StopRule, WarmupRule, measure_region

PAGE_BYTES = mmap.PAGESIZE
FRESH_PAGES_BYTES = 16 * 2**20  # pages mapped per call of the fresh-page point
TRIAD_SCALE = 3.0


@dataclass(frozen=True)
class RoofSizes:
    triad_bytes: int  # per array
    matmul_n: int


def triad_region(library: str, device: str, nbytes: int, torch=None) -> Region:
    """One triad call over three arrays of `nbytes` each (float64 on the cpu, float32 on GPUs
    that lack float64), in the library's own form (libraries/)."""
    dtype = "float32" if device == "mps" else "float64"
    n = nbytes // np.dtype(dtype).itemsize
    rng = np.random.default_rng(0)
    b, c = (rng.random(n).astype(dtype) for _ in range(2))
    return Region("triad", *registry.get(library).triad(devices.get(device, torch), b, c, TRIAD_SCALE, torch))


def matmul_region(library: str, device: str, dtype: str, n: int, torch=None) -> Region:
    rng = np.random.default_rng(1)
    a, b = ((rng.random((n, n)) * 2 - 1).astype("float32" if dtype == "bfloat16" else dtype) for _ in range(2))
    return Region("matmul", *registry.get(library).matmul(devices.get(device, torch), a, b, dtype, torch))


def fresh_pages_region(nbytes: int = FRESH_PAGES_BYTES) -> Region:
    """One call maps `nbytes` of anonymous memory, touches each page once (each a minor
    fault: a fresh zeroed page) and unmaps it, as an allocator that returns large blocks to
    the system makes every call do. An explicit mapping, since malloc may keep freed blocks."""

    def touch():
        block = mmap.mmap(-1, nbytes)
        view = np.frombuffer(block, dtype=np.uint8)
        view[::PAGE_BYTES] = 1
        del view
        block.close()

    return Region("fresh pages", touch)


def compute_roof_exists(device: str, dtype: str) -> bool:
    """CPU BLAS libraries have fast float32 and float64 only (half precision runs in slow
    generic loops, no roof to speak of); MPS has no float64."""
    if device == "cpu":
        return dtype in ("float32", "float64")
    return not (device == "mps" and dtype == "float64")


def _measure(region: Region, budget_s: float) -> list[float]:
    measured = measure_region(region, BlockRule(), WarmupRule(budget_s=min(1.0, budget_s)),
                              StopRule(budget_s=budget_s, target_rel_ci=0.01))
    return list(measured.samples_s)


def calibrate(device: str, libraries: list[str], dtypes: list[str], sizes: RoofSizes, budget_s: float, torch=None,
              absent: str | None = None) -> list[dict]:
    """Every roof point of one device: measured, or skipped/oom/error with a reason;
    `absent` is why the device is known to be missing (then torch need not even load)."""
    points = []
    for library in libraries:
        own = registry.get(library)
        if not own.runs_on(device):
            continue
        reason = absent or (devices.unavailable_reason(device, torch) if own.uses_torch else None)
        computes = [("compute", dtype) for dtype in dtypes if compute_roof_exists(device, dtype)]
        for kind, dtype in [("memory", "float64" if device != "mps" else "float32"), *computes]:
            point = {"library": library, "kind": kind, "dtype": dtype, "status": "ok", "reason": ""}
            if kind == "memory":
                point.update(bytes=3 * sizes.triad_bytes, size=sizes.triad_bytes)
            else:
                point.update(flops=2.0 * sizes.matmul_n**3, size=sizes.matmul_n)
            if reason:
                point.update(status="skipped", reason=reason)
            else:
                try:
                    region = (triad_region(library, device, sizes.triad_bytes, torch) if kind == "memory"
                              else matmul_region(library, device, dtype, sizes.matmul_n, torch))
                    point["samples_s"] = _measure(region, budget_s)
                except Exception as error:  # noqa: BLE001 - a point's failure is recorded, calibration goes on
                    oom = devices.is_out_of_memory(error, torch)
                    point.update(status="oom" if oom else "error", reason=devices.first_line(error))
                finally:
                    devices.release_memory(device, torch)
            points.append(point)
    if device == "cpu" and registry.BASELINE in libraries:
        points.append(fresh_pages_point(budget_s))
    return points


def fresh_pages_point(budget_s: float) -> dict:
    """The cost of fresh pages on the cpu: `size` pages per call of the region above."""
    point = {"library": registry.BASELINE, "kind": "pages", "dtype": "uint8", "bytes": FRESH_PAGES_BYTES,
             "size": FRESH_PAGES_BYTES // PAGE_BYTES, "status": "ok", "reason": ""}
    try:
        point["samples_s"] = _measure(fresh_pages_region(), min(budget_s, 0.2))
    except (OSError, ValueError) as error:  # no anonymous mappings here
        point.update(status="error", reason=devices.first_line(error))
    return point
