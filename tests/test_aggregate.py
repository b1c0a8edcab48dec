import math

import pytest

from offloadbench.aggregate import Analysis, speedups_table, thread_scaling_table, timings_table

FAST = Analysis(resamples=500, seed=0)
TIMING_COLUMNS = ["machine", "op", "library", "device", "dtype", "size", "threads", "status", "reason", "n_samples",
                  "median_s", "q1_s", "q3_s", "ci_low_s", "ci_high_s", "gflops", "rel_err",
                  "h2d_s", "compute_s", "d2h_s", "end_to_end_s", "transfer_fraction", "unstable"]


@pytest.fixture
def records(record_factory):
    gpu_phases = {"h2d": 2e-3, "compute": 1e-4, "d2h": 1e-3, "end_to_end": 3.2e-3}
    return [
        record_factory(library="numpy", threads="1", median=4e-3, seed=1),
        record_factory(library="numpy", threads="all", median=1e-3, seed=2),
        record_factory(library="torch", threads="1", median=2e-3, seed=3, phases={"end_to_end": 2.1e-3}),
        record_factory(library="torch", threads="all", median=1e-3, seed=4, phases={"end_to_end": 1.05e-3}),
        record_factory(library="torch", device="cuda", threads="1", median=1e-4, seed=5, phases=gpu_phases),
        record_factory(library="torch", device="mps", threads="1", status="skipped", reason="mps unavailable: x"),
    ]


def test_timings_have_the_contract_columns_and_one_row_per_cell(records):
    table = timings_table(records, "testbox", FAST)
    assert set(TIMING_COLUMNS) <= set(table.columns)
    assert len(table) == len(records)
    numpy1 = table[(table.library == "numpy") & (table.threads == "1")].iloc[0]
    assert numpy1.median_s == pytest.approx(4e-3, rel=0.02)
    assert numpy1.ci_low_s < numpy1.median_s < numpy1.ci_high_s
    assert numpy1.gflops == pytest.approx(2 * 256**3 / numpy1.median_s / 1e9)
    assert numpy1.end_to_end_s == numpy1.median_s  # numpy: the compute region is end to end


def test_device_cells_have_phases_and_a_transfer_fraction(records):
    table = timings_table(records, "testbox", FAST)
    gpu = table[table.device == "cuda"].iloc[0]
    assert gpu.h2d_s == pytest.approx(2e-3, rel=0.02)
    assert gpu.transfer_fraction == pytest.approx(3e-3 / 3.2e-3, rel=0.03)
    skipped = table[table.device == "mps"].iloc[0]
    assert skipped.status == "skipped" and skipped.reason == "mps unavailable: x"
    assert math.isnan(skipped.median_s)


def test_speedups_use_the_right_baseline(records):
    table = speedups_table(records, "testbox", FAST).set_index(["device", "threads"])
    # cpu cell vs numpy at its own thread count
    assert table.loc[("cpu", "1"), "speedup"] == pytest.approx(2.0, rel=0.03)
    assert table.loc[("cpu", "1"), "baseline_threads"] == "1"
    assert table.loc[("cpu", "all"), "speedup_verdict"] == "no measurable difference"
    # GPU cell vs numpy on all cores, device-resident and with copies
    assert table.loc[("cuda", "1"), "baseline_threads"] == "all"
    assert table.loc[("cuda", "1"), "speedup"] == pytest.approx(10.0, rel=0.03)
    assert table.loc[("cuda", "1"), "end_to_end_speedup"] == pytest.approx(1e-3 / 3.2e-3, rel=0.03)
    assert table.loc[("cuda", "1"), "end_to_end_verdict"] == "slower"
    lo, hi = table.loc[("cuda", "1"), ["speedup_ci_low", "speedup_ci_high"]]
    assert lo < 10.0 * 1.03 and hi > 10.0 * 0.97
    assert ("mps", "1") not in table.index  # skipped cells have no speedup


def test_a_cell_without_a_baseline_has_no_speedup(record_factory):
    table = speedups_table([record_factory(library="torch", dtype="bfloat16")], "m", FAST)
    assert table.empty


def test_thread_scaling_compares_most_threads_with_one(records):
    table = thread_scaling_table(records, "testbox", FAST).set_index("library")
    assert table.loc["numpy", "scaling"] == pytest.approx(4.0, rel=0.03)
    assert table.loc["numpy", "verdict"] == "faster"
    assert table.loc["numpy", "threads"] == "all"
