"""Shared fixtures: synthetic records and tables, and the skip rules of the gpu and slurm marks."""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

STANDIN_DIR = str(Path(__file__).resolve().parent / "standin")


def pytest_configure(config):
    """Inductor compiles in this process, as in every process of a run, and with
    OFFLOADBENCH_STANDIN_GPU set this process's torch gets the stand-in GPU, before any test
    module loads torch (measure.devices.import_torch does both). The stand-in lives in
    tests/standin/, on the path of this process (pyproject.toml) and of every process a test
    starts."""
    from offloadbench.measure import devices, system

    os.environ.update(devices.ONE_COMPILE_THREAD)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [STANDIN_DIR, os.environ.get("PYTHONPATH")]))
    if system.standin_requested():
        devices.import_torch()


@functools.lru_cache(maxsize=1)
def gpu_at_hand() -> str | None:
    """Which GPU the gpu tests run on here: "cuda" (a real one), "stand-in", or None."""
    from offloadbench.measure import system

    if system.standin_requested():
        return "stand-in"
    try:
        import torch
    except ImportError:
        return None
    return "cuda" if torch.cuda.is_available() else None


def pytest_collection_modifyitems(config, items):
    """gpu tests need a GPU, a real one or the stand-in; standin tests the stand-in. `make
    test` runs both in a session of their own with OFFLOADBENCH_STANDIN_GPU=1."""
    at_hand = gpu_at_hand()
    for item in items:
        if "standin" in item.keywords and at_hand != "stand-in":
            item.add_marker(pytest.mark.skip(reason="needs the stand-in GPU: OFFLOADBENCH_STANDIN_GPU=1 (make test)"))
        elif "gpu" in item.keywords and at_hand is None:
            item.add_marker(pytest.mark.skip(reason="needs a GPU: make test runs these on the stand-in, "
                                                    "make gpu-check on a real one"))


FINGERPRINT = {"cpu_model": "Test CPU", "logical_cores": 4, "gpus": None}


def make_record(op="matmul", library="numpy", device="cpu", dtype="float32", size=256, threads="1",
                median=1e-3, spread=0.01, n=30, status="ok", seed=0, phases=None, reason="",
                round=1, rounds=1, shares_cores=False):
    """A record as a worker writes it, with lognormal samples around `median`."""
    rng = np.random.default_rng(seed)
    samples = (median * np.exp(rng.normal(0, spread, n))).tolist() if status == "ok" else []
    record = {
        "schema_version": 3,
        "cell": {"op": op, "library": library, "device": device, "dtype": dtype, "size": size, "threads": threads},
        "machine": "testbox",
        "process": {"round": round, "processes": rounds, "worker": f"{library}-{device}-t{threads}", "pid": 100 + round,
                    "position": 1, "host": "testbox", "slurm_job_id": None},
        "status": status,
        "reason": reason,
        "samples_s": samples,
        "calls_per_sample": 1,
        "warmup": {"count": 3, "samples_s": samples[:3]},
        "phases": {},
        "stopping": {"stop_reason": "ci", "converged": True, "rel_ci": 0.01, "n_samples": n, "elapsed_s": 0.1, "sweeps": n, "target_rel_ci": 0.02},
        "diagnostics": {"unstable": False, "flags": []},
        "model": {"flops": 2.0 * size**3, "traffic_bytes": 12 * size**2, "h2d_bytes": 8 * size**2, "d2h_bytes": 4 * size**2, "itemsize": 4},
        "check": {"rel_err": 1e-7, "tolerance": 1e-5, "passed": True, "rows_checked": 32},
        "memory": {"host": {"peak_bytes": 4 * size * size, "method": "tracemalloc", "rss_hwm_bytes": 0},
                   **({"device": {"peak_bytes": 8 * size * size, "method": "torch.cuda.max_memory_allocated"}}
                      if device != "cpu" else {})},
        "device": {"name": "cpu" if device == "cpu" else "Test GPU"},
        "threads": {"requested": 1, "effective": 4 if threads == "all" else int(threads)},
        "sharing": {"threads": 4 if threads == "all" else int(threads), "cores_usable": 4, "shares_cores_with_orchestrator": shares_cores},
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


def typed(records: list[dict]) -> list:
    """Records as the readers turn them into typed objects (records.CellRecord), version shims included."""
    from offloadbench.records import CellRecord

    return [CellRecord.from_json(r) for r in records]


def group_typed(records: list[dict], *args, **kwargs):
    """analysis.measured.group_records of records written as dicts (make_record)."""
    from offloadbench.analysis.measured import group_records

    return group_records(typed(records), *args, **kwargs)


def make_processes(processes=3, process_spread=0.0, seed=0, **cell):
    """One record per process of one cell, each process's median moved by its own effect."""
    rng = np.random.default_rng(seed + 7919)
    records = []
    for k in range(1, processes + 1):
        effect = float(np.exp(rng.normal(0, process_spread))) if process_spread else 1.0
        phases = {name: value * effect for name, value in (cell.get("phases") or {}).items()}
        args = {**cell, "median": cell.get("median", 1e-3) * effect, "phases": phases}
        records.append(make_record(**args, seed=seed * 100 + k, round=k, rounds=processes))
    return records


@pytest.fixture
def record_factory():
    return make_record


@pytest.fixture
def environment_json():
    return {"fingerprint": copy.deepcopy(FINGERPRINT), "hostname": "testbox", "cpu_model": "Test CPU"}


def tables_of(records: list[dict], machine: str, transfer: list[dict] | None = None, resamples: int = 300,
              environment: dict | None = None) -> dict:
    from offloadbench.analysis.decisions import decision_tables
    from offloadbench.analysis.measured import Analysis
    from offloadbench.analysis.memory_fit import memory_table
    from offloadbench.analysis.tables import (
        controls_table,
        flags_table,
        resident_table,
        speedups_table,
        states_table,
        thread_scaling_table,
        timings_table,
        transfer_table,
    )
    from offloadbench.records import DeviceRecord, Environment

    analysis = Analysis(resamples=resamples)
    cells = group_typed(records, analysis)
    transfer = [DeviceRecord.from_json(r) for r in transfer or []]
    environment = Environment.from_json(environment) if isinstance(environment, dict) else environment
    timings, speedups = timings_table(cells, machine), speedups_table(cells, machine)
    decisions, decision_sizes, losses = decision_tables(speedups, timings, analysis.judging, machine)
    return {
        "timings": timings,
        "speedups": speedups,
        "thread_scaling": thread_scaling_table(cells, machine),
        "decisions": decisions,
        "decision_sizes": decision_sizes,
        "losses": losses,
        "controls": controls_table(cells, machine),
        "memory": memory_table(timings, environment, machine),
        "resident": resident_table(cells, machine),
        "states": states_table(cells, machine),
        "flags": flags_table(cells, machine),
        "transfer": transfer_table(transfer, machine, analysis),
    }


def gpu_machine_records(processes: int = 2) -> list[dict]:
    """numpy and torch on the cpu (1 thread and all), torch on cuda, at 3 sizes."""
    records = []
    for i, size in enumerate((256, 1024, 4096)):
        scale = (size / 256) ** 3
        for threads in ("1", "all"):
            speed = 1 if threads == "1" else 1.8
            records += make_processes(processes, seed=10 * i + 1 + (threads == "all") * 5, library="numpy",
                                      size=size, threads=threads, median=1e-3 * scale / speed)
            records += make_processes(processes, seed=10 * i + 2 + (threads == "all") * 5, library="torch",
                                      size=size, threads=threads, median=1.1e-3 * scale / speed,
                                      phases={"end_to_end": 1.15e-3 * scale / speed})
        copies = 2e-4 * (size / 256) ** 2
        compute = 2e-5 * scale
        records += make_processes(processes, seed=10 * i + 3, library="torch", device="cuda", size=size,
                                  median=compute,
                                  phases={"h2d": copies, "compute": compute, "d2h": copies / 2,
                                          "end_to_end": 1.5 * copies + compute})
    return records


@pytest.fixture(scope="session")
def gpu_tables():
    """Tables of a machine with a GPU, each cell measured in two processes."""
    return tables_of(gpu_machine_records(), "gpubox", [make_transfer_record()])


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
        "schema_version": 2, "kind": "transfer", "machine": "gpubox", "device": device,
        "device_name": "Test GPU" if status == "ok" else None,
        "link": {"kind": "PCIe gen 5 x16", "gbs": link_gbs} if status == "ok" else None,
        "points": points, "settings": {},
        "provenance": {"hostname": "gpubox", "cpu_model": "Test CPU"},
        "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:01+00:00",
    }


def assert_real_image(png, min_side: int = 200) -> None:  # a message figure is under an inch tall
    import matplotlib.image as mpimg

    image = mpimg.imread(png)
    assert image.ndim == 3 and min(image.shape[:2]) > min_side
    assert image.std() > 0.01  # not a blank canvas


def assert_real_figure(pdf, png) -> None:
    """A figure saved as the pipeline saves it: a vector PDF and a PNG with content."""
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 2000
    assert_real_image(png)


def run_cell_record(cell, settings, torch=None, artifact_path=None, kernels=None) -> dict:
    """A cell measured in this process; the outcome's fields as one dict, as a record holds them."""
    from offloadbench.measure import cell as measure_cell

    outcome = measure_cell.run_cell(cell, settings, torch, artifact_path=artifact_path, kernels=kernels)
    # as the worker writes it: the config's settings, then what the cell set up (TF32)
    configured = {"pinned_memory": settings.pinned_memory, "allow_tf32": settings.allow_tf32}
    return {"status": outcome.status, "reason": outcome.reason, "settings": {**configured, **outcome.settings},
            "samples_s": [], "phases": {}, **outcome.measured}


@pytest.fixture(scope="session", autouse=True)
def no_slurm_stall(tmp_path_factory):
    """Where SLURM is installed but no controller answers (after `make test-slurm` took its
    cluster down), the SLURM plugin's `scontrol show config` waits ~9 s at every snakemake
    start; a stand-in scontrol that fails at once spares the suite that wait."""
    real = shutil.which("scontrol")
    answers = real and subprocess.run([real, "ping"], capture_output=True, timeout=30, check=False).returncode == 0
    if real is None or answers:
        yield
        return
    stand_in = tmp_path_factory.mktemp("no-slurm")
    (stand_in / "scontrol").write_text("#!/bin/sh\nexit 1\n")
    (stand_in / "scontrol").chmod(0o755)
    before = os.environ["PATH"]
    os.environ["PATH"] = f"{stand_in}{os.pathsep}{before}"
    yield
    os.environ["PATH"] = before


# --- the real pipeline on the tiny grid of .test/, once per test session ----------------------

TINY = __import__("yaml").safe_load((Path(__file__).resolve().parents[1] / ".test" / "config.yaml").read_text())
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # the suite takes as long on a GPU machine and checks the same statuses
# the stand-in GPU in every process of the run, as the one GPU visible (a real one stays untouched)
STANDIN_GPU = {"OFFLOADBENCH_STANDIN_GPU": "1", "CUDA_VISIBLE_DEVICES": "0"}


def own_lock(workdir: Path) -> dict[str, str]:
    """A benchmark lock of the run's own: the suite's pipelines run side by side on the test
    workers, and a real run on this host is never held up by them (nor they by it)."""
    from offloadbench.jobs.lock import LOCK_ENV

    return {LOCK_ENV: str(workdir / ".benchmark-lock")}


def snakemake(workdir: Path, *args, config: dict | None = None, check=True, env=None):
    """The real snakemake in `workdir` (GPUs hidden, a lock of its own); an AssertionError with
    its output when it fails."""
    from offloadbench import sandbox

    result = sandbox.snakemake(workdir, *args, config=config, timeout=900,
                               env={**NO_GPU, **own_lock(workdir), **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """The tiny grid run through the real pipeline in a copy of the repository, with the
    stand-in GPU as its cuda; a `python` first on PATH notes each call (the rules must run
    the environment's python)."""
    import stat
    import sys

    from offloadbench import sandbox

    workdir = sandbox.copy_workflow(tmp_path_factory.mktemp("pipeline"))
    spy = workdir / "spy"
    spy.mkdir()
    (spy / "python").write_text(f'#!/bin/sh\necho "$@" >> {spy}/calls.log\nexec {sys.executable} "$@"\n')
    (spy / "python").chmod(stat.S_IRWXU)
    # a temporary folder of the run's own: what the run leaves there is its own, not an earlier run's
    scratch = workdir / "scratch"
    scratch.mkdir()
    done = snakemake(workdir, config=TINY, env={"PATH": sandbox.interpreter_path(str(spy)), "TMPDIR": str(scratch),
                                                **STANDIN_GPU})
    return {"dir": workdir, "out": workdir / "results" / "ci-box", "log": done.stdout + done.stderr, "scratch": scratch,
            "stderr": done.stderr, "python_calls": (spy / "calls.log").read_text().splitlines()}


def plotted_points(ax) -> np.ndarray:
    """Every finite (x, y) an axes draws as lines, markers or bars (their corners), in data
    coordinates."""
    import matplotlib.collections as mcoll
    import matplotlib.lines as mlines
    from matplotlib.container import BarContainer

    points = [np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
              for line in ax.get_lines() if isinstance(line, mlines.Line2D) and len(line.get_xdata())
              and line.get_transform() == ax.transData]
    points += [np.asarray(c.get_offsets(), float) for c in ax.collections
               if isinstance(c, mcoll.PathCollection) and len(c.get_offsets())]
    points += [np.array([[bar.get_x(), bar.get_y()], [bar.get_x() + bar.get_width(), bar.get_y() + bar.get_height()]])
               for container in ax.containers if isinstance(container, BarContainer) for bar in container]
    stacked = np.concatenate(points) if points else np.empty((0, 2))
    return stacked[np.isfinite(stacked).all(axis=1)]


def assert_shows_its_data(fig) -> None:
    """A figure that draws data: at least one panel has marks, and every panel's axes span
    all of its marks (none drawn outside the visible range)."""
    drawn = 0
    for ax in fig.axes:
        points = plotted_points(ax)
        if not len(points):
            continue
        drawn += len(points)
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        slack = lambda lo, hi: 1e-9 * max(abs(lo), abs(hi), 1.0)
        assert (points[:, 0] >= x0 - slack(x0, x1)).all() and (points[:, 0] <= x1 + slack(x0, x1)).all(), \
            f"{ax.get_title()!r}: x {points[:, 0].min()}..{points[:, 0].max()} beyond {x0}..{x1}"
        assert (points[:, 1] >= y0 - slack(y0, y1)).all() and (points[:, 1] <= y1 + slack(y0, y1)).all(), \
            f"{ax.get_title()!r}: y {points[:, 1].min()}..{points[:, 1].max()} beyond {y0}..{y1}"
    assert drawn, "no panel draws any mark"


def load_benchmark(name: str):
    """benchmarks/<name>.py as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}",
                                                  Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def recorded(tmp_path, settings=None, judging=None) -> dict:
    """The method's thresholds as a run records them: a round's record and judging.json,
    read back (the report's Method section and docs/measuring.md are held to them)."""
    from offloadbench.analysis.tables import write_judging
    from offloadbench.jobs import bout
    from offloadbench.measure.settings import Settings
    from offloadbench.records import RoundRecord, load_judging
    from offloadbench.report.text.method import recorded_method
    from offloadbench.verdicts import Judging

    path = tmp_path / "judging.json"
    write_judging(judging or Judging(), str(path))
    round_ = RoundRecord.from_json({"round": 1, "method": {**(settings or Settings()).method(), **bout.method(4)}})
    return recorded_method([round_], load_judging(path))


# --- the stand-in GPU's log of a timed block -------------------------------------------


def recorded_timing(region, calls: int = 3) -> list:
    """The device calls of one timed block of `region`, with its two clock reads marked."""
    import dataclasses
    import time

    import standin_gpu

    def clock():
        standin_gpu.note("clock")
        return time.perf_counter_ns()

    with standin_gpu.recording() as log:
        dataclasses.replace(region, clock=clock).time_block(calls)
    return list(log)


def synced_at_both_ends(log: list) -> bool:
    """Sync, then the clock starts; calls; sync, then the clock stops."""
    marks = [i for i, entry in enumerate(log) if entry == ("clock",)]
    start, stop = marks[0], marks[-1]
    return start > 0 and log[start - 1] == ("sync",) and log[stop - 1] == ("sync",) and stop - start > 2
