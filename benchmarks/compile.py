"""Compile benchmark: NumPy, torch eager, torch compiled and numpy compiled (torch.compile of
the unchanged NumPy function), for the example kernels and two catalogue ops, through the
real pipeline (3 fresh processes per cell, each compiling with an empty cache).

For every op and size it prints each variant's time with its 95% CI, the speedup over
NumPy with its CI, the compile seconds and the calls needed to amortize the compile.

    python benchmarks/compile.py                 # the examples, transcendental and axpy at n = 2048
    python benchmarks/compile.py --sizes 512 2048 --keep /tmp/compile-bench
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from offloadbench import sandbox
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source
from offloadbench.report.format import fmt_payback
from offloadbench.units import fmt_duration, fmt_time

ROOT = Path(__file__).resolve().parents[1]
OPS = ["heat_step", "pairwise_distances", "option_price", "transcendental", "axpy"]
VARIANTS = ["numpy", "torch", "torch compiled", "numpy compiled"]
LABEL = "compile-bench"


def config(sizes: list[int], processes: int) -> dict:
    return {
        "machine": LABEL, "kernels": ["examples/kernels.py"],
        "grid": {"ops": OPS, "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
                 "sizes": sizes, "threads": ["all"], "modes": ["eager", "compiled"],
                 # every op compiled: not the default config's narrowing, which a config file extends
                 "compiled": {"ops": None, "devices": None, "sizes": None, "threads": None}},
        "measure": {"processes": processes, "budget_s": 0.3, "warmup_budget_s": 0.2},
        "roofs": {"devices": []}, "transfer": {"devices": []},
    }


def interval(value: float, low: float, high: float, fmt) -> str:
    return f"{fmt(value)} ({fmt(low)}–{fmt(high)})"


def ratio(value: float) -> str:
    return f"{value:.2f}×"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--keep", help="keep the run's results in this folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="offloadbench-compile-") as tmp:
        workdir = sandbox.copy_workflow(Path(args.keep or tmp) / "wf")
        start = time.perf_counter()
        result = sandbox.snakemake(workdir, "--until", "aggregate", config=config(args.sizes, args.processes))
        if result.returncode != 0:
            raise SystemExit(f"the run failed:\n{result.stderr[-3000:]}")
        wall = time.perf_counter() - start
        tables = Source(LABEL, workdir / "results" / LABEL).tables(Analysis())
    timings, speedups = tables["timings"], tables["speedups"]
    print("| op | n | " + " | ".join(f"{v}: time (95% CI)" for v in VARIANTS) + " |")
    print("|---|---|" + "---|" * len(VARIANTS))
    for (op, size), group in timings[timings["status"] == "ok"].groupby(["op", "size"], sort=False):
        cells = {row["variant"]: row for _, row in group.iterrows()}
        text = [interval(cells[v]["median_s"], cells[v]["ci_low_s"], cells[v]["ci_high_s"], fmt_time)
                if v in cells else "–" for v in VARIANTS]
        print(f"| {op} | {size} | " + " | ".join(text) + " |")
    print()
    print("| op | n | variant | speedup over NumPy (95% CI) | verdict | compile (95% CI) | calls to amortize |")
    print("|---|---|---|---|---|---|---|")
    for _, row in speedups.iterrows():
        compile_s = (interval(row["compile_s"], row["compile_s_ci_low"], row["compile_s_ci_high"], lambda v: f"{v:.2f} s")
                     if row["mode"] == "compiled" else "–")
        print(f"| {row['op']} | {row['size']} | {row['variant']} | "
              f"{interval(row['speedup'], row['speedup_ci_low'], row['speedup_ci_high'], ratio)} | "
              f"{row['speedup_verdict']} | {compile_s} | "
              f"{fmt_payback(row['amortize_calls'], row['amortize_calls_ci_low'], row['amortize_calls_ci_high'])} |")
    startup = timings["compiler_startup_s"].dropna()
    print()
    print(f"compiler start-up per compiled process: {startup.min():.1f}–{startup.max():.1f} s; "
          f"{args.processes} processes per cell; the run took {fmt_duration(wall)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
