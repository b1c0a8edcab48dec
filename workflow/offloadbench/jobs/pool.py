"""The round's workers: one per library, device, threads and mode (and twin), forked by the
round's launchers (one per set of imports) or started on their own; each is waited for
until it says it is ready, restarted when it is gone, and retired at the round's end. A
worker that cannot start fails only its own cells (`WorkerFailed`), once per round; one that
refuses, as on another machine's label, stops the round (`Refused`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from .. import layout
from ..cells import WorkerSpec
from ..errors import UserError
from ..measure import devices
from ..measure.allocator import allocator_env
from ..measure.provenance import utc_now
from ..measure.threads import thread_env
from ..records import Environment
from ..run_settings import RunSettings
from .launcher import COMPILER, GPU, Launcher, LauncherFailed
from .launcher import available as launcher_available
from .protocol import Broken, ProtocolFault, Ready, Refusal, WorkerProcess, death_reason
from .worker import EXIT_REFUSED


class Refused(UserError):
    """The round must stop without measuring (another machine's label, say)."""


class WorkerFailed(Exception):
    """A worker did not start: its cells get records with `status` and `reason`."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class Workers:
    """The running workers of one round, the launchers they came from, and each worker kind's
    processes (`history`, for the round's record); the seconds spent starting them count in
    `split["start"]`."""

    def __init__(self, args: argparse.Namespace, settings: RunSettings, environment: Environment, raw: Path,
                 split: Counter):
        self.args, self.cold_cache = args, settings.compile.cold_cache
        self.environment, self.raw, self.split = environment, raw, split
        self.timeout_s = settings.measure.timeout_s
        self.allocator_env = allocator_env(settings.measure.allocator)
        self.workers: dict[WorkerSpec, WorkerProcess] = {}
        self.launchers: dict[str, Launcher] = {}  # by what they import: numpy, or torch too
        self.history: dict[str, dict] = {}
        self.broken: dict[WorkerSpec, WorkerFailed] = {}  # workers that did not start, and why

    def start(self, specs) -> None:
        """Start the round's workers: the launchers side by side (their imports take seconds
        each), then the workers, then wait until each is ready."""
        began = time.monotonic()
        ordered = sorted(specs, key=lambda spec: spec.name)
        for launcher in {id(l): l for spec in ordered if (l := self.launcher(spec)) is not None}.values():
            with contextlib.suppress(LauncherFailed):  # said at each of its workers' cells
                launcher.ready()
        launched = []
        for spec in ordered:
            with contextlib.suppress(WorkerFailed):  # kept in self.broken, said at each of its cells
                launched.append(self.start_worker(spec))
        for worker in launched:
            with contextlib.suppress(WorkerFailed):
                self.await_ready(worker)
        self.split["start"] += time.monotonic() - began

    def get(self, spec: WorkerSpec) -> WorkerProcess:
        """The running worker of `spec`, started when it is not running; WorkerFailed when it
        did not start (in this round, once: its later cells are told the same at once)."""
        if spec in self.broken:
            raise self.broken[spec]
        if spec in self.workers and self.workers[spec].proc.poll() is None:
            return self.workers[spec]
        began = time.monotonic()
        try:
            return self.await_ready(self.start_worker(spec))
        finally:
            self.split["start"] += time.monotonic() - began

    def compile_cache_dir(self, name: str) -> str:
        """The compile cache of a compiled worker kind (or the launcher's): one per kind and
        run, under raw/, so the first round compiles as a program's first run does (an empty
        cache) and later rounds reuse what it compiled (compile time is its own phase, never a
        sample)."""
        folder = self.raw / layout.COMPILE_CACHE_DIR / name
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder)

    def worker_env(self, spec: WorkerSpec) -> dict[str, str]:
        """The environment variables a worker of `spec` sets on top of the job's: its threads,
        and a compiled worker's compiler settings."""
        env = thread_env(spec.host_threads)  # the label resolved once, here, for the environment and the worker
        if spec.compiled and self.cold_cache:
            cache = self.compile_cache_dir(spec.name)
            env.update(TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
        if spec.compiled and spec.device == "cpu":
            env.update(self.cpu_compiler_env())
        return env

    def cpu_compiler_env(self) -> dict[str, str]:
        """A compiled CPU worker's compiler (or its launcher's) runs in the process itself, as
        every process's does (devices.ONE_COMPILE_THREAD): a pool of compile processes, and
        the thread that feeds it, cannot cross the fork of each cell's process. Its vector ISA
        checks ran once, in the environment job."""
        env = dict(devices.ONE_COMPILE_THREAD)
        if self.environment.vec_isa_known:
            env["TORCHINDUCTOR_VEC_ISA_OK"] = "1"
        return env

    def launcher(self, spec: WorkerSpec) -> Launcher | None:
        """The round's launcher for `spec`'s imports, started at its first worker (None where
        workers are started on their own). Those of CPU workers never see a GPU, so nothing
        in them can initialise CUDA before they fork; the GPU workers have one of their own."""
        if not launcher_available():
            return None
        imports = GPU if spec.device != "cpu" else COMPILER if spec.compiled else spec.library
        if imports not in self.launchers:
            # every worker sets its own threads; the launcher imports with one, so no pool runs at a fork
            env = {**os.environ, **thread_env(1), **self.allocator_env}
            if imports != GPU:
                env = devices.hide_gpus(env)
            if imports == COMPILER:  # the compiler started there, once, for every compiled CPU worker
                env.update(self.cpu_compiler_env())
                if self.cold_cache:  # a cache of its own
                    env["TORCHINDUCTOR_CACHE_DIR"] = self.compile_cache_dir("launcher")
            self.launchers[imports] = Launcher(imports, env, self.timeout_s, self.args.settings)
        return self.launchers[imports]

    def start_worker(self, spec: WorkerSpec) -> WorkerProcess:
        """Start the worker of `spec`, forked by the round's launcher where there is one (it
        dies with this job, and its cells' processes with it); a launcher that failed is the
        worker's failure."""
        token = secrets.token_hex(8)
        argv = [
            "--token", token, "--library", spec.library, "--device", spec.device, "--threads-label", spec.threads,
            "--threads", str(spec.host_threads), "--mode", spec.mode, *(["--twin"] if spec.twin else []),
            *(["--setting", spec.setting] if spec.setting else []),
            "--machine", self.args.machine, "--round", str(self.args.round), "--processes", str(self.args.processes),
            "--settings", self.args.settings, "--environment", self.args.environment,
            "--kernels", self.args.kernels,
        ]
        launcher = self.launcher(spec)
        if launcher is not None:
            try:
                proc = launcher.spawn(argv, self.worker_env(spec))
            except LauncherFailed as error:
                timed_out = "did not answer" in str(error)
                self.broken[spec] = WorkerFailed("timeout" if timed_out else "error",
                                                 f"its worker did not start: {error}")
                raise self.broken[spec] from None
            events_fd = proc.events_fd
        else:
            events_fd, write_fd = os.pipe()
            env = {**os.environ, **self.worker_env(spec), **self.allocator_env}
            sys.stderr.flush()
            proc = subprocess.Popen([sys.executable, "-m", "offloadbench.jobs.worker", *argv,
                                     "--events-fd", str(write_fd)],
                                    stdin=subprocess.PIPE, stdout=sys.stderr.fileno(), env=env, pass_fds=(write_fd,))
            os.close(write_fd)
        worker = WorkerProcess(spec, proc, os.fdopen(events_fd, "rb", buffering=0), token=token)
        self.workers[spec] = worker
        self.history.setdefault(spec.name, {"processes": []})["processes"].append(
            {"pid": proc.pid, "started_at": utc_now()})
        return worker

    def await_ready(self, worker: WorkerProcess) -> WorkerProcess:
        """Wait for a launched worker's first event; refuse the round where it refused, and
        raise WorkerFailed where it did not start (kept in self.broken)."""
        spec = worker.spec
        timed_out = False
        try:
            received = worker.next_event(time.monotonic() + self.timeout_s)
            timed_out = received is None
        except (EOFError, ProtocolFault):
            received = None
        sender, event = received or (None, None)
        if isinstance(event, Ready) and sender == worker.token:
            self.history[spec.name]["processes"][-1].update(event.ready)
            return worker
        code = worker.kill()
        if isinstance(event, Refusal):
            raise Refused(event.refused)
        if isinstance(event, Broken) and sender == worker.token:  # it cannot measure, and says why
            failed = WorkerFailed("error", f"its worker cannot measure: {event.broken[:300]}")
        elif code == EXIT_REFUSED:
            raise Refused(f"worker {spec.name} refused to start (see the log)")
        elif timed_out:
            failed = WorkerFailed("timeout", f"its worker did not start within the cell time limit of {self.timeout_s:g} s")
        else:
            failed = WorkerFailed("error", f"its worker did not start: {death_reason(code)[1]} (see the log)")
        self.broken[spec] = failed
        raise failed

    def retire(self, workers: list[WorkerProcess]) -> None:
        """End the workers: every command channel closed first, so they all end at once."""
        for worker in workers:
            worker.end_commands()
        for worker in workers:
            worker.close()
            entry = self.history[worker.spec.name]["processes"][-1]
            entry.update(finished_at=utc_now(), cells=worker.cells, returncode=worker.proc.returncode)

    def close(self) -> None:
        """Retire every worker, then close the launchers."""
        self.retire(list(self.workers.values()))
        for launcher in self.launchers.values():
            launcher.close()

    def pids(self, specs) -> list[int]:
        """The pids of the processes measuring for those of these workers that are running,
        each once: a worker's cell's process, where it forked one."""
        return [worker.cell_pid or worker.proc.pid for spec in dict.fromkeys(specs)
                if (worker := self.workers.get(spec)) is not None and worker.proc.poll() is None]
