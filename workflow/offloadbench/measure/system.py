"""A read-only check of the system around a measurement: it reports, it never tunes.

Load and busy processes, the CPU governor and turbo, the cores present, and on NVIDIA GPUs
persistence mode, clocks and the reasons they are held down (through nvidia-ml-py). Every
reading is optional: an unreadable /proc, /sys or NVML gives None, never an error.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import time
from pathlib import Path

from ..cells import usable_cores

# Where this variable is set (and not 0), cuda is the stand-in GPU, test equipment that takes
# the cuda paths on a machine without one (devices.py loads it; tests/standin/ holds it).
STANDIN_ENV = "OFFLOADBENCH_STANDIN_GPU"


def standin_requested() -> bool:
    """Whether this run's cuda is the stand-in GPU (OFFLOADBENCH_STANDIN_GPU set, not 0)."""
    return os.environ.get(STANDIN_ENV, "") not in ("", "0")


BUSY_CPU_SHARE = 0.10  # a process using this share of one core counts as busy
BUSY_LOAD_PER_CORE = 0.5  # 1-minute load per core above which the machine is not idle
STEAL_SHARE = 0.05  # CPU time stolen by a hypervisor above which timings suffer

# nvmlClocksEventReason bits, as named in NVIDIA's documentation.
CLOCK_EVENT_REASONS = {
    0x1: "gpu idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clocks setting",
}


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def load_average() -> list[float] | None:
    text = _read("/proc/loadavg")
    try:
        return [float(v) for v in text.split()[:3]] if text else None
    except ValueError:
        return None


def cpu_governor() -> str | None:
    return _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def turbo() -> str | None:
    """"on", "off" or None where the kernel does not say."""
    for switch, on in (("intel_pstate/no_turbo", "0"), ("cpufreq/boost", "1")):
        value = _read(f"/sys/devices/system/cpu/{switch}")
        if value in ("0", "1"):
            return "on" if value == on else "off"
    return None


def _stat(pid: int) -> tuple[str, list[str]]:
    """A process's command name and the fields after it (/proc/<pid>/stat); ("", []) where
    it cannot be read."""
    text = _read(f"/proc/{pid}/stat") or ""
    if ")" not in text:
        return "", []
    return text[text.find("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()


def _cpu_ticks() -> dict[int, tuple[str, int]]:
    """(command name, user + system ticks) of every readable process."""
    ticks = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return ticks
    for pid in pids:
        name, fields = _stat(pid)
        with contextlib.suppress(IndexError, ValueError):
            ticks[pid] = (name, int(fields[11]) + int(fields[12]))
    return ticks


def _ancestors(pid: int) -> set[int]:
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            pid = int(_stat(pid)[1][1])
        except (IndexError, ValueError):
            break
    return seen


def _cpu_times() -> list[int] | None:
    """The machine's CPU time counters (/proc/stat's first line): user ... steal."""
    text = _read("/proc/stat")
    try:
        return [int(v) for v in text.splitlines()[0].split()[1:9]] if text else None
    except (IndexError, ValueError):
        return None


def steal_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of CPU time a hypervisor gave to other guests between two readings."""
    if not before or not after:
        return None
    delta = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(delta)
    return delta[7] / total if total > 0 else None


def busy_processes(window_s: float = 0.25) -> list[dict] | None:
    """Processes that used at least a tenth of a core over a short window, busiest first.
    This process and its ancestors (the job, Snakemake) are marked, not left out."""
    before = _cpu_ticks()
    if not before:
        return None
    time.sleep(window_s)
    after = _cpu_ticks()
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    own = _ancestors(os.getpid())
    busy = []
    for pid, (name, ticks) in after.items():
        if pid in before:
            share = (ticks - before[pid][1]) / hz / window_s
            if share >= BUSY_CPU_SHARE:
                busy.append({"pid": pid, "name": name, "cpu_share": round(share, 2), "ours": pid in own})
    return sorted(busy, key=lambda p: -p["cpu_share"])


@functools.cache
def _nvml():
    """pynvml, initialised once per process and kept (None: no NVML here). A cell reads its
    GPU's clocks before and after sampling; opening NVML and listing the GPUs each time
    would cost milliseconds a reading."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: no NVIDIA GPU, or no driver
        return None
    return pynvml


def nvml_state() -> list[dict] | None:
    """Per NVIDIA GPU, in NVML's (PCI) order: its PCI address, persistence mode, clocks now
    and at most, and what holds them down."""
    pynvml = _nvml()
    if pynvml is None:
        return None
    gpus = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append({"index": index, **_nvml_device(pynvml, handle)})
    except Exception as error:  # noqa: BLE001 - a partial reading is still worth keeping
        gpus.append({"error": str(error)[:200]})
    return gpus


def _nvml_device(pynvml, handle) -> dict:
    def read(fn, *args):
        try:
            value = fn(handle, *args)
        except Exception:  # noqa: BLE001 - fields a GPU or driver does not support
            return None
        return value.decode() if isinstance(value, bytes) else value

    events = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    mask = read(events) if events else None
    power = read(pynvml.nvmlDeviceGetPowerUsage)
    return {
        "name": read(pynvml.nvmlDeviceGetName),
        "pci_bus_id": _bus_id(read(pynvml.nvmlDeviceGetPciInfo)),
        "persistence_mode": {0: "off", 1: "on"}.get(read(pynvml.nvmlDeviceGetPersistenceMode)),
        "sm_clock_mhz": read(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM),
        "sm_clock_max_mhz": read(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": read(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_MEM),
        "mem_clock_max_mhz": read(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM),
        "clock_event_reasons": clock_event_reasons(mask),
        "temperature_c": read(pynvml.nvmlDeviceGetTemperature, pynvml.NVML_TEMPERATURE_GPU),
        "power_w": power / 1000 if isinstance(power, (int, float)) else None,
    }


def clock_event_reasons(mask: int | None) -> list[str] | None:
    """The names of the set bits of an NVML clocks-event (throttle) reason mask."""
    if mask is None:
        return None
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]


def _bus_id(pci) -> str | None:
    """NVML's PCI address of a GPU ("00000000:19:00.0"), bytes in some versions of nvidia-ml-py."""
    bus_id = getattr(pci, "busId", None)
    return bus_id.decode() if isinstance(bus_id, bytes) else bus_id


def parse_pci_bus_id(bus_id: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) of "00000000:19:00.0" (NVML's form) or "0000:19:00.0"."""
    try:
        domain, bus, rest = str(bus_id).split(":")
        return int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
    except (AttributeError, ValueError):
        return None


def nvml_index_of(pci_bus_id: str | None) -> int | None:
    """NVML's index of the GPU at this PCI address (CUDA's index counts within
    CUDA_VISIBLE_DEVICES, NVML's over every GPU in PCI order); None where NVML or the
    address is missing."""
    pynvml, wanted = _nvml(), parse_pci_bus_id(pci_bus_id)
    if pynvml is None or wanted is None:
        return None
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            if parse_pci_bus_id(_bus_id(pynvml.nvmlDeviceGetPciInfo(handle))) == wanted:
                return index
    except Exception:  # noqa: BLE001 - an NVML that cannot list its GPUs
        return None
    return None


def gpu_clocks(nvml_index: int | None) -> dict | None:
    """SM and memory clocks in MHz of one GPU (by NVML's index), for the clock-change check."""
    pynvml = _nvml()
    if pynvml is None or nvml_index is None:
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(nvml_index)
        return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "mem_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)}
    except Exception:  # noqa: BLE001 - a GPU or driver without clock readings
        return None


def nvidia_smi(query: str, run=subprocess.run) -> str | None:
    """The first GPU's line of `nvidia-smi --query-gpu=<query>` (CSV, no header or units);
    None where nvidia-smi cannot run or says nothing."""
    try:
        out = run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                  capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


# PCIe per-lane payload rate in GB/s by generation, after line encoding (8b/10b up to gen 2,
# 128b/130b from gen 3; gen 6 counts its FLIT overhead).
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_link(run=subprocess.run) -> dict | None:
    """The GPU's PCIe link as nvidia-smi reports it, with its theoretical rate."""
    query = "pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,pcie.link.width.current"
    line = nvidia_smi(query, run)
    try:
        gen_max, width_max, gen_now, width_now = (int(v.strip()) for v in line.split(","))
    except (AttributeError, ValueError):  # no nvidia-smi, or no answer from it
        return None
    lane = PCIE_LANE_GBS.get(gen_max)
    return {
        "kind": f"PCIe gen {gen_max} x{width_max}",
        "gbs": lane * width_max if lane else None,
        "current": f"gen {gen_now} x{width_now}",
        "source": "nvidia-smi (maximum generation and width)",
    }


def snapshot(busy_window_s: float = 0.25) -> dict:
    """Everything this check reads, once."""
    times = _cpu_times()
    busy = busy_processes(busy_window_s)
    return {
        "load_average": load_average(),
        "busy_processes": busy,
        "cpu_steal_share": steal_share(times, _cpu_times()),
        "cpu_governor": cpu_governor(),
        "turbo": turbo(),
        "cores_present": os.cpu_count(),
        "cores_usable": usable_cores(),
        "gpus": nvml_state(),
        "standin_gpu": standin_requested(),
    }


def advice(snap: dict) -> list[str]:
    """Plain warnings from a snapshot: what may make this run's numbers weaker."""
    lines = []
    load = (snap.get("load_average") or [None])[0]
    cores = snap.get("cores_present") or 1
    busy = snap.get("busy_processes")
    others = [p for p in busy or [] if not p["ours"]]
    # The load average lags by about a minute, so after this pipeline's own previous job it stays
    # high; it says something only when the direct look could not be taken or found others.
    if load is not None and load > BUSY_LOAD_PER_CORE * cores and (busy is None or others):
        lines.append(f"the machine was busy (1-minute load {load:.1f} on {cores} cores)")
    if others:
        names = ", ".join(f"{p['name']} ({p['cpu_share']:.0%} of a core)" for p in others[:3])
        lines.append(f"other processes were using the CPU: {names}")
    steal = snap.get("cpu_steal_share")
    if steal is not None and steal > STEAL_SHARE:
        lines.append(f"the hypervisor gave {steal:.0%} of this virtual machine's CPU time to other guests (steal)")
    if snap.get("cpu_governor") not in (None, "performance"):
        lines.append(f"the CPU governor is {snap['cpu_governor']!r}, so clocks follow the load")
    if snap.get("standin_gpu"):
        lines.append(f"cuda is offloadbench's stand-in GPU ({STANDIN_ENV} is set): its times are this CPU's "
                     "and a modelled link, not a GPU's")
    for gpu in snap.get("gpus") or []:
        reasons = [r for r in gpu.get("clock_event_reasons") or [] if r != "gpu idle"]
        if reasons:
            lines.append(f"GPU {gpu.get('index')} clocks were held down: {', '.join(reasons)}")
        if gpu.get("persistence_mode") == "off":
            lines.append(f"GPU {gpu.get('index')} has persistence mode off (first use after idle is slower)")
    return lines
