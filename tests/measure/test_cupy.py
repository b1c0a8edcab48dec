"""CuPy's paths: the stand-in GPU's own CuPy (tests/standin/standin_cupy.py) fails where CuPy
fails (`standin`), and a CuPy cell on cuda is measured as a torch one is, copies counted, every
timed block ended on a synchronisation (`gpu`: on the stand-in in `make test`, on a real GPU
with the real CuPy in `make gpu-check`)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import standin_gpu
from conftest import recorded_timing, run_cell_record, synced_at_both_ends
from offloadbench.cells import Cell
from offloadbench.grid import possible
from offloadbench.kernels import load_kernels
from offloadbench.measure import devices
from offloadbench.measure.backend import build_regions, make_host_inputs
from offloadbench.measure.cell import make_backend
from offloadbench.measure.ops import get_op
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import StopRule, WarmupRule

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Settings(stop=StopRule(budget_s=0.2, min_samples=6), warmup=WarmupRule(budget_s=0.1))


@pytest.fixture(scope="module")
def cupy():
    """CuPy: the stand-in's where it is switched on (devices.import_torch installs it), else
    the host's; a GPU host without CuPy skips these tests with the way to install it."""
    devices.import_torch()
    return pytest.importorskip("cupy", reason="this host has no CuPy: pip install -r requirements-cupy.txt")


# --- it fails where CuPy fails -------------------------------------------------------------


@pytest.mark.standin
def test_a_cupy_array_refuses_implicit_conversion_to_numpy(cupy):
    x = cupy.asarray(np.arange(8.0))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(x)
    assert isinstance(np.roll(x, 1), cupy.ndarray)  # NumPy's functions dispatch to CuPy's, as on CuPy
    assert float(x.sum()) == 28.0 and x.get().tolist() == list(np.arange(8.0))


@pytest.mark.standin
def test_a_call_mixing_cupy_and_numpy_arrays_fails(cupy):
    x = cupy.asarray(np.ones(4))
    for mixed in (lambda: x + np.ones(4), lambda: np.ones(4) * x, lambda: cupy.add(x, np.ones(4))):
        with pytest.raises(TypeError, match="Unsupported type"):
            mixed()


@pytest.mark.standin
def test_cupy_work_waits_on_the_device_stream_and_its_memory_counts(cupy):
    device = standin_gpu.state()
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    held = pool.total_bytes()
    with standin_gpu.recording() as log:
        x = cupy.asarray(np.ones(1 << 16))
        y = x * 2.0
        cupy.cuda.Device().synchronize()
    assert log[0][:2] == ("copy", "h2d") and ("call", "mul") in log and log[-1] == ("sync",)
    assert pool.total_bytes() - held == 2 * (1 << 19)  # two arrays of 65536 float64
    del x, y
    assert pool.total_bytes() - held == 2 * (1 << 19)  # the pool keeps what its arrays freed
    pool.free_all_blocks()
    assert pool.total_bytes() == held
    with pytest.raises(MemoryError, match="Out of memory"):
        cupy.zeros(device.capacity // 8 + 1)


def test_cupy_runs_on_cuda_only_eager_only_and_not_in_bfloat16():
    assert possible("cupy", "cuda", "float32") and not possible("cupy", "cpu", "float32")
    assert not possible("cupy", "cuda", "float32", "compiled") and not possible("cupy", "cuda", "bfloat16")


# --- a CuPy cell, measured -----------------------------------------------------------------


@pytest.mark.standin
def test_a_cupy_region_without_a_sync_at_its_end_is_caught(cupy):
    """Every region of a CuPy cell is sync, calls, sync (test_standin's test of every GPU
    cell's regions has CuPy cells); one without the sync is what the log catches."""
    cell = Cell("matmul", "cupy", "cuda", "float32", 64, "1")
    backend = make_backend(cell, get_op("matmul"), SETTINGS, devices.import_torch())
    regions = build_regions(backend, make_host_inputs(get_op("matmul"), cell, 0))
    assert synced_at_both_ends(recorded_timing(regions["compute"]))
    unsynced = dataclasses.replace(regions["compute"], sync=lambda: None)
    assert not synced_at_both_ends(recorded_timing(unsynced))


@pytest.mark.gpu
def test_a_cupy_cell_is_measured_checked_and_its_device_peak_read_from_cupys_pool(cupy):
    record = run_cell_record(Cell("axpy", "cupy", "cuda", "float32", 256, "1"), SETTINGS, devices.import_torch())
    assert record["status"] == "ok", record["reason"]
    assert record["check"]["passed"] and record["check"]["rel_err"] < 1e-6
    assert {"h2d", "compute", "d2h", "end_to_end", "resident_1"} <= set(record["phases"])
    device = record["memory"]["device"]
    assert device["method"].startswith("CuPy's memory pool") and device["peak_bytes"] >= 256 * 4


@pytest.mark.gpu
def test_a_cupy_kernel_that_updates_its_arguments_is_checked_on_what_it_changed(cupy):
    kernels = load_kernels([str(ROOT / "examples" / "real_code.py")])
    record = run_cell_record(Cell("leapfrog", "cupy", "cuda", "float64", 64, "1"), SETTINGS,
                             devices.import_torch(), kernels=kernels)
    assert record["status"] == "ok", record["reason"]
    check, timing = record["check"], record["timing"]
    assert check["passed"] and check["changes"] == ["pos", "vel"] == check["reference_changes"]
    assert timing["changes"] == ["pos", "vel"] and timing["per_call"] and timing["restore_s"] > 0
    assert "resident_1" in record["phases"]  # its trips call it again on the same device arrays


# --- through the real round job -------------------------------------------------------------


@pytest.mark.standin
def test_a_round_measures_cupy_on_cuda_beside_numpy_on_the_cpu(tmp_path):
    from offloadbench.records import load_record
    from rounds import SETTINGS as ROUND_SETTINGS
    from rounds import run_round
    from test_standin import standin_box

    box = standin_box(tmp_path)
    grid = {"ops": ["axpy"], "libraries": ["numpy", "cupy"], "devices": ["cpu", "cuda"], "dtypes": ["float32"],
            "sizes": [16], "threads": [1]}
    code, err = run_round(box, grid=grid, settings={**ROUND_SETTINGS, "timeout_s": 120})
    assert code == 0, err[-3000:]
    cells = sorted(p.name for p in (box / "raw" / "axpy").iterdir())
    assert cells == ["cupy-cuda-float32-n16-t1", "numpy-cpu-float32-n16-t1"]  # no CuPy on the CPU
    path = box / "raw" / "axpy" / "cupy-cuda-float32-n16-t1" / "p1.json"
    record = load_record(path)
    assert record.ok, record.reason
    assert json.loads(path.read_text())["provenance"]["cupy"].endswith("+standin")
