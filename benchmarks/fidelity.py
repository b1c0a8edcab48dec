"""Fidelity benchmark: does our timer agree with the reference harnesses, and how fast does
it reach a given precision?

For each cell (matmul, n = 256 and 1024, float32 and float64, numpy and torch on the cpu,
1 thread and all) it times the same closure with our timer (warm-up, blocks, adaptive
stopping) and with torch.utils.benchmark.Timer.blocked_autorange at the same thread count,
interleaved in rounds in one process so drift hits both alike. It prints ours ÷ reference
with a bootstrap 95% CI per cell, then our wall time to reach ±2% against
adaptive_autorange(threshold=0.02) on the same cell. On CUDA it also compares against
CUDA-event timing and, where triton is installed, triton.testing.do_bench.

    python benchmarks/fidelity.py            # full run (a few minutes)
    python benchmarks/fidelity.py --smoke    # one small cell, one round (the test suite)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

import numpy as np
import torch
import torch.utils.benchmark as tbench
from offloadbench.cells import Cell, resolve_threads
from offloadbench.measure.cell import Backend, Settings, make_host_inputs
from offloadbench.measure.ops import get_op
from offloadbench.measure.timing import BlockRule, Region, StopRule, WarmupRule, measure_region
from offloadbench.stats import draws, median_and_ci, median_ci_rel_halfwidth, ratio_ci
from threadpoolctl import threadpool_limits

TARGET = 0.02


@dataclass
class Tally:
    ours: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)
    round_ratios: list[float] = field(default_factory=list)  # paired: drift cancels within a round
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


def run_cpu(cells: list[Cell], rounds: int, budget_s: float, adaptive_max_s: float, min_reference_s: float = 0.05) -> dict[Cell, Tally]:
    tallies = {cell: Tally() for cell in cells}
    stop = StopRule(target_rel_ci=TARGET, budget_s=budget_s)
    for round_index in range(rounds):
        for cell in cells:
            threads = resolve_threads(cell.threads)
            with threadpool_limits(limits=threads):
                torch.set_num_threads(threads)
                fn, sync = compute_closure(cell)
                tally = tallies[cell]
                # Alternate who goes first so neither always runs on a warmer machine; the
                # reference gets as long as ours took, so both see the same stretch of drift.
                ref_first = round_index % 2 == 1
                ref = reference(fn, threads, min_run_time=min_reference_s) if ref_first else None
                samples, wall, rel_ci = ours(fn, sync, stop)
                if ref is None:
                    ref = reference(fn, threads, min_run_time=max(min_reference_s, wall))
                tally.ours += samples
                tally.reference += ref
                tally.round_ratios.append(statistics.median(samples) / statistics.median(ref))
                tally.ours_time_to_target.append(wall)
                tally.ours_precision.append(rel_ci)
                if round_index == 0:
                    tally.adaptive_time, tally.adaptive_precision = adaptive(fn, threads, adaptive_max_s)
    return tallies


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
        "| cell | ours (median, all rounds) | reference (same) | ours/reference, median of rounds [95% CI] | ours: s to ±2% (CI reached) | adaptive_autorange: s (CI reached) |",
        "|---|---|---|---|---|---|",
    ]
    worst_cell, worst = None, 1.0
    time_ratios, verified = [], 0
    for cell, t in tallies.items():
        ratio, lo, hi = round_ratio_ci(t.round_ratios)
        if abs(math.log(ratio)) >= abs(math.log(worst)):
            worst_cell, worst = cell, ratio
        our_time = statistics.median(t.ours_time_to_target)
        time_ratios.append(our_time / t.adaptive_time)
        verified += t.adaptive_precision <= TARGET
        lines.append(
            f"| {cell.stem} | {statistics.median(t.ours) * 1e3:.4f} ms | {statistics.median(t.reference) * 1e3:.4f} ms | "
            f"{ratio:.3f} [{lo:.3f}, {hi:.3f}] | {our_time:.3f} ({_shown(statistics.median(t.ours_precision))}) | "
            f"{t.adaptive_time:.3f} ({_shown(t.adaptive_precision)}) |"
        )
    lines.append("")
    lines.append(
        "CI reached: half-width of the distribution-free 95% CI of the median of the samples each method took "
        "(undefined below 6 samples); adaptive_autorange stops on IQR/mean < 2% instead."
    )
    lines.append(
        f"precision per second: median over cells of our time ÷ adaptive_autorange's = {statistics.median(time_ratios):.2f}; "
        f"adaptive_autorange's own samples support ±2% in {verified} of {len(tallies)} cells, ours in "
        f"{sum(statistics.median(t.ours_precision) <= TARGET for t in tallies.values())} of {len(tallies)}"
    )
    lines.append(f"worst ratio ours/reference: {worst:.3f} ({worst_cell.stem}; the furthest from 1; goal: within 0.98–1.02)")
    return lines


def round_ratio_ci(ratios: list[float]) -> tuple[float, float, float]:
    """Median of the per-round ratios with a bootstrap 95% CI over rounds."""
    interval = median_and_ci(ratios)
    return statistics.median(ratios), interval.low, interval.high


def _shown(rel_ci: float) -> str:
    return "±undefined" if not math.isfinite(rel_ci) else f"±{rel_ci:.1%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one tiny cell, one round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget", type=float, default=0.5, help="seconds per timer per cell and round")
    args = parser.parse_args(argv)
    if args.smoke:
        cells = cpu_cells([64], ["float32"], ["numpy", "torch"], ["1"])
        tallies = run_cpu(cells, rounds=2, budget_s=0.05, adaptive_max_s=0.2)
    else:
        cells = cpu_cells([256, 1024], ["float32", "float64"], ["numpy", "torch"], ["1", "all"])
        tallies = run_cpu(cells, rounds=args.rounds, budget_s=args.budget, adaptive_max_s=10.0)
    print(f"fidelity: ours vs torch.utils.benchmark (torch {torch.__version__}, numpy {np.__version__})")
    lines = report(tallies)
    if torch.cuda.is_available() and not args.smoke:
        lines[-1:-1] = cuda_comparison([256, 1024, 4096], ["float32", "float64"], args.budget)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
