"""Paired benchmark: what measuring the compared cells in one bout, taking turns, gains over
sampling each cell alone.

It runs one small grid through the real pipeline (a disposable copy of the workflow) with
`measure.pairing: separate` (each cell sampled alone, one after another, its ratios paired
by round: the method before bouts) and with `measure.pairing: bouts`, alternately, at the
same sampling time per cell (`measure.budget_s` per timed region, a CI target no cell
reaches, no extra rounds). The grid holds an A/A pair (transcendental, n = 1024, against
its twin), a compute-bound op (transcendental at n = 2048), fft2 (n = 1024) and a stencil
(the heat_step kernel, n = 2048), NumPy and torch on one thread. It prints each
comparison's ratio (torch's time over NumPy's, and the twin's over its original's) with
its CI's half-width per run, the seconds each run spent measuring, and how the half-widths
and the seconds compare.

    python benchmarks/paired.py                    # 2 runs per method, 5 processes per cell (about 12 minutes)
    python benchmarks/paired.py --repeats 3 --processes 6 --budget 0.8
    python benchmarks/paired.py --smoke            # a tiny grid, one run per method (the test suite)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

import yaml
from offloadbench import sandbox
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source
from offloadbench.units import fmt_duration

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("separate", "bouts")


@dataclass(frozen=True)
class Comparison:
    name: str
    op: str
    size: int
    twin: bool = False  # the A/A pair: the twin over its original, else torch over NumPy

    def row(self, tables: dict):
        """The comparison's row: its controls row (A/A) or speedups row (torch against NumPy)."""
        if self.twin:
            frame = tables["controls"]
            rows = frame[(frame["op"] == self.op) & (frame["size"] == self.size) & (frame["library"] == "numpy")]
        else:
            frame = tables["speedups"]
            rows = frame[(frame["op"] == self.op) & (frame["size"] == self.size) & (frame["library"] == "torch")
                         & (frame["mode"] == "eager") & (frame["device"] == "cpu")]
        return rows.iloc[0] if len(rows) else None

    def ratio(self, tables: dict) -> tuple[float, float, str] | None:
        """(time ratio, half-width of its CI as a share, pairing) of one run."""
        row = self.row(tables)
        if row is None:
            return None
        if self.twin:
            value, low, high = row["ratio"], row["ratio_ci_low"], row["ratio_ci_high"]
        else:  # a speedup is NumPy's time over torch's: turned into torch's over NumPy's
            value, low, high = 1 / row["speedup"], 1 / row["speedup_ci_high"], 1 / row["speedup_ci_low"]
        if not all(map(math.isfinite, (value, low, high))) or low <= 0:
            return None
        return value, math.expm1((math.log(high) - math.log(low)) / 2), row["pairing"]


COMPARISONS = (
    Comparison("A/A: numpy transcendental, n = 1024, twin / original", "transcendental", 1024, twin=True),
    Comparison("compute-bound: transcendental, n = 2048, torch / numpy", "transcendental", 2048),
    Comparison("fft2, n = 1024, torch / numpy", "fft2", 1024),
    Comparison("stencil: heat_step, n = 2048, torch / numpy", "heat_step", 2048),
)
SMOKE = (Comparison("A/A: numpy matmul, n = 64, twin / original", "matmul", 64, twin=True),
         Comparison("matmul, n = 64, torch / numpy", "matmul", 64))


def grid_config(method: str, processes: int, budget: float, smoke: bool) -> dict:
    grid = ({"ops": ["matmul"], "sizes": [64]} if smoke else
            {"ops": ["transcendental", "fft2", "heat_step"], "sizes": [1024, 2048]})
    return {
        "kernels": [str(ROOT / "examples" / "kernels.py")],
        "grid": {**grid, "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
                 "threads": [1], "modes": ["eager"]},
        # the same sampling per cell in both methods: a CI target no cell reaches, no extra rounds
        "measure": {"pairing": method, "processes": processes, "max_processes": processes, "budget_s": budget,
                    "target_rel_ci": 0.0001, "max_samples": 100000, "warmup_budget_s": 0.05 if smoke else 0.2},
        "analysis": {"controls": "all", "bootstrap_resamples": 200 if smoke else 2000},
        "roofs": {"devices": []}, "transfer": {"devices": []},
    }


def run(workdir: Path, label: str, config: dict) -> tuple[dict, float]:
    """(tables, seconds spent measuring) of one run through the pipeline up to the tables."""
    result = sandbox.snakemake(workdir, "--until", "aggregate", config={**config, "machine": label}, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"run {label} failed:\n{result.stderr[-3000:]}")
    source = Source(label, workdir / "results" / label)
    settings = yaml.safe_load((workdir / "test.yaml").read_text())
    tables = source.tables(Analysis(resamples=settings["analysis"]["bootstrap_resamples"]))
    return tables, sum(r.took_s or 0.0 for r in source.rounds(("planned", "extra")))


def spread(values: list[float], fmt) -> str:
    """One value, or the range of several."""
    if not values:
        return "–"
    low, high = min(values), max(values)
    return fmt(low) if fmt(low) == fmt(high) else f"{fmt(low)}–{fmt(high)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs per method")
    parser.add_argument("--processes", type=int, default=5, help="measure.processes of each run")
    parser.add_argument("--budget", type=float, default=0.5, help="measure.budget_s: sampling per cell and round")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    repeats, processes, budget = (1, 3, 0.05) if args.smoke else (args.repeats, args.processes, args.budget)
    comparisons = SMOKE if args.smoke else COMPARISONS
    found: dict[str, dict[str, list]] = {m: {c.name: [] for c in comparisons} for m in METHODS}
    seconds: dict[str, list[float]] = {m: [] for m in METHODS}
    pairing: dict[str, set[str]] = {m: set() for m in METHODS}
    with tempfile.TemporaryDirectory(prefix="offloadbench-paired-") as tmp:
        workdir = sandbox.copy_workflow(Path(tmp) / "wf")
        for k in range(repeats):
            for method in METHODS if k % 2 == 0 else METHODS[::-1]:  # neither method always goes first
                started = time.perf_counter()
                tables, measuring = run(workdir, f"{method}-{k + 1}", grid_config(method, processes, budget, args.smoke))
                print(f"{method} run {k + 1}: {fmt_duration(time.perf_counter() - started)} "
                      f"(measuring {fmt_duration(measuring)})", flush=True)
                seconds[method].append(measuring)
                for comparison in comparisons:
                    ratio = comparison.ratio(tables)
                    if ratio is not None:
                        found[method][comparison.name].append(ratio[:2])
                        pairing[method].add(ratio[2])
    print()
    print(f"{repeats} run(s) per method, {processes} processes per cell, {budget:g} s of sampling per cell and "
          "round; each entry: the time ratio and its CI's half-width, over the runs")
    print("| comparison | separate processes | bouts (taking turns) | half-width, bouts ÷ separate |")
    print("|---|---|---|---|")
    gains = {}
    for comparison in comparisons:
        cells = []
        for method in METHODS:
            pairs = found[method][comparison.name]
            cells.append(f"{spread([r for r, _ in pairs], lambda v: f'{v:.2f}')}, "
                         f"±{spread([h for _, h in pairs], lambda v: f'{v:.1%}')}" if pairs else "–")
        widths = [statistics.median(h for _, h in found[m][comparison.name]) if found[m][comparison.name] else math.nan
                  for m in METHODS]
        gains[comparison.name] = widths[1] / widths[0] if widths[0] > 0 else math.nan
        print(f"| {comparison.name} | {cells[0]} | {cells[1]} | {gains[comparison.name]:.2f} |")
    print(f"| seconds measuring | {spread(seconds['separate'], fmt_duration)} | "
          f"{spread(seconds['bouts'], fmt_duration)} | |")
    print()
    print("analysed as: " + "; ".join(f"{m}: {', '.join(sorted(pairing[m])) or '–'}" for m in METHODS))
    time_ratio = statistics.median(seconds["bouts"]) / statistics.median(seconds["separate"])
    compute = [gains[c.name] for c in comparisons[:2]]
    print(f"A/A and compute-bound: half-widths in bouts {', '.join(f'{g:.2f}' for g in compute)} of the separate ones "
          f"(goal: at most 0.33), in {time_ratio:.2f} of the measuring time (goal: at most 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
