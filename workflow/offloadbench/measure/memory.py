"""Peak memory of one call, measured in an untimed call of its own after the sampling, so
no timing sees the tracing.

- Host, counted where the allocation happens: NumPy reports its data buffers to
  `tracemalloc`; torch's CPU allocations (torch cells and every compiled cell, which run
  torch underneath) show in its profiler's memory records, every allocation and free in
  the order they happened, whose running sum peaks at the call's peak.
- The process's RSS high-water mark as a cross-check (Linux: reset with
  /proc/self/clear_refs, value 5, read VmHWM). After the warm-up an allocator reuses freed
  pages, so a call's output and temporaries may not raise RSS at all: it is a lower bound.
- Device, through measure/devices.py: `torch.cuda.reset_peak_memory_stats` and
  `max_memory_allocated` on cuda; on mps the driver's allocated memory after the call (mps
  keeps no peak).
Where a method is unavailable, the field says `not measured` with the reason.
"""

from __future__ import annotations

import contextlib
import tracemalloc
from collections.abc import Callable

STATUS = "/proc/self/status"
CLEAR_REFS = "/proc/self/clear_refs"


def _kib_field(field: str, path: str = STATUS) -> int | None:
    """A `field: N kB` line of a /proc file, in bytes."""
    try:
        with open(path, encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def available_host_memory() -> int | None:
    """What the host can still give to new allocations (MemAvailable), None where unread."""
    return _kib_field("MemAvailable", "/proc/meminfo")


def reset_high_water() -> int | None:
    """Reset the RSS high-water mark to the current RSS (None where Linux does not let us)."""
    try:
        with open(CLEAR_REFS, "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return None
    return _kib_field("VmRSS")


def high_water_since(baseline: int | None) -> int | None:
    """How far RSS rose above `baseline` since the reset (None where it cannot be read)."""
    peak = _kib_field("VmHWM")
    return max(0, peak - baseline) if peak is not None and baseline is not None else None


def _numpy_peak(call: Callable[[], object]) -> int:
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    result = call()
    _, peak = tracemalloc.get_traced_memory()
    del result
    if not was_tracing:
        tracemalloc.stop()
    return max(0, peak - before)


def _torch_peak(call: Callable[[], object], torch) -> int:
    """The peak of torch's CPU allocations in one call: the running sum of every allocation
    and free the profiler recorded (Kineto's "[memory]" records), in the order they
    happened. Per-op totals are no substitute: inside compiled code a free belongs to the
    compiled region, which begins before any of its ops allocate (an aot_eager graph read 0
    that way). The autograd profiler starts in milliseconds (torch.profiler.profile took
    1.5 s in every fresh process); its Kineto hangs in a child forked after its parent used
    it, and no worker profiles before it forks (jobs/worker.py)."""
    with torch.autograd.profiler.profile(use_kineto=True, use_cpu=True, profile_memory=True) as prof:
        result = call()
        del result
    records = sorted((e for e in prof.kineto_results.events()
                      if e.name() == "[memory]" and str(e.device_type()).endswith("CPU")), key=lambda e: e.start_ns())
    running = peak = 0
    for record in records:
        running += record.nbytes()
        peak = max(peak, running)
    return peak


def host_peak(call: Callable[[], object], method: str, torch=None) -> dict:
    """Peak extra host bytes of one call, by the method that sees its library's allocations
    ("torch profiler", "tracemalloc", or "rss" where neither does: XLA allocates outside
    both), and the RSS high-water mark's rise as a cross-check."""
    baseline = reset_high_water()
    try:
        if method == "rss":
            call()
            peak = high_water_since(baseline)
            if peak is None:
                raise OSError("no /proc/self/clear_refs here to reset the RSS high-water mark")
        else:
            peak = _torch_peak(call, torch) if method == "torch profiler" else _numpy_peak(call)
        found = {"peak_bytes": int(peak), "method": method}
    except Exception as error:  # noqa: BLE001 - an unavailable method is said, never a failed cell
        found = {"peak_bytes": None, "method": "not measured", "reason": f"{type(error).__name__}: {error}"[:300]}
    rss = high_water_since(baseline)
    found["rss_hwm_bytes"] = rss
    if rss is None:
        found["rss_reason"] = "not measured: no /proc/self/clear_refs here"
    return found


def device_peak(call: Callable[[], object], device) -> dict:
    """Peak bytes one call allocates on a GPU (measure.devices), above what it held before."""
    device.synchronize()
    before = device.reset_peak()
    result = call()
    device.synchronize()
    peak = device.peak_since(before)
    del result
    if peak is None:  # a runtime whose peak cannot be reset (XLA), not risen above its earlier one
        return {"peak_bytes": None, "method": "not measured",
                "reason": f"{device.peak_method}: the call stayed below the process's earlier peak, which cannot be reset"}
    return {"peak_bytes": peak, "method": device.peak_method}


@contextlib.contextmanager
def watching_first_call(device):
    """Around a compiled cell's first call (the compile): the RSS high-water rise and, on a
    GPU, the device's peak; filled into the yielded dict when the block ends. Only a reset
    before and a read after, so the compile time it surrounds is unchanged."""
    found: dict = {}
    baseline = reset_high_water()
    before = device.reset_peak() if device.name == "cuda" else None
    yield found
    found["rss_hwm_bytes"] = high_water_since(baseline)
    if device.name == "cuda":
        found["device_peak_bytes"] = device.peak_since(before)
