"""A worker: the fresh processes that measure the cells of one library, device, thread count
and mode (and twin) in one round, one bout at a time, on the round job's commands.

    python -m offloadbench.jobs.worker --library torch --device cpu --threads-label all --threads 8 \
        --mode eager --events-fd 5 ...

On the CPU each cell runs in a process of its own: the worker imports the libraries, sets
the threads and starts the compiler once, then forks one child per cell, which prepares,
samples and finishes that cell and exits. So every cell starts from the same state, that of
a fresh program that has imported its libraries, whatever the worker measured before: a
NumPy function's speed can depend on what the process allocated earlier (where malloc puts
its temporaries against its input; docs/measuring.md, "Why each cell has a process of its
own"), and a worker that served one cell after another carried that from cell to cell. The
worker itself runs no array code before it forks, so no thread pool is running at the
fork. GPU cells (CUDA and Metal cannot be used across a fork) and hosts without fork are
measured in the worker itself, one after the other.

Commands arrive on stdin; events go back on the file descriptor `--events-fd`, so that
whatever a library prints cannot garble them (the messages are jobs/protocol.py's). Every
command carries a fresh token, and every event answering it carries that token back; the
worker's own events (Ready, Forked, Died) carry the worker's `--token`. The round job counts
nothing else: a line a kernel wrote to the channel, or a `Done` it forged, ends that cell
as a protocol fault. Both channels are read and written on private copies of their
descriptors, so a kernel that closes stdin harms no record; the worker checks the original
descriptors before each answer and names the change (`Fault`).
- `Prepare`: inputs, compile and warm-up (`measure.cell.CellRun.prepare`); answers
  `Prepared`, or, when the cell failed, writes its record and answers `Done`;
- `Turn`: one turn of the bout; answers `Turned` (each region's median over the turn), or
  `Done` when the cell failed;
- `Finish`: the check against float64 and the peak memory (unless `carried` brought them
  from an earlier round), the noise checks, then the record; answers `Done`.
The worker answers a cell's fork with `Forked`, and a cell's process that dies (a signal,
an exit of the user's kernel) with `Died`. What a cell's process prints goes through its
worker, which keeps the first and last 64 KiB of it in the log (jobs/output.py).

Before its first cell the worker reads the process state a kernel can change (threads,
pools, thread variables, NumPy's error state, the working directory, live threads;
measure/process_state.py); after each cell's finish it reads it again. A cell whose code
changed it is an error, with what changed. A worker that measures its cells one after the
other restores what it can, and ends after a cell that left a thread running
(`Done.replace`), so that the next cell gets a fresh worker. Before the first command the
worker answers `Ready` (or `Refusal`). The round job set the thread-count variables before
this process started, so BLAS and OpenMP pools are sized right at import; the counts are
read back and recorded.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from .. import libraries
from ..catalogue import SPECS
from ..cells import COMPILED, MODES, Cell, WorkerSpec
from ..kernels import load_kernels, read_kernel_files
from ..measure import compiled, devices, process_state
from ..measure.provenance import host_facts, utc_now, where
from ..measure.threads import apply_thread_limits, thread_counts
from ..records import CELL_SCHEMA, cell_record, warm_validators, write_json_atomic
from ..run_settings import RunSettings
from .environment import foreign_host, model_name
from .output import CappedOutput, ProcessOutput
from .protocol import (
    Broken,
    ChannelFault,
    Channels,
    CommandReader,
    Died,
    Done,
    Finish,
    Forked,
    Phase,
    Prepare,
    Prepared,
    Ready,
    Refusal,
    Turn,
    Turned,
)

EXIT_REFUSED = 2
# Modules a measuring process should load only when its cells need them (kept in the record).
HEAVY_MODULES = ("torch", "pandas", "seaborn", "matplotlib", "snakemake", "scipy")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Measure cells of one library, device, thread count and mode.")
    parser.add_argument("--library", required=True, choices=libraries.NAMES)
    parser.add_argument("--device", required=True)
    parser.add_argument("--threads-label", required=True, help="the cells' thread label: a count or all")
    parser.add_argument("--threads", type=int, required=True, help="the host threads, resolved by the round job")
    parser.add_argument("--mode", default="eager", choices=MODES)
    parser.add_argument("--twin", action="store_true", help="the second process of a self-comparison")
    parser.add_argument("--setting", default="", help="what its cells set for the whole process (JAX's x64)")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True, help="measure.processes: the planned rounds")
    parser.add_argument("--settings", required=True, help="the run's settings file (run_settings.py)")
    parser.add_argument("--environment", help="environment.json of this machine label")
    parser.add_argument("--kernels", default="[]", help="the config's kernels files as JSON")
    parser.add_argument("--events-fd", type=int, required=True)
    parser.add_argument("--token", default="", help="the token of the worker's own events (ready, forked, died)")
    parser.add_argument("--imported-s", type=float, default=0.0,
                        help="seconds the launcher this worker was forked from spent importing (jobs/launcher.py)")
    parser.add_argument("--compiler-started-s", type=float,
                        help="seconds that launcher spent starting the compiler, which this worker need not")
    return parser.parse_args(argv)


def die_with_parent() -> None:
    """Be killed when the parent process ends (Linux): a worker with its round job, a cell's
    process with its worker, so that a round killed or timed out leaves no process behind,
    a hung cell included."""
    import ctypes

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: not Linux
        return
    if os.getppid() != parent:  # the parent ended before the request took hold
        os._exit(1)


def forks_cells(device: str) -> bool:
    """Whether a worker of `device` measures each cell in a child process of its own: CPU
    cells on hosts with fork (Linux); CUDA and Metal cannot be used across a fork."""
    return device == "cpu" and sys.platform.startswith("linux") and hasattr(os, "fork")


def _interrupted(signum, frame):
    from ..measure.cell import Interrupted

    raise Interrupted()


class Worker:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.channels = Channels(args.events_fd, args.token)
        self.spec = WorkerSpec(args.library, args.device, args.threads_label, args.mode, args.twin, args.setting)
        self.run_settings = RunSettings.read(args.settings)
        self.kernel_paths = json.loads(args.kernels)
        # resolved now: a kernel that changes the working directory moves no later import; a
        # thread running their code is a kernel's
        self.kernel_files = tuple(os.path.abspath(path) for path in self.kernel_paths)
        self.kernel_infos = read_kernel_files(self.kernel_paths, SPECS)  # the source only: cheap
        self.kernels: dict | None = None  # imported at the first kernel cell
        self.torch = None
        self.compiler_startup_s = None
        self.forks = forks_cells(self.spec.device)
        self.runs: dict[str, tuple] = {}  # cell key -> (CellRun, command, started_at, began, prepare_s)
        self.state_before = None  # the process state a cell starts from (measure/process_state.py)
        self.replace = False  # a cell left what cannot be restored: end after it

    def start(self) -> bool:
        """Import the libraries, pin the threads, check the hardware; False if refused."""
        start = time.perf_counter()
        import numpy  # noqa: F401 - timed: part of the process's cost, not a cell's

        library = libraries.get(self.spec.library)
        # torch.compile compiles NumPy code too, and a GPU is watched through torch
        if libraries.needs_torch(library.name, self.spec.compiled, self.spec.device):
            self.torch = devices.import_torch()
        if self.torch is not None or not library.uses_torch:  # the kernels' `xp`: imported once, not per cell
            library.kernel_namespace(library.namespace(self.torch))
        self.import_s = time.perf_counter() - start + self.args.imported_s  # a launcher's imports are its too

        self.threads_info = apply_thread_limits(self.args.threads, self.torch)
        gpu = model_name("cuda", self.torch) if self.spec.device == "cuda" else None
        self.facts = host_facts([gpu] if gpu else None)  # the host's usable cores: before a runtime is bound
        if library.limit_threads is not None:  # a runtime that takes no thread count (XLA): before it starts
            self.threads_info["runtime"] = library.limit_threads(self.args.threads)
        self.where = where()
        refusal = foreign_host(self.args.environment, self.facts["fingerprint"])
        if refusal:
            self.channels.send(Refusal(refusal))
            return False
        from ..measure import cell  # what every cell's process needs, loaded once here
        from ..measure.settings import Settings

        self.cell_settings = Settings.from_run(self.run_settings)
        # cells measured one after the other in this process: bring it to a steady state
        self.warmed_s = None if self.forks else cell.warm_process(self.spec.library, self.torch)
        if self.spec.mode == COMPILED and self.torch is not None:
            if self.args.compiler_started_s is not None:  # its launcher started the compiler
                self.compiler_startup_s = self.args.compiler_started_s
            elif devices.get(self.spec.device, self.torch).compile_reason() is None:
                self.compiler_startup_s = compiled.warm_compiler(self.torch, self.cell_settings, self.spec.device)
        warm_validators(CELL_SCHEMA)  # each cell's process checks its record against it
        self.state_before = process_state.read(self.torch, self.kernel_files)  # what every forked cell starts from
        if self.forks:
            try:
                devices.check_fork_safe(self.torch, f"worker {self.spec.name}")
            except devices.ForkRefused as refused:
                self.channels.send(Broken(str(refused)))  # its cells become errors saying why; no broken child is forked
                return False
        gc.collect()
        gc.freeze()  # the imports' objects live as long as the process: the per-cell collections skip them
        self.channels.send(Ready({"pid": os.getpid(), "import_s": self.import_s, "warm_s": self.warmed_s,
                                  "compiler_startup_s": self.compiler_startup_s,
                                  "threads": self.threads_info.get("effective"), "forks_cells": self.forks}))
        return True

    def user_kernels(self, cell: Cell) -> dict | None:
        """The user's kernels, imported at the first cell that needs them (in a cell's own
        process, so each cell imports them anew); a file that fails to import fails that
        cell, with its message."""
        if cell.op not in self.kernel_infos:
            return None
        if self.kernels is None:
            self.kernels = load_kernels(list(self.kernel_files))
            gc.collect()
            gc.freeze()  # what the kernels files imported lives as long as the process, too
        return self.kernels

    # the commands
    def prepare(self, command: Prepare) -> bool:
        """Get ready for the cell; False when it ended here (its record is written)."""
        from ..measure.cell import CellFailed, CellRun, Progress

        cell = Cell.from_key(command.prepare)
        if not self.forks:  # one cell after another in this process: each from the state now
            self.state_before = process_state.read(self.torch, self.kernel_files)
        artifact = str(Path(command.out).with_suffix(".png")) if command.artifact else None
        progress = Progress(report=lambda phase: self.channels.send(Phase(phase)))
        run = CellRun(cell, self.cell_settings, self.torch, progress, artifact, None, command.memory_scale,
                      command.carried or None)
        started, began = utc_now(), time.perf_counter()
        try:
            run.kernels = self.user_kernels(cell)
        except Exception as error:  # noqa: BLE001 - the user's file: its failure is this cell's record
            with run.failures():
                raise CellFailed("error", f"the kernels files could not be imported: {type(error).__name__}: "
                                          f"{str(error).strip()[:300]}") from None
        ready = not run.failed and run.prepare()
        self.runs[cell.key] = (run, command, started, began, sum(run.progress.spent().values()))
        if ready:
            self.channels.answer(Prepared(cell.key, os.getpid(), len(run.states), run.progress.spent()))
            return True
        self.finish(Finish(cell.key))
        return False

    def turn(self, command: Turn) -> bool:
        """One turn of the cell; False when the cell failed in it (its record is written)."""
        from ..measure.cell import Place

        key = command.turn
        run = self.runs[key][0]
        converged = run.turn(Place(command.cycle, command.position, command.after, command.after_threads,
                                   command.pause_s, tuple(command.siblings)))
        if run.failed:
            self.finish(Finish(key))
            return False
        self.channels.answer(Turned(key, converged, run.turn_medians()))
        return True

    def finish(self, command: Finish) -> None:
        key = command.finish
        run, prepared, started, began, prepare_s = self.runs.pop(key)
        finishing = time.perf_counter()
        outcome = run.finish(command.stop_reason)
        finish_s = time.perf_counter() - finishing
        changed = self.process_changes()
        if changed and outcome.status != "skipped":
            outcome.status = "error"
            outcome.reason = f"its code changed the process: {'; '.join(changed)}"[:400]
        try:  # the thread counts as the cell was measured, read now (a kernel may have changed them)
            threads = {**thread_counts(self.args.threads, self.torch), "at_start": self.threads_info.get("effective"),
                       "runtime": self.threads_info.get("runtime")}
        except Exception:  # noqa: BLE001 - a pool a kernel broke: the worker's reading stands
            threads = self.threads_info
        info = self.kernel_infos.get(run.cell.op)
        effective = threads.get("effective") or 1
        process = {"round": self.args.round, "processes": self.args.processes, "worker": self.spec.name,
                   "pid": os.getpid(), "position": prepared.position, **self.where}
        record = cell_record(
            run.cell, self.args.machine, process,
            status=outcome.status, reason=outcome.reason,
            started_at=started, finished_at=utc_now(),
            provenance=self.facts, settings={**self.run_settings.measure.recorded(), **outcome.settings},
            measured={
                **outcome.measured,
                **({"op_info": info.describe()} if info else {}),
                **({"bout": command.bout} if command.bout else {}),
                "threads": threads,
                "process_state": {"changed": changed},
                "sharing": {"threads": effective, "cores_usable": self.facts["usable_cores"],
                            "shares_cores_with_orchestrator": effective >= (self.facts["usable_cores"] or 1)},
            },
            costs={
                "import_s": self.import_s,
                "compiler_startup_s": self.compiler_startup_s,
                "measure_s": time.perf_counter() - began,
                "prepare_s": prepare_s,
                "finish_s": finish_s,
                "phases_s": run.progress.spent(),
                "own_process": self.forks,
                "heavy_modules_loaded": [m for m in HEAVY_MODULES if m in sys.modules],
            },
        )
        self.channels.check(key)  # else its record would tell a measurement the round job cannot trust
        write_json_atomic(prepared.out, record)
        if not self.forks:  # free the cell's arrays before the next cell (a failed cell's traceback holds them in cycles)
            gc.collect()
            devices.release_memory(run.cell.device, self.torch)
        self.channels.send(Done(key, outcome.status, outcome.reason, run.progress.spent(), self.replace))

    def process_changes(self) -> list[str]:
        """What the cell's code changed in the process, in words; a worker that measures the
        next cell itself puts back what it can, and is replaced where it cannot."""
        changed = process_state.changes(self.state_before, process_state.read(self.torch, self.kernel_files))
        if changed and not self.forks and not process_state.restore(self.state_before, self.torch,
                                                                    self.kernel_files):
            self.replace = True
        return changed

    # serving
    def serve(self) -> int:
        die_with_parent()
        if not self.start():
            return EXIT_REFUSED
        if not self.forks:  # Ctrl-C stops the run; it is no failure of the cell being measured
            signal.signal(signal.SIGINT, _interrupted)
        reader = CommandReader(self.channels.command_fd)
        output = None if self.forks else ProcessOutput()
        while not self.replace and (received := reader.next()) is not None:
            token, command = received
            if not isinstance(command, Prepare):
                continue  # the turn or finish of a cell whose process died: the round job knows already
            if self.forks:
                self.measure_in_child(token, command, reader)
            else:
                self.measure_here(token, command, reader)
                output.end_cell(command.prepare)
        return 0

    def measure_here(self, token: str, command: Prepare, reader: CommandReader) -> None:
        """One cell, from its prepare to its record, on the commands that follow; each
        answer carries its command's token."""
        key = command.prepare
        try:
            self.channels.token = token
            if not self.prepare(command):
                return
            while (received := reader.next()) is not None:
                self.channels.token, command = received
                if isinstance(command, Turn) and command.turn == key:
                    if not self.turn(command):
                        return
                elif isinstance(command, Finish) and command.finish == key:
                    self.finish(command)
                    return
        except ChannelFault:
            return  # said to the round job, which replaces this worker
        finally:
            self.channels.token = self.args.token

    def measure_in_child(self, token: str, command: Prepare, reader: CommandReader) -> None:
        """One cell in a process of its own, forked from this one. What it prints comes
        through this process, capped (jobs/output.py); a child that dies is answered with its
        return code (negative: the signal), as the round job reads one."""
        sys.stdout.flush()
        sys.stderr.flush()
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the cell's process
            code = 0
            try:
                die_with_parent()
                signal.signal(signal.SIGINT, _interrupted)
                os.close(out_r)
                os.dup2(out_w, 1)
                os.dup2(out_w, 2)
                os.close(out_w)
                self.measure_here(token, command, reader)
            except BaseException:  # noqa: BLE001 - the worker answers for it with the exit status
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(out_w)
        self.channels.send(Forked(command.prepare, pid))
        code = CappedOutput(command.prepare).drain(out_r, pid)
        if code != 0:
            self.channels.send(Died(command.prepare, code))


def main(argv: list[str] | None = None) -> int:
    from ..measure.cell import Interrupted

    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        code = Worker(args).serve()
    except Interrupted:  # Ctrl-C: the cell in hand leaves no record, so a rerun measures it
        code = 128 + signal.SIGINT
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every record is written: tearing down torch and the compiler would only cost time


if __name__ == "__main__":
    sys.exit(main())
