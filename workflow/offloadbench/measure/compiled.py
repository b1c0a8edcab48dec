"""Compiled cells: torch.compile of a cell's code, what the compile cost, and what it did.

numpy compiled is torch.compile of the unchanged NumPy function: TorchDynamo traces the
NumPy calls into torch ops and Inductor compiles them (C++/OpenMP on the CPU, Triton
kernels on a GPU), NumPy arrays in and out. On a GPU it has two forms, like torch:
device-resident, the function wrapped with `torch.compiler.wrap_numpy` so that it takes
and returns device tensors; and end to end, the plain function called under
`torch.device(...)`, host arrays in and out (both made by the device seam,
measure/devices.py). torch compiled is torch.compile of the torch code.

The first call of a compiled function compiles it: it is timed as its own phase and never
becomes a sample. Dynamo's counters tell the graphs it captured, the graph breaks (each
one a piece of the function that runs uncompiled, in NumPy or Python, on every call) with
their first reason, and recompiles during sampling. torch is passed in, never imported here.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .timing import Region

COMPILER_STARTUP_SIZE = 64
# Compile modes that record CUDA graphs on a GPU: a call's outputs live in the graph's memory
# pool, and the next call overwrites them ("accessing tensor output of CUDAGraphs that has been
# overwritten by a subsequent run"). What a cell keeps past the next call, it clones.
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def vector_isa_probe() -> dict:
    """Which vector instructions Inductor's C++ code uses on this cpu, found the slow way (it
    compiles and runs a small test per instruction set, seconds each, once per cache) and
    the fast way (the cpu's flags alone). Where they agree, the workers may skip the slow
    checks (TORCHINDUCTOR_VEC_ISA_OK=1): a program pays them once per machine, not per run."""
    import tempfile

    try:
        from torch._inductor import config
        from torch._inductor.cpu_vec_isa import pick_vec_isa, supported_vec_isa_list, x86_isa_checker

        with tempfile.TemporaryDirectory(prefix="offloadbench-isa-") as cache, \
                config.patch({"cpp.vec_isa_ok": None}):
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
            picked = str(pick_vec_isa())
            flags = x86_isa_checker()
            unchecked = next((str(isa) for isa in supported_vec_isa_list
                              if all(flag in flags for flag in str(isa).split())), "")
    except Exception as error:  # noqa: BLE001 - no probe: the workers check as Inductor does
        return {"picked": None, "unchecked": None, "reason": short_reason(str(error))}
    finally:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    return {"picked": picked, "unchecked": unchecked}


def probe_device(device, torch) -> str | None:
    """Compile and run a tiny function on a GPU (`device`, the seam's): a compiler that loads
    but cannot build code there (a broken Triton, an Inductor without the backend) shows
    here, once per machine, so that its cells are skipped with the reason instead of each
    failing. None when it compiled and gave the right result."""
    try:
        x = torch.linspace(-1.0, 1.0, COMPILER_STARTUP_SIZE)
        fn = device.compiled(torch.compile(lambda a: a * 2.0 + 1.0, dynamic=False))
        result = device.to_host(fn(device.to_device(x)))
        right = bool(torch.allclose(result, x * 2.0 + 1.0))
    except Exception as error:  # noqa: BLE001 - whatever fails, the compiled cells cannot run
        return f"torch.compile cannot build code for {device.name} here: {short_reason(str(error)) or type(error).__name__}"
    finally:
        torch._dynamo.reset()
    return None if right else f"torch.compile's code for {device.name} gives a wrong result here"


def _dynamo_counters() -> dict:
    from torch._dynamo.utils import counters

    return {"graphs": int(counters["stats"].get("unique_graphs", 0)), "breaks": dict(counters["graph_break"]),
            "hits": int(counters["inductor"].get("fxgraph_cache_hit", 0)),
            "misses": int(counters["inductor"].get("fxgraph_cache_miss", 0))}


@dataclass
class CompileWatch:
    """Dynamo's counters since the watch was made: what one compiled cell did (the counters
    are process-wide and survive `torch._dynamo.reset()`, so differences are taken)."""

    start: dict = field(default_factory=_dynamo_counters)

    def since(self) -> dict:
        now = _dynamo_counters()
        breaks = {reason: count - self.start["breaks"].get(reason, 0) for reason, count in now["breaks"].items()}
        breaks = {reason: count for reason, count in breaks.items() if count > 0}
        first = next(iter(breaks), "")
        return {"graphs": now["graphs"] - self.start["graphs"], "graph_breaks": sum(breaks.values()),
                "first_break": short_reason(first), "cache_hits": now["hits"] - self.start["hits"],
                "cache_misses": now["misses"] - self.start["misses"]}


def short_reason(reason: str) -> str:
    """A graph break's reason in one line: its title and explanation."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    text = lines[0]
    if len(lines) > 1 and lines[1].startswith("Explanation:"):
        text += ": " + lines[1].removeprefix("Explanation:").strip()
    return text[:300]


def fallback_of(found: dict) -> str:
    """What of the function did not compile, in words ('' when all of it did)."""
    if found["graphs"] == 0:
        why = f" ({found['first_break']})" if found["first_break"] else ""
        return f"nothing compiled: Dynamo captured no graph and ran the function as plain Python{why}"
    if found["graph_breaks"]:
        return (f"{found['graph_breaks']} graph break(s): part of the function runs uncompiled on every call "
                f"(first: {found['first_break']})")
    return ""


def compile_function(fn: Callable, torch, settings, device=None) -> Callable:
    """torch.compile of `fn` with the configured backend and mode (as the device takes it),
    shapes static: each cell compiles for its own size, as code with arrays of one size does."""
    options = {"backend": settings.compile_backend, "dynamic": False}
    mode = device.compile_mode(settings.compile_mode) if device is not None else settings.compile_mode
    if mode != "default":
        options["mode"] = mode
    return torch.compile(fn, **options)


def timed_first_call(fn: Callable, args, sync: Callable[[], object]) -> float:
    """Seconds of the first call: the compile, plus one run."""
    return Region("first call", lambda: fn(*args), sync).time_block(1)


def warm_compiler(torch, settings, device: str = "cpu") -> float:
    """Start the compiler before a worker's first cell: its imports and the one-time code it
    builds (headers, runtime) cost seconds once per process. Without this, the worker's
    first compiled cell would carry that cost and the others not; the record keeps it as
    the worker's compiler start-up, which a process's first compile pays. A GPU worker
    starts its device's compiler only (through the device seam): its cells never compile
    for the CPU, so no failure there can keep its own compiler from starting."""
    import numpy as np

    from . import devices

    start = time.perf_counter()
    x = np.linspace(-1.0, 1.0, COMPILER_STARTUP_SIZE, dtype=np.float32)
    on = devices.get(device, torch)
    with contextlib.suppress(Exception):  # a broken compiler shows in the cells, with its reason
        if on.is_gpu:
            on.compiled(compile_function(on.wrap_numpy(lambda a: a * 2.0 + 1.0), torch, settings, on))(
                on.to_device(torch.from_numpy(x)))
        else:
            compile_function(lambda a: a * 2.0 + 1.0, torch, settings)(x)
    torch._dynamo.reset()
    return time.perf_counter() - start
