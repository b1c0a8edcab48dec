"""Reproducibility benchmark: the same grid run twice through the real pipeline, under two
machine labels, then compared cell by cell.

For every cell it prints the two runs' medians, whether the second lies inside the first's
95% CI, and the speedup verdicts of both runs; then the wall time of each run, and how the
variance splits between processes and samples (Kalibera & Jones, ISMM 2013), with the
number of samples per process and of processes their method recommends. The last line
gives the share inside, the worst ratio and the count of faster<->slower flips.

    python benchmarks/reproducibility.py                         # the default grid, config/config.yaml
    python benchmarks/reproducibility.py --config my.yaml --processes 5
    python benchmarks/reproducibility.py --smoke                 # a tiny grid (the test suite)
    python benchmarks/reproducibility.py --disturb               # the second run beside a busy loop

With --disturb, a one-core busy loop runs during the second run, switched on for 2 s and off
for 3 s; it stops by itself when the run ends, or after two hours at most.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from offloadbench import sandbox
from offloadbench.analysis.columns import unstable_cells
from offloadbench.analysis.compare import compare, reproducibility
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source
from offloadbench.cells import Cell
from offloadbench.config import validate
from offloadbench.units import fmt_duration, fmt_time

ROOT = Path(__file__).resolve().parents[1]
LABELS = ("rep-a", "rep-b")
TARGET_HALF_WIDTH = 0.02


def smoke_config() -> dict:
    return yaml.safe_load((ROOT / ".test" / "config.yaml").read_text()) | {
        "grid": {"ops": ["matmul"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
                 "sizes": [32, 64], "threads": [1]},
        "roofs": {"devices": []}, "transfer": {"devices": []},
    }


# A bounded on/off busy loop: it watches its parent and ends with it, or after `limit` s.
BUSY_LOOP = """
import os, sys, time
parent, limit, on, off = os.getppid(), float(sys.argv[1]), 2.0, 3.0
end = time.monotonic() + limit
while time.monotonic() < end and os.getppid() == parent:
    stop = time.monotonic() + on
    while time.monotonic() < stop:
        pass
    time.sleep(off)
"""


@contextlib.contextmanager
def disturbance(active: bool, limit_s: float = 7200.0):
    """A one-core busy loop, 2 s on and 3 s off, while the block runs (when `active`)."""
    if not active:
        yield
        return
    loop = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(limit_s)])
    try:
        yield
    finally:
        loop.kill()
        loop.wait()


def run_twice(config: dict, workdir: Path, disturb: bool = False) -> list[float]:
    walls = []
    for label in LABELS:
        start = time.perf_counter()
        with disturbance(disturb and label == LABELS[1]):
            result = sandbox.snakemake(workdir, "--until", "aggregate", config={**config, "machine": label})
        if result.returncode != 0:
            raise SystemExit(f"run {label} failed:\n{result.stderr[-3000:]}")
        walls.append(time.perf_counter() - start)
    return walls


def measuring_seconds(source: Source) -> float:
    """The seconds the rounds spent measuring (regular and extra), from their own records."""
    return sum(r.took_s or 0.0 for r in source.rounds(("planned", "extra")))


def left_out_cells(tables: dict) -> set[str]:
    """The cells with a process left out (flags.csv)."""
    flags = tables["flags"]
    return {Cell.from_dict(r).key for _, r in flags[flags["left_out_round"].notna()].iterrows()}


def replaced_and_flagged(tables: dict) -> tuple[int, int]:
    return len(left_out_cells(tables)), int(unstable_cells(tables["timings"]).sum())


def moved_cells(comparison, tables: dict, threshold: float = 0.25) -> list[str]:
    """Cells whose median moved by more than `threshold` between the runs, and whether the
    second run replaced a process of theirs or flagged them."""
    timings, left_out = tables[LABELS[1]]["timings"], left_out_cells(tables[LABELS[1]])
    caught = {key: "replaced" if key in left_out else ("flagged" if flagged else "")
              for key, flagged in zip([Cell.from_dict(r).key for _, r in timings.iterrows()], unstable_cells(timings),
                                      strict=True)}
    lines = []
    for _, row in comparison.iterrows():
        ratio = row["ratio"]
        if ratio > 0 and max(ratio, 1 / ratio) > 1 + threshold:
            key = Cell.from_dict(row).key
            lines.append(f"{key} {ratio:.2f}× ({caught.get(key) or 'NOT caught'})")
    return lines


def verdicts_of(speedups) -> dict[Cell, str]:
    return {Cell.from_dict(row): row["speedup_verdict"] for _, row in speedups.iterrows()}


def cell_table(result) -> list[str]:
    lines = ["| cell | run 1: median (95% CI) | run 2: median | inside | verdict 1 | verdict 2 |",
             "|---|---|---|---|---|---|"]
    verdicts_a, verdicts_b = (verdicts_of(result.tables[label]["speedups"]) for label in LABELS)
    for _, row in result.comparison.iterrows():
        cell = Cell.from_dict(row)
        lines.append(
            f"| {cell.key} | {fmt_time(row['median_a_s'])} ({fmt_time(row['ci_a_low_s'])}–{fmt_time(row['ci_a_high_s'])}) "
            f"| {fmt_time(row['median_b_s'])} | {'yes' if row['b_inside_a_ci'] else 'NO'} "
            f"| {verdicts_a.get(cell, '–')} | {verdicts_b.get(cell, '–')} |"
        )
    return lines


def variance_levels(sources: list[Source], analysis: Analysis) -> list[str]:
    """Kalibera & Jones: within-process (T1) and between-process (T2) variance of log times,
    pooled over both runs, the costs of a sample (c1) and of a process (c2), and the
    optimal samples per process r1 = sqrt(c2 T1^2 / (c1 T2^2)) they give."""
    by_cell: dict[Cell, list] = {}
    for source in sources:
        for mc in source.cells(analysis):
            by_cell.setdefault(mc.cell, []).append(mc)
    rows = []
    for cell, cells in by_cell.items():
        groups = [np.log(g) for mc in cells for g in mc.groups("compute") if len(g) >= 2]
        records = [r for mc in cells for r in mc.ok]
        if len(groups) < 3:
            continue
        t1 = float(np.mean([np.var(g, ddof=1) for g in groups]))
        n = float(np.mean([len(g) for g in groups]))
        t2 = max(0.0, float(np.var([np.median(g) for g in groups], ddof=1)) - 1.57 * t1 / n)
        sampling = [sum(region.sampling_s or 0.0 for region in r.regions.values()) for r in records]
        c1 = statistics.median(s / max(1, len(r.samples("compute").seconds))
                               for s, r in zip(sampling, records, strict=True))
        c2 = statistics.median((r.measure_s or 0.0) - s for s, r in zip(sampling, records, strict=True))
        r1 = math.sqrt(c2 * t1 / (c1 * t2)) if t2 > 0 and c1 > 0 else math.inf
        # processes for a ±2% half-width of the mean over processes (normal approximation)
        per_process = t2 + t1 / max(1.0, min(r1, n))
        processes = math.ceil(per_process * (1.96 / math.log1p(TARGET_HALF_WIDTH)) ** 2)
        rows.append((cell, t1, t2, c1, c2, r1, processes))
    if not rows:
        return ["(too few processes per cell for a variance split)"]
    lines = ["| cell | within sd | between sd | c1 (s/sample) | c2 (s/process) | K&J samples/process | processes for ±2% |",
             "|---|---|---|---|---|---|---|"]
    for cell, t1, t2, c1, c2, r1, processes in rows:
        lines.append(f"| {cell.key} | {math.sqrt(t1):.1%} | {math.sqrt(t2):.1%} | {c1:.2g} | {c2:.2g} | "
                     f"{'∞' if math.isinf(r1) else f'{r1:.0f}'} | {processes} |")
    finite_r1 = [r[5] for r in rows if math.isfinite(r[5])]
    between = [r[2] for r in rows]
    lines.append("")
    lines.append(
        f"levels: between-process variance dominates in {sum(r[2] > r[1] / 30 for r in rows)} of {len(rows)} cells; "
        f"median between sd {math.sqrt(statistics.median(between)):.1%}; K&J samples per process: median "
        f"{statistics.median(finite_r1) if finite_r1 else float('inf'):.0f}; processes for ±2%: median "
        f"{statistics.median(r[6] for r in rows):.0f}"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    parser.add_argument("--processes", type=int, help="override measure.processes")
    parser.add_argument("--keep", help="keep the two runs' results in this folder")
    parser.add_argument("--smoke", action="store_true", help="a tiny grid, to test the benchmark itself")
    parser.add_argument("--disturb", action="store_true", help="run the second run beside an on/off busy loop")
    args = parser.parse_args(argv)
    config = smoke_config() if args.smoke else yaml.safe_load(Path(args.config).read_text())
    if args.processes:
        config = {**config, "measure": {**config.get("measure", {}), "processes": args.processes}}
    with tempfile.TemporaryDirectory(prefix="offloadbench-repro-") as tmp:
        workdir = sandbox.copy_workflow(Path(args.keep or tmp) / "wf")
        walls = run_twice(config, workdir, args.disturb)
        settings = validate(config)["analysis"]  # the run's own analysis settings
        analysis = Analysis.from_config(settings)
        sources = [Source(label, workdir / "results" / label) for label in LABELS]
        result = compare(sources, analysis)
        summary = reproducibility(result.comparison, result.tables)
        print("\n".join(cell_table(result)))
        print()
        print("\n".join(variance_levels(sources, analysis)))
        print()
        measuring = [measuring_seconds(s) for s in sources]
        print(f"wall time: run 1 {fmt_duration(walls[0])} (measuring {fmt_duration(measuring[0])}), "
              f"run 2 {fmt_duration(walls[1])} (measuring {fmt_duration(measuring[1])})"
              + (" beside a one-core busy loop, 2 s on and 3 s off" if args.disturb else ""))
        for label in LABELS:
            replaced, flagged = replaced_and_flagged(result.tables[label])
            print(f"{label}: {replaced} cells with a replaced process, {flagged} flagged")
        moved = moved_cells(result.comparison, result.tables)
        print(f"medians moved by more than 25%: {len(moved)}{': ' + '; '.join(moved) if moved else ''}")
        if summary["changed_cells"]:
            print("changed verdicts: " + "; ".join(summary["changed_cells"]))
        print(f"verdicts changed: {summary['verdicts_changed']} of {summary['verdicts']} "
              f"({1 - summary['verdicts_changed'] / max(1, summary['verdicts']):.0%} identical); contradictions: "
              f"{summary['contradictions']}; decided: {summary['decided'][0]:.0%} and {summary['decided'][1]:.0%}; "
              f"median CI half-width ±{summary['median_rel_halfwidth']:.1%}")
        for label, (count, false) in zip(LABELS, summary["controls"], strict=True):
            print(f"{label}: {count} self-comparisons, {false} called faster or slower")
        print(f"inside: {summary['inside']}/{summary['cells']} ({summary['inside'] / max(1, summary['cells']):.0%}) · "
              f"worst ratio {summary['worst_ratio']:.2f}× ({summary['worst_cell']}) · "
              f"faster↔slower flips: {summary['flips']}")
        if args.keep:
            (Path(args.keep) / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
