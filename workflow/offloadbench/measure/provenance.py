"""Hardware and software provenance, gathered in one place (as pyperf does).

`host_facts` is cheap and torch-free: every record carries it. `environment` adds the GPU
and library details, which devices this machine can use, and the system check, once per
machine label, for `environment.json`.
"""

from __future__ import annotations

import datetime as _dt
import glob
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata

from ..cells import usable_cores
from ..machine import fingerprint
from ..records import DOCUMENT_VERSION
from . import compiled, devices, system
from .threads import blas_tuning_env

PACKAGES = ("snakemake", "pandas", "seaborn", "matplotlib", "threadpoolctl", "nvidia-ml-py")


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, timeout=5, check=False,
            ).stdout.strip() or platform.processor()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def cpu_clocks_mhz() -> dict | None:
    """Mean current frequency over the CPUs, where the kernel exposes it."""
    values = []
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"):
        try:
            with open(path, encoding="utf-8") as handle:
                values.append(int(handle.read().strip()) / 1000)
        except (OSError, ValueError):
            continue
    if not values:
        return None
    return {"mean_mhz": sum(values) / len(values)}


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
        "numpy": package_version("numpy"),
        "torch": package_version("torch"),
        "cpu_governor": system.cpu_governor(),
        "blas_env": blas_tuning_env(),
    }
    facts["fingerprint"] = fingerprint(facts["cpu_model"], facts["logical_cores"], gpu_names)
    return facts


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def torch_facts(torch) -> dict:
    """GPU and torch build details; `torch` may be None when it is not installed."""
    if torch is None:
        return {"torch_available": False, "cuda_available": False, "mps_available": False, "gpus": []}
    cuda = bool(torch.cuda.is_available())
    gpus = []
    if cuda:
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            gpus.append({
                "index": index,
                "name": props.name,
                "total_memory_bytes": int(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
                "multiprocessors": int(props.multi_processor_count),
            })
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if mps:
        gpus.append({"index": 0, "name": "Apple MPS", "total_memory_bytes": None})
    return {
        "torch_available": True,
        "torch_version": torch.__version__,
        "torch_cuda_build": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "cuda_available": cuda,
        "mps_available": mps,
        "gpus": gpus,
        "nvidia_driver": _nvidia_driver() if cuda else None,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "tf32_matmul_default": bool(torch.backends.cuda.matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch_parallel_info": torch.__config__.parallel_info(),
    }


def device_availability(torch) -> dict[str, str | None]:
    """Per device, why it cannot be used here (None: it can). Measurement jobs record the
    cells of an unusable device as skipped with this reason, without starting a process."""
    return {device: devices.unavailable_reason(device, torch) for device in ("cpu", "cuda", "mps")}


def compile_availability(torch, usable: dict[str, str | None]) -> dict[str, str | None]:
    """Per device, why torch.compile cannot generate code for it here (None: it can);
    compiled cells of such a device are skipped with this reason."""
    return {device: reason or compiled.unavailable_reason(device, torch) for device, reason in usable.items()}


def environment(torch, machine: str, probe_compiler: bool = False) -> dict:
    """Everything `environment.json` records about this machine; with `probe_compiler`, which
    vector instructions compiled code uses on its cpu (compiled.vector_isa_probe)."""
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
        "memory_bytes": _memory_bytes(),
        "cpu_clocks": cpu_clocks_mhz(),
        "numpy_version": numpy.__version__,
        "numpy_blas": _numpy_blas(numpy),
        "threadpools": threadpool_info(),
        "thread_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
        **tfacts,
        "devices": (usable := device_availability(torch)),
        "compile_devices": (compilable := compile_availability(torch, usable)),
        **({"compile_vec_isa": compiled.vector_isa_probe(torch)} if probe_compiler and torch is not None
           and compilable.get("cpu") is None else {}),
        "system": _checked(system.snapshot()),
        "packages": {name: package_version(name) for name in PACKAGES},
    }


def _checked(snapshot: dict) -> dict:
    return {**snapshot, "advice": system.advice(snapshot)}


def _numpy_blas(numpy) -> dict | None:
    try:
        config = numpy.show_config(mode="dicts")
    except TypeError:  # numpy < 1.26
        return None
    deps = config.get("Build Dependencies", {}) if isinstance(config, dict) else {}
    blas = deps.get("blas", {})
    return {"name": blas.get("name"), "version": blas.get("version")} if blas else None
