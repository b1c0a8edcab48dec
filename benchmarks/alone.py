"""Alone benchmark: does the pipeline measure the function, or the harness around it?

For every one-thread, eager, CPU cell of a run's grid (config/config.yaml by default) it
times the cell's function alone: in fresh processes of its own (a new interpreter each,
with the thread and allocator settings the workers get), in a plain hot loop of its own
(no worker, bout or timing code of the pipeline; the op and its inputs come from the
catalogue, so the function and its data are the same), NumPy's and torch's processes
alternating A B A B, several of each. A torch call takes NumPy's arrays in and gives one
back, as the pipeline's torch cell on the cpu does (the conversions cost a few
microseconds; the pipeline records them apart, `conversion_s`). A kernel that updates its
arguments has them put back before each call, outside the clock, each call timed alone, as
its program's own loop over the same inputs would. It then prints, per cell, the pipeline's median
over the alone median with an interval, and per speedup the alone ratio beside the
pipeline's CI, and whether it lies inside it or within 10% of its point.

One process calling both functions in turn is no reference: the two share one heap and one
cache, and a memory-bound NumPy function's speed depends on where malloc put its
temporaries (docs/measuring.md).

    python benchmarks/alone.py                       # against results/<this machine> (make run first)
    python benchmarks/alone.py --results results/vm --processes 5
    python benchmarks/alone.py --smoke               # a tiny grid through the pipeline, then alone (the test suite)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

import numpy as np
import yaml
from offloadbench import grid, sandbox
from offloadbench.analysis.tables import read_table
from offloadbench.cells import Cell
from offloadbench.config import kernel_infos, resolve_machine, validate
from offloadbench.measure.allocator import allocator_env
from offloadbench.measure.threads import thread_env
from offloadbench.stats import independent_ratio, log_t_interval

ROOT = Path(__file__).resolve().parents[1]
CLOSE = 0.10  # the goal: an alone ratio inside the pipeline's CI, or within 10% of its point

# The program each alone process runs: the function and its inputs from the catalogue, a
# hot loop of its own. It prints the median seconds per call as JSON.
ALONE = r"""
import json, sys, time
cell, kernels, seconds = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
import numpy as np
lib = np
if cell["library"] == "torch":
    import torch
    lib = torch
from offloadbench.cells import Cell
from offloadbench.kernels import load_kernels
from offloadbench.measure.backend import make_host_inputs
from offloadbench.measure.ops import get_op
c = Cell.from_key(cell["key"])
op = get_op(c.op, load_kernels(kernels) if kernels else None)
inputs = make_host_inputs(op, c, 0, lib if c.library == "torch" else None)
if c.library == "torch":  # as the pipeline's cell runs it: NumPy's arrays wrapped in, the result unwrapped
    def call():
        result = op.compute(lib, *[torch.from_numpy(x) if isinstance(x, np.ndarray) else x for x in inputs])
        return result.numpy() if isinstance(result, torch.Tensor) else result
else:
    def call():
        return op.compute(lib, *inputs)
# a kernel that updates its arguments: which, found on copies; each call then starts from the
# first inputs, put back outside the clock, as its program's own loop would have to
kept = [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]
call()
changed = [i for i, (x, k) in enumerate(zip(inputs, kept)) if isinstance(x, np.ndarray) and not np.array_equal(x, k)]
for i in changed:
    np.copyto(inputs[i], kept[i])
first = time.perf_counter(); call(); one = max(time.perf_counter() - first, 1e-7)
calls = max(1, int(1e-3 / one))  # blocks of at least a millisecond
def block():
    if not changed:
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        return (time.perf_counter_ns() - start) / calls / 1e9
    took = 0
    for _ in range(calls):
        for i in changed:
            np.copyto(inputs[i], kept[i])
        start = time.perf_counter_ns()
        call()
        took += time.perf_counter_ns() - start
    return took / calls / 1e9
warm_until = time.perf_counter() + 0.2
while time.perf_counter() < warm_until:
    block()
samples, until = [], time.perf_counter() + seconds
while time.perf_counter() < until or len(samples) < 7:
    samples.append(block())
samples.sort()
print(json.dumps({"median_s": samples[len(samples) // 2], "samples": len(samples)}))
"""


@dataclass(frozen=True)
class Alone:
    """A cell timed alone: each process's median seconds per call, in the order run."""

    cell: Cell
    medians: tuple[float, ...]

    @property
    def interval(self):
        return log_t_interval(self.medians)


def alone_cells(cells: list[Cell]) -> list[Cell]:
    """The one-thread, eager, CPU cells that the alone benchmark times (no twins)."""
    return [c for c in cells if c.device == "cpu" and c.threads == "1" and not c.compiled and not c.twin]


def time_alone(cell: Cell, kernels: list[str], seconds: float, allocator: str) -> float:
    """One fresh process timing the cell's function alone: its median seconds per call."""
    env = {**os.environ, **thread_env(1), **allocator_env(allocator),
           "PYTHONPATH": str(ROOT / "workflow") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", ALONE, json.dumps({"key": cell.key, "library": cell.library}),
                          json.dumps(kernels), str(seconds)],
                         capture_output=True, text=True, env=env, check=False, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the alone process of {cell.key} failed: {out.stderr.strip().splitlines()[-1:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["median_s"])


def measure_alone(cells: list[Cell], kernels: list[str], processes: int, seconds: float, allocator: str,
                  say=print) -> dict[Cell, Alone]:
    """Every cell alone, each group's NumPy and torch processes alternating A B A B."""
    by_group: dict[tuple, list[Cell]] = {}
    for cell in cells:
        by_group.setdefault((cell.op, cell.dtype, cell.size), []).append(cell)
    found: dict[Cell, list[float]] = {cell: [] for cell in cells}
    for key, members in sorted(by_group.items(), key=lambda item: str(item[0])):
        members = sorted(members, key=lambda c: c.library)
        for k in range(processes):
            for cell in members if k % 2 == 0 else members[::-1]:
                found[cell].append(time_alone(cell, kernels, seconds, allocator))
        say(f"alone: {key[0]} n = {key[2]}: " + ", ".join(
            f"{c.library} {np.median(found[c]) * 1e3:.3g} ms" for c in members))
    return {cell: Alone(cell, tuple(values)) for cell, values in found.items()}


def pipeline_ratio_to_alone(row, alone: Alone) -> tuple[float, float, float]:
    """The pipeline's median over the alone median, with an interval from both CIs."""
    a = alone.interval
    return independent_ratio((row["median_s"], row["ci_low_s"], row["ci_high_s"]), (a.value, a.low, a.high))


def judged(alone_ratio: float, value: float, low: float, high: float) -> str:
    """"inside" the pipeline's CI, "within 10%" of its point, or "OFF by x%"."""
    if not all(math.isfinite(v) for v in (alone_ratio, value, low, high)):
        return "no CI"
    if low <= alone_ratio <= high:
        return "inside"
    off = abs(math.log(value / alone_ratio))
    return "within 10%" if off <= math.log1p(CLOSE) else f"OFF by {math.expm1(off):.0%}"


def key_of(row) -> Cell:
    """The eager cell a table's row is about."""
    return Cell.from_key(f"{row.op}/{row.library}-{row.device}-{row.dtype}-n{row.size}-t{row.threads}")


def report(results: Path, cells: list[Cell], found: dict[Cell, Alone], say=print) -> int:
    """Print both tables; the number of speedups neither inside nor within 10%."""
    timings = read_table("timings", str(results / "timings.csv"))
    speedups = read_table("speedups", str(results / "speedups.csv"))
    rows = {key_of(r): r for r in timings.itertuples() if r.status == "ok" and r.mode == "eager"}
    say("")
    say("| cell | pipeline | alone (processes) | pipeline ÷ alone (CI) | |")
    say("|---|---|---|---|---|")
    far = 0
    for cell in cells:
        row = rows.get(cell)
        alone = found.get(cell)
        if row is None or alone is None:
            continue
        ratio, low, high = pipeline_ratio_to_alone(row._asdict(), alone)
        note = "" if abs(math.log(ratio)) <= math.log(1.15) else "more than 15% from alone"
        say(f"| {cell.key} | {row.median_s * 1e3:.4g} ms | {alone.interval.value * 1e3:.4g} ms ({len(alone.medians)}) "
            f"| {ratio:.3f} ({low:.3f}–{high:.3f}) | {note} |")
    say("")
    say("| speedup of torch over NumPy, 1 thread | pipeline (CI) | alone (CI) | |")
    say("|---|---|---|---|")
    for row in speedups.itertuples():
        cell = key_of(row)
        if cell not in found or row.mode != "eager":
            continue
        base = Cell.from_key(f"{row.op}/numpy-cpu-{row.dtype}-n{row.size}-t1")
        if base not in found:
            continue
        pairs = [b / t for b, t in zip(found[base].medians, found[cell].medians, strict=False)]
        alone = log_t_interval(pairs)
        verdict = judged(alone.value, row.speedup, row.speedup_ci_low, row.speedup_ci_high)
        far += verdict.startswith("OFF")
        say(f"| {row.op} n = {row.size} | {row.speedup:.3f} ({row.speedup_ci_low:.3f}–{row.speedup_ci_high:.3f}) "
            f"| {alone.value:.3f} ({alone.low:.3f}–{alone.high:.3f}) | {verdict} |")
    say("")
    say(f"speedups neither inside the pipeline's CI nor within {CLOSE:.0%} of it: {far}")
    return far


def smoke_run(workdir: Path) -> tuple[Path, dict]:
    """A tiny grid through the pipeline up to its tables: (results folder, config)."""
    config = {"machine": "alone", "grid": {"ops": ["sum_rows"], "libraries": ["numpy", "torch"], "devices": ["cpu"],
                                           "dtypes": ["float32"], "sizes": [128], "threads": [1], "modes": ["eager"]},
              "measure": {"processes": 3, "max_processes": 3, "budget_s": 0.05, "warmup_budget_s": 0.05},
              "analysis": {"bootstrap_resamples": 200, "controls": 0}, "kernels": [],
              "roofs": {"devices": []}, "transfer": {"devices": []}}
    result = sandbox.snakemake(workdir, "--until", "aggregate", config=config, timeout=1800)
    if result.returncode != 0:
        raise SystemExit(f"the smoke run failed:\n{result.stderr[-3000:]}")
    return workdir / "results" / "alone", config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "config" / "config.yaml"), help="the run's config file")
    parser.add_argument("--results", help="the run's results folder (default: results/<machine> of the config)")
    parser.add_argument("--processes", type=int, default=5, help="fresh processes per cell (at least 3)")
    parser.add_argument("--seconds", type=float, default=0.4, help="sampling per process")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="offloadbench-alone-") as tmp:
        if args.smoke:
            results, raw_config = smoke_run(sandbox.copy_workflow(Path(tmp) / "wf"))
            processes, seconds = 3, 0.05
        else:
            raw_config = yaml.safe_load(Path(args.config).read_text())
            processes, seconds = max(3, args.processes), args.seconds
        config = validate(raw_config)
        results = results if args.smoke else Path(args.results or ROOT / config["results_dir"] / resolve_machine(config))
        if not (results / "speedups.csv").is_file():
            raise SystemExit(f"error: no run's tables in {results}: run `make run` first, or give --results")
        kernels = [str(Path(p).resolve()) for p in config["kernels"]]
        cells = alone_cells(grid.expand(config["grid"], kernel_infos(config)))
        print(f"{len(cells)} one-thread eager CPU cells, {processes} fresh processes each, alternating A B A B; "
              f"pipeline: {results}", flush=True)
        found = measure_alone(cells, kernels, processes, seconds, config["measure"]["allocator"],
                              say=lambda line: print(line, flush=True))
        report(results, cells, found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
