"""pyperf as a second reference: the same single-thread cells measured by the real pipeline
(processes, warm-up, two-level CIs) and by pyperf (20 worker processes by default), with
the environment passed through to pyperf's workers (`--copy-env`), since pyperf strips it
otherwise and its workers then measure another BLAS kernel than the user's environment
selects (OPENBLAS_CORETYPE, say).

For each cell it prints our median and 95% CI, pyperf's mean and standard deviation, and
the seconds each spent (ours: the measuring rounds, extra rounds included; pyperf: its
whole run).

    python benchmarks/pyperf_reference.py            # matmul n = 256 and 1024, sum_rows n = 2048
    python benchmarks/pyperf_reference.py --smoke    # one small cell, few pyperf processes
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from offloadbench import sandbox
from offloadbench.analysis.sources import Source
from offloadbench.units import fmt_duration, fmt_time

ROOT = Path(__file__).resolve().parents[1]
CELLS = [("matmul", 256), ("matmul", 1024), ("sum_rows", 2048)]

# One pyperf benchmark: the op's NumPy implementation on the pipeline's own inputs, on one thread.
PYPERF_SCRIPT = """
import sys
sys.path.insert(0, {package!r})
from threadpoolctl import threadpool_limits
import pyperf
from offloadbench.cells import Cell
from offloadbench.measure.backend import Backend, make_host_inputs
from offloadbench.measure.settings import Settings
from offloadbench.measure.ops import get_op

cell = Cell({op!r}, "numpy", "cpu", "float32", {size}, "1")
op = get_op(cell.op)
backend = Backend(cell, op, Settings())
inputs = make_host_inputs(op, cell, 0)
threadpool_limits(1)
runner = pyperf.Runner()
runner.bench_func(cell.key, lambda: backend.compute(inputs))
"""


def ours(cells, workdir: Path) -> tuple[pd.DataFrame, float]:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    ops = sorted({op for op, _ in cells})
    sizes = sorted({n for _, n in cells})
    config |= {"machine": "pyperf-ref", "grid": {**config["grid"], "ops": ops, "libraries": ["numpy"],
               "devices": ["cpu"], "dtypes": ["float32"], "sizes": sizes, "threads": [1], "modes": ["eager"]},
               "roofs": {"devices": []}, "transfer": {"devices": []}}
    result = sandbox.snakemake(workdir, "--until", "aggregate", config=config)
    if result.returncode != 0:
        raise SystemExit(f"the pipeline failed:\n{result.stderr[-3000:]}")
    folder = workdir / "results" / "pyperf-ref"
    spent = sum(r.took_s or 0.0 for r in Source("pyperf-ref", folder).rounds(("planned", "extra")))
    return pd.read_csv(folder / "timings.csv", dtype={"threads": str}), spent


def pyperf_run(op: str, size: int, folder: Path, processes: int) -> tuple[float, float, int, float]:
    """(mean, standard deviation, values, seconds) of pyperf on one cell."""
    import pyperf

    script = folder / f"{op}-{size}.py"
    script.write_text(PYPERF_SCRIPT.format(package=str(ROOT / "workflow"), op=op, size=size))
    out = folder / f"{op}-{size}.json"
    start = time.perf_counter()
    subprocess.run([sys.executable, str(script), "--copy-env", "--quiet", "-p", str(processes), "-o", str(out)],
                   check=True)
    spent = time.perf_counter() - start
    bench = pyperf.Benchmark.load(str(out))
    return bench.mean(), (bench.stdev() if bench.get_nvalue() > 1 else float("nan")), bench.get_nvalue(), spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one small cell, 3 pyperf processes")
    parser.add_argument("--processes", type=int, default=20, help="pyperf's worker processes")
    args = parser.parse_args(argv)
    cells = [("matmul", 64)] if args.smoke else CELLS
    processes = 3 if args.smoke else args.processes
    with tempfile.TemporaryDirectory(prefix="offloadbench-pyperf-") as tmp:
        workdir = sandbox.copy_workflow(Path(tmp) / "wf")
        timings, our_seconds = ours(cells, workdir)
        print("| cell | ours: median (95% CI) | half-width | pyperf: mean ± sd | sd | ours ÷ pyperf |")
        print("|---|---|---|---|---|---|")
        pyperf_seconds = 0.0
        for op, size in cells:
            row = timings[(timings["op"] == op) & (timings["size"] == size)].iloc[0]
            mean, sd, values, spent = pyperf_run(op, size, Path(tmp), processes)
            pyperf_seconds += spent
            half = (row["ci_high_s"] - row["ci_low_s"]) / 2 / row["median_s"]
            print(f"| {op} n={size} | {fmt_time(row['median_s'])} ({fmt_time(row['ci_low_s'])}–"
                  f"{fmt_time(row['ci_high_s'])}), {int(row['processes'])} processes | ±{half:.1%} | "
                  f"{fmt_time(mean)} ± {fmt_time(sd)} ({values} values) | {sd / mean:.1%} | {row['median_s'] / mean:.3f} |")
        print(f"seconds: ours {fmt_duration(our_seconds)} measuring (all cells); pyperf {fmt_duration(pyperf_seconds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
