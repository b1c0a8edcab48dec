"""Units shared by every stage: byte sizes, bandwidth, and times as people read them."""

from __future__ import annotations

import math
import re

_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?I?B)\s*$", re.IGNORECASE)


def parse_size(value) -> int:
    """Bytes from an integer or a text such as "64KiB", "1.5 GB"."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (use e.g. 4096, '64KiB', '1GiB')")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def format_bytes(nbytes: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale  # three significant digits: 23.5 GiB, 141 GiB, 1000 KiB
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(nbytes)} B"


def fmt_count(value: float) -> str:
    """A count people read at a glance: "1,008", "4.06k", "1.2M" (three significant digits)."""
    if not math.isfinite(value):
        return "–"
    value = round(value)
    if value < 10_000:
        return f"{value:,}"
    return f"{value / 1e6:.3g}M" if value >= 1e6 else f"{value / 1e3:.3g}k"


def bandwidth_gbs(nbytes: float, seconds: float) -> float:
    """Bytes per second in GB/s (10^9), the unit of link specifications."""
    return nbytes / seconds / 1e9 if seconds > 0 else math.nan


def fmt_time(seconds: float | None) -> str:
    """A duration with three significant digits and a unit: 1.23 ms, 45.6 µs."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_duration(seconds: float) -> str:
    """A wall-clock duration for progress lines: 45 s, 3m10s, 1h05m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
