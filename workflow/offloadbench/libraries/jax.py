"""JAX: `jax.numpy` op by op (eager), and `jax.jit` as its compiled mode, on the CPU.

What it is not: its arrays cannot be changed, so a kernel that updates its arguments is not
for JAX; under jit, code whose shapes or control flow depend on the values (boolean masks,
`if` on an array) does not trace. Such cells are skipped with the reason.

float64 needs x64, a setting of the whole process: every CPU cell has a process of its own
(forked from its worker before JAX's runtime starts), which enables x64 for a float64 cell
and leaves it off otherwise. The measuring side is measure/xla_backend.py."""

from __future__ import annotations

import os

from .library import Library

WIDE_DTYPES = ("float64", "int64", "uint64", "complex128")


def namespace(torch=None):
    import jax.numpy

    return jax.numpy


def kernel_namespace(lib):
    return lib  # jax.numpy follows the array API


def configure(dtype: str) -> None:
    """JAX on the CPU, with x64 on for a 64-bit dtype and off otherwise. Without the first, a
    GPU host's CUDA jaxlib would put a "cpu" cell's arrays on its GPU; without the second,
    JAX would silently run float64 in float32. Both hold from before the runtime starts."""
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_x64", dtype in WIDE_DTYPES)


def from_host(array, torch=None):
    import jax.numpy as jnp

    return jnp.asarray(array)


def owns(value) -> bool:
    """A JAX array (jaxlib's ArrayImpl, or a tracer under jit), known without importing jax."""
    return any(kind.__module__.split(".")[0] in ("jax", "jaxlib") and kind.__name__ in ("ArrayImpl", "Array")
               for kind in type(value).__mro__)


def _ready(fn):
    return lambda *args: fn(*args).block_until_ready()


def triad(on, b, c, scale: float, torch=None):
    """a = b + s·c, jitted: XLA fuses it into one pass."""
    import jax

    configure(str(b.dtype))
    jb, jc = jax.device_put(b), jax.device_put(c)
    call = _ready(jax.jit(lambda x, y: x + scale * y))
    return (lambda: call(jb, jc)), on.synchronize


def matmul(on, a, b, dtype: str, torch=None):
    import jax
    import jax.numpy as jnp

    configure(dtype)
    ja, jb = (jax.device_put(x).astype(getattr(jnp, dtype)) for x in (a, b))
    call = _ready(jax.jit(jnp.matmul))
    return (lambda: call(ja, jb)), on.synchronize


def limit_threads(count: int) -> dict:
    """XLA sizes its CPU thread pools when its runtime starts, from the cores the process may
    run on, and takes no thread count: so, before it starts, the process is bound to `count`
    cores. With one thread, Eigen's pool is switched off and calls run on the calling
    thread (no asynchronous dispatch: on one core the dispatching thread and the one that
    computes would wait for each other). What was set is recorded."""
    import jax

    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if cores and count < len(cores):
        os.sched_setaffinity(0, cores[:count])
    flags = os.environ.get("XLA_FLAGS", "")
    if count == 1 and "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    jax.config.update("jax_cpu_enable_async_dispatch", count > 1)
    return {"cores": len(os.sched_getaffinity(0)) if cores else None, "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "async_dispatch": count > 1}


LIBRARY = Library(
    name="jax", label="JAX", module_name="jax.numpy", baseline=False, compiler="jax",
    devices=("cpu",), runs_plain_numpy=False,
    unsupported_dtypes={"bfloat16": "bfloat16 inputs are made through torch, which JAX cells do not load"},
    uses_torch=False, tensors=False, drives_devices=False,
    import_s=1.5, pool_spin_s=0.03,  # XLA's pool is bound at start (limit_threads) and blocks, not spins
    namespace=namespace, kernel_namespace=kernel_namespace, from_host=from_host, owns=owns,
    triad=triad, matmul=matmul,
    distribution="jax", source="PyPI (jax with its CPU jaxlib), an extra: requirements-jax.txt",
    requirements="requirements-jax.txt",
    mutable_arrays=False, copies_from_numpy=True, backend="xla", host_peak_method="rss", limit_threads=limit_threads,
)
