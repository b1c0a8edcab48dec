"""JAX: `jax.numpy` op by op (eager), and `jax.jit` as its compiled mode, on the CPU and on
a CUDA GPU.

What it is not: its arrays cannot be changed, so a kernel that updates its arguments is not
for JAX; under jit, code whose shapes or control flow depend on the values (boolean masks,
`if` on an array) does not trace. Such cells are skipped with the reason.

Two settings belong to the whole process and hold from before XLA's runtime starts: the
platform (a "cpu" cell's process sees XLA's CPU only, a "cuda" cell's the GPU), and x64,
without which JAX silently runs float64 in float32. Every CPU cell has a process of its own,
forked from its worker before the runtime starts; a GPU worker measures its cells itself,
so float64 cells get a worker of their own (`process_setting`: "x64"), whose process
enables x64 at its first cell. On a GPU, XLA takes memory as it needs it instead of 75% of
the GPU at its start (XLA_PYTHON_CLIENT_PREALLOCATE=false): torch's workers share the GPU.
The measuring side is measure/xla_backend.py."""

from __future__ import annotations

import os

from .library import Library

WIDE_DTYPES = ("float64", "int64", "uint64", "complex128")


def namespace(torch=None):
    import jax.numpy

    return jax.numpy


def kernel_namespace(lib):
    return lib  # jax.numpy follows the array API


# XLA's platform of each device of ours; the stand-in GPU maps its cuda to XLA's CPU, where
# its cells take every path of ours but the CUDA runtime (tests/standin/standin_gpu.py).
PLATFORMS = {"cpu": "cpu", "cuda": "cuda"}


def process_setting(dtype: str) -> str:
    return "x64" if dtype in WIDE_DTYPES else ""


def _width_and_memory(dtype: str):
    """x64 on for a 64-bit dtype and off otherwise (else JAX silently runs float64 in
    float32), and a GPU's memory taken as needed, should its runtime start: jax itself."""
    import jax

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax.config.update("jax_enable_x64", dtype in WIDE_DTYPES)
    return jax


def configure(dtype: str, device: str = "cpu") -> None:
    """The cell's process on the device's platform only (else a GPU host's CUDA jaxlib would
    put a "cpu" cell's arrays on its GPU), in the dtype's width."""
    _width_and_memory(dtype).config.update("jax_platforms", PLATFORMS[device])


def device_of(device: str):
    """XLA's device of one of ours, in a process configured for it."""
    import jax

    return jax.devices(PLATFORMS[device])[0]


def _roof_device(on, dtype: str):
    """A roof point's XLA device and x64, in the roofs job: one process measures the roofs
    of every device, so the platform stays open and each point's arrays are placed on their
    device (a jitted call runs where its arrays are); x64 is set per point, on fresh arrays
    and a fresh jit."""
    return _width_and_memory(dtype).devices(PLATFORMS[on.name])[0]


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

    where = _roof_device(on, str(b.dtype))
    jb, jc = jax.device_put(b, where), jax.device_put(c, where)
    call = _ready(jax.jit(lambda x, y: x + scale * y))
    return (lambda: call(jb, jc)), on.synchronize


def matmul(on, a, b, dtype: str, torch=None):
    import jax
    import jax.numpy as jnp

    where = _roof_device(on, dtype)
    ja, jb = (jax.device_put(x, where).astype(getattr(jnp, dtype)) for x in (a, b))
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
    devices=("cpu", "cuda"), runs_plain_numpy=False,
    unsupported_dtypes={"bfloat16": "bfloat16 inputs are made through torch, which JAX cells do not load"},
    uses_torch=False, tensors=False, drives_devices=False,
    import_s=1.5, pool_spin_s=0.03,  # XLA's pool is bound at start (limit_threads) and blocks, not spins
    namespace=namespace, kernel_namespace=kernel_namespace, from_host=from_host, owns=owns,
    triad=triad, matmul=matmul,
    distribution="jax", source="PyPI (jax with its CPU jaxlib; a GPU needs jax[cuda13]), an extra: requirements-jax.txt",
    requirements="requirements-jax.txt",
    mutable_arrays=False, copies_from_numpy=True, backend="xla", host_peak_method="rss", limit_threads=limit_threads,
    process_setting=process_setting,
)
