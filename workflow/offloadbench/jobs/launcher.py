"""The launcher: a process that imports the libraries once per round and forks the round's
workers from there, so that a round pays torch's import (about 1.5 s on our 2-core VM)
once, not once per worker. This module holds both sides: the launcher process, and the
round job's handles on it (`Launcher`, `LaunchedProcess`).

    python -m offloadbench.jobs.launcher --imports torch --control-fd 5

A launcher imports what one library's eager CPU workers need, and is named after it
(`numpy`: NumPy's workers never load torch; `torch`), torch with its compiler started (`compiler`: for the compiled CPU workers, which
then share one start of the compiler, its imports and the code it builds for itself, a few
seconds a round), or torch for the GPU workers (`gpu`). The launchers of CPU workers are
started with the GPUs hidden (CUDA_VISIBLE_DEVICES=''), so nothing in them, Dynamo's probes
included, can initialise CUDA: a process forked after that could not use CUDA, and the
compiler's start reads the CUDA random state wherever a GPU is visible. Before each fork a
launcher checks that CUDA is not up in it, and refuses ({"refused": why}) where it is.

The round job (jobs/round.py, `Launcher`) sends each request over the control socket: the
worker's command line and environment as one JSON line, with its command and event pipes
attached (their file descriptors). The launcher forks; the child takes the pipes as its
stdin and event channel, sets the worker's environment (its thread counts, its compiler's
cache) and runs as `python -m offloadbench.jobs.worker` would. The launcher answers
{"started": pid} and, when a worker ends, {"ended": pid, "returncode"} (negative: the
signal), as subprocess.Popen reports one. It never computes anything, so no thread pool
runs at a fork; it ends when the round closes the socket, and dies with the round.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

from .. import libraries
from .protocol import wait_or_kill

REQUEST_BYTES = 1 << 20  # a worker's command line and environment, with room to spare


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fork the round's workers from one process that imported the libraries.")
    parser.add_argument("--imports", choices=IMPORTS, required=True)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--settings", required=True, help="the run's settings file (the compiler's settings)")
    return parser.parse_args(argv)


COMPILER, GPU = "compiler", "gpu"  # the launchers of compiled CPU workers and of GPU workers
IMPORTS = (*libraries.NAMES, COMPILER, GPU)  # else one per library, for its eager CPU workers


def imports_torch(imports: str) -> bool:
    return imports in (COMPILER, GPU) or libraries.get(imports).uses_torch


def import_libraries(imports: str):
    """What every worker of this launcher needs, loaded once: torch (None where it is not
    loaded), and the seconds it took."""
    start = time.perf_counter()
    import numpy  # noqa: F401

    torch = None
    if imports_torch(imports):
        from ..measure.devices import import_torch

        torch = import_torch()  # None: the workers say so, cell by cell
    if imports in libraries.NAMES:  # its module only: no runtime starts before the forks
        libraries.get(imports).namespace(torch)
    from ..measure import cell  # noqa: F401 - the measuring code every worker runs
    from ..records import CELL_SCHEMA, ENVIRONMENT_SCHEMA, warm_validators
    from . import worker  # noqa: F401

    warm_validators(CELL_SCHEMA, ENVIRONMENT_SCHEMA)
    return torch, time.perf_counter() - start


def start_compiler(settings_path: str, torch) -> float | None:
    """The compiler's start, once for every compiled worker (measure.compiled.warm_compiler);
    None where it cannot run here (the workers say why, cell by cell)."""
    if torch is None:
        return None
    from ..measure import compiled, devices
    from ..measure.settings import Settings
    from ..run_settings import RunSettings

    if devices.get("cpu", torch).compile_reason() is not None:
        return None
    return compiled.warm_compiler(torch, Settings.from_run(RunSettings.read(settings_path)))


def run_worker(request: dict, command_fd: int, events_fd: int, imported_s: float,
               compiler_s: float | None) -> int:
    """In the forked child: become the worker the request describes."""
    from . import worker

    os.dup2(command_fd, 0)
    os.close(command_fd)
    os.environ.update(request["env"])
    argv = [*request["argv"], "--events-fd", str(events_fd), "--imported-s", f"{imported_s:.6f}"]
    if compiler_s is not None:
        argv += ["--compiler-started-s", f"{compiler_s:.6f}"]
    return worker.main(argv)


def serve(control: socket.socket, imported_s: float, compiler_s: float | None, torch=None) -> int:
    from ..measure import devices

    ended_r, ended_w = os.pipe()  # SIGCHLD wakes the loop
    os.set_blocking(ended_w, False)
    signal.set_wakeup_fd(ended_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    live: set[int] = set()
    while True:
        ready, _, _ = select.select([control, ended_r], [], [])
        if ended_r in ready:
            os.read(ended_r, 4096)
            reap(control, live)
        if control in ready:
            message, fds, _, _ = socket.recv_fds(control, REQUEST_BYTES, 2)
            if not message:
                return 0  # the round job is done
            try:
                devices.check_fork_safe(torch, "launcher")
                answer = {"started": os.fork()}
            except devices.ForkRefused as refused:
                answer = {"refused": str(refused)}
            if answer.get("started") == 0:  # the forked child: it becomes the worker
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(ended_r)
                os.close(ended_w)
                control.close()
                code = 1
                try:
                    code = run_worker(json.loads(message), fds[0], fds[1], imported_s, compiler_s)
                finally:
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            if "started" in answer:
                live.add(answer["started"])
            control.send(json.dumps(answer).encode())


def reap(control: socket.socket, live: set[int]) -> None:
    """Report every worker that has ended."""
    for pid in list(live):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            live.discard(pid)
            control.send(json.dumps({"ended": pid, "returncode": os.waitstatus_to_exitcode(status)}).encode())


def main(argv: list[str] | None = None) -> int:
    from .worker import die_with_parent

    args = parse_args(sys.argv[1:] if argv is None else argv)
    die_with_parent()
    control = socket.socket(fileno=args.control_fd)
    torch, imported_s = import_libraries(args.imports)
    compiler_s = start_compiler(args.settings, torch) if args.imports == COMPILER else None
    import gc

    gc.collect()
    gc.freeze()  # what the imports made lives as long as every worker: their collections skip it
    control.send(json.dumps({"ready": imported_s}).encode())
    code = serve(control, imported_s, compiler_s, torch)
    os._exit(code)


# --- the round job's side ---------------------------------------------------------------


def available() -> bool:
    """Whether workers can be forked from a launcher here (Linux); elsewhere each is started
    on its own."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


class LauncherFailed(RuntimeError):
    """The launcher did not start, or ended while the round needed it."""


class Launcher:
    """A running launcher, as the round job holds it."""

    def __init__(self, imports: str, env: dict[str, str], timeout_s: float, settings_path: str):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control, self.timeout_s, self.imports = ours, timeout_s, imports
        self.gpus_hidden = env.get("CUDA_VISIBLE_DEVICES") == ""
        self.ended: dict[int, int] = {}  # pid -> return code of each worker that ended
        self.imported_s: float | None = None
        self.failed: LauncherFailed | None = None
        self.refusals: list[str] = []
        sys.stderr.flush()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "offloadbench.jobs.launcher", "--imports", imports,
             "--control-fd", str(theirs.fileno()), "--settings", settings_path],
            env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), pass_fds=(theirs.fileno(),))
        theirs.close()

    def as_dict(self) -> dict:
        """What the round's record keeps of it: whether the GPUs were hidden from it, and
        every fork it refused because CUDA was up in it."""
        return {"imports": self.imports, "pid": self.proc.pid, "gpus_hidden": self.gpus_hidden,
                "import_s": self.imported_s, "refused": self.refusals}

    def ready(self) -> None:
        """Wait until the libraries are imported (the seconds they took: `imported_s`)."""
        if self.failed is not None:  # said once: every later worker of it fails at once
            raise self.failed
        if self.imported_s is None:
            try:
                message = self._next(("ready",), time.monotonic() + self.timeout_s)
            except LauncherFailed as error:
                self.failed = error
                self.proc.kill()
                raise
            self.imported_s = float(message["ready"])

    def spawn(self, argv: list[str], env: dict[str, str]) -> LaunchedProcess:
        """Fork a worker with these arguments (after `python -m offloadbench.jobs.worker`) and
        environment variables; its pipes are made here."""
        self.ready()
        command_r, command_w = os.pipe()
        events_r, events_w = os.pipe()
        try:
            try:
                socket.send_fds(self.control, [json.dumps({"argv": argv, "env": env}).encode()], [command_r, events_w])
            except OSError as error:
                raise LauncherFailed(f"the {self.imports} launcher is gone ({error})") from None
            answer = self._next(("started", "refused"), time.monotonic() + self.timeout_s)
        finally:
            os.close(command_r)
            os.close(events_w)
        if "refused" in answer:
            self.refusals.append(str(answer["refused"])[:300])
            raise LauncherFailed(self.refusals[-1])
        return LaunchedProcess(self, int(answer["started"]), os.fdopen(command_w, "wb"), events_r)

    def _next(self, kinds: tuple[str, ...], deadline: float) -> dict:
        """The next message of one of `kinds`, recording the workers that ended on the way."""
        while True:
            message = self._receive(deadline)
            if message is None:
                raise LauncherFailed(f"the {self.imports} launcher did not answer within {self.timeout_s:g} s")
            if any(kind in message for kind in kinds):
                return message

    def _receive(self, deadline: float) -> dict | None:
        remaining = max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([self.control], [], [], remaining)
        if not ready:
            return None
        data = self.control.recv(65536)
        if not data:
            code = self.proc.wait()
            raise LauncherFailed(f"the {self.imports} launcher ended (status {code}; see the log)")
        message = json.loads(data)
        if "ended" in message:
            self.ended[int(message["ended"])] = int(message["returncode"])
        return message

    def returncode(self, pid: int, wait_s: float = 0.0) -> int | None:
        """The worker's return code once it has ended (None: still running after `wait_s`)."""
        deadline = time.monotonic() + wait_s
        while pid not in self.ended:
            if self._receive(deadline) is None:
                return None
        return self.ended[pid]

    def close(self) -> None:
        """End the launcher: its workers have ended, or die with it."""
        self.control.close()
        wait_or_kill(self.proc)


class LaunchedProcess:
    """A worker forked by a launcher, with what the round job uses of subprocess.Popen."""

    def __init__(self, launcher: Launcher, pid: int, stdin, events_fd: int):
        self.launcher, self.pid, self.stdin, self.events_fd = launcher, pid, stdin, events_fd
        self.returncode: int | None = None

    def poll(self, wait_s: float = 0.0) -> int | None:
        if self.returncode is None:
            self.returncode = self.launcher.returncode(self.pid, wait_s)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.poll(1e9 if timeout is None else timeout) is None:
            raise subprocess.TimeoutExpired("offloadbench.jobs.worker", timeout)
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
