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

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..records.types import WHOLE_CELL, Flag

# Others using more than this share of one core during the sampling flag the process
# `disturbed`: about what a browser tab or an editor's indexer takes in bursts.
DISTURBED_CORES = 0.10
# Some task waited for a CPU during more than this share of the window: a bout's own hand-offs (the
# orchestrator waking, a sibling's pool spinning down) keep it near 0.1 on 2 cores.
DISTURBED_PRESSURE = 0.25
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (not idle, iowait, guest)


def _ticks_per_second() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100.0


TICK_S = 1.0 / _ticks_per_second()
_PROC_TASKS = Path("/proc/self/task").is_dir()  # Linux: each thread's CPU time, in nanoseconds


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
    siblings_s: float = 0.0  # CPU seconds of the bout's other workers (their pools spinning down)


def _threads_cpu_s(pid: int) -> float | None:
    """CPU seconds of all of a process's threads so far, to the nanosecond
    (/proc/<pid>/task/*/schedstat); 0 for a process gone, None where no thread's could be read."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0.0
    total, read = 0, False
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text(encoding="ascii").split()[0])
            read = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
    return total / 1e9 if read else None


def processes_running(pids: list[int]) -> bool | None:
    """Whether any thread of these processes is running or waiting for a core (state R in
    /proc/<pid>/task/*/stat): a thread pool spinning after its last call is; one asleep, or
    a main thread waiting for its next command, is not. One read, no waiting: a pool's CPU
    time shows only at the scheduler's tick, its state at once. None where /proc has no
    thread states (not Linux); a process gone runs nothing."""
    if not _PROC_TASKS:
        return None
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                stat = (task / "stat").read_text(encoding="ascii", errors="replace")
            except OSError:
                continue  # a thread that ended between the listing and the read
            state = stat[stat.rfind(")") + 2:stat.rfind(")") + 3]
            if state == "R":
                return True
    return False


@functools.cache
def _schedstat_counts() -> bool:
    """Whether this kernel's schedstat counts run time at all (some print zeros: no
    CONFIG_SCHED_INFO); checked once, on a few milliseconds of this process's own work."""
    before = _threads_cpu_s(os.getpid())
    end = time.perf_counter() + 0.005
    while time.perf_counter() < end:
        pass
    after = _threads_cpu_s(os.getpid())
    return before is not None and after is not None and after > before


def processes_cpu_s(pids: list[int]) -> float | None:
    """CPU seconds of these processes together, all threads, as finely as the system
    counts them (schedstat; psutil where that is absent or counts nothing); None where
    neither can read them. A process that ended counts 0."""
    if not pids:
        return 0.0
    if _PROC_TASKS and _schedstat_counts():
        found = [_threads_cpu_s(pid) for pid in pids]
        if all(value is not None for value in found):
            return float(sum(found))
    try:
        import psutil
    except ImportError:
        return None
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        except psutil.Error:
            return None  # not allowed to read it: no reading rather than a quiet one
        total += times.user + times.system
    return total


def read(siblings: tuple[int, ...] = ()) -> Reading:
    """One reading; cheap (a few file reads and two system calls), taken outside timed
    regions. `siblings` are the bout's other workers: what they use is no disturbance from
    outside, and is told apart."""
    siblings_s = processes_cpu_s(list(siblings)) or 0.0  # first: its one-time check stays out of the window
    busy, source = _proc_stat_busy_s(), "/proc/stat"
    if busy is None:
        busy, source = _psutil_busy_s(), "psutil"
    return Reading(time.monotonic(), busy, time.process_time(), _involuntary_switches(),
                   source if busy is not None else None, _pressure_us(), siblings_s)


def across(windows: list[tuple[Reading, Reading]]) -> dict:
    """What other processes used during several windows (a bout's turns of one cell) taken
    as one: their seconds added up. Each window's count of busy ticks is off by up to a
    tick per CPU at each end, at random, so the uncertainty of the sum grows as the square
    root of the number of windows; the pressure is counted in microseconds."""
    if not windows:
        return {"window_s": 0.0, "own_cores": None, "others_cores": None, "cpu_pressure": None,
                "involuntary_switches": None, "source": None, "disturbed": False}
    wall = max(sum(after.wall_s - before.wall_s for before, after in windows), 1e-9)
    own = sum(after.own_s - before.own_s for before, after in windows)
    switches = _added(windows, "switches")
    pressure_us = _added(windows, "pressure_us")
    pressure = pressure_us / 1e6 / wall if pressure_us is not None else None
    waited = pressure is not None and pressure > DISTURBED_PRESSURE
    busy = _added(windows, "busy_s")
    if busy is None:
        return {"window_s": wall, "own_cores": own / wall, "others_cores": None, "cpu_pressure": pressure,
                "involuntary_switches": switches, "source": None, "disturbed": waited}
    siblings = sum(after.siblings_s - before.siblings_s for before, after in windows)
    others = max(0.0, busy - own - siblings)
    resolution = 2 * (os.cpu_count() or 1) * TICK_S * len(windows) ** 0.5  # a tick per CPU at each end
    return {
        "window_s": wall,
        "own_cores": own / wall,
        "others_cores": others / wall,
        "siblings_cores": siblings / wall,
        "resolution_cores": resolution / wall,
        "cpu_pressure": pressure,
        "involuntary_switches": switches,
        "source": windows[0][0].source,
        "disturbed": others - resolution > DISTURBED_CORES * wall or waited,
    }


def _added(windows: list[tuple[Reading, Reading]], name: str):
    """The sum of a reading's differences over the windows, None where any reading lacks it."""
    total = 0
    for before, after in windows:
        start, end = getattr(before, name), getattr(after, name)
        if start is None or end is None:
            return None
        total += end - start
    return total


def describe(disturbance: dict) -> str:
    """"other processes used 0.90 cores; a task waited for a CPU 50% of the time"."""
    words = [f"other processes used {disturbance.get('others_cores') or 0:.2f} cores"]
    if (disturbance.get("cpu_pressure") or 0) > DISTURBED_PRESSURE:
        words.append(f"a task waited for a CPU {disturbance['cpu_pressure']:.0%} of the time")
    return "; ".join(words)


def flag_for(disturbance: dict) -> Flag | None:
    """The noise flag of a disturbed sampling window (its size the cores others used), or None."""
    if not disturbance.get("disturbed"):
        return None
    return Flag("disturbed", WHOLE_CELL, disturbance.get("others_cores") or 0.0,
                f"disturbed: {describe(disturbance)} while it sampled")
