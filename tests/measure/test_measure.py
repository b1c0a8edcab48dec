"""run_cell on real numpy and torch cells (tiny sizes, short budgets)."""

import dataclasses

import numpy as np
import pytest
import torch  # a pinned requirement: missing, it must fail the suite, not skip it
from conftest import run_cell_record
from offloadbench.cells import Cell
from offloadbench.measure import cell as measure_cell
from offloadbench.measure.ops import get_op
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import StopRule, WarmupRule

FAST = Settings(stop=StopRule(budget_s=0.2, min_samples=8), warmup=WarmupRule(budget_s=0.1))


def run_cell(cell, settings=FAST, torch=None, artifact_path=None):
    return run_cell_record(cell, settings, torch, artifact_path)


def replace_op(monkeypatch, name, **changes):
    changed = dataclasses.replace(get_op(name), **changes)
    monkeypatch.setattr(measure_cell, "get_op", lambda op, kernels=None: changed if op == name else get_op(op))


def test_numpy_cell_is_measured_and_checked():
    record = run_cell(Cell("matmul", "numpy", "cpu", "float64", 64, "1"))
    assert record["status"] == "ok", record["reason"]
    assert len(record["samples_s"]) >= 6 and all(s > 0 for s in record["samples_s"])
    assert record["check"]["passed"] and record["check"]["rel_err"] < 1e-13
    assert record["model"]["flops"] == 2 * 64**3
    assert record["warmup"]["count"] >= 2
    assert record["stopping"]["stop_reason"] in ("ci", "budget", "max_samples")
    assert list(record["phases"]) == ["compute"]


def test_a_torch_cpu_cell_times_one_region_numpy_arrays_in_and_out():
    record = run_cell(Cell("matmul", "torch", "cpu", "float32", 64, "1"), FAST, torch)
    assert record["status"] == "ok", record["reason"]
    assert set(record["phases"]) == {"compute"}  # its end to end: torch wraps NumPy's arrays without a copy
    assert record["settings"]["tf32_matmul"] is False
    assert record["device"]["name"] == "cpu"


def test_bfloat16_torch_cell_runs_and_passes_its_own_tolerance():
    record = run_cell(Cell("matmul", "torch", "cpu", "bfloat16", 64, "1"), FAST, torch)
    assert record["status"] == "ok", record["reason"]
    assert record["check"]["tolerance"] > 1e-3


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_absent_gpu_gives_a_skipped_record_with_a_reason(device):
    available = torch.cuda.is_available() if device == "cuda" else torch.backends.mps.is_available()
    if available:
        pytest.skip(f"{device} exists here")
    record = run_cell(Cell("matmul", "torch", device, "float32", 64, "1"), FAST, torch)
    assert record["status"] == "skipped"
    assert record["reason"].startswith(f"{device} unavailable")
    assert record["samples_s"] == []


def test_compute_then_plot_runs_on_the_cpu_and_renders_a_png():
    record = run_cell(Cell("compute_then_plot", "numpy", "cpu", "float32", 64, "1"))
    assert record["status"] == "ok", record["reason"]
    assert {"compute", "finish", "end_to_end"} <= set(record["phases"])
    e2e = np.median(record["phases"]["end_to_end"]["samples_s"])
    assert e2e > np.median(record["samples_s"])  # plotting costs time


def test_a_wrong_result_is_an_error_not_a_speedup(monkeypatch):
    replace_op(monkeypatch, "matmul", compute=lambda lib, a, b: a @ b + 1e-3)
    record = run_cell(Cell("matmul", "numpy", "cpu", "float32", 64, "1"))
    assert record["status"] == "error"
    assert record["reason"].startswith("wrong result")
    assert record["samples_s"] == []


@pytest.mark.parametrize(
    "error, status, reason",
    [
        (RuntimeError("kernel exploded\nsecond line"), "error", "RuntimeError during warm-up compute: kernel exploded"),
        (MemoryError("Unable to allocate 3 TiB"), "oom", "out of memory during warm-up compute: Unable to allocate 3 TiB"),
    ],
)
def test_an_exception_becomes_a_record(monkeypatch, error, status, reason):
    def fail(lib, a, b):
        raise error

    replace_op(monkeypatch, "matmul", compute=fail)
    record = run_cell(Cell("matmul", "numpy", "cpu", "float32", 64, "1"))
    assert (record["status"], record["reason"]) == (status, reason)


def test_a_cell_too_large_for_host_memory_is_oom_before_allocating():
    record = run_cell(Cell("matmul", "numpy", "cpu", "float64", 131072, "1"))
    assert record["status"] == "oom"
    assert "GiB" in record["reason"]


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_compute_then_plot_saves_a_real_png(tmp_path, library):
    import matplotlib.image as mpimg

    png = tmp_path / "field.png"
    record = run_cell(Cell("compute_then_plot", library, "cpu", "float32", 96, "1"), FAST,
                      torch if library == "torch" else None, artifact_path=str(png))
    assert record["status"] == "ok", record["reason"]
    assert record["artifact"] == "field.png"
    image = mpimg.imread(png)
    assert image.ndim == 3 and image.shape[0] > 200 and image.std() > 0.05


def test_rendering_does_not_leak_the_field_while_the_gc_is_off():
    import gc
    import tracemalloc

    from offloadbench.measure.ops.plotting import render_field_png

    # 8 MiB: a leak of the field (45 MiB over 5 renders before the fix) stands out from the
    # figure's own constant garbage (about 0.7 MiB per render).
    field = np.random.default_rng(0).random((1024, 1024))
    gc.disable()
    tracemalloc.start()
    try:
        render_field_png(field)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            render_field_png(field)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        gc.enable()
    assert grown < field.nbytes, f"{grown / 2**20:.1f} MiB kept after 5 renders"


def test_cublas_allocation_failures_count_as_out_of_memory():
    from offloadbench.measure.devices import is_out_of_memory

    assert is_out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)"), None)
    assert not is_out_of_memory(RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED"), None)


def test_a_cells_progress_counts_the_seconds_of_each_kind_of_phase_but_not_the_bouts():
    from offloadbench.measure.cell import Progress

    now = iter([1.0, 1.5, 2.0, 2.25, 7.0, 9.0, 9.5, 9.75])
    progress = Progress(clock=lambda: next(now), began=0.0)
    for phase in ("inputs", "warm-up compute", "warm-up end_to_end", "waiting", "sampling", "check", "memory"):
        progress.enter(phase)
    # starting 1.0, inputs 0.5, warm-up 0.5 + 0.25, waiting and sampling (the bout's) left out, check 0.5
    assert progress.spent() == {"starting": 1.0, "inputs": 0.5, "warm-up": 0.75, "check": 0.5, "memory": 0.25}


def test_a_carried_check_is_not_measured_again(monkeypatch):
    carried = {"round": 1, "check": {"rel_err": 1e-9, "tolerance": 1e-5, "passed": True},
               "model": {"flops": 1.0, "traffic_bytes": 1.0, "h2d_bytes": 8, "d2h_bytes": 8, "itemsize": 4},
               "memory": {"host": {"peak_bytes": 123, "method": "tracemalloc"}}}
    monkeypatch.setattr(measure_cell, "check_result", lambda *a: pytest.fail("checked again"))
    monkeypatch.setattr(measure_cell, "peak_memory", lambda *a: pytest.fail("peak measured again"))
    run = measure_cell.CellRun(Cell("matmul", "numpy", "cpu", "float32", 32, "1"), FAST, carried=carried)
    assert run.prepare()
    run.sample_alone()
    outcome = run.finish()
    assert outcome.status == "ok", outcome.reason
    assert outcome.measured["check"] == {**carried["check"], "from_round": 1}
    assert outcome.measured["memory"] == carried["memory"] and outcome.measured["model"] == carried["model"]
