"""One measurement job: take the host's benchmark lock, measure the cell in a supervised
child process, and always leave a record behind.

The parent imports nothing heavy. It forks before numpy or torch load, so the child can set
its thread counts in the environment first, and a child that hangs past the time limit or
dies (the kernel's OOM killer, a segfault) still yields a `timeout`, `oom` or `error`
record, and the pipeline goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .cells import Cell, resolve_threads
from .records import base_record, write_json_atomic
from .scripting import stderr_to_log, tell

EXIT_REFUSED = 2  # the child refused to measure (message on stderr); write nothing
LOCK_NAME = "offloadbench-measure.lock"
LOCK_ENV = "OFFLOADBENCH_LOCK"  # another lock file, e.g. for tests that must not wait on real runs
# Modules a measuring process should load only when its cell needs them (kept in the record).
HEAVY_MODULES = ("torch", "pandas", "seaborn", "matplotlib", "snakemake", "scipy", "jsonschema")


class Refused(Exception):
    """A user-level problem that must stop the job without writing a record."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Measure one grid cell and write its raw record.")
    parser.add_argument("--op", required=True)
    parser.add_argument("--cell", required=True, help="cell file stem, e.g. numpy-cpu-float32-n256-t1")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--settings", required=True, help="the config's measure section as JSON")
    parser.add_argument("--environment", help="environment.json of this machine label")
    parser.add_argument("--out", required=True)
    parser.add_argument("--log", help="the job's log; without it, stderr stays where it is")
    return parser.parse_args(argv)


def lock_path() -> Path:
    """One lock file per host, whatever TMPDIR a job gets (SLURM and Snakemake set their own)."""
    override = os.environ.get(LOCK_ENV)
    if override:
        return Path(override)
    shared = Path("/tmp")
    return (shared if shared.is_dir() else Path(tempfile.gettempdir())) / LOCK_NAME


@contextlib.contextmanager
def host_lock(path: Path | None = None):
    """Hold the per-host benchmark lock: no two cells are measured at once on one machine,
    whatever --cores is and however many workflows or users run. Yields the seconds waited."""
    path = path or lock_path()
    start = time.perf_counter()
    try:
        import fcntl
    except ImportError:  # Windows: rely on the scheduler alone
        yield 0.0
        return
    # Read-only suffices for flock, so another user's lock file (mode 0666 from us) still works.
    old_umask = os.umask(0)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    finally:
        os.umask(old_umask)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - start
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def thread_count(cell: Cell) -> int:
    # Host threads mean nothing for GPU kernels; one host thread drives the device.
    return 1 if cell.is_gpu else resolve_threads(cell.threads)


def check_same_machine(environment_path: str | None, facts: dict, gpu_names: list[str] | None) -> None:
    """Refuse to add results of this host to a label measured on different hardware."""
    if not environment_path or not os.path.exists(environment_path):
        return
    with open(environment_path, encoding="utf-8") as handle:
        recorded = json.load(handle).get("fingerprint", {})
    mine = {"cpu_model": facts.get("cpu_model"), "logical_cores": facts.get("logical_cores")}
    for key, value in mine.items():
        if recorded.get(key) not in (None, value):
            raise Refused(
                f"this host's {key} is {value!r} but {environment_path} records "
                f"{recorded.get(key)!r}: choose a new `machine:` label rather than mixing machines"
            )
    if gpu_names and recorded.get("gpus") is not None:
        missing = [name for name in gpu_names if name not in recorded["gpus"]]
        if missing:
            raise Refused(
                f"GPU {missing[0]!r} is not among {recorded['gpus']} recorded in {environment_path}: "
                "choose a new `machine:` label"
            )


def measure_in_child(args: argparse.Namespace, cell: Cell, settings: dict, extra: dict, report) -> None:
    """Runs in the child: pin threads, import the libraries, measure, write the record."""
    from .threads import set_thread_env

    threads = thread_count(cell)
    set_thread_env(threads)
    start = time.perf_counter()
    import numpy  # noqa: F401 - timed: part of the job's cost, not the cell's

    torch = None
    if cell.library == "torch":
        try:
            import torch
        except ImportError:
            torch = None
    extra["import_s"] = time.perf_counter() - start

    from .measure import Progress, Settings, run_cell
    from .provenance import host_facts
    from .threads import apply_thread_limits

    extra["threads"] = apply_thread_limits(threads, torch)
    gpu_names = None
    if cell.is_gpu and torch is not None and cell.device == "cuda" and torch.cuda.is_available():
        gpu_names = [torch.cuda.get_device_name(0)]
    check_same_machine(args.environment, host_facts(), gpu_names)
    # Ops that plot leave their last rendering beside the record, for a look at what was timed.
    artifact = str(Path(args.out).with_suffix(".png"))
    record = run_cell(
        cell, args.machine, Settings.from_config(settings), torch, Progress(report=report), extra, artifact
    )
    record["measure_s"] = time.perf_counter() - start - extra["import_s"]
    record["heavy_modules_loaded"] = [m for m in HEAVY_MODULES if m in sys.modules]
    write_json_atomic(args.out, record)


def _child_main(args, cell, settings, extra, write_fd: int, terminal) -> int:
    def report(phase: str) -> None:
        with contextlib.suppress(OSError):
            os.write(write_fd, (phase + "\n").encode())

    try:
        measure_in_child(args, cell, settings, extra, report)
    except Refused as refusal:
        tell(terminal, f"error: cell {cell.label}: {refusal}")
        return EXIT_REFUSED
    except BaseException:  # noqa: BLE001 - a bug, not a cell's failure: keep the traceback in the log
        traceback.print_exc()
        return 1
    return 0


def _supervise(pid: int, read_fd: int, timeout_s: float) -> tuple[int | None, str, bool]:
    """Wait for the child; returns (wait status, last phase, timed out)."""
    deadline = time.monotonic() + timeout_s
    phase, buffer = "starting", b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return status, phase, True
        ready, _, _ = select.select([read_fd], [], [], min(remaining, 1.0))
        if ready:
            chunk = os.read(read_fd, 4096)
            if not chunk:  # child closed the pipe: it is exiting
                _, status = os.waitpid(pid, 0)
                return status, phase, False
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if lines:
                phase = lines[-1].decode(errors="replace")


def _failure_status(wait_status: int) -> tuple[str, str]:
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        if sig == signal.SIGKILL:
            return "oom", "killed by SIGKILL, most likely the kernel's out-of-memory killer"
        return "error", f"the measuring process died from signal {signal.Signals(sig).name}"
    return "error", f"the measuring process exited with status {os.WEXITSTATUS(wait_status)}"


def run(argv: list[str]) -> int:
    args = parse_args(argv)
    with stderr_to_log(args.log) as terminal:
        return _run(args, terminal)


def _run(args: argparse.Namespace, terminal) -> int:
    try:
        cell = Cell.from_stem(args.op, args.cell)
        settings = json.loads(args.settings)
    except (ValueError, json.JSONDecodeError) as error:
        tell(terminal, f"error: {error}")
        return EXIT_REFUSED
    timeout_s = float(settings.get("timeout_s", 600))
    with host_lock() as waited:
        extra = {"lock_wait_s": waited}
        started = _utc_now()
        if not hasattr(os, "fork"):
            return _child_main(args, cell, settings, extra, -1, terminal)
        read_fd, write_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read_fd)
            code = 1
            try:
                code = _child_main(args, cell, settings, extra, write_fd, terminal)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(write_fd)
        wait_status, phase, timed_out = _supervise(pid, read_fd, timeout_s)
        os.close(read_fd)
    if not timed_out and os.WIFEXITED(wait_status):
        code = os.WEXITSTATUS(wait_status)
        if code == 0:
            _tell_failed_cell(args.out, cell, terminal)
        if code in (0, EXIT_REFUSED):
            return code
    if timed_out:
        status, reason = "timeout", f"exceeded the cell time limit of {timeout_s:g} s during {phase}"
    else:
        status, reason = _failure_status(wait_status)
        reason = f"{reason} (during {phase})"
    _write_failure(args, cell, settings, started, status, reason, extra)
    tell(terminal, f"cell {cell.label}: {status}: {reason}")
    return 0


def _tell_failed_cell(record_path: str, cell: Cell, terminal) -> None:
    """A cell that failed (not one merely skipped) is worth a line on the terminal."""
    with open(record_path, encoding="utf-8") as handle:
        record = json.load(handle)
    if record["status"] in ("oom", "error", "timeout"):
        tell(terminal, f"cell {cell.label}: {record['status']}: {record['reason']}")


def _utc_now() -> str:
    from .provenance import utc_now

    return utc_now()


def _write_failure(args, cell: Cell, settings: dict, started: str, status: str, reason: str, extra: dict) -> None:
    from .provenance import fingerprint, host_facts

    facts = host_facts()
    record = base_record(cell.as_dict(), args.machine, settings, started, {**facts, "fingerprint": fingerprint(facts)})
    record.update(extra, status=status, reason=reason, finished_at=_utc_now())
    write_json_atomic(args.out, record)
