"""The host's benchmark lock: no two measurements run at once on one machine, whatever
--cores is and however many workflows or users run."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

LOCK_NAME = "offloadbench-measure.lock"
LOCK_ENV = "OFFLOADBENCH_LOCK"  # another lock file, e.g. for tests that must not wait on real runs


def lock_path() -> Path:
    """One lock file per host, whatever TMPDIR a job gets (SLURM and Snakemake set their own)."""
    override = os.environ.get(LOCK_ENV)
    if override:
        return Path(override)
    shared = Path("/tmp")
    return (shared if shared.is_dir() else Path(tempfile.gettempdir())) / LOCK_NAME


@contextlib.contextmanager
def host_lock(path: Path | None = None):
    """Hold the lock; yields the seconds waited for it."""
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
