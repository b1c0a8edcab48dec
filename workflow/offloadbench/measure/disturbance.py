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

Ticks are coarse beside a 0.1 s sampling window on 2 CPUs (0.4 cores of uncertainty), so
Linux's CPU pressure (/proc/pressure/cpu, microseconds) is read too: the share of the
window during which some task waited for a CPU. That is the mechanism of the damage, and
it separates cleanly here: a 2-thread matmul measured 0.2-1.4% alone and 50% beside one
busy process, which made it 5 times slower.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

# Others using more than this share of one core during the sampling flag the process
# `disturbed`: about what a browser tab or an editor's indexer takes in bursts.
DISTURBED_CORES = 0.10
DISTURBED_PRESSURE = 0.10  # some task waited for a CPU during more than this share of the window
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


def _pressure_us() -> int | None:
    """Microseconds during which some task waited for a CPU, since boot (PSI), or None."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as handle:
            return int(handle.readline().split("total=")[1])
    except (OSError, ValueError, IndexError):
        return None


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
    pressure_us: int | None = None


def read() -> Reading:
    """One reading; cheap (a file read and two system calls), taken outside timed regions."""
    busy, source = _proc_stat_busy_s(), "/proc/stat"
    if busy is None:
        busy, source = _psutil_busy_s(), "psutil"
    return Reading(time.monotonic(), busy, time.process_time(), _involuntary_switches(),
                   source if busy is not None else None, _pressure_us())


def between(before: Reading, after: Reading, cpus: int | None = None) -> dict:
    """What other processes used between two readings, as the record keeps it."""
    wall = max(after.wall_s - before.wall_s, 1e-9)
    own = after.own_s - before.own_s
    switches = (after.switches - before.switches
                if after.switches is not None and before.switches is not None else None)
    pressure = ((after.pressure_us - before.pressure_us) / 1e6 / wall
                if after.pressure_us is not None and before.pressure_us is not None else None)
    waited = pressure is not None and pressure > DISTURBED_PRESSURE
    if before.busy_s is None or after.busy_s is None:
        return {"window_s": wall, "own_cores": own / wall, "others_cores": None, "cpu_pressure": pressure,
                "involuntary_switches": switches, "source": None, "disturbed": waited}
    others = max(0.0, (after.busy_s - before.busy_s) - own)
    resolution = 2 * (cpus or os.cpu_count() or 1) * TICK_S  # a tick per CPU at each end
    return {
        "window_s": wall,
        "own_cores": own / wall,
        "others_cores": others / wall,
        "resolution_cores": resolution / wall,
        "cpu_pressure": pressure,
        "involuntary_switches": switches,
        "source": before.source,
        "disturbed": others - resolution > DISTURBED_CORES * wall or waited,
    }


def describe(disturbance: dict) -> str:
    """"other processes used 0.90 cores; a task waited for a CPU 50% of the time"."""
    words = [f"other processes used {disturbance.get('others_cores') or 0:.2f} cores"]
    if (disturbance.get("cpu_pressure") or 0) > DISTURBED_PRESSURE:
        words.append(f"a task waited for a CPU {disturbance['cpu_pressure']:.0%} of the time")
    return "; ".join(words)


def flag_for(disturbance: dict) -> str | None:
    """The noise flag of a disturbed sampling window, or None."""
    if not disturbance.get("disturbed"):
        return None
    return f"disturbed: {describe(disturbance)} while it sampled"
