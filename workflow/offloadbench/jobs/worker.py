"""A worker: one fresh process that measures the cells of one (library, device, threads)
in one round, one cell per command from the round job.

    python -m offloadbench.jobs.worker --worker torch-cpu-tall --events-fd 5 ...

Commands arrive on stdin, one JSON object per line ({"cell", "out", "position"});
events go back on the file descriptor `--events-fd` ({"ready"}, {"phase"}, {"done"},
{"refused"}), so that whatever a library prints cannot garble them. The round job set the
thread-count variables before this process started, so BLAS and OpenMP pools are sized
right at import; the counts are read back and recorded.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

from ..catalogue import SPECS
from ..cells import COMPILED, Cell, resolve_threads
from ..kernels import read_kernel_files
from ..machine import mismatch
from ..records import cell_record, read_json, write_json_atomic
from ..schedule import worker_parts

EXIT_REFUSED = 2
# Modules a measuring process should load only when its cells need them (kept in the record).
HEAVY_MODULES = ("torch", "pandas", "seaborn", "matplotlib", "snakemake", "scipy")


def worker_threads(device: str, threads: str) -> int:
    """Host threads of a worker: the cell's count on the cpu; one host thread drives a GPU."""
    return 1 if device != "cpu" else resolve_threads(threads)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Measure cells of one library, device and thread count.")
    parser.add_argument("--worker", required=True, help="e.g. numpy-cpu-t1, torch-cuda-t1")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True, help="measure.processes: the planned rounds")
    parser.add_argument("--settings", required=True, help="the config's measure section as JSON")
    parser.add_argument("--environment", help="environment.json of this machine label")
    parser.add_argument("--kernels", default="[]", help="the config's kernels files as JSON")
    parser.add_argument("--compile", default="{}", help="the config's compile section as JSON")
    parser.add_argument("--events-fd", type=int, required=True)
    return parser.parse_args(argv)


class Worker:
    def __init__(self, args: argparse.Namespace, events):
        self.args, self.events = args, events
        self.library, self.device, self.threads, self.mode = worker_parts(args.worker)
        self.settings = json.loads(args.settings)
        self.compile_settings = json.loads(args.compile)
        self.kernel_paths = json.loads(args.kernels)
        self.kernel_infos = read_kernel_files(self.kernel_paths, SPECS)  # the source only: cheap
        self.kernels: dict | None = None  # imported at the first kernel cell
        self.torch = None
        self.compiler_startup_s = None

    def send(self, **event) -> None:
        self.events.write(json.dumps(event) + "\n")
        self.events.flush()

    def start(self) -> bool:
        """Import the libraries, pin the threads, check the hardware; False if refused."""
        start = time.perf_counter()
        import numpy  # noqa: F401 - timed: part of the process's cost, not a cell's

        if self.library == "torch" or self.mode == COMPILED:  # torch.compile compiles NumPy code too
            try:
                import torch

                self.torch = torch
            except ImportError:
                self.torch = None
        self.import_s = time.perf_counter() - start

        from ..measure.provenance import host_facts, where
        from ..measure.threads import apply_thread_limits

        self.threads_info = apply_thread_limits(worker_threads(self.device, self.threads), self.torch)
        gpu_names = None
        if self.device == "cuda" and self.torch is not None and self.torch.cuda.is_available():
            gpu_names = [self.torch.cuda.get_device_name(0)]
        self.facts = host_facts(gpu_names)
        self.where = where()
        refusal = self.foreign_hardware()
        if refusal:
            self.send(refused=refusal)
            return False
        from ..measure.cell import Settings, warm_process

        self.warmed_s = warm_process(self.library, self.torch)
        if self.mode == COMPILED and self.torch is not None:
            from ..measure import compiled

            if compiled.unavailable_reason(self.device, self.torch) is None:
                settings = Settings.from_config(self.settings, self.compile_settings)
                self.compiler_startup_s = compiled.warm_compiler(self.torch, settings, self.device)
        gc.collect()
        gc.freeze()  # the imports' objects live as long as the process: the per-cell collections skip them
        self.send(ready={"pid": os.getpid(), "import_s": self.import_s, "warm_s": self.warmed_s,
                         "compiler_startup_s": self.compiler_startup_s, "threads": self.threads_info.get("effective")})
        return True

    def user_kernels(self, cell: Cell) -> dict | None:
        """The user's kernels, imported at the first cell that needs them; a file that fails
        to import fails that cell, with its message."""
        if cell.op not in self.kernel_infos:
            return None
        if self.kernels is None:
            from ..kernels import load_kernels

            self.kernels = load_kernels(self.kernel_paths)
            gc.collect()
            gc.freeze()  # what the kernels files imported lives as long as the process, too
        return self.kernels

    def foreign_hardware(self) -> str | None:
        path = self.args.environment
        if not path or not os.path.exists(path):
            return None
        different = mismatch(read_json(path).get("fingerprint"), self.facts["fingerprint"])
        if different:
            return f"this host's {different} recorded in {path}: choose a new `machine:` label rather than mixing machines"
        return None

    def measure(self, command: dict) -> None:
        from ..measure.cell import CellOutcome, Progress, Settings, run_cell
        from ..measure.provenance import utc_now

        cell = Cell.from_key(command["cell"])
        started, began = utc_now(), time.perf_counter()
        out = Path(command["out"])
        artifact = str(out.with_suffix(".png")) if command.get("artifact") else None
        try:
            kernels = self.user_kernels(cell)
        except Exception as error:  # noqa: BLE001 - the user's file: its failure is this cell's record
            outcome = CellOutcome("error", f"the kernels files could not be imported: {type(error).__name__}: "
                                           f"{str(error).strip()[:300]}")
        else:
            outcome = run_cell(
                cell, Settings.from_config(self.settings, self.compile_settings), self.torch,
                Progress(report=lambda phase: self.send(phase=phase)), artifact, kernels,
                command.get("memory_scale") or {},
            )
        info = self.kernel_infos.get(cell.op)
        effective = self.threads_info.get("effective") or 1
        record = cell_record(
            cell, self.args.machine, self.process(command),
            status=outcome.status, reason=outcome.reason,
            started_at=started, finished_at=utc_now(),
            provenance=self.facts, settings={**self.settings, **outcome.settings},
            measured={
                **outcome.measured,
                **({"op_info": info.describe()} if info else {}),
                "threads": self.threads_info,
                "sharing": {"threads": effective, "cores_usable": self.facts["usable_cores"],
                            "shares_cores_with_orchestrator": effective >= (self.facts["usable_cores"] or 1)},
            },
            costs={
                "import_s": self.import_s,
                "compiler_startup_s": self.compiler_startup_s,
                "measure_s": time.perf_counter() - began,
                "heavy_modules_loaded": [m for m in HEAVY_MODULES if m in sys.modules],
            },
        )
        write_json_atomic(out, record)
        self.release(cell)
        self.send(done=cell.key, status=outcome.status, reason=outcome.reason)

    def process(self, command: dict) -> dict:
        return {
            "round": self.args.round,
            "rounds": self.args.processes,
            "worker": self.args.worker,
            "pid": os.getpid(),
            "position": command.get("position"),
            **self.where,
        }

    def release(self, cell: Cell) -> None:
        """Free the cell's arrays before the next cell, on the host and the device (a failed
        cell's traceback holds them in reference cycles)."""
        gc.collect()
        if self.torch is not None and cell.device == "cuda":
            self.torch.cuda.empty_cache()

    def serve(self) -> int:
        if not self.start():
            return EXIT_REFUSED
        for line in sys.stdin:
            if line.strip():
                self.measure(json.loads(line))
        return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with os.fdopen(args.events_fd, "w", buffering=1) as events:
        return Worker(args, events).serve()


if __name__ == "__main__":
    sys.exit(main())
