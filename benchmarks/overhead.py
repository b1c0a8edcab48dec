"""Overhead benchmark: what the pipeline costs beyond the measurement itself.

It runs a small grid through the real pipeline (a disposable copy of the workflow) and
reports, per round job, its wall time (Snakemake's `benchmark:` file), the time inside the
measurements (the bouts' turns and the pauses between them, and each worker getting ready
for its cell and finishing it), the workers' library imports, their warm-up (a deliberate
part of the method), and the remainder: the pipeline's own overhead (job and
worker launch, the system check, writing records), also per cell. It then times
`snakemake -n` on a generated grid of at least 5,000 cells.

    python benchmarks/overhead.py            # full run (about a minute)
    python benchmarks/overhead.py --smoke    # two cells and a 200-cell dry run (the test suite)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from offloadbench import layout, sandbox
from offloadbench.grid import expand
from offloadbench.records import load_record, load_round

GOAL_OVERHEAD_S = 0.5
GOAL_DRY_RUN_S = 20.0


def small_grid(smoke: bool) -> dict:
    return {
        "machine": "overhead",
        "grid": {"ops": ["matmul"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
                 "sizes": [64] if smoke else [64, 256, 1024], "threads": [1] if smoke else [1, "all"]},
        "measure": {"budget_s": 0.1 if smoke else 0.3, "warmup_budget_s": 0.05, "min_samples": 6, "processes": 2},
        "analysis": {"bootstrap_resamples": 200},
        # the smoke test checks the rounds only: no roofs, copies, figures or report
        **({"roofs": {"devices": []}, "transfer": {"devices": []}} if smoke else {}),
    }


def big_grid(target_cells: int) -> dict:
    """A grid of at least `target_cells` cells, built by adding sizes."""
    grid = {"ops": ["matmul", "compute_then_plot"], "libraries": ["numpy", "torch"], "devices": ["cpu", "cuda", "mps"],
            "dtypes": ["float16", "bfloat16", "float32", "float64"], "threads": [1, 2, 4, 8, "all"], "sizes": [16]}
    while len(expand(grid)) < target_cells:
        grid["sizes"].append(grid["sizes"][-1] + 16)
    return {"machine": "dryrun", "grid": grid}


def interpreter_import_s(statement: str, repeats: int = 3) -> float:
    """Seconds a fresh interpreter spends on `statement` beyond starting up."""
    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    bare = statistics.median(run("pass") for _ in range(repeats))
    return statistics.median(run(statement) for _ in range(repeats)) - bare


def round_rows(out: Path) -> list[dict]:
    """Per round job: its wall time (Snakemake's `benchmark:` file) split into the time inside
    the measurements, the workers' library imports, and the rest (the pipeline's own cost)."""
    rows = []
    for manifest_path in layout.round_records(out / "raw", "planned"):
        manifest = load_round(manifest_path)
        bench = out / "benchmarks" / "rounds" / f"{manifest_path.stem}.tsv"
        header, values = bench.read_text().splitlines()[:2]
        wall = float(dict(zip(header.split("\t"), values.split("\t")))["s"])
        records = [load_record(p) for p in (out / "raw").rglob(f"p{manifest.round}.json") if p.parent.name != "rounds"]
        # bouts: the turns and the pauses between them; cells: each worker getting ready and finishing
        measured = sum((b.get("sampling_s") or 0.0) + (b.get("paused_s") or 0.0) for b in manifest.bouts) + \
            sum((r.prepare_s or 0.0) + (r.finish_s or 0.0) for r in records)
        processes = manifest.worker_processes
        imports = sum(p.get("import_s") or 0.0 for p in processes)
        warm = sum(p.get("warm_s") or 0.0 for p in processes)
        rows.append({"round": manifest_path.stem, "cells": len(records), "workers": len(processes), "wall": wall,
                     "measure": measured, "imports": imports, "warm": warm,
                     "overhead": wall - measured - imports - warm, "records": records})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="offloadbench-overhead-") as tmp:
        workdir = sandbox.copy_workflow(Path(tmp) / "wf")
        start = time.perf_counter()
        until = ["--until", "aggregate"] if args.smoke else []
        result = sandbox.snakemake(workdir, *until, config=small_grid(args.smoke))
        total = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            return 1
        rows = round_rows(workdir / "results" / "overhead")
        repeats = 1 if args.smoke else 3
        print("overhead: per round job (seconds)")
        print("| round | cells | workers | job wall | measurement | worker imports | worker warm-ups | overhead | overhead per cell |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['round']} | {r['cells']} | {r['workers']} | {r['wall']:.2f} | {r['measure']:.2f} | "
                  f"{r['imports']:.2f} | {r['warm']:.2f} | {r['overhead']:.2f} | {r['overhead'] / max(1, r['cells']):.2f} |")
        print()
        print("| cell | heavy modules loaded by its worker |")
        print("|---|---|")
        for record in rows[0]["records"]:
            print(f"| {record.cell.key} | {','.join(record.heavy_modules) or 'none'} |")
        print(f"bare imports in a fresh interpreter: numpy {interpreter_import_s('import numpy', repeats):.2f} s, "
              f"numpy+torch {interpreter_import_s('import numpy, torch', repeats):.2f} s")
        what = "pipeline up to the tables" if args.smoke else "whole pipeline (incl. environment, tables, figures, report)"
        print(f"{what}: {total:.1f} s for {rows[0]['cells'] if rows else 0} cells "
              f"in {len(rows)} rounds")

        dry = big_grid(200 if args.smoke else 5000)
        cells = len(expand(dry["grid"]))
        start = time.perf_counter()
        result = sandbox.snakemake(workdir, "-n", "--quiet", "all", config=dry)
        dry_s = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            return 1
        per_cell = [r["overhead"] / max(1, r["cells"]) for r in rows]
        print(f"snakemake -n on {cells} cells: {dry_s:.1f} s (goal: within {GOAL_DRY_RUN_S:g} s)")
        print(f"overhead per cell: median {statistics.median(per_cell):.2f} s, "
              f"worst {max(per_cell):.2f} s (goal: at most {GOAL_OVERHEAD_S} s on top of the imports and warm-ups)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
