"""How long a grid will take, from the ops' FLOP and byte models and the machine's roofs.

    python -m offloadbench.estimate --configfile config/paper.yaml --roofs results/h200

A cell's call takes max(FLOP / compute roof, bytes / memory roof) plus a launch latency;
its time in one process follows the measure settings (warm-up blocks, samples until the
CI or the budget, at least the floor of samples) for each of its timed regions; each round
pays its workers' imports. Roofs come from a machine's measured roofs (raw/roofs/*.json), else
from its best measured matmul rates (timings.csv), else from FALLBACK, rates of an
ordinary laptop. The estimate is meant to be right within a factor of about
two; the report compares it with the real time so that it can be improved.

Pure Python: the Snakefile and the round jobs use it, neither loads numpy or pandas for it.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import grid, libraries
from .catalogue import MEMORY_HEADROOM, SPECS, OpSpec, kernel_spec, working_set_bytes
from .cells import ALL_THREADS, COMPILED, ITEMSIZE, Cell
from .config import kernel_infos, measured_grid
from .footprint import Polynomial, power
from .machine import host_memory_bytes
from .records import ROOFS_SCHEMA, Environment, load_device_record, load_environment
from .run_settings import MeasureSection, RunSettings
from .units import fmt_duration

# Fraction of the matmul peak an op reaches where compute bounds it (its FLOPs are not all
# fused multiply-adds, or it has little parallelism); ops not named are memory-bound anyway.
COMPUTE_EFFICIENCY = {"matmul": 0.9, "compute_then_plot": 0.9, "batched_matmul": 0.3, "solve": 0.5,
                      "eigh": 0.1, "fft2": 0.2, "sort": 0.05}
ROW_SAMPLED_CHECKS = ("matmul", "compute_then_plot")  # their float64 reference covers sampled rows only
LATENCY_S = {"cpu": 2e-6, "gpu": 1.5e-5}  # a call's fixed cost: dispatch, a kernel launch
CUDA_CONTEXT_S = 3.0  # on top of a worker's start (its runtime library's import_s)
DEVICE_IMPORT_S = libraries.get(libraries.DEVICE_RUNTIME).import_s  # the roofs' and copies' jobs
WORKER_WARMUP_S = 0.5  # measure.cell.warm_process
CELL_OVERHEAD_S = 0.08  # a record built, checked against its schema and written; memory released
TURN_SETTLE_S = 0.1  # jobs.round.SETTLE_S, between workers
PLOT_S, PLOT_PIXEL_S = 0.15, 50e-9  # matplotlib's imshow and PNG, as measured on laptops
SAMPLES_TO_CONVERGE = 100  # samples a cheap region takes on a noisy laptop before its CI or budget stops it
ROUND_OVERHEAD_S = 3.0  # Snakemake's job, the system checks, publishing the records
# torch.compile, measured on a 2-core laptop with a cold cache: a compiled worker's compiler
# start-up (imports, headers, runtime) once, then each cell's own compile
COMPILER_STARTUP_S = {"cpu": 5.5, "gpu": 10.0}
COMPILE_S = {"cpu": 0.6, "gpu": 2.0}
KERNEL_PASSES = 4  # a user kernel without models: this many passes over its arrays and result
FIXED_S = 20.0  # the environment job, tables, figures and report of a small grid


@dataclass(frozen=True)
class Roofs:
    """Rates a machine sustains with every core (cpu) or on its GPU."""

    cpu_cores: int
    cpu_gflops: dict[str, float]  # per dtype
    cpu_gbs: float
    gpu_gflops: dict[str, float] = field(default_factory=dict)
    gpu_gbs: float = 1000.0
    link_gbs: float = 10.0  # pageable host<->device copies
    source: str = "fallback"

    def compute(self, device: str, dtype: str) -> float:
        rates = self.cpu_gflops if device == "cpu" else self.gpu_gflops
        return rates.get(dtype) or rates.get("float32") or min(rates.values(), default=10.0)


FALLBACK = Roofs(cpu_cores=4, cpu_gflops={"float32": 100.0, "float64": 50.0, "float16": 5.0, "bfloat16": 5.0},
                 cpu_gbs=10.0, gpu_gflops={"float32": 10_000.0, "float64": 1_000.0, "float16": 50_000.0,
                                            "bfloat16": 50_000.0}, gpu_gbs=1000.0, link_gbs=10.0)


def spec_of(op: str, kernels: dict | None = None) -> OpSpec:
    """The catalogue's spec of an op; for a user kernel, one from what its source says, with
    a memory-bound guess where it gives no models (its models are functions, which only
    the measuring workers run), and its inputs as a run measured them where one did, else
    one n×n array per parameter."""
    if op in SPECS:
        return SPECS[op]
    info = (kernels or {}).get(op)
    arrays = info.arrays if info else 2
    spec = kernel_spec(op, arrays, flops=lambda n: 0.0, outputs=1,
                       traffic=lambda n, s: KERNEL_PASSES * (arrays + 1) * n * n * s)
    elements = info.measured_inputs if info is not None else None
    return replace(spec, input_shapes=lambda n: [(max(1, round(elements(n))),)]) if elements else spec


def measured_inputs(folder: Path) -> dict[str, Polynomial]:
    """The elements of each kernel's inputs as a function of n, from a results folder's
    memory.csv (its NumPy rows: the inputs' bytes at the largest size measured and the
    power of n they grow with), where it has one."""
    path = folder / "memory.csv"
    if not path.is_file():
        return {}
    found: dict[str, Polynomial] = {}
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            try:
                n, nbytes, degree = int(row["largest_measured"]), float(row["inputs_bytes"]), int(float(row["inputs_degree"]))
                itemsize = ITEMSIZE[row["dtype"]]
            except (KeyError, ValueError):  # an op of the catalogue, or a table from before these columns
                continue
            if libraries.is_baseline(row.get("variant")) and n > 0 and nbytes > 0:
                found[row["op"]] = power(degree).through(n, nbytes / itemsize)
    return found


def call_seconds(cell: Cell, roofs: Roofs, kernels: dict | None = None) -> dict[str, float]:
    """Predicted seconds per call of each timed region of a cell."""
    spec, itemsize = spec_of(cell.op, kernels), ITEMSIZE[cell.dtype]
    n, device = cell.size, cell.device
    gpu = device != "cpu"
    # "all" means the cores of the machine estimated for, which need not be this one
    threads = roofs.cpu_cores if cell.threads == ALL_THREADS else int(cell.threads)
    share = 1.0 if gpu else min(1.0, threads / roofs.cpu_cores)
    compute = roofs.compute(device, cell.dtype) * share * COMPUTE_EFFICIENCY.get(cell.op, 0.5)
    memory = (roofs.gpu_gbs if gpu else roofs.cpu_gbs * min(1.0, 4 * share))
    op_s = max(spec.flops(n) / (compute * 1e9), spec.traffic(n, itemsize) / (memory * 1e9))
    regions = {"compute": op_s + LATENCY_S["gpu" if gpu else "cpu"]}
    copies = 0.0
    if gpu:
        regions["h2d"] = spec.input_bytes(n, itemsize) / (roofs.link_gbs * 1e9) + LATENCY_S["gpu"]
        regions["d2h"] = spec.output_bytes(n, itemsize) / (roofs.link_gbs * 1e9) + LATENCY_S["gpu"]
        copies = regions["h2d"] + regions["d2h"]
    finish = PLOT_S + PLOT_PIXEL_S * n * n if spec.finish else 0.0
    if finish:
        regions["finish"] = finish
    runtime = libraries.runtime(cell.library, cell.mode == COMPILED)
    if (gpu and runtime.tensors) or finish or (not gpu and runtime.copies_from_numpy):
        regions["end_to_end"] = regions["compute"] + copies + finish
    return regions


def region_seconds(call_s: float, measure: MeasureSection) -> float:
    """Warm-up and sampling of one region under the measure settings."""
    sample = max(call_s, measure.min_sample_s)
    warmup = call_s + min(measure.warmup_budget_s, 3 * sample)
    sampling = min(measure.budget_s, max(measure.min_sampling_s, SAMPLES_TO_CONVERGE * sample))
    floor = measure.min_samples * sample  # taken even past the budget
    return warmup + max(sampling, floor)


def cell_seconds(cell: Cell, measure: MeasureSection, roofs: Roofs, kernels: dict | None = None) -> float:
    """One process's time on a cell: inputs, the compile, the float64 check, and every region."""
    spec = spec_of(cell.op, kernels)
    regions = call_seconds(cell, roofs, kernels)
    inputs = spec.input_bytes(cell.size, 8) / 0.5e9  # drawing float64 random numbers
    reference = replace(cell, library=libraries.BASELINE, device="cpu", dtype="float64", threads="1", mode="eager")
    check = call_seconds(reference, roofs, kernels)["compute"]
    if cell.op in ROW_SAMPLED_CHECKS:
        check *= min(1.0, measure.check_rows / cell.size)
    compile_s = COMPILE_S["gpu" if cell.is_gpu else "cpu"] if cell.mode == COMPILED else 0.0
    return CELL_OVERHEAD_S + inputs + compile_s + check + sum(region_seconds(s, measure) for s in regions.values())


@dataclass(frozen=True)
class Estimate:
    rounds: int
    cells: int  # cell-processes to measure
    measure_s: float
    other_s: float
    source: str
    extra_s: float = 0.0  # the most the extra rounds may take (measure.extra_time_fraction)
    refused: int = 0  # cells the workers will refuse for memory, left out

    def line(self, machine: str) -> str:
        extra = (f", plus up to {fmt_duration(self.extra_s)} of extra rounds where verdicts are undecided"
                 if self.extra_s > 0 else "")
        refused = (f"; {self.refused} cell{'s' if self.refused != 1 else ''} left out, which need more memory than "
                   "the host has"
                   if self.refused else "")
        total = fmt_duration(self.measure_s + self.other_s)
        return (f"{machine}: about {total} for {self.cells} cell-processes in {self.rounds} "
                f"rounds ({fmt_duration(self.measure_s)} measuring{extra}){refused}, from {self.source}")


TRUST_OWN_PACE_AFTER = 0.1  # the share of a round done before its own pace counts
# A round's end after its last cell: the workers retired, the system checked again, the
# records moved into place (1.5-3 s on our 2-core VM).
ROUND_CLOSE_S = 2.0


def remaining_s(elapsed_s: float, done_s: float, total_s: float) -> float:
    """Wall seconds left of a round the estimate put at `total_s`, of which `done_s` (in the
    estimate's seconds) are done after `elapsed_s`. Until a tenth is done the estimate alone
    answers: a round's first cells carry the workers' start and say little of its pace.
    After that the round's own pace (elapsed ÷ done) is blended in by the share done, so
    the answer moves from the estimate to the pace as the round goes on."""
    left = max(0.0, total_s - done_s)
    share = done_s / total_s if total_s > 0 else 1.0
    if share < TRUST_OWN_PACE_AFTER or done_s <= 0:
        return left
    pace = elapsed_s / done_s
    return left * (1.0 - share + share * pace)


def workers_seconds(cells: list[Cell]) -> float:
    """A round's workers: imports and warm-up (and the compiler's start-up in compiled
    workers), and the pauses between their turns."""
    workers = {(c.library, c.device, c.threads, c.mode) for c in cells}
    turns = len({(c.op, c.dtype, c.library, c.device, c.threads, c.mode) for c in cells})
    starts = 0.0
    for library, device, _, mode in workers:
        starts += libraries.runtime(library, mode == COMPILED).import_s + (CUDA_CONTEXT_S if device == "cuda" else 0.0)
        starts += COMPILER_STARTUP_S["cpu" if device == "cpu" else "gpu"] if mode == COMPILED else 0.0
    return starts + WORKER_WARMUP_S * len(workers) + TURN_SETTLE_S * turns


def refused_for_memory(cell: Cell, memory_bytes: int | None, kernels: dict | None = None) -> bool:
    """Whether the worker will refuse the cell before measuring: it needs more host memory
    than the headroom allows (a 60000² matmul on a 128 GiB host, say). A kernel that makes
    its own inputs, of sizes no run here measured yet, is left to its worker, which counts
    them from small draws."""
    info = (kernels or {}).get(cell.op)
    if not memory_bytes or (info is not None and info.own_inputs and info.measured_inputs is None):
        return False
    need = working_set_bytes(spec_of(cell.op, kernels), cell.size, ITEMSIZE[cell.dtype])
    return need > MEMORY_HEADROOM * memory_bytes


def estimate_run(config: dict, roofs: Roofs, todo: dict[int, list[Cell]] | None = None,
                 available: dict[str, bool] | None = None, memory_bytes: int | None = None,
                 inputs: dict[str, Polynomial] | None = None) -> Estimate:
    """The duration of a run: `todo` maps each round to the cells it still has to measure
    (the whole grid by default); cells of devices not `available`, and cells the host has
    too little memory for, cost nothing. `inputs`: the elements of kernels' inputs as a
    run measured them (measured_inputs)."""
    kernels = {name: replace(info, measured_inputs=(inputs or {}).get(name))
               for name, info in kernel_infos(config).items()}
    cells = grid.expand(measured_grid(config), kernels)
    measure = RunSettings.from_config(config).measure
    rounds = range(1, measure.processes + 1)
    todo = todo if todo is not None else {k: cells for k in rounds}
    available = available or {"cpu": True}
    refused = {c for c in cells if refused_for_memory(c, memory_bytes, kernels)}
    measure_s, count, busy_rounds = 0.0, 0, 0
    for round_cells in todo.values():
        live = [c for c in round_cells if (available.get(c.device, False) or c.device == "cpu") and c not in refused]
        measure_s += sum(cell_seconds(c, measure, roofs, kernels) for c in live) + workers_seconds(live)
        measure_s += ROUND_OVERHEAD_S if round_cells else 0.0
        count += len(live)  # a cell of an absent device, or refused for memory, starts no process
        busy_rounds += bool(live)
    other = FIXED_S + 0.002 * len(cells) * len(rounds)
    for device in config["roofs"]["devices"]:
        if available.get(device, False):
            points = 1 + sum(d in ("float32", "float64") or device != "cpu" for d in config["grid"]["dtypes"])
            other += DEVICE_IMPORT_S + points * 2 * (config["roofs"]["budget_s"] + 0.3)
    for device in config["transfer"]["devices"]:
        if available.get(device, False):
            other += DEVICE_IMPORT_S + 4 * len(config["transfer"]["sizes"]) * (config["transfer"]["budget_s"] + 0.1)
    extra = measure.extra_time_fraction * measure_s if measure.max_processes > measure.processes else 0.0
    return Estimate(busy_rounds, count, measure_s, other, roofs.source, extra, len(refused))


def _median_rate(work: float, samples: list[float]) -> float:
    return work / statistics.median(samples) / 1e9


def roofs_from_records(paths, cores: int) -> Roofs | None:
    """Roofs from raw/roofs/<device>.json records (the best library per roof)."""
    found = {"cpu_gflops": {}, "gpu_gflops": {}}  # and cpu_gbs, gpu_gbs where measured
    for path in paths:
        record = load_device_record(path, ROOFS_SCHEMA)
        side = "cpu" if record.device == "cpu" else "gpu"
        for point in record.points:
            if point.status != "ok" or not point.samples_s:
                continue
            if point.kind == "memory" and point.bytes:
                found[f"{side}_gbs"] = max(found.get(f"{side}_gbs", 0.0), _median_rate(point.bytes, point.samples_s))
            elif point.flops:
                rates = found[f"{side}_gflops"]
                rates[point.dtype] = max(rates.get(point.dtype, 0.0), _median_rate(point.flops, point.samples_s))
    if not found["cpu_gflops"] and not found["gpu_gflops"]:
        return None
    # what was not measured (or measured as nothing) stays the fallback's
    return replace(FALLBACK, cpu_cores=cores, source="the roofs measured on this machine",
                   **{key: value for key, value in found.items() if value})


def roofs_from_timings(path: Path, cores: int) -> Roofs | None:
    """Roofs from a results folder without roofs: its best matmul rates (memory: fallback)."""
    rates: dict[str, dict[str, float]] = {"cpu": {}, "gpu": {}}
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["op"] == "matmul" and row["status"] == "ok" and row.get("gflops"):
                side = "cpu" if row["device"] == "cpu" else "gpu"
                rates[side][row["dtype"]] = max(rates[side].get(row["dtype"], 0.0), float(row["gflops"]))
    if not rates["cpu"] and not rates["gpu"]:
        return None
    return replace(FALLBACK, cpu_cores=cores, cpu_gflops=rates["cpu"] or FALLBACK.cpu_gflops,
                   gpu_gflops=rates["gpu"] or FALLBACK.gpu_gflops,
                   source=f"the best matmul rates in {path} (memory and links: the fallback)")


def environment_of(folder: Path) -> Environment | None:
    """A results folder's environment.json, where it has one."""
    path = folder / "environment.json"
    return load_environment(path) if path.exists() else None


def roofs_for(folder: Path) -> Roofs:
    """The best roofs a results folder offers: measured roofs, else its matmul rates, else FALLBACK."""
    environment = environment_of(folder)
    cores = (environment and environment.usable_cores) or FALLBACK.cpu_cores
    measured = roofs_from_records(sorted((folder / "raw" / "roofs").glob("*.json")), cores)
    if measured:
        return measured
    timings = folder / "timings.csv"
    from_timings = roofs_from_timings(timings, cores) if timings.exists() else None
    return from_timings or replace(FALLBACK, cpu_cores=cores, source="the fallback roofs (nothing measured here yet)")


def remaining(config: dict, folder: Path) -> Estimate:
    """What is left of a machine's run: the records still missing, with its roofs."""
    from .layout import partial_relpath, record_relpath

    raw = folder / "raw"
    cells = grid.expand(measured_grid(config), kernel_infos(config))
    todo = {
        k: [c for c in cells if not ((raw / record_relpath(c, k)).exists() or (raw / partial_relpath(c, k)).exists())]
        for k in range(1, config["measure"]["processes"] + 1)
    }
    environment = environment_of(folder)
    if environment:
        available = {device: reason is None for device, reason in (environment.devices or {}).items()}
        memory = environment.memory_bytes
    else:
        available = {"cpu": True, "cuda": shutil.which("nvidia-smi") is not None}
        memory = host_memory_bytes()
    return estimate_run(config, roofs_for(folder), todo, available, memory, measured_inputs(folder))


def main(argv: list[str] | None = None) -> int:
    import yaml

    from .config import validate

    parser = argparse.ArgumentParser(description="Estimate how long a config's grid takes on a machine.")
    parser.add_argument("--configfile", required=True)
    parser.add_argument("--roofs", help="a results folder whose roofs (or matmul rates) to use")
    parser.add_argument("--gpu", action="store_true", help="assume the machine has a CUDA GPU")
    args = parser.parse_args(argv)
    config = validate(yaml.safe_load(Path(args.configfile).read_text()))
    roofs = roofs_for(Path(args.roofs)) if args.roofs else FALLBACK
    environment = environment_of(Path(args.roofs)) if args.roofs else None  # that machine's memory
    estimate = estimate_run(config, roofs, available={"cpu": True, "cuda": args.gpu},
                            memory_bytes=(environment and environment.memory_bytes) or host_memory_bytes(),
                            inputs=measured_inputs(Path(args.roofs)) if args.roofs else None)
    print(estimate.line(Path(args.configfile).stem))
    per_round = estimate.measure_s / max(1, estimate.rounds)
    print(f"per round: about {fmt_duration(per_round)}; besides measuring: about {fmt_duration(estimate.other_s)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
