"""The host's benchmark lock: no two measurements run at once on one machine, whatever
--cores is and however many workflows or users run.

The lock file sits in /tmp, where every user of the host can reach it. So that nobody can
plant a link there and make us create or truncate a file of theirs, it is opened without
following links, created exclusively with mode 0644 (others open it read-only, which is
all flock needs), and refused unless it is a regular file. Its holder writes who it is into
it, so that a waiting run can say whom it waits for, every 30 s, up to its time limit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ..errors import UserError

LOCK_NAME = "offloadbench-measure.lock"
LOCK_ENV = "OFFLOADBENCH_LOCK"  # another lock file, e.g. for tests that must not wait on real runs
DEFAULT_TIMEOUT_S = 6 * 3600  # measure.lock_timeout_s
REPORT_EVERY_S = 30.0
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # POSIX (Linux, macOS) only, as flock is


class LockError(UserError):
    """The lock cannot be taken safely, or not in time; one line says why and what to do."""


def lock_path() -> Path:
    """One lock file per host, whatever TMPDIR a job gets (SLURM and Snakemake set their own)."""
    override = os.environ.get(LOCK_ENV)
    if override:
        return Path(override)
    shared = Path("/tmp")
    return (shared if shared.is_dir() else Path(tempfile.gettempdir())) / LOCK_NAME


def _open_lock(path: Path) -> tuple[int, bool]:
    """(fd, writable): ours to write the holder into, or another user's, read-only."""
    for _ in range(5):  # another process may create or remove it between our calls
        try:
            try:
                fd, writable = os.open(path, os.O_RDWR | _OPEN_FLAGS), True
            except PermissionError:
                fd, writable = os.open(path, os.O_RDONLY | _OPEN_FLAGS), False
        except FileNotFoundError:
            try:
                fd, writable = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o644), True
                os.fchmod(fd, 0o644)  # whatever the umask: others must be able to open it to wait
            except FileExistsError:
                continue
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise LockError(f"the benchmark lock {path} is a symbolic link, which is refused (someone may be "
                                f"trying to hijack it): remove it, or set {LOCK_ENV} to a file of yours") from None
            raise LockError(f"cannot open the benchmark lock {path} ({error.strerror}); set {LOCK_ENV} to a "
                            "file you may open") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LockError(f"the benchmark lock {path} is not a regular file: remove it, or set {LOCK_ENV}")
        return fd, writable
    raise LockError(f"the benchmark lock {path} keeps appearing and vanishing; set {LOCK_ENV} to a file of yours")


def holder_of(fd: int) -> str:
    """Who holds the lock, as its holder wrote it, in words."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "null")
    except (OSError, ValueError):
        info = None
    if not isinstance(info, dict):
        return "held by a process that does not say which"
    words = [f"held by pid {info.get('pid')}"]
    words += [form.format(info[key]) for key, form in (("user", "of {}"), ("label", "({})"), ("since", "since {}"))
              if info.get(key)]
    return " ".join(str(w)[:200] for w in words)


def _write_holder(fd: int, label: str) -> None:
    info = {"pid": os.getpid(), "user": os.environ.get("USER") or str(os.getuid()), "label": label,
            "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)


def _wait(fd: int, path: Path, timeout_s: float, say: Callable[[str], None]) -> None:
    start = time.monotonic()
    next_report, pause = start + REPORT_EVERY_S, 0.05
    while True:
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        now = time.monotonic()
        if now - start >= timeout_s:
            raise LockError(f"gave up after {now - start:.0f} s waiting for the benchmark lock {path}, "
                            f"{holder_of(fd)} (measure.lock_timeout_s is {timeout_s:g})")
        if now >= next_report:
            say(f"waiting {now - start:.0f} s for the benchmark lock {path}, {holder_of(fd)}; "
                f"giving up after {timeout_s:g} s (measure.lock_timeout_s)")
            next_report += REPORT_EVERY_S
        time.sleep(min(pause, max(0.0, start + timeout_s - now)))
        pause = min(0.5, pause * 2)


@contextlib.contextmanager
def host_lock(path: Path | None = None, *, label: str = "", timeout_s: float = DEFAULT_TIMEOUT_S,
              say: Callable[[str], None] | None = None):
    """Hold the lock; yields the seconds waited for it. `label` says who holds it (machine,
    round), `say` receives the waiting lines."""
    path = path or lock_path()
    start = time.perf_counter()
    fd, writable = _open_lock(path)
    try:
        _wait(fd, path, timeout_s, say or (lambda line: print(line, file=sys.stderr, flush=True)))
        try:
            if writable:
                _write_holder(fd, label)
            yield time.perf_counter() - start
        finally:
            if writable:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
