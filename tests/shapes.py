"""Grid shapes drawn at random, and the results folder a run of each would leave, built
synthetically (no measuring) in the record format the workers write.

A shape is what a user's config can ask for: one or several sizes and thread counts,
libraries present or absent, eager and/or compiled cells, GPU cells, ops of the catalogue
and kernels of the user's with and without FLOP/byte models, self-comparisons, roofs and
a copy sweep or none; and how each cell ended: ok, error, skipped, oom or timeout, with
whole ops failing. `tests/pipeline/test_shapes.py` runs the analysis, figures, reports, LaTeX and
the terminal summary on the folders, in process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from conftest import FINGERPRINT, make_processes, make_transfer_record
from hypothesis import strategies as st
from offloadbench import grid as grids
from offloadbench.catalogue import SPECS
from offloadbench.cells import Cell
from offloadbench.layout import record_relpath
from offloadbench.records import cell_record

CATALOGUE_OPS = ("matmul", "fft2", "sum_rows", "compute_then_plot", "transcendental")
KERNEL_OPS = {"kmodel": True, "kplain": False}  # a kernel with FLOP/byte models, one without
FAILURES = ("error", "skipped", "oom", "timeout")
FAILURE_REASONS = {
    "error": "RuntimeError during check: this kernel always raises (at held_kernels.py:9)",
    "skipped": "no CUDA device: torch.cuda.is_available() is False",
    "oom": "killed by SIGKILL, most likely the kernel's out-of-memory killer",
    "timeout": "exceeded the cell time limit of 600 s during sampling",
}


@dataclass(frozen=True)
class Shape:
    label: str
    ops: tuple[str, ...]
    libraries: tuple[str, ...]
    devices: tuple[str, ...]
    sizes: tuple[int, ...]
    threads: tuple[str, ...]
    modes: tuple[str, ...]
    processes: int
    controls: int
    failing_ops: tuple[str, ...]  # every cell of these ends in a failure
    failures: dict = field(default_factory=dict)  # cell key -> status, of single failed cells
    roofs: bool = True
    transfer: bool = False

    @property
    def grid(self) -> dict:
        return {"ops": list(self.ops), "libraries": list(self.libraries), "devices": list(self.devices),
                "dtypes": ["float32"], "sizes": list(self.sizes), "threads": list(self.threads),
                "modes": list(self.modes), "compiled": {}, "op_max_size": {}, "controls": self.controls}

    def cells(self) -> list[Cell]:
        return grids.expand(self.grid, {}, set(self.devices))


def subset(items, min_size: int = 1):
    return st.lists(st.sampled_from(items), min_size=min_size, max_size=len(items), unique=True).map(tuple)


@st.composite
def shapes(draw, label: str = "shaped") -> Shape:
    ops = draw(st.lists(st.sampled_from([*CATALOGUE_OPS, *KERNEL_OPS]), min_size=1, max_size=3, unique=True))
    libraries = draw(subset(["numpy", "torch"]))
    devices = ("cpu", *(("cuda",) if draw(st.booleans()) else ()))
    sizes = tuple(sorted(draw(st.lists(st.sampled_from([32, 64, 256, 1024]), min_size=1, max_size=2, unique=True))))
    threads = draw(st.sampled_from([("1",), ("all",), ("1", "all"), ("1", "2", "all")]))
    modes = draw(st.sampled_from([("eager",), ("compiled",), ("eager", "compiled")]))
    failing = tuple(op for op in ops if draw(st.integers(0, 4)) == 0)
    shape = Shape(label, tuple(ops), libraries, devices, sizes, threads, modes,
                  processes=draw(st.sampled_from([1, 2, 2, 2, 3])), controls=draw(st.sampled_from([0, 0, 2])),
                  failing_ops=failing, roofs=draw(st.integers(0, 3)) > 0, transfer="cuda" in devices)
    cells = shape.cells()
    picks = draw(st.lists(st.tuples(st.integers(0, max(0, len(cells) - 1)), st.sampled_from(FAILURES)),
                          max_size=3)) if cells else []
    return Shape(**{**shape.__dict__, "failures": {cells[i].key: status for i, status in picks}})


def _median(cell: Cell) -> float:
    """A time that varies with the op, the library, the place and the size, so that speedups
    fall on both sides of 1."""
    base = 1e-6 * (cell.size / 32) ** 2 * (1 + len(cell.op) % 3)
    if cell.library == "torch":
        base *= 0.6 if cell.size >= 256 else 1.7
    if cell.compiled:
        base *= 0.8
    if cell.threads != "1":
        base *= 0.6
    if cell.is_gpu:
        base *= 0.05
    return base


def ok_records(cell: Cell, processes: int, seed: int) -> list[dict]:
    median = _median(cell)
    phases = None
    if cell.is_gpu:
        copies = 2e-6 * (cell.size / 32) ** 2
        phases = {"h2d": copies, "compute": median, "d2h": copies / 2, "end_to_end": 1.5 * copies + median}
    elif cell.library == "torch" or cell.op == "compute_then_plot":
        phases = {"end_to_end": median * 1.03, **({"finish": median} if cell.op == "compute_then_plot" else {})}
    records = make_processes(processes, process_spread=0.02, seed=seed, op=cell.op, library=cell.library,
                             device=cell.device, dtype=cell.dtype, size=cell.size, threads=cell.threads,
                             median=median, phases=phases, n=8)
    for record in records:
        record["cell"] = cell.as_dict()
        record["process"]["worker"] = f"{cell.library}-{cell.device}-t{cell.threads}"
        if cell.op in KERNEL_OPS:
            record["op_info"] = {"kind": "kernel", "family": "user kernels", "takes_xp": True, "n_means": "n"}
            if not KERNEL_OPS[cell.op]:
                record["model"].update(flops=None, traffic_bytes=None)
        elif cell.op in SPECS:
            spec = SPECS[cell.op]
            record["model"].update(flops=float(spec.flops(cell.size)), traffic_bytes=float(spec.traffic(cell.size, 4)))
        if cell.compiled:
            record["compile"] = {"first_call_s": 0.8, "graphs": 1, "graph_breaks": 0, "fallback": "",
                                 "backend": "inductor", "mode": "default", "torch_version": "2.13.0",
                                 "cache": {"cold": True, "hits": 0}, "recompiles": 0}
            record["compiler_startup_s"] = 5.0
    return records


def failed_record(cell: Cell, status: str, k: int, processes: int) -> dict:
    """A failure as the round job writes it (records.cell_record, nothing measured)."""
    process = {"round": k, "processes": processes, "worker": f"{cell.library}-{cell.device}-t{cell.threads}",
               "pid": None, "position": None, "host": "testbox", "slurm_job_id": None}
    return cell_record(cell, "testbox", process, status=status, reason=FAILURE_REASONS[status],
                       started_at="2026-01-01T00:00:00.000+00:00", finished_at="2026-01-01T00:00:00.000+00:00",
                       provenance={"hostname": "testbox", "cpu_model": "Test CPU", "fingerprint": dict(FINGERPRINT)},
                       settings={})


def write_results(shape: Shape, folder: Path) -> Path:
    """The results folder a run of `shape` would leave (records, environment, roofs, copies)."""
    folder.mkdir(parents=True, exist_ok=True)
    environment = {"machine": shape.label, "hostname": "testbox", "fingerprint": dict(FINGERPRINT),
                   "cpu_model": "Test CPU", "logical_cores": 4, "usable_cores": 4, "memory_bytes": 16 * 2**30,
                   "devices": {"cpu": None, "cuda": None if "cuda" in shape.devices else "no CUDA device"}}
    (folder / "environment.json").write_text(json.dumps(environment))
    for i, cell in enumerate(shape.cells()):
        status = "error" if cell.op in shape.failing_ops else shape.failures.get(cell.key)
        records = ok_records(cell, shape.processes, seed=i) if status is None else \
            [failed_record(cell, status, k, shape.processes) for k in range(1, shape.processes + 1)]
        for k, record in enumerate(records, start=1):
            path = folder / "raw" / record_relpath(cell, k)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record))
    if shape.roofs:
        write_device_record(folder, "roofs", "cpu", roofs_record())
    if shape.transfer:
        write_device_record(folder, "transfer", "cuda", make_transfer_record())
    return folder


def write_device_record(folder: Path, kind: str, device: str, record: dict) -> None:
    path = folder / "raw" / kind / f"{device}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def roofs_record() -> dict:
    """The cpu's roofs: a triad's bandwidth and a float32 matmul's rate."""
    points = [
        {"library": "numpy", "kind": "memory", "dtype": "float32", "size": 2**22, "bytes": 3 * 4 * 2**22,
         "status": "ok", "reason": "", "samples_s": [0.01, 0.011, 0.0105]},
        {"library": "numpy", "kind": "compute", "dtype": "float32", "size": 512, "flops": 2.0 * 512**3,
         "status": "ok", "reason": "", "samples_s": [0.004, 0.0041, 0.0042]},
    ]
    return {"schema_version": 2, "kind": "roofs", "machine": "testbox", "device": "cpu", "device_name": "Test CPU",
            "points": points, "provenance": {"hostname": "testbox", "cpu_model": "Test CPU"},
            "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:01+00:00"}
