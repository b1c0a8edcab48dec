"""Shared fixtures: synthetic records and tables, and the GPU marker's skip rule."""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: run `make gpu-check` on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


FINGERPRINT = {"cpu_model": "Test CPU", "logical_cores": 4, "gpus": None}


def make_record(op="matmul", library="numpy", device="cpu", dtype="float32", size=256, threads="1",
                median=1e-3, spread=0.01, n=30, status="ok", seed=0, phases=None, reason=""):
    """A record as the measure job writes it, with lognormal samples around `median`."""
    rng = np.random.default_rng(seed)
    samples = (median * np.exp(rng.normal(0, spread, n))).tolist() if status == "ok" else []
    record = {
        "schema_version": 1,
        "cell": {"op": op, "library": library, "device": device, "dtype": dtype, "size": size, "threads": threads},
        "machine": "testbox",
        "status": status,
        "reason": reason,
        "samples_s": samples,
        "calls_per_sample": 1,
        "warmup": {"count": 3, "samples_s": samples[:3]},
        "phases": {},
        "stopping": {"stop_reason": "ci", "converged": True, "rel_ci": 0.01, "n_samples": n, "elapsed_s": 0.1, "rounds": n, "target_rel_ci": 0.02},
        "diagnostics": {"unstable": False, "flags": []},
        "model": {"flops": 2.0 * size**3, "h2d_bytes": 8 * size**2, "d2h_bytes": 4 * size**2, "memory_bytes": 12 * size**2, "itemsize": 4},
        "check": {"rel_err": 1e-7, "tolerance": 1e-5, "passed": True, "rows_checked": 32},
        "device": {"name": "cpu" if device == "cpu" else "Test GPU"},
        "threads": {"requested": 1, "effective": 4 if threads == "all" else int(threads)},
        "settings": {},
        "provenance": {"hostname": "testbox", "cpu_model": "Test CPU", "fingerprint": copy.deepcopy(FINGERPRINT)},
        "started_at": "2026-01-01T00:00:00.000+00:00",
        "finished_at": "2026-01-01T00:00:01.000+00:00",
    }
    for name, phase_median in (phases or {}).items():
        record["phases"][name] = {
            "samples_s": (phase_median * np.exp(rng.normal(0, spread, n))).tolist(),
            "calls_per_sample": 1, "warmup_s": [], "rel_ci": 0.01, "converged": True,
        }
    return record


@pytest.fixture
def record_factory():
    return make_record


@pytest.fixture
def environment_json():
    return {"fingerprint": copy.deepcopy(FINGERPRINT), "hostname": "testbox", "cpu_model": "Test CPU"}


@pytest.fixture
def gpu_tables(record_factory):
    """Tables of a machine with a GPU: numpy and torch on the cpu, torch on cuda, 3 sizes."""
    from offloadbench.aggregate import Analysis, speedups_table, thread_scaling_table, timings_table, transfer_table

    records = []
    for i, size in enumerate((256, 1024, 4096)):
        scale = (size / 256) ** 3
        for threads in ("1", "all"):
            records.append(record_factory(library="numpy", size=size, threads=threads, median=1e-3 * scale / (1 if threads == "1" else 1.8), seed=10 * i + 1))
            records.append(record_factory(library="torch", size=size, threads=threads, median=1.1e-3 * scale / (1 if threads == "1" else 1.8), seed=10 * i + 2, phases={"end_to_end": 1.15e-3 * scale}))
        copies = 2e-4 * (size / 256) ** 2
        compute = 2e-5 * scale
        records.append(record_factory(library="torch", device="cuda", size=size, median=compute, seed=10 * i + 3,
                                      phases={"h2d": copies, "compute": compute, "d2h": copies / 2, "end_to_end": 1.5 * copies + compute}))
    analysis = Analysis(resamples=300)
    return {
        "timings": timings_table(records, "gpubox", analysis),
        "speedups": speedups_table(records, "gpubox", analysis),
        "thread_scaling": thread_scaling_table(records, "gpubox", analysis),
        "transfer": transfer_table([make_transfer_record()], "gpubox", analysis),
    }


def make_transfer_record(device="cuda", link_gbs=63.0, status="ok", reason=""):
    """A sweep record: pinned reaches 50 GB/s, pageable 20 GB/s, small copies pay latency."""
    rng = np.random.default_rng(7)
    points = []
    for memory, peak in (("pageable", 20e9), ("pinned", 50e9)):
        for direction in ("h2d", "d2h"):
            for nbytes in (4096, 2**20, 2**28):
                seconds = 10e-6 + nbytes / peak
                point = {"direction": direction, "memory": memory, "bytes": nbytes, "status": status, "reason": reason}
                if status == "ok":
                    point["samples_s"] = (seconds * np.exp(rng.normal(0, 0.01, 20))).tolist()
                points.append(point)
    return {
        "schema_version": 1, "kind": "transfer", "machine": "gpubox", "device": device,
        "device_name": "Test GPU" if status == "ok" else None,
        "link": {"kind": "PCIe gen 5 x16", "gbs": link_gbs} if status == "ok" else None,
        "points": points, "settings": {},
        "provenance": {"hostname": "gpubox", "cpu_model": "Test CPU"},
        "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:01+00:00",
    }
