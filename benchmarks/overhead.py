"""Overhead benchmark: what the pipeline costs beyond the measurement itself.

It runs a small grid through the real pipeline (a disposable copy of the workflow) and
reports, per cell, the job's wall time (Snakemake's `benchmark:` file), the time inside
the measurement, the library imports, and the remainder: the pipeline's own overhead
(process launch, interpreter start, the supervisor, writing the record). It then times
`snakemake -n` on a generated grid of at least 5,000 cells.

    python benchmarks/overhead.py            # full run (about a minute)
    python benchmarks/overhead.py --smoke    # two cells and a 200-cell dry run (the test suite)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from offloadbench import sandbox  # noqa: E402
from offloadbench.grid import expand  # noqa: E402

GOAL_OVERHEAD_S = 0.5
GOAL_DRY_RUN_S = 20.0


def small_grid(smoke: bool) -> dict:
    return {
        "machine": "overhead",
        "grid": {"ops": ["matmul"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
                 "sizes": [64] if smoke else [64, 256, 1024], "threads": [1]},
        "measure": {"budget_s": 0.1 if smoke else 0.3, "warmup_budget_s": 0.05, "min_samples": 6},
        "analysis": {"bootstrap_resamples": 200},
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


def job_rows(out: Path) -> list[dict]:
    rows = []
    for record_path in sorted((out / "raw").rglob("*.json")):
        record = json.loads(record_path.read_text())
        if "cell" not in record:  # the transfer sweep's record
            continue
        cell = record["cell"]
        bench = out / "benchmarks" / "measure" / cell["op"] / f"{record_path.stem}.tsv"
        header, values = bench.read_text().splitlines()[:2]
        wall = float(dict(zip(header.split("\t"), values.split("\t")))["s"])
        measure_s, import_s = record.get("measure_s") or 0.0, record.get("import_s") or 0.0
        rows.append({
            "cell": f"{cell['op']}/{record_path.stem}",
            "wall": wall, "measure": measure_s, "imports": import_s,
            "overhead": wall - measure_s - import_s,
            "heavy": ",".join(record.get("heavy_modules_loaded", [])) or "none",
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="offloadbench-overhead-") as tmp:
        workdir = sandbox.copy_workflow(Path(tmp) / "wf")
        start = time.perf_counter()
        result = sandbox.snakemake(workdir, config=small_grid(args.smoke))
        total = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            return 1
        rows = job_rows(workdir / "results" / "overhead")
        print("overhead: per measurement job (seconds)")
        print("| cell | job wall | measurement | imports | overhead | heavy modules loaded |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['cell']} | {r['wall']:.2f} | {r['measure']:.2f} | {r['imports']:.2f} | {r['overhead']:.2f} | {r['heavy']} |")
        print(f"bare imports in a fresh interpreter: numpy {interpreter_import_s('import numpy'):.2f} s, "
              f"numpy+torch {interpreter_import_s('import numpy, torch'):.2f} s")
        print(f"whole pipeline (incl. environment, tables, figures, report): {total:.1f} s for {len(rows)} cells")

        dry = big_grid(200 if args.smoke else 5000)
        cells = len(expand(dry["grid"]))
        start = time.perf_counter()
        result = sandbox.snakemake(workdir, "-n", "--quiet", "all", config=dry)
        dry_s = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            return 1
        worst = max(r["overhead"] for r in rows)
        print(f"snakemake -n on {cells} cells: {dry_s:.1f} s (goal: within {GOAL_DRY_RUN_S:g} s)")
        print(f"overhead per cell: median {statistics.median(r['overhead'] for r in rows):.2f} s, "
              f"worst {worst:.2f} s (goal: at most {GOAL_OVERHEAD_S} s on top of the imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
