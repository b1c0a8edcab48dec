"""CPU thread control for one measurement process.

Snakemake exports OMP_NUM_THREADS = the rule's threads, and BLAS pools size themselves at
import, so the count is set twice: in the environment of the worker process before
numpy/torch load, and through threadpoolctl and torch.set_num_threads afterwards. What
took effect is read back.
"""

from __future__ import annotations

import os

THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
POOL_FIELDS = ("prefix", "version", "threading_layer", "architecture", "num_threads")  # kept of each pool
# The environment as the user gave it: threadpoolctl and torch set variables of their own on
# import (e.g. KMP_DUPLICATE_LIB_OK), which are not the user's settings.
STARTUP_ENV = dict(os.environ)
# Variables that change BLAS speed or threading without being thread counts.
BLAS_TUNING_ENV_PREFIXES = ("OPENBLAS_", "OMP_", "MKL_", "GOTO", "KMP_", "BLIS_", "GOMP_")


def thread_env(count: int) -> dict[str, str]:
    """The thread-count variables for a process about to import numpy or torch."""
    return {name: str(count) for name in THREAD_ENV_VARS}


def blas_tuning_env() -> dict[str, str]:
    """BLAS/OpenMP variables other than thread counts, e.g. OPENBLAS_CORETYPE (can move
    NumPy's speed by 40%). Thread counts are set per cell and recorded with the cell."""
    return {
        key: value
        for key, value in sorted(STARTUP_ENV.items())
        if key.startswith(BLAS_TUNING_ENV_PREFIXES)
        and key not in THREAD_ENV_VARS
        and not key.endswith("_NUM_THREADS")
    }


def apply_thread_limits(count: int, torch_module=None) -> dict:
    """Limit every thread pool of this process to `count`; return what took effect."""
    from threadpoolctl import threadpool_limits

    # Kept for the life of the process: one process measures one cell.
    threadpool_limits(limits=count)
    if torch_module is not None:
        torch_module.set_num_threads(count)
    return thread_counts(count, torch_module)


def thread_counts(count: int, torch_module=None) -> dict:
    """The thread counts in effect now, against the `count` requested: each BLAS and OpenMP
    pool's, torch's, and the largest of them (`effective`)."""
    from threadpoolctl import threadpool_info

    pools = [{"library": info.get("internal_api"), **{key: info.get(key) for key in POOL_FIELDS}}
             for info in threadpool_info()]
    effective: dict = {"requested": count, "pools": pools}
    counts = [p["num_threads"] for p in pools if p["num_threads"] is not None]
    if torch_module is not None:
        effective["torch"] = torch_module.get_num_threads()
        counts.append(effective["torch"])
    effective["effective"] = max(counts, default=count)
    return effective
