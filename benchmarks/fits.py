"""Fits benchmark: is "fits up to n" right? The largest size the report says fits a memory,
against the largest size that really does, under a memory limit this benchmark sets.

For an op of the catalogue, a kernel that makes its own inputs (examples/real_code.py) and a
compiled variant, it:
1. measures the cell at two small sizes as the pipeline does (a fresh process each,
   `measure.cell.run_cell`: its inputs' bytes, what it returns and its peak), and asks the
   analysis (analysis/memory_fit.py) for the largest n whose call fits a machine of
   `--memory` bytes;
2. finds the largest n that really fits by bisection: a fresh process joins a memory cgroup,
   makes the cell's inputs (and for a compiled cell compiles it), gives the float64 draws'
   pages back, then limits the cgroup to `--memory` and calls the function twice; the
   kernel's OOM killer ends one that does not fit (a limit below what it already holds is
   refused: it does not fit either);
3. prints both, and whether the stated size lies within 15% of the real one.

It needs a writable cgroup-v1 memory controller (root on Linux), and says so in one line where
there is none. Nothing else should run meanwhile: the cgroup counts only its own processes,
but a busy machine slows the bisection.

    python benchmarks/fits.py                 # 3 GiB
    python benchmarks/fits.py --memory 2GiB
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

import pandas as pd
from offloadbench.analysis.memory_fit import memory_table
from offloadbench.cells import Cell
from offloadbench.measure.threads import thread_env
from offloadbench.records import Environment
from offloadbench.units import parse_size

ROOT = Path(__file__).resolve().parents[1]
CGROUPS = Path("/sys/fs/cgroup/memory")
CLOSE = 0.15
KERNELS = [str(ROOT / "examples" / "real_code.py"), str(ROOT / "examples" / "kernels.py")]
CASES = (("an op of the catalogue", "transcendental/numpy-cpu-float32-n{n}-t1"),
         ("a kernel that makes its own inputs", "diffuse_3d/numpy-cpu-float32-n{n}-t1"),
         ("a compiled variant", "heat_step/torch-cpu-float32-n{n}-t1-compiled"))
MEASURED_AT = (256, 512)

# 1. One cell measured as a worker measures it: what memory_fit reads from its record.
MEASURE = r"""
import json, sys
from offloadbench.cells import Cell
from offloadbench.config import validate
from offloadbench.kernels import load_kernels
from offloadbench.measure import devices
from offloadbench.measure.cell import run_cell
from offloadbench.measure.settings import Settings
cell = Cell.from_key(sys.argv[1])
torch = devices.import_torch()
settings = Settings.from_config({**validate({})["measure"], "budget_s": 0.05, "warmup_budget_s": 0.05},
                                validate({})["compile"])
out = run_cell(cell, settings, torch, kernels=load_kernels(json.loads(sys.argv[2])))
print(json.dumps({"status": out.status, "reason": out.reason, "memory": out.measured.get("memory"),
                  "model": out.measured.get("model")}))
"""

# 2. The program at one size, in the cgroup: its inputs made, the limit set, two calls. Killed
# by the OOM killer where it does not fit.
PROGRAM = r"""
import ctypes, gc, json, os, sys
cgroup, limit = sys.argv[3], sys.argv[4]
with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
    procs.write(str(os.getpid()))  # every page from here on counts
from offloadbench.cells import Cell
from offloadbench.kernels import load_kernels
from offloadbench.measure import devices
from offloadbench.measure.backend import Backend, make_host_inputs
from offloadbench.measure.ops import get_op
from offloadbench.measure.settings import Settings
cell = Cell.from_key(sys.argv[1])
torch = devices.import_torch()
op = get_op(cell.op, load_kernels(json.loads(sys.argv[2])))
backend = Backend(cell, op, Settings(), torch)
inputs = make_host_inputs(op, cell, 0, torch)
if cell.compiled:
    backend.compute([backend.to_device(x) for x in inputs])  # the compile, before the limit: a program's warm-up
gc.collect()
ctypes.CDLL(None).malloc_trim(0)  # the float64 draws' pages given back
try:
    with open(os.path.join(cgroup, "memory.limit_in_bytes"), "w") as limits:
        limits.write(limit)  # refused where it holds more already
except OSError:
    print("holds more than the limit before its call")
    sys.exit(0)
for _ in range(2):
    result = backend.round_trip(inputs)
    del result
print("fits")
"""


def _env() -> dict:
    return {**os.environ, **thread_env(1),
            "PYTHONPATH": str(ROOT / "workflow") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def measured_row(key: str) -> dict:
    """The timings row memory_fit reads, from one fresh process measuring the cell."""
    cell = Cell.from_key(key)
    out = subprocess.run([sys.executable, "-c", MEASURE, key, json.dumps(KERNELS)], capture_output=True, text=True,
                         env=_env(), check=False, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"measuring {key} failed: {out.stderr.strip().splitlines()[-1:]}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if found["status"] != "ok":
        raise SystemExit(f"{key}: {found['status']}: {found['reason']}")
    model, host = found["model"], found["memory"]["host"]
    return {**cell.as_dict(), "variant": cell.variant, "status": "ok", "peak_host_bytes": host["peak_bytes"],
            "peak_device_bytes": math.nan, "inputs_bytes": model["h2d_bytes"], "result_bytes": model["result_bytes"],
            "inputs_degree": model["inputs_degree"]}


def stated(template: str, memory: int) -> float:
    """The largest n the analysis says fits `memory`, from the cell measured at MEASURED_AT."""
    rows = [measured_row(template.format(n=n)) for n in MEASURED_AT]
    table = memory_table(pd.DataFrame(rows), Environment.from_json({"memory_bytes": memory}), "fits")
    return float(table.iloc[0]["largest_size"])


def fits(key: str, cgroup: Path, memory: int) -> bool:
    """Whether the program at this size ran under the limit."""
    (cgroup / "memory.limit_in_bytes").write_text("-1")  # no limit while the next one makes its inputs
    out = subprocess.run([sys.executable, "-c", PROGRAM, key, json.dumps(KERNELS), str(cgroup), str(memory)],
                         capture_output=True, text=True, env=_env(), check=False, timeout=1800)
    if out.returncode == 0:
        return out.stdout.strip().endswith("fits")
    if out.returncode in (-9, 137) or "MemoryError" in out.stderr or "out of memory" in out.stderr.lower():
        return False
    raise SystemExit(f"the program of {key} failed otherwise ({out.returncode}): {out.stderr.strip()[-300:]}")


def largest_real(template: str, cgroup: Path, memory: int, around: float) -> int:
    """The largest n that runs under the limit, by bisection from around the stated size."""
    low, high = max(16, int(around / 2)), int(around * 2)
    while fits(template.format(n=high), cgroup, memory):
        low, high = high, high * 2
    while not fits(template.format(n=low), cgroup, memory):
        low, high = max(16, low // 2), low
        if low == 16:
            break
    while high - low > max(8, low // 100):
        middle = (low + high) // 2
        low, high = (middle, high) if fits(template.format(n=middle), cgroup, memory) else (low, middle)
    return low


def make_cgroup(memory: int) -> Path:
    if not CGROUPS.is_dir() or not os.access(CGROUPS, os.W_OK):
        raise SystemExit(f"error: no writable cgroup memory controller at {CGROUPS} (run as root on Linux)")
    return Path(tempfile.mkdtemp(prefix="offloadbench-fits-", dir=CGROUPS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", default="3GiB", help="the memory limit: bytes, or with a unit (2GiB)")
    args = parser.parse_args(argv)
    memory = parse_size(args.memory)
    cgroup = make_cgroup(memory)
    try:
        print(f"memory limit {args.memory}; the analysis keeps a tenth of it free, the real process its own "
              f"interpreter and libraries besides; measured at n = {', '.join(map(str, MEASURED_AT))}", flush=True)
        print()
        print("| case | cell | stated: fits up to n | really fits up to n | stated ÷ real | |")
        print("|---|---|---|---|---|---|")
        off = 0
        for what, template in CASES:
            said = stated(template, memory)
            real = largest_real(template, cgroup, memory, said)
            ratio = said / real
            verdict = "within 15%" if abs(ratio - 1) <= CLOSE else f"OFF by {abs(ratio - 1):.0%}"
            off += verdict.startswith("OFF")
            print(f"| {what} | {template.format(n='N')} | {said:,.0f} | {real:,} | {ratio:.3f} | {verdict} |",
                  flush=True)
        print()
        print(f"cases whose stated size is more than {CLOSE:.0%} from the real one: {off}")
    finally:
        with open(CGROUPS / "cgroup.procs", "w") as procs:  # nothing left inside, then the group goes
            procs.writelines((cgroup / "cgroup.procs").read_text().split())
        cgroup.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
