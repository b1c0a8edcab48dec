"""The copy-bandwidth sweep: host->device and device->host, pageable and pinned host memory.

Copies go between preallocated buffers (`copy_`), so the sweep times the link, not the
allocator; pinned copies are `non_blocking` and synchronised like every device region.
"""

from __future__ import annotations

import itertools
import statistics

from ..units import bandwidth_gbs
from . import devices
from .timing import BlockRule, Region, StopRule, WarmupRule, measure_region

DIRECTIONS = ("h2d", "d2h")
def link_rate(configured, device: str, torch=None) -> dict | None:
    """The theoretical host<->device rate: configured in GB/s, or read where possible."""
    if isinstance(configured, (int, float)):
        return {"kind": "configured", "gbs": float(configured), "source": "config transfer.link_gbs"}
    return devices.get(device, torch).link()


def unavailable(device: str, memory: str, torch) -> str | None:
    """Why this (device, memory kind) cannot be swept here, or None."""
    reason = devices.unavailable_reason(device, torch)
    if reason:
        return reason
    if memory == "pinned" and device != "cuda":
        return f"pinned host memory is a CUDA feature; {device} copies use pageable memory only"
    return None


COPY_WARMUP = WarmupRule(budget_s=0.3)


def measure_copy(torch, nbytes: int, direction: str, pinned: bool, stop: StopRule, device: str = "cuda") -> dict:
    """Time one copy size and direction; returns samples, median and GB/s."""
    on = devices.get(device, torch)
    host = on.host_buffer(nbytes, pinned)
    host.fill_(1)  # touch every page so the first copy does not pay for page faults
    dev = on.device_buffer(nbytes)
    destination, source = (dev, host) if direction == "h2d" else (host, dev)
    region = Region(direction, lambda: on.copy(destination, source, non_blocking=pinned), on.synchronize)
    measured = measure_region(region, BlockRule(), COPY_WARMUP, stop)
    median = statistics.median(measured.samples_s)
    return {
        "samples_s": list(measured.samples_s),
        "calls_per_sample": measured.calls_per_sample,
        "rel_ci": measured.rel_ci,
        "converged": measured.converged,
        "median_s": median,
        "gbs": bandwidth_gbs(nbytes, median),
    }


def sweep(torch, device: str, sizes: list[int], memory_kinds: list[str], stop: StopRule,
          absent: str | None = None) -> list[dict]:
    """Every (direction, memory kind, size) point: measured, or skipped/oom with a reason;
    `absent` is why the device is known to be missing (then torch need not even load)."""
    points = []
    for memory in memory_kinds:
        reason = absent or unavailable(device, memory, torch)
        for direction, nbytes in itertools.product(DIRECTIONS, sizes):
            point = {"direction": direction, "memory": memory, "bytes": nbytes, "status": "ok", "reason": ""}
            if reason:
                point.update(status="skipped", reason=reason)
            else:
                try:
                    point.update(measure_copy(torch, nbytes, direction, memory == "pinned", stop, device))
                except Exception as error:  # noqa: BLE001 - a point's failure is recorded, the sweep goes on
                    oom = devices.is_out_of_memory(error, torch)
                    point.update(status="oom" if oom else "error", reason=devices.first_line(error))
                    devices.release_memory(device, torch)
            points.append(point)
    return points
