"""Restore benchmark: what timing each call alone changes, on functions that update nothing.

A kernel that updates its arguments is timed one call at a time: before each call, what the
last one changed is put back, outside the clock (measure/timing.py, `Region.restore`). Every
other cell is timed in blocks of calls back to back. This benchmark times cells of ops that
update nothing both ways, in fresh processes of their own taking turns A B A B (A: blocks, as
the pipeline times them; B: each call alone, with a restore that puts nothing back, so that
only the way of timing differs), each with the pipeline's own regions, warm-up and sampling.
It prints, per cell, the median over B's processes against A's, with a 95% CI, and whether
the two agree within that CI or 3%.

    python benchmarks/restore.py                    # the default cells, 5 processes each way
    python benchmarks/restore.py --smoke            # two tiny cells (the test suite)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from offloadbench.cells import Cell
from offloadbench.measure.threads import thread_env
from offloadbench.stats import log_t_interval

ROOT = Path(__file__).resolve().parents[1]
CLOSE = 0.03  # the goal: per call within the CI of blocks, or within 3%
CELLS = ("sum_rows/numpy-cpu-float32-n256-t1", "sum_rows/torch-cpu-float32-n256-t1",
         "transcendental/numpy-cpu-float32-n256-t1", "transcendental/torch-cpu-float32-n1024-t1",
         "matmul/numpy-cpu-float32-n256-t1", "matmul/torch-cpu-float32-n256-t1",
         "fft2/numpy-cpu-float32-n256-t1", "fft2/torch-cpu-float32-n1024-t1",
         "heat_step/numpy-cpu-float32-n1024-t1", "heat_step/torch-cpu-float32-n256-t1")
SMOKE = ("sum_rows/numpy-cpu-float32-n64-t1", "sum_rows/torch-cpu-float32-n64-t1")

# One process: the cell's compute region as the pipeline builds it, timed in blocks or each
# call alone; its median seconds per call as JSON.
PROCESS = r"""
import json, sys
from dataclasses import replace
key, per_call, budget = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])
from offloadbench.cells import Cell
from offloadbench.config import validate
from offloadbench.kernels import load_kernels
from offloadbench.measure import devices
from offloadbench.measure.backend import Backend, build_regions, make_host_inputs
from offloadbench.measure.ops import get_op
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import StopRule, collector_off, sample_region, warm_up
cell = Cell.from_key(key)
torch = devices.import_torch() if cell.library == "torch" else None
settings = Settings.from_config(validate({})["measure"], validate({})["compile"])
op = get_op(cell.op, load_kernels([sys.argv[4]]))
backend = Backend(cell, op, settings, torch)
region = build_regions(backend, make_host_inputs(op, cell, 0, torch))["compute"]
if per_call:
    region = replace(region, restore=lambda: None)  # each call alone; nothing to put back
with collector_off():
    warmup = warm_up(region, settings.block, settings.warmup)
    measured = sample_region(region, warmup, StopRule(budget_s=budget, target_rel_ci=0.0, min_sampling_s=budget))
samples = sorted(measured.samples_s)
print(json.dumps({"median_s": samples[len(samples) // 2], "samples": len(samples)}))
"""


def time_once(key: str, per_call: bool, budget: float) -> float:
    """One fresh process: the cell's median seconds per call, timed in blocks or per call."""
    env = {**os.environ, **thread_env(1),
           "PYTHONPATH": str(ROOT / "workflow") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", PROCESS, key, "1" if per_call else "0", str(budget),
                          str(ROOT / "examples" / "kernels.py")],
                         capture_output=True, text=True, env=env, check=False, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the process of {key} failed: {out.stderr.strip().splitlines()[-1:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["median_s"])


def judged(low: float, high: float, value: float) -> str:
    """"inside" (1 within the CI), "within 3%" of 1, or "OFF by x%"."""
    if low <= 1.0 <= high:
        return "inside"
    return "within 3%" if abs(math.log(value)) <= math.log1p(CLOSE) else f"OFF by {math.expm1(abs(math.log(value))):.0%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=5, help="fresh processes each way (at least 3)")
    parser.add_argument("--budget", type=float, default=0.3, help="sampling seconds per process")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    cells = SMOKE if args.smoke else CELLS
    processes, budget = (3, 0.05) if args.smoke else (max(3, args.processes), args.budget)
    print(f"{len(cells)} cells of ops that update nothing, {processes} fresh processes each way, alternating "
          "A B A B (A: blocks of calls, B: each call alone)", flush=True)
    print()
    print("| cell | blocks | each call alone | alone ÷ blocks (95% CI) | |")
    print("|---|---|---|---|---|")
    off = 0
    for key in cells:
        Cell.from_key(key)  # a bad name fails here, before any process
        blocks, alone = [], []
        for k in range(processes):
            for per_call in ((False, True) if k % 2 == 0 else (True, False)):
                (alone if per_call else blocks).append(time_once(key, per_call, budget))
        ratio = log_t_interval([b / a for a, b in zip(blocks, alone, strict=True)])
        verdict = judged(ratio.low, ratio.high, ratio.value)
        off += verdict.startswith("OFF")
        print(f"| {key} | {sorted(blocks)[len(blocks) // 2] * 1e6:.4g} µs | {sorted(alone)[len(alone) // 2] * 1e6:.4g} µs "
              f"| {ratio.value:.3f} ({ratio.low:.3f}–{ratio.high:.3f}) | {verdict} |", flush=True)
    print()
    print(f"cells where timing each call alone is neither inside the CI nor within {CLOSE:.0%}: {off}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
