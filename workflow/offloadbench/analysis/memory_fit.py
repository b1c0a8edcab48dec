"""Does the problem fit? The measured memory of each variant's call fitted against n, and
the largest size that fits each device.

A call holds its inputs and the extra bytes it allocates (results and temporaries), both
measured at each size run: the inputs' bytes as given (a kernel's may have any shape), the
extra as the peak of one untimed call (host peak on the cpu, device peak on a GPU). A
catalogue op's inputs are exact and its extra is a multiple of its outputs, the largest
quotient over the sizes (`scale`); the model guessed TEMPORARIES outputs, and the row says
how far that was. A kernel's inputs and extra are each fitted as c·n^p (footprint.py). A
peak below the bytes the call returns is not believed (a reading that missed allocations,
as the profiler misses some of compiled code's): the returned bytes stand in, and the row
says so. The largest n that fits keeps HEADROOM of the device's memory (environment.json:
the GPU's, else the host's) free. A later run's out-of-memory check fits the same points
(jobs/earlier.py, catalogue.footprint).
"""

from __future__ import annotations

import math

import pandas as pd

from ..catalogue import SPECS, TEMPORARIES, footprint, kernel_spec, measured_scale
from ..cells import ITEMSIZE
from ..footprint import fit
from ..records import Environment
from .columns import MEMORY

HEADROOM = 0.1  # a tenth of the device's memory stays free for the program's other data


def spec_for(op: str):
    """The catalogue's spec, or a user kernel's, whose input bytes are measured and fitted."""
    return SPECS.get(op) or kernel_spec(op, 0, default_inputs=False)


def device_memory(environment: Environment | None, device: str) -> float:
    """The memory of a device as environment.json records it (NaN where it does not)."""
    if environment is None:
        return math.nan
    gpu = next((g.total_memory_bytes for g in environment.gpus), None)
    value = environment.memory_bytes if device == "cpu" else gpu
    return float(value) if isinstance(value, (int, float)) and value > 0 else math.nan


def _points(group: pd.DataFrame, column: str) -> list[tuple[int, float]]:
    """(n, value) of each size measured: the largest reading of `column` over its cells."""
    found = group.dropna(subset=[column]).groupby("size")[column].max()
    return [(int(n), float(v)) for n, v in found.items()]


def memory_table(timings: pd.DataFrame, environment: Environment | None, machine: str) -> pd.DataFrame:
    """One row per op, variant, device and dtype measured ok with a peak, in the declared columns."""
    if timings.empty or "peak_host_bytes" not in timings:
        return pd.DataFrame(columns=list(MEMORY))
    ok = timings[timings["status"] == "ok"].copy()
    ok["peak"] = ok["peak_device_bytes"].where(ok["device"] != "cpu", ok["peak_host_bytes"])
    for column in ("inputs_bytes", "result_bytes", "inputs_degree"):
        if column not in ok:
            ok[column] = math.nan  # tables from before these readings
    # a peak below what the call returns missed allocations: the returned bytes stand in
    returned = pd.to_numeric(ok["result_bytes"], errors="coerce")
    ok["doubted"] = ok["peak"].notna() & (returned > ok["peak"])
    ok["peak"] = ok["peak"].where(~ok["doubted"], returned)
    rows = []
    for (op, variant, device, dtype), group in ok.groupby(["op", "variant", "device", "dtype"], sort=False):
        peaks = _points(group, "peak")
        if not peaks:
            continue
        itemsize = ITEMSIZE.get(dtype, 4)
        inputs = _points(group, "inputs_bytes")
        kernel = op not in SPECS
        spec = spec_for(op)
        degree = group["inputs_degree"].dropna()
        degree = int(degree.max()) if not degree.empty else None
        found = footprint(spec, itemsize, peaks, inputs, degree)
        scale = None if kernel else measured_scale(peaks, spec, itemsize)
        memory = device_memory(environment, device)
        biggest, room = max(n for n, _ in peaks), (1 - HEADROOM) * memory
        rows.append({
            "machine": machine, "op": op, "variant": variant, "device": device, "dtype": dtype,
            "sizes": ", ".join(str(n) for n, _ in peaks),
            "largest_measured": biggest, "peak_bytes": dict(peaks)[biggest],
            "peak_doubted": bool(group["doubted"].any()),
            "inputs_bytes": found.inputs(biggest) if found else math.nan,
            "inputs_degree": _degree(fit(inputs), degree) if kernel else math.nan,
            "extra_degree": _degree(fit(peaks), None) if kernel else math.nan,
            "scale": scale if scale is not None else math.nan, "model_scale": math.nan if kernel else float(TEMPORARIES),
            "model_error": TEMPORARIES / scale - 1 if scale else math.nan,
            "memory_bytes": memory, "headroom": HEADROOM,
            "largest_size": found.largest(room) if found else math.nan,
            "largest_size_model": math.nan if kernel else footprint(spec, itemsize).largest(room),
        })
    return pd.DataFrame(rows, columns=list(MEMORY))


def _degree(polynomial, otherwise: int | None) -> float:
    """The power a fit grows with where two sizes or more were measured, else `otherwise`."""
    if polynomial is not None:
        return polynomial.degree
    return otherwise if otherwise is not None else math.nan
