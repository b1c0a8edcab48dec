"""Hardware and software provenance, gathered in one place (as pyperf does).

`host_facts` is cheap and torch-free: every record carries it. `environment` adds the GPU
and library details, which devices this machine can use, and the system check, once per
machine label, for `environment.json`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import glob
import itertools
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .. import libraries
from ..cells import usable_cores
from ..machine import fingerprint, host_memory_bytes
from ..records import DOCUMENT_VERSION
from . import compiled, devices, system
from .threads import blas_tuning_env

PACKAGES = ("snakemake", "pandas", "seaborn", "matplotlib", "threadpoolctl", "nvidia-ml-py")


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def _cpuinfo() -> dict[str, str]:
    """/proc/cpuinfo's first processor, key by key ({} where it cannot be read): two CPUs
    of one machine do not differ in what is read of it."""
    found = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in itertools.takewhile(str.strip, handle):
                key, _, value = (part.strip() for part in line.partition(":"))
                found[key] = value
    except OSError:
        pass
    return found


def cpu_model() -> str:
    if model := _cpuinfo().get("model name"):
        return model
    if sys.platform == "darwin":
        try:
            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, timeout=5, check=False,
            ).stdout.strip() or platform.processor()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


CPUINFO_FIELDS = {"vendor_id": "vendor", "cpu family": "family", "model": "model", "stepping": "stepping"}
# The instruction-set extensions that decide how fast vector code runs (x86 and Arm names).
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                "avx512_fp16", "amx_tile", "asimd", "sve", "sve2")


def cpu_identity() -> dict:
    """The CPU's vendor, family, model and stepping, and the vector extensions it has
    (/proc/cpuinfo's first processor; the machine's architecture elsewhere): two CPUs of one
    model name can differ in these, and NumPy and torch dispatch on them."""
    info = _cpuinfo()
    found: dict = {"architecture": platform.machine()}
    found.update({name: int(info[key]) if info[key].isdigit() else info[key]
                  for key, name in CPUINFO_FIELDS.items() if key in info})
    flags = info.get("flags", info.get("Features"))
    if flags is not None:
        found["vector_extensions"] = [flag for flag in VECTOR_FLAGS if flag in flags.split()]
    return found


def numpy_dispatch() -> dict | None:
    """Which of NumPy's SIMD targets its kernels run here: every target in use, and the one
    of each float32 and float64 loop the default grid leans on (numpy.lib.introspect)."""
    try:
        from numpy.lib.introspect import opt_func_info

        info = opt_func_info()
    except Exception:  # noqa: BLE001 - a NumPy before 2.0
        return None
    targets = sorted({t["current"] for loops in info.values() for t in loops.values() if "current" in t})
    loops = {}
    for name in ("sin", "cos", "exp", "add", "multiply", "absolute"):
        for letter, dtype in (("f", "float32"), ("d", "float64")):
            target = info.get(name, {}).get(letter * (3 if name in ("add", "multiply") else 2), {}).get("current")
            if target:
                loops[f"{name} {dtype}"] = target
    return {"targets": targets, "loops": loops}


def cpu_clocks_mhz() -> dict | None:
    """Mean current frequency over the CPUs, where the kernel exposes it."""
    values = []
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"):
        with contextlib.suppress(OSError, ValueError):
            values.append(int(Path(path).read_text(encoding="utf-8")) / 1000)
    return {"mean_mhz": sum(values) / len(values)} if values else None


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def where() -> dict:
    """The host and, under SLURM, the job a process runs in."""
    return {
        "host": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_partition": os.environ.get("SLURM_JOB_PARTITION"),
    }


def host_facts(gpu_names: list[str] | None = None) -> dict:
    """What every record needs to say where it was measured; cheap, no torch."""
    facts = {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "os": platform.platform(),
        "python": platform.python_version(),
        **libraries.versions(),
        "cpu_governor": system.cpu_governor(),
        "blas_env": blas_tuning_env(),
    }
    facts["fingerprint"] = fingerprint(facts["cpu_model"], facts["logical_cores"], gpu_names)
    return facts


def torch_facts(torch) -> dict:
    """GPU and torch build details; `torch` may be None when it is not installed. Each GPU
    with CUDA's index, its PCI address and NVML's index (which differ under
    CUDA_VISIBLE_DEVICES or SLURM's --gres)."""
    if torch is None:
        return {"torch_available": False, "cuda_available": False, "mps_available": False, "gpus": []}
    cuda = devices.get("cuda", torch)
    available = cuda.unavailable_reason() is None
    machine_wide = ("count", "cuda_runtime")  # said once, below
    gpus = [{"index": index, **{k: v for k, v in cuda.describe(index).items() if k not in machine_wide}}
            for index in range(torch.cuda.device_count() if available else 0)]
    mps = devices.get("mps", torch).unavailable_reason() is None
    if mps:
        gpus.append({"index": 0, "name": "Apple MPS", "total_memory_bytes": None})
    return {
        "torch_available": True,
        "torch_version": torch.__version__,
        "torch_cuda_build": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if available and not system.standin_requested() else None,
        "cuda_available": available,
        "standin_gpu": system.standin_requested() and available,
        "mps_available": mps,
        "gpus": gpus,
        "nvidia_driver": (system.nvidia_smi("driver_version")
                          if available and not system.standin_requested() else None),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "torch_cpu_capability": _cpu_capability(torch),
        "tf32_matmul_default": bool(torch.backends.cuda.matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch_parallel_info": torch.__config__.parallel_info(),
    }


def _cpu_capability(torch) -> str | None:
    """The vector instructions torch's eager CPU kernels dispatch to here (AVX512, AVX2, ...)."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - an older torch without it
        return None


def device_availability(torch) -> dict[str, str | None]:
    """Per device, why it cannot be used here (None: it can). Measurement jobs record the
    cells of an unusable device as skipped with this reason, without starting a process."""
    return {device: devices.unavailable_reason(device, torch) for device in ("cpu", "cuda", "mps")}


def compile_availability(torch, usable: dict[str, str | None], probe: set[str] = frozenset()) -> dict[str, str | None]:
    """Per device, why torch.compile cannot generate code for it here (None: it can);
    compiled cells of such a device are skipped with this reason. A GPU in `probe` (the
    grid compiles there) must also compile and run a tiny function (compiled.probe_device)."""
    found = {}
    for device, reason in usable.items():
        on = devices.get(device, torch)
        reason = reason or on.compile_reason()
        if reason is None and on.is_gpu and device in probe:
            reason = compiled.probe_device(on, torch)
        found[device] = reason
    return found


def environment(torch, machine: str, compiled_on: set[str] = frozenset()) -> dict:
    """Everything `environment.json` records about this machine. `compiled_on`: the devices
    the grid compiles on; on the cpu, which vector instructions compiled code uses
    (compiled.vector_isa_probe), on a GPU a probe compile."""
    import numpy
    from threadpoolctl import threadpool_info

    tfacts = torch_facts(torch)
    facts = host_facts([g["name"] for g in tfacts["gpus"]])
    return {
        "schema_version": DOCUMENT_VERSION,
        "machine": machine,
        "captured_at": utc_now(),
        **facts,
        **where(),
        "cpu": cpu_identity(),
        "memory_bytes": host_memory_bytes(),
        "cpu_clocks": cpu_clocks_mhz(),
        "numpy_version": numpy.__version__,
        "numpy_blas": _numpy_blas(numpy),
        "numpy_dispatch": numpy_dispatch(),
        "threadpools": threadpool_info(),
        "thread_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
        **tfacts,
        "devices": (usable := device_availability(torch)),
        "compile_devices": (compilable := compile_availability(torch, usable, set(compiled_on))),
        **({"compile_vec_isa": compiled.vector_isa_probe()} if "cpu" in compiled_on and torch is not None
           and compilable.get("cpu") is None else {}),
        "system": {**(snapshot := system.snapshot()), "advice": system.advice(snapshot)},
        "packages": {name: package_version(name) for name in PACKAGES},
    }


def _numpy_blas(numpy) -> dict | None:
    try:
        config = numpy.show_config(mode="dicts")
    except TypeError:  # numpy < 1.26
        return None
    deps = config.get("Build Dependencies", {}) if isinstance(config, dict) else {}
    blas = deps.get("blas", {})
    return {"name": blas.get("name"), "version": blas.get("version")} if blas else None
