"""GPU tests, through the device seam: on a real CUDA GPU (`make gpu-check`) and on the
stand-in GPU (`make test`, OFFLOADBENCH_STANDIN_GPU=1) alike; sizes are smaller on the
stand-in, whose device is this CPU. Skipped where neither is at hand (see conftest)."""

import numpy as np
import pytest
from conftest import gpu_at_hand, run_cell_record
from offloadbench.cells import Cell
from offloadbench.measure import cell as measure_cell
from offloadbench.measure import devices
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import BlockRule, Region, StopRule, WarmupRule, measure_region

pytestmark = pytest.mark.gpu
SETTINGS = Settings(stop=StopRule(budget_s=1.0, min_samples=10), warmup=WarmupRule(budget_s=0.5))
REAL = gpu_at_hand() == "cuda"
LARGE, MEDIUM, SMALL = (4096, 2048, 1024) if REAL else (512, 256, 128)
COPY_BYTES = 2**28 if REAL else 2**25  # large enough that pinned memory shows its rate


@pytest.fixture(scope="module")
def torch():
    return devices.import_torch()


@pytest.fixture(scope="module")
def cuda(torch):
    return devices.get("cuda", torch)


@pytest.fixture(autouse=True)
def default_precision(torch):
    """Every test starts and ends with TF32 off, whatever a test switched on."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def test_cuda_cell_records_every_phase(torch):  # matmul does not chain: no resident trip
    record = run_cell_record(Cell("matmul", "torch", "cuda", "float32", MEDIUM, "1"), SETTINGS, torch)
    assert record["status"] == "ok", record["reason"]
    assert set(record["phases"]) == {"h2d", "compute", "d2h", "end_to_end"}
    assert record["device"]["name"] == torch.cuda.get_device_name(0)
    assert record["device"]["pci_bus_id"] and record["device"]["nvml_index"] is not None
    assert record["check"]["passed"]
    assert record["settings"]["tf32_matmul"] is False


def test_timing_without_sync_reads_far_too_fast_and_ours_matches_the_synced_value(cuda):
    """A non-blocking copy from pinned memory only queues the copy: an unsynchronised clock
    sees the launch; ours synchronises at both ends and agrees with the device's events."""
    # a copy long enough that its launch (on the stand-in about 0.3 ms of Python) is far below it
    nbytes = (COPY_BYTES if REAL else 2**27) // 4
    host, on_device = cuda.host_buffer(nbytes, pinned=True), cuda.device_buffer(nbytes)
    host.fill_(1)

    def copy():
        cuda.copy(on_device, host, non_blocking=True)

    def unsynced():
        cuda.synchronize()
        start = __import__("time").perf_counter()
        copy()  # only queued: the clock stops before the copy finishes
        elapsed = __import__("time").perf_counter() - start
        cuda.synchronize()
        return elapsed

    def with_events():
        start, end = cuda.event(), cuda.event()
        start.record()
        copy()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    for _ in range(3):
        copy()
    cuda.synchronize()
    naive = np.median([unsynced() for _ in range(10)])
    events = np.median([with_events() for _ in range(10)])
    measured = measure_region(Region("h2d", copy, cuda.synchronize), BlockRule(), WarmupRule(budget_s=0.3),
                              StopRule(budget_s=0.5))
    ours = float(np.median(measured.samples_s))
    assert naive < events / 5, "an unsynchronised timing should only see the launch"
    assert ours == pytest.approx(events, rel=0.1)


def test_phases_add_up_to_the_end_to_end_time(torch):
    record = run_cell_record(Cell("matmul", "torch", "cuda", "float32", LARGE, "1"), SETTINGS, torch)
    assert record["status"] == "ok", record["reason"]
    median = {name: np.median(p["samples_s"]) for name, p in record["phases"].items()}
    parts = median["h2d"] + median["compute"] + median["d2h"]
    # The end-to-end region also allocates; under a sandboxed kernel that adds some noise.
    assert parts == pytest.approx(median["end_to_end"], rel=0.2)


def test_pinned_memory_copies_faster_than_pageable_for_large_arrays(torch):
    from offloadbench.measure.transfer import measure_copy

    pageable = measure_copy(torch, COPY_BYTES, "h2d", pinned=False, stop=StopRule(budget_s=0.5))
    pinned = measure_copy(torch, COPY_BYTES, "h2d", pinned=True, stop=StopRule(budget_s=0.5))
    assert pinned["median_s"] < pageable["median_s"]


def test_tf32_sneaking_in_is_caught_by_the_correctness_check(torch, monkeypatch):
    def tf32_on(torch_module, settings):
        torch_module.backends.cuda.matmul.allow_tf32 = True
        return {"tf32_matmul": True}

    monkeypatch.setattr(measure_cell, "configure_torch", tf32_on)
    record = run_cell_record(Cell("matmul", "torch", "cuda", "float32", LARGE, "1"), SETTINGS, torch)
    assert record["status"] == "error"
    assert record["reason"].startswith("wrong result")


def test_allowed_tf32_is_checked_against_its_own_tolerance(torch):
    settings = Settings(stop=SETTINGS.stop, warmup=SETTINGS.warmup, allow_tf32=True)
    record = run_cell_record(Cell("matmul", "torch", "cuda", "float32", LARGE, "1"), settings, torch)
    assert record["status"] == "ok", record["reason"]
    assert record["settings"]["tf32_matmul"] is True


def test_pinned_cells_record_their_memory_kind(torch):
    settings = Settings(stop=SETTINGS.stop, warmup=SETTINGS.warmup, pinned_memory=True)
    record = run_cell_record(Cell("matmul", "torch", "cuda", "float32", SMALL, "1"), settings, torch)
    assert record["status"] == "ok", record["reason"]
    assert record["settings"]["pinned_memory"] is True
    copy = np.median(record["phases"]["h2d"]["samples_s"])
    pageable = run_cell_record(Cell("matmul", "torch", "cuda", "float32", SMALL, "1"), SETTINGS, torch)
    assert pageable["settings"]["pinned_memory"] is False
    assert copy < np.median(pageable["phases"]["h2d"]["samples_s"])


def test_out_of_device_memory_becomes_an_oom_record(torch, cuda):
    cuda.release()  # memory cached by earlier tests is not counted as free
    hog = cuda.device_buffer(cuda.free_bytes() - 2**26)  # leave 64 MiB
    try:
        # 4096^2 float32: 64 MiB per matrix, so the two inputs cannot fit.
        record = run_cell_record(Cell("matmul", "torch", "cuda", "float32", 4096, "1"), SETTINGS, torch)
    finally:
        del hog
        cuda.release()
    assert record["status"] == "oom", record["reason"]
    assert "out of memory" in record["reason"]


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_compiled_cells_on_cuda_have_both_phases_and_their_compile(torch, library):
    """numpy compiled on cuda: the NumPy function wrapped for device tensors, and end to end with
    host arrays (under torch.device, or copies around it where that fails); torch compiled: the
    phases of torch eager, with the resident trips of an op that chains. The compile is never a sample."""
    record = run_cell_record(Cell("transcendental", library, "cuda", "float32", SMALL, "1", "compiled"), SETTINGS,
                             torch)
    assert record["status"] == "ok", record["reason"]
    assert set(record["phases"]) == {"h2d", "compute", "d2h", "end_to_end", "resident_1", "resident_16"}
    phase = record["compile"]
    assert phase["graphs"] >= 1 and phase["graph_breaks"] == 0 and phase["fallback"] == ""
    assert phase["first_call_s"] > max(record["samples_s"])
    if library == "numpy":
        assert phase["end_to_end_form"]
    assert record["check"]["passed"]
    compute = float(np.median(record["phases"]["compute"]["samples_s"]))
    end_to_end = float(np.median(record["phases"]["end_to_end"]["samples_s"]))
    assert end_to_end > compute  # the copies of 2 inputs in and the result out are in it
    assert record["compile"]["memory"]["device_peak_bytes"] >= 0


def test_an_elementwise_cell_keeps_its_data_on_the_device_for_each_resident_trip(torch):
    """One copy in, k chained calls, one copy out: the trip's time sits near what the phases
    predict (h2d + k·compute + d2h), and grows with k by about k·compute."""
    record = run_cell_record(Cell("transcendental", "torch", "cuda", "float32", MEDIUM, "1"), SETTINGS, torch)
    assert record["status"] == "ok", record["reason"]
    assert {"resident_1", "resident_16"} <= set(record["phases"])
    median = {name: float(np.median(phase["samples_s"])) for name, phase in record["phases"].items()}
    for k in (1, 16):
        predicted = median["h2d"] + k * median["compute"] + median["d2h"]
        assert 0.5 < median[f"resident_{k}"] / predicted < 2.0, (k, median)
    assert median["resident_16"] > median["resident_1"]


def test_a_matmul_says_why_it_has_no_resident_trip(torch):
    record = run_cell_record(Cell("matmul", "torch", "cuda", "float32", SMALL, "1"), SETTINGS, torch)
    assert not [name for name in record["phases"] if name.startswith("resident_")]
    assert "does not chain" in record["resident"]["reason"]


def test_device_memory_is_measured_in_an_untimed_call(torch):
    record = run_cell_record(Cell("matmul", "torch", "cuda", "float32", MEDIUM, "1"), SETTINGS, torch)
    device = record["memory"]["device"]
    assert device["method"] == "torch.cuda.max_memory_allocated"
    assert MEDIUM * MEDIUM * 4 <= device["peak_bytes"] <= 64 * MEDIUM * MEDIUM * 4  # its output, and not far more
    assert record["memory"]["host"]["peak_bytes"] >= MEDIUM * MEDIUM * 4  # the result copied back to the host
