"""What other processes did to the machine while a cell sampled.

The system check before and after a round misses a disturbance that comes and goes between
them. Every worker therefore reads, right before and right after a cell's sampling (never
inside a timed region), the CPU time the whole machine was busy and the CPU time of its
own process, all threads included. The difference is what other processes used. On a
2-core machine, one busy process beside a 2-thread OpenBLAS cell is enough to make threads
wait for a descheduled sibling and turn 10 µs calls into 15 ms ones.

The machine's busy time comes from /proc/stat (user, nice, system, irq, softirq and
steal), or from psutil where /proc is absent. Both count in clock ticks, so each reading
is uncertain by a tick per CPU; a disturbance is only claimed beyond that. The process's
own time comes from its CPU clock (nanoseconds), and the involuntary context switches
from getrusage.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

# Others using more than this share of one core during the sampling flag the process
# `disturbed`: about what a browser tab or an editor's indexer takes in bursts.
DISTURBED_CORES = 0.10
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (not idle, iowait, guest)


def _ticks_per_second() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100.0


TICK_S = 1.0 / _ticks_per_second()


def _proc_stat_busy_s() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = handle.readline().split()[1:]
        return sum(int(fields[i]) for i in _BUSY_FIELDS if i < len(fields)) * TICK_S
    except (OSError, ValueError, IndexError):
        return None


def _psutil_busy_s() -> float | None:
    try:
        import psutil
    except ImportError:
        return None
    times = psutil.cpu_times()
    return sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))


def _involuntary_switches() -> int | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)


@dataclass(frozen=True)
class Reading:
    wall_s: float
    busy_s: float | None  # CPU seconds the machine was busy, summed over its CPUs
    own_s: float  # CPU seconds of this process, all threads
    switches: int | None
    source: str | None


def read() -> Reading:
    """One reading; cheap (a file read and two system calls), taken outside timed regions."""
    busy, source = _proc_stat_busy_s(), "/proc/stat"
    if busy is None:
        busy, source = _psutil_busy_s(), "psutil"
    return Reading(time.monotonic(), busy, time.process_time(), _involuntary_switches(),
                   source if busy is not None else None)


def between(before: Reading, after: Reading, cpus: int | None = None) -> dict:
    """What other processes used between two readings, as the record keeps it."""
    wall = max(after.wall_s - before.wall_s, 1e-9)
    own = after.own_s - before.own_s
    switches = (after.switches - before.switches
                if after.switches is not None and before.switches is not None else None)
    if before.busy_s is None or after.busy_s is None:
        return {"window_s": wall, "own_cores": own / wall, "others_cores": None, "involuntary_switches": switches,
                "source": None, "disturbed": False}
    others = max(0.0, (after.busy_s - before.busy_s) - own)
    resolution = 2 * (cpus or os.cpu_count() or 1) * TICK_S  # a tick per CPU at each end
    return {
        "window_s": wall,
        "own_cores": own / wall,
        "others_cores": others / wall,
        "resolution_cores": resolution / wall,
        "involuntary_switches": switches,
        "source": before.source,
        "disturbed": others - resolution > DISTURBED_CORES * wall,
    }


def flag_for(disturbance: dict) -> str | None:
    """The noise flag of a disturbed sampling window, or None."""
    if not disturbance.get("disturbed"):
        return None
    return f"disturbed: other processes used {disturbance['others_cores']:.2f} cores while it sampled"
