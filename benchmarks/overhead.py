"""Overhead benchmark: where a run's measuring time goes, and what the pipeline costs beside it.

Each round records its wall time split by what it went to (`split_s` in
raw/rounds/round-<k>.json): starting the workers (imports, the compiler), the cells'
preparation (setup, inputs, compile, warm-up), the bouts' sampling and the pauses between
their turns, the cells' finish (check, memory, record), handing commands over, and the
rest. This prints that split per round and over the run, with sampling's share, for a
finished run (by default this machine's run of config/config.yaml: `make run` first),
then the heavy modules each cell's worker loaded and how long `snakemake -n` takes on a
generated grid of at least 5,000 cells.

    python benchmarks/overhead.py                      # the default run's rounds (results/<machine>)
    python benchmarks/overhead.py --results results/vm
    python benchmarks/overhead.py --smoke              # a two-cell grid through the pipeline (the test suite)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

import yaml
from offloadbench import layout, sandbox
from offloadbench.config import resolve_machine, validate
from offloadbench.grid import expand
from offloadbench.records import load_record, load_round

ROOT = Path(__file__).resolve().parents[1]
GOAL_SAMPLING_SHARE = 0.70
GOAL_DRY_RUN_S = 20.0
# The split's parts, in the order a cell meets them.
PARTS = ("start", "setup", "inputs", "compile", "warm-up", "handover", "sampling", "paused", "check", "memory",
         "record", "other")
NAMES = {"starting": "setup"}  # what the cells' processes call a part, where the table names it otherwise


def small_grid() -> dict:
    return {
        "machine": "overhead",
        "grid": {"ops": ["matmul"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
                 "sizes": [64], "threads": [1]},
        "measure": {"budget_s": 0.1, "warmup_budget_s": 0.05, "min_samples": 6, "processes": 2},
        "analysis": {"bootstrap_resamples": 200},
        "roofs": {"devices": []}, "transfer": {"devices": []},
    }


def big_grid(target_cells: int) -> dict:
    """A grid of at least `target_cells` cells, built by adding sizes."""
    grid = {"ops": ["matmul", "compute_then_plot"], "libraries": ["numpy", "torch"], "devices": ["cpu", "cuda", "mps"],
            "dtypes": ["float16", "bfloat16", "float32", "float64"], "threads": [1, 2, 4, 8, "all"], "sizes": [16]}
    while len(expand(grid)) < target_cells:
        grid["sizes"].append(grid["sizes"][-1] + 16)
    return {"machine": "dryrun", "grid": grid}


def splits(raw: Path) -> list[tuple[str, float, dict[str, float]]]:
    """(round, wall seconds, seconds per part) of every round of a run that recorded its split."""
    found = []
    for kind in ("planned", "extra"):
        for path in layout.round_records(raw, kind):
            record = load_round(path)
            if record.split_s:
                parts: dict[str, float] = {}
                for name, seconds in record.split_s.items():
                    parts[NAMES.get(name, name)] = parts.get(NAMES.get(name, name), 0.0) + float(seconds)
                found.append((path.stem, float(record.took_s or 0.0), parts))
    return found


def print_splits(rows: list[tuple[str, float, dict[str, float]]]) -> float:
    """The split per round and in all; returns sampling's share of the rounds' wall time."""
    shown = [p for p in PARTS if any(parts.get(p) for _, _, parts in rows)]
    extra = sorted({p for _, _, parts in rows for p in parts} - set(PARTS))
    columns = shown + extra
    print("where each round's wall time went (seconds)")
    print("| round | wall | " + " | ".join(columns) + " | sampling share |")
    print("|---|---|" + "---|" * len(columns) + "---|")
    total: dict[str, float] = {}
    wall = 0.0
    for name, took, parts in rows:
        wall += took
        for part, seconds in parts.items():
            total[part] = total.get(part, 0.0) + seconds
        share = parts.get("sampling", 0.0) / took if took > 0 else 0.0
        print(f"| {name} | {took:.1f} | " + " | ".join(f"{parts.get(c, 0.0):.1f}" for c in columns) + f" | {share:.0%} |")
    share = total.get("sampling", 0.0) / wall if wall > 0 else 0.0
    print(f"| all {len(rows)} | {wall:.1f} | " + " | ".join(f"{total.get(c, 0.0):.1f}" for c in columns)
          + f" | {share:.0%} |")
    print(f"sampling: {share:.0%} of the rounds' wall time (goal: at least {GOAL_SAMPLING_SHARE:.0%})")
    return share


def heavy_modules(raw: Path, round_index: int = 1) -> None:
    print()
    print("| cell | heavy modules loaded by its worker |")
    print("|---|---|")
    for path in sorted(raw.rglob(f"p{round_index}.json")):
        if path.parent.name != layout.ROUNDS_DIR and layout.PARTIAL_DIR not in path.parts:
            record = load_record(path)
            if record.ok:
                print(f"| {record.cell.key} | {','.join(record.heavy_modules) or 'none'} |")


def dry_run(workdir: Path, cells_wanted: int) -> None:
    dry = big_grid(cells_wanted)
    cells = len(expand(dry["grid"]))
    start = time.perf_counter()
    result = sandbox.snakemake(workdir, "-n", "--quiet", "all", config=dry)
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    print(f"snakemake -n on {cells} cells: {time.perf_counter() - start:.1f} s (goal: within {GOAL_DRY_RUN_S:g} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "config" / "config.yaml"), help="the run's config file")
    parser.add_argument("--results", help="the run's results folder (default: results/<machine> of the config)")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="offloadbench-overhead-") as tmp:
        workdir = sandbox.copy_workflow(Path(tmp) / "wf")
        if args.smoke:
            result = sandbox.snakemake(workdir, "--until", "aggregate", config=small_grid())
            if result.returncode != 0:
                print(result.stderr[-3000:], file=sys.stderr)
                return 1
            results = workdir / "results" / "overhead"
        else:
            config = validate(yaml.safe_load(Path(args.config).read_text()))
            results = Path(args.results or ROOT / config["results_dir"] / resolve_machine(config))
        rows = splits(results / "raw")
        if not rows:
            raise SystemExit(f"error: no round in {results} recorded its time split: run `make run` first, "
                             "or give --results")
        print_splits(rows)
        heavy_modules(results / "raw")
        print(f"bare imports in a fresh interpreter: numpy+torch {interpreter_s('import numpy, torch'):.2f} s")
        dry_run(workdir, 200 if args.smoke else 5000)
    return 0


def interpreter_s(statement: str) -> float:
    """Seconds a fresh interpreter spends on `statement` beyond starting up (the least of 3)."""
    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    return min(run(statement) for _ in range(3)) - min(run("pass") for _ in range(3))


if __name__ == "__main__":
    sys.exit(main())
