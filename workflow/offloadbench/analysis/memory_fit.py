"""Does the problem fit? The measured peaks fitted against the op's memory model, and the
largest size that fits each device.

For each op, variant, device and dtype, the peaks of its cells (host peak on the cpu,
device peak on a GPU: extra bytes of one call, measured untimed) are divided by the
model's unit, the op's outputs (`catalogue.output_unit_bytes`): the largest quotient over
the sizes measured is the calibrated `scale` of results and temporaries. A call then holds
its inputs and `scale` outputs (`catalogue.call_bytes`); the model guessed TEMPORARIES
outputs, and the row says how far that was from the measurements. The largest n that fits
keeps HEADROOM of the device's memory (environment.json: the GPU's, else the host's) free.
The OOM pre-check of a later run uses the same scale where a measurement exists (jobs/earlier.py).
"""

from __future__ import annotations

import math

import pandas as pd

from ..catalogue import SPECS, TEMPORARIES, OpSpec, call_bytes, kernel_spec, measured_scale
from ..cells import ITEMSIZE
from ..records import Environment
from .columns import MEMORY

HEADROOM = 0.1  # a tenth of the device's memory stays free for the program's other data
LARGEST_N = 2**20  # the search stops here (the config's sizes stop at 131072)


def spec_for(op: str) -> OpSpec:
    """The catalogue's spec, or a user kernel's as one n×n argument (its arrays are n×n)."""
    return SPECS.get(op) or kernel_spec(op, 1)


def largest_fitting(spec: OpSpec, itemsize: int, scale: float | None, memory_bytes: float) -> float:
    """The largest n whose call (inputs and `scale` outputs) fits (1 - HEADROOM) of the memory
    (NaN where none does, or where the memory is not known)."""
    room = (1 - HEADROOM) * memory_bytes
    if not (math.isfinite(room) and room > 0) or call_bytes(spec, 1, itemsize, scale) > room:
        return math.nan
    low, high = 1, LARGEST_N
    if call_bytes(spec, high, itemsize, scale) <= room:
        return high
    while high - low > 1:  # call_bytes grows with n
        middle = (low + high) // 2
        low, high = (middle, high) if call_bytes(spec, middle, itemsize, scale) <= room else (low, middle)
    return low


def device_memory(environment: Environment | None, device: str) -> float:
    """The memory of a device as environment.json records it (NaN where it does not)."""
    if environment is None:
        return math.nan
    gpu = next((g.total_memory_bytes for g in environment.gpus), None)
    value = environment.memory_bytes if device == "cpu" else gpu
    return float(value) if isinstance(value, (int, float)) and value > 0 else math.nan


def memory_table(timings: pd.DataFrame, environment: Environment | None, machine: str) -> pd.DataFrame:
    """One row per op, variant, device and dtype measured ok with a peak, in the declared columns."""
    if timings.empty or "peak_host_bytes" not in timings:
        return pd.DataFrame(columns=list(MEMORY))
    ok = timings[timings["status"] == "ok"].copy()
    ok["peak"] = ok["peak_device_bytes"].where(ok["device"] != "cpu", ok["peak_host_bytes"])
    rows = []
    for (op, variant, device, dtype), group in ok.groupby(["op", "variant", "device", "dtype"], sort=False):
        measured = group.dropna(subset=["peak"]).groupby("size")["peak"].max()
        if measured.empty:
            continue
        spec, itemsize = spec_for(op), ITEMSIZE.get(dtype, 4)
        scale = measured_scale(list(measured.items()), spec, itemsize)
        memory = device_memory(environment, device)
        biggest = int(measured.index.max())
        rows.append({
            "machine": machine, "op": op, "variant": variant, "device": device, "dtype": dtype,
            "sizes": ", ".join(str(int(n)) for n in measured.index),
            "largest_measured": biggest, "peak_bytes": float(measured.loc[biggest]),
            "scale": scale, "model_scale": float(TEMPORARIES),
            "model_error": TEMPORARIES / scale - 1 if scale else math.nan,
            "memory_bytes": memory, "headroom": HEADROOM,
            "largest_size": largest_fitting(spec, itemsize, scale, memory),
            "largest_size_model": largest_fitting(spec, itemsize, None, memory),
        })
    return pd.DataFrame(rows, columns=list(MEMORY))
