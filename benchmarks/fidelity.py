"""Fidelity benchmark: does our timer agree with the reference harnesses, and how fast does
it reach a given precision?

For each cell (matmul, n = 256 and 1024, float32 and float64, numpy and torch on the cpu,
1 thread and all) it times the same closure with our timer (warm-up, blocks, adaptive
stopping) and with torch.utils.benchmark.Timer.blocked_autorange at the same thread count,
in one process, in *passes* of three: the reference, ours, the reference again (which of
the reference's runs counts as first alternates from pass to pass). A pass's ratio is
ours ÷ the geometric mean of the reference's two runs, so a drift that is linear over the
pass cancels; the reference's two runs against each other give its own spread at that
timescale, the floor under any ratio this machine can resolve. Passes go on until the 95%
CI of the median pass ratio is within ±2% or `--passes` are spent, and the table says
which, with the reference's spread beside each ratio. It then prints our wall time to
reach ±2% against adaptive_autorange(threshold=0.02) on the same cell. On CUDA it also
compares against CUDA-event timing and, where triton is installed, triton.testing.do_bench.

    python benchmarks/fidelity.py              # full run (several minutes)
    python benchmarks/fidelity.py --smoke      # one small cell, two passes (the test suite)
    python benchmarks/fidelity.py --pipeline   # the pipeline's 1-thread matmul cells against it, before and after

With --pipeline it runs the one-thread CPU matmul cells (numpy and torch, float32 and float64,
n = 256 and 1024) through the real pipeline, and times each cell's exact callable with
torch.utils.benchmark's adaptive_autorange in fresh processes of their own (the workers'
thread and allocator settings) before and after the run; it prints the pipeline's median ÷
the geometric mean of the two.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

import numpy as np
import torch
import torch.utils.benchmark as tbench
from offloadbench.cells import Cell, resolve_threads
from offloadbench.measure.backend import Backend, make_host_inputs
from offloadbench.measure.ops import get_op
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import BlockRule, Region, StopRule, WarmupRule, measure_region
from offloadbench.stats import draws, median_ci, median_ci_rel_halfwidth, ratio_ci
from threadpoolctl import threadpool_limits

TARGET = 0.02


@dataclass
class Tally:
    ours: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)
    pass_ratios: list[float] = field(default_factory=list)  # ours ÷ the reference's two runs around it
    reference_ratios: list[float] = field(default_factory=list)  # the reference's second run ÷ its first
    ours_time_to_target: list[float] = field(default_factory=list)
    ours_precision: list[float] = field(default_factory=list)
    adaptive_time: float = math.nan
    adaptive_precision: float = math.nan


def compute_closure(cell: Cell):
    """The exact callable the pipeline times for this cell, with its synchronisation."""
    op = get_op(cell.op)
    backend = Backend(cell, op, Settings(), torch if cell.library == "torch" else None)
    inputs = [backend.to_device(x) for x in make_host_inputs(op, cell, 0, torch)]
    backend.sync()
    return (lambda: backend.compute(inputs)), backend.sync


def ours(fn, sync, stop: StopRule) -> tuple[list[float], float, float]:
    """Our method end to end: warm-up, block sizing, adaptive sampling; wall time included."""
    start = time.perf_counter()
    measured = measure_region(Region("compute", fn, sync), BlockRule(), WarmupRule(budget_s=0.5), stop)
    return list(measured.samples_s), time.perf_counter() - start, measured.rel_ci


def reference(fn, threads: int, min_run_time: float) -> list[float]:
    timer = tbench.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    return list(timer.blocked_autorange(min_run_time=min_run_time).times)


def adaptive(fn, threads: int, max_run_time: float) -> tuple[float, float]:
    timer = tbench.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    start = time.perf_counter()
    measurement = timer.adaptive_autorange(threshold=TARGET, max_run_time=max_run_time)
    elapsed = time.perf_counter() - start
    # Judge its samples by our yardstick (CI of the median), so precision is comparable.
    return elapsed, median_ci_rel_halfwidth(measurement.times)


def cpu_cells(sizes, dtypes, libraries, threads) -> list[Cell]:
    return [Cell("matmul", lib, "cpu", dtype, n, t) for n in sizes for dtype in dtypes for lib in libraries for t in threads]


def run_cpu(cells: list[Cell], passes: int, budget_s: float, adaptive_max_s: float, min_reference_s: float = 0.05,
            min_passes: int = 6) -> dict[Cell, Tally]:
    """Passes of reference, ours, reference per cell, until the median pass ratio's CI is
    within ±TARGET (after `min_passes`) or `passes` are spent."""
    tallies = {cell: Tally() for cell in cells}
    stop = StopRule(target_rel_ci=TARGET, budget_s=budget_s)
    for cell in cells:
        threads = resolve_threads(cell.threads)
        with threadpool_limits(limits=threads):
            torch.set_num_threads(threads)
            fn, sync = compute_closure(cell)
            tally = tallies[cell]
            tally.adaptive_time, tally.adaptive_precision = adaptive(fn, threads, adaptive_max_s)
            for index in range(passes):
                # The reference gets as long as ours took, so all three see the same stretch of drift.
                so_far = statistics.fmean(tally.ours_time_to_target) if tally.ours_time_to_target else min_reference_s
                first = reference(fn, threads, min_run_time=max(min_reference_s, so_far))
                samples, wall, rel_ci = ours(fn, sync, stop)
                second = reference(fn, threads, min_run_time=max(min_reference_s, wall))
                if index % 2:  # neither of the reference's runs always sits on the warmer side
                    first, second = second, first
                ref_a, ref_b = statistics.median(first), statistics.median(second)
                tally.ours += samples
                tally.reference += first + second
                tally.pass_ratios.append(statistics.median(samples) / math.sqrt(ref_a * ref_b))
                tally.reference_ratios.append(ref_b / ref_a)
                tally.ours_time_to_target.append(wall)
                tally.ours_precision.append(rel_ci)
                if index + 1 >= min_passes and resolved(tally.pass_ratios):
                    break
    return tallies


def resolved(ratios: list[float]) -> bool:
    """Whether the CI of the median pass ratio lies within ±TARGET of its value."""
    value, low, high = ratio_interval(ratios)
    return math.isfinite(low) and low >= value / (1 + TARGET) and high <= value * (1 + TARGET)


def cuda_comparison(sizes, dtypes, budget_s: float) -> list[str]:
    """Ours against CUDA events (and triton's do_bench) on device-resident matmuls."""
    lines = ["", "CUDA: ours ÷ CUDA events (and ÷ triton do_bench)", "| cell | ours | events | ours/events | do_bench | ours/do_bench |", "|---|---|---|---|---|---|"]
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    worst = 1.0
    for n in sizes:
        for dtype in dtypes:
            cell = Cell("matmul", "torch", "cuda", dtype, n, "1")
            fn, sync = compute_closure(cell)
            samples, _, _ = ours(fn, sync, StopRule(target_rel_ci=TARGET, budget_s=budget_s))
            events = []
            for _ in range(max(20, len(samples))):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                events.append(start.elapsed_time(end) / 1e3)
            interval = ratio_ci(draws([samples], 2000, 0), draws([events], 2000, 1))
            ratio, lo, hi = interval.value, interval.low, interval.high
            worst = max(worst, ratio, 1 / ratio)
            bench = ""
            if do_bench is not None:
                db = do_bench(fn, return_mode="median") / 1e3
                bench = f"{db * 1e3:.4f} ms | {statistics.median(samples) / db:.3f}"
            else:
                bench = "– | –"
            lines.append(
                f"| {cell.stem} | {statistics.median(samples) * 1e3:.4f} ms | {statistics.median(events) * 1e3:.4f} ms | "
                f"{ratio:.3f} [{lo:.3f}, {hi:.3f}] | {bench} |"
            )
    lines.append(f"CUDA worst ratio (max of r and 1/r): {worst:.3f}")
    return lines


def report(tallies: dict[Cell, Tally]) -> list[str]:
    lines = [
        ("| cell | ours (median) | reference (median) | ours/reference, median of passes [95% CI] | passes | "
        "±2% resolved | reference against itself [95% CI], IQR | ours: s to ±2% (CI reached) | "
        "adaptive_autorange: s (CI reached) |"),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    worst_cell, worst = None, 1.0
    time_ratios, verified, unresolved = [], 0, []
    for cell, t in tallies.items():
        ratio, lo, hi = ratio_interval(t.pass_ratios)
        self_ratio, self_lo, self_hi = ratio_interval(t.reference_ratios)
        spread = iqr_of_logs(t.reference_ratios)
        if abs(math.log(ratio)) >= abs(math.log(worst)):
            worst_cell, worst = cell, ratio
        done = resolved(t.pass_ratios)
        if not done:
            unresolved.append(f"{cell.stem} (the reference's own runs differ by {spread:.1%} IQR)")
        our_time = statistics.median(t.ours_time_to_target)
        time_ratios.append(our_time / t.adaptive_time)
        verified += t.adaptive_precision <= TARGET
        lines.append(
            f"| {cell.stem} | {statistics.median(t.ours) * 1e3:.4f} ms | {statistics.median(t.reference) * 1e3:.4f} ms | "
            f"{ratio:.3f} [{lo:.3f}, {hi:.3f}] | {len(t.pass_ratios)} | {'yes' if done else 'no'} | "
            f"{self_ratio:.3f} [{self_lo:.3f}, {self_hi:.3f}], {spread:.1%} | "
            f"{our_time:.3f} ({_shown(statistics.median(t.ours_precision))}) | "
            f"{t.adaptive_time:.3f} ({_shown(t.adaptive_precision)}) |"
        )
    lines.append("")
    lines.append(
        "A pass: the reference, ours, the reference again. Ratio: ours ÷ the geometric mean of the reference's two "
        "runs; 'reference against itself': its second run ÷ its first, whose spread is how far two timings of one "
        "cell differ on this machine at this timescale. CI reached: half-width of the distribution-free 95% CI of "
        "the median of the samples each method took; adaptive_autorange stops on IQR/mean < 2% instead."
    )
    lines.append(
        f"precision per second: median over cells of our time ÷ adaptive_autorange's = {statistics.median(time_ratios):.2f}; "
        f"adaptive_autorange's own samples support ±2% in {verified} of {len(tallies)} cells, ours in "
        f"{sum(statistics.median(t.ours_precision) <= TARGET for t in tallies.values())} of {len(tallies)}"
    )
    lines.append(f"resolved to ±2%: {len(tallies) - len(unresolved)} of {len(tallies)} cells"
                 + (f"; not: {'; '.join(unresolved)}" if unresolved else ""))
    lines.append(f"worst ratio ours/reference: {worst:.3f} ({worst_cell.stem}; the furthest from 1; goal: within 0.98–1.02)")
    return lines


def ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """Median of per-pass ratios with the distribution-free 95% CI of the median (NaN below 6)."""
    low, high = median_ci(ratios)
    return statistics.median(ratios), low, high


def iqr_of_logs(ratios: list[float]) -> float:
    """The interquartile range of the log ratios, as a factor less 1."""
    if len(ratios) < 2:
        return math.nan
    q1, q3 = np.percentile(np.log(ratios), [25, 75])
    return math.exp(q3 - q1) - 1


def _shown(rel_ci: float) -> str:
    return "±undefined" if not math.isfinite(rel_ci) else f"±{rel_ci:.1%}"


# The reference for the pipeline: torch.utils.benchmark in a fresh process of its own with the
# workers' thread and allocator settings, timing the exact callable the cell's region times,
# after half a second of calls (a program's heap has settled by then). Prints its median.
REFERENCE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from offloadbench.measure.devices import import_torch
torch = import_torch()
import torch.utils.benchmark as tbench
from offloadbench.cells import Cell
from offloadbench.measure.backend import Backend, build_regions, make_host_inputs
from offloadbench.measure.ops import get_op
from offloadbench.measure.settings import Settings
from offloadbench.measure.threads import apply_thread_limits
cell = Cell.from_key(sys.argv[1])
apply_thread_limits(1, torch)
op = get_op(cell.op)
backend = Backend(cell, op, Settings(), torch if cell.library == "torch" else None)
fn = build_regions(backend, make_host_inputs(op, cell, 0, torch))["compute"].fn
until = time.perf_counter() + 0.5
while time.perf_counter() < until:
    fn()
timer = tbench.Timer(stmt="fn()", globals={"fn": fn}, num_threads=1)
print(json.dumps({"median_s": timer.adaptive_autorange(threshold=0.01, max_run_time=float(sys.argv[3])).median}))
"""
PIPELINE_CELLS = [Cell("matmul", lib, "cpu", dtype, n, "1") for n in (256, 1024) for dtype in ("float32", "float64")
                  for lib in ("numpy", "torch")]


def reference_alone(cell: Cell, seconds: float) -> float:
    import json
    import os
    import subprocess

    from offloadbench.measure.allocator import STEADY, allocator_env
    from offloadbench.measure.threads import thread_env

    env = {**os.environ, **thread_env(1), **allocator_env(STEADY)}
    out = subprocess.run([sys.executable, "-c", REFERENCE, cell.key, str(ROOT / "workflow"), str(seconds)],
                         capture_output=True, text=True, env=env, check=False, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the reference process of {cell.key} failed: {out.stderr.strip().splitlines()[-1:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["median_s"])


def references(cells: list[Cell], processes: int, seconds: float) -> dict[Cell, list[float]]:
    """Each cell's reference in fresh processes, NumPy's and torch's alternating A B A B."""
    found: dict[Cell, list[float]] = {cell: [] for cell in cells}
    for k in range(processes):
        for cell in cells if k % 2 == 0 else cells[::-1]:
            found[cell].append(reference_alone(cell, seconds))
    return found


def pipeline_fidelity(processes: int, reference_processes: int, seconds: float, smoke: bool = False) -> list[str]:
    """The pipeline's median of every one-thread CPU matmul cell against torch.utils.benchmark
    timed before and after the run, each in fresh processes (the geometric mean of the two)."""
    import tempfile

    from offloadbench import sandbox
    from offloadbench.analysis.tables import read_table

    cells = PIPELINE_CELLS[:2] if smoke else PIPELINE_CELLS
    sizes = sorted({c.size for c in cells})
    dtypes = sorted({c.dtype for c in cells})
    config = {"machine": "fidelity", "kernels": [],
              "grid": {"ops": ["matmul"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": dtypes,
                       "sizes": sizes, "threads": [1], "modes": ["eager"]},
              "measure": {"processes": processes, "max_processes": processes},
              "analysis": {"controls": 0}, "roofs": {"devices": []}, "transfer": {"devices": []}}
    before = references(cells, reference_processes, seconds)
    with tempfile.TemporaryDirectory(prefix="offloadbench-fidelity-") as tmp:
        workdir = sandbox.copy_workflow(Path(tmp) / "wf")
        result = sandbox.snakemake(workdir, "--until", "aggregate", config=config, timeout=3600)
        if result.returncode != 0:
            raise SystemExit(f"the pipeline run failed:\n{result.stderr[-3000:]}")
        timings = read_table("timings", str(workdir / "results" / "fidelity" / "timings.csv"))
    after = references(cells, reference_processes, seconds)
    lines = ["", "pipeline ÷ torch.utils.benchmark before and after it, one-thread CPU matmul cells",
             "| cell | pipeline (CI) | reference before | after | pipeline ÷ reference (CI) |", "|---|---|---|---|---|"]
    worst = 1.0
    for cell in cells:
        row = next(r for r in timings.itertuples() if r.library == cell.library and r.dtype == cell.dtype
                   and int(r.size) == cell.size)
        ref = math.sqrt(statistics.median(before[cell]) * statistics.median(after[cell]))
        ratio = row.median_s / ref
        worst = ratio if abs(math.log(ratio)) > abs(math.log(worst)) else worst
        lines.append(f"| {cell.stem} | {row.median_s * 1e3:.4f} ms ({row.ci_low_s * 1e3:.4f}–{row.ci_high_s * 1e3:.4f}) "
                     f"| {statistics.median(before[cell]) * 1e3:.4f} ms | {statistics.median(after[cell]) * 1e3:.4f} ms "
                     f"| {ratio:.3f} ({row.ci_low_s / ref:.3f}–{row.ci_high_s / ref:.3f}) |")
    lines.append(f"worst pipeline ÷ reference: {worst:.3f} (goal: within 0.98–1.02)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one tiny cell, two passes")
    parser.add_argument("--pipeline", action="store_true",
                        help="the pipeline's one-thread CPU matmul cells against torch.utils.benchmark before and after")
    parser.add_argument("--processes", type=int, default=8, help="--pipeline: the run's processes per cell")
    parser.add_argument("--passes", type=int, default=40, help="most passes per cell (fewer once ±2%% is resolved)")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of ours per cell and pass")
    args = parser.parse_args(argv)
    if args.pipeline:
        print(f"fidelity: the pipeline vs torch.utils.benchmark (torch {torch.__version__}, numpy {np.__version__})")
        print("\n".join(pipeline_fidelity(3 if args.smoke else args.processes, 2 if args.smoke else 3,
                                          0.2 if args.smoke else 1.0, args.smoke)))
        return 0
    if args.smoke:
        cells = cpu_cells([64], ["float32"], ["numpy", "torch"], ["1"])
        tallies = run_cpu(cells, passes=2, budget_s=0.05, adaptive_max_s=0.2, min_passes=2)
    else:
        cells = cpu_cells([256, 1024], ["float32", "float64"], ["numpy", "torch"], ["1", "all"])
        tallies = run_cpu(cells, passes=args.passes, budget_s=args.budget, adaptive_max_s=10.0)
    print(f"fidelity: ours vs torch.utils.benchmark (torch {torch.__version__}, numpy {np.__version__})")
    lines = report(tallies)
    if torch.cuda.is_available() and not args.smoke:
        lines[-1:-1] = cuda_comparison([256, 1024, 4096], ["float32", "float64"], args.budget)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
