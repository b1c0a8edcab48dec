"""What a cell's code can change in its process that a later cell, or its own record, would
carry: torch's thread count, the BLAS and OpenMP pools, the thread-count variables, NumPy's
error state, the working directory and the Python threads left running.

A worker reads it before each cell and after the cell's finish (jobs/worker.py). A change
is a note in the cell's record and a flag on its numbers: a kernel that calls
`torch.set_num_threads(2)` in a one-thread cell was measured on two threads. Where the
worker measures its cells one after the other (a GPU worker), it restores what it can
before the next cell; a thread still running cannot be stopped, so the worker is replaced.
A CPU cell runs in a process of its own, which ends with the cell.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from .threads import THREAD_ENV_VARS


@dataclass(frozen=True)
class ProcessState:
    torch_threads: int | None
    pools: tuple[tuple[str, int], ...]  # (pool, threads) as threadpoolctl reads them
    thread_env: tuple[tuple[str, str | None], ...]
    numpy_errors: tuple[tuple[str, str], ...]
    cwd: str
    threads: frozenset[int]  # idents of the live Python threads running the user's code


def read(torch=None, code_files: tuple[str, ...] = ()) -> ProcessState:
    """This process's state now (a few hundred microseconds: threadpoolctl reads the pools).
    Threads count where their stack passes through one of `code_files` (the kernels
    files): a thread the compiler or a library keeps is not the cell's."""
    import numpy as np
    from threadpoolctl import threadpool_info

    pools = tuple(sorted((f"{info.get('internal_api')} ({os.path.basename(str(info.get('filepath', '')))})",
                          int(info.get("num_threads") or 0)) for info in threadpool_info()))
    try:
        cwd = os.getcwd()
    except OSError:  # the folder was deleted under the process
        cwd = ""
    return ProcessState(
        torch_threads=torch.get_num_threads() if torch is not None else None,
        pools=pools,
        thread_env=tuple((name, os.environ.get(name)) for name in THREAD_ENV_VARS),
        numpy_errors=tuple(sorted(np.geterr().items())),
        cwd=cwd,
        threads=_threads_in(code_files),
    )


def _threads_in(files: tuple[str, ...]) -> frozenset[int]:
    if not files:
        return frozenset()
    found = set()
    for ident, frame in sys._current_frames().items():  # the only way to a thread's stack
        while frame is not None:
            if frame.f_code.co_filename in files:
                found.add(ident)
                break
            frame = frame.f_back
    return frozenset(found)


def changes(before: ProcessState, after: ProcessState) -> list[str]:
    """What changed, in words, each change once: "torch's thread count: 1 → 2"."""
    found = []
    if before.torch_threads != after.torch_threads:
        found.append(f"torch's thread count: {before.torch_threads} → {after.torch_threads}")
    old, new = dict(before.pools), dict(after.pools)
    most = max(old.values(), default=1)
    for pool in sorted(set(old) | set(new)):
        if pool in old and old[pool] != new.get(pool):
            found.append(f"the {pool} pool's threads: {old[pool]} → {new.get(pool)}")
        elif pool not in old and new[pool] > most:  # a library the code loaded, with a larger pool
            found.append(f"the {pool} pool it loaded has {new[pool]} threads")
    found += [f"{name}: {was} → {now}"
              for (name, was), (_, now) in zip(before.thread_env, after.thread_env, strict=True) if was != now]
    if before.numpy_errors != after.numpy_errors:
        changed = [f"{kind} {was} → {dict(after.numpy_errors)[kind]}" for kind, was in before.numpy_errors
                   if dict(after.numpy_errors).get(kind) != was]
        found.append(f"NumPy's error state: {', '.join(changed)}")
    if before.cwd != after.cwd:
        found.append("the working directory")
    left = len(after.threads - before.threads)
    if left:
        found.append(f"{left} thread{'s' if left > 1 else ''} left running")
    return found


def restore(before: ProcessState, torch=None, code_files: tuple[str, ...] = ()) -> bool:
    """Put back what can be put back; False when something cannot (a thread still running)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    after = read(torch, code_files)
    if torch is not None and before.torch_threads is not None and after.torch_threads != before.torch_threads:
        torch.set_num_threads(before.torch_threads)
    if after.pools != before.pools and before.pools:
        threadpool_limits(limits=min(count for _, count in before.pools) or None)
    for name, value in before.thread_env:
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    np.seterr(**dict(before.numpy_errors))
    if before.cwd and after.cwd != before.cwd:
        os.chdir(before.cwd)
    return not (after.threads - before.threads) and read(torch, code_files).pools == before.pools
