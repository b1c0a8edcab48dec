import math

import pytest
from conftest import group_typed, make_processes, make_record
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.tables import memory_columns, speedups_table, thread_scaling_table, timings_table

FAST = Analysis(resamples=500, random_state=0)
TIMING_COLUMNS = ["machine", "op", "library", "device", "dtype", "size", "threads", "status", "reason", "n_samples",
                  "median_s", "q1_s", "q3_s", "ci_low_s", "ci_high_s", "gflops", "rel_err",
                  "h2d_s", "compute_s", "d2h_s", "end_to_end_s", "transfer_fraction", "flagged",
                  "processes", "ci_scope", "process_spread", "shares_cores", "host", "slurm_job_id"]


@pytest.fixture
def cells():
    gpu_phases = {"h2d": 2e-3, "compute": 1e-4, "d2h": 1e-3, "end_to_end": 3.2e-3}
    records = [
        *make_processes(3, seed=1, library="numpy", threads="1", median=4e-3),
        *make_processes(3, seed=2, library="numpy", threads="all", median=1e-3, shares_cores=True),
        *make_processes(3, seed=3, library="torch", threads="1", median=2e-3, phases={"end_to_end": 2.1e-3}),
        *make_processes(3, seed=4, library="torch", threads="all", median=1e-3, phases={"end_to_end": 1.05e-3}),
        *make_processes(3, seed=5, library="torch", device="cuda", threads="1", median=1e-4, phases=gpu_phases),
        *make_processes(3, seed=6, library="torch", device="mps", threads="1", status="skipped", reason="mps unavailable: x"),
    ]
    return group_typed(records, FAST)


def test_timings_have_the_contract_columns_and_one_row_per_cell(cells):
    table = timings_table(cells, "testbox")
    assert set(TIMING_COLUMNS) <= set(table.columns)
    assert len(table) == len(cells) == 6
    numpy1 = table[(table.library == "numpy") & (table.threads == "1")].iloc[0]
    assert numpy1.median_s == pytest.approx(4e-3, rel=0.02)
    assert numpy1.ci_low_s < numpy1.median_s < numpy1.ci_high_s
    assert numpy1.gflops == pytest.approx(2 * 256**3 / numpy1.median_s / 1e9)
    assert numpy1.end_to_end_s == numpy1.median_s  # numpy: the compute region is end to end
    assert numpy1.processes == 3 and numpy1.ci_scope == "across processes"
    assert numpy1.n_samples == 90 and numpy1.host == "testbox"


def test_a_cells_time_is_the_geometric_mean_of_its_process_medians():
    records = [make_record(median=m, spread=0.001, seed=i, round=i + 1, rounds=3) for i, m in enumerate((1e-3, 2e-3, 4e-3))]
    (cell,) = group_typed(records, FAST)
    row = timings_table([cell], "m").iloc[0]
    assert row.median_s == pytest.approx(2e-3, rel=0.01)
    assert row.process_spread == pytest.approx(3.0, rel=0.02)
    assert row.ci_low_s < 1.5e-3 and row.ci_high_s > 2.7e-3  # three processes that disagree: a wide CI


def test_one_process_is_labelled_within_process_only():
    (cell,) = group_typed([make_record(median=1e-3)], FAST)
    row = timings_table([cell], "m").iloc[0]
    assert row.processes == 1 and row.ci_scope == "within-process only"
    assert math.isnan(row.process_spread)


def test_device_cells_have_phases_and_a_transfer_fraction(cells):
    table = timings_table(cells, "testbox")
    gpu = table[table.device == "cuda"].iloc[0]
    assert gpu.h2d_s == pytest.approx(2e-3, rel=0.02)
    assert gpu.transfer_fraction == pytest.approx(3e-3 / 3.2e-3, rel=0.03)
    skipped = table[table.device == "mps"].iloc[0]
    assert skipped.status == "skipped" and skipped.reason == "mps unavailable: x"
    assert math.isnan(skipped.median_s)


def test_speedups_use_the_right_baseline(cells):
    table = speedups_table(cells, "testbox").set_index(["device", "threads"])
    # cpu cell vs numpy at its own thread count
    assert table.loc[("cpu", "1"), "speedup"] == pytest.approx(2.0, rel=0.03)
    assert table.loc[("cpu", "1"), "baseline_threads"] == "1"
    assert table.loc[("cpu", "all"), "speedup_verdict"] == "same"
    assert bool(table.loc[("cpu", "all"), "shares_cores"]) and not bool(table.loc[("cpu", "1"), "shares_cores"])
    # GPU cell vs numpy on all cores, device-resident and with copies
    assert table.loc[("cuda", "1"), "baseline_threads"] == "all"
    assert table.loc[("cuda", "1"), "speedup"] == pytest.approx(10.0, rel=0.03)
    assert table.loc[("cuda", "1"), "end_to_end_speedup"] == pytest.approx(1e-3 / 3.2e-3, rel=0.03)
    assert table.loc[("cuda", "1"), "end_to_end_verdict"] == "slower"
    lo, hi = table.loc[("cuda", "1"), ["speedup_ci_low", "speedup_ci_high"]]
    assert lo < 10.0 * 1.03 and hi > 10.0 * 0.97
    assert table.loc[("cuda", "1"), "processes"] == 3
    assert ("mps", "1") not in table.index  # skipped cells have no speedup


def test_a_cell_without_a_baseline_has_no_speedup():
    table = speedups_table(group_typed([make_record(library="torch", dtype="bfloat16")], FAST), "m")
    assert table.empty


def test_thread_scaling_compares_most_threads_with_one(cells):
    table = thread_scaling_table(cells, "testbox").set_index("library")
    assert table.loc["numpy", "scaling"] == pytest.approx(4.0, rel=0.03)
    assert table.loc["numpy", "verdict"] == "faster"
    assert table.loc["numpy", "threads"] == "all"


def test_a_process_that_failed_is_named_among_the_flags():
    records = make_processes(3, seed=9, median=1e-3)
    records[1] = make_record(status="timeout", reason="exceeded the cell time limit", round=2, rounds=3)
    (cell,) = group_typed(records, FAST)
    row = timings_table([cell], "m").iloc[0]
    assert row.status == "ok" and row.processes == 2 and row.flagged
    (failed,) = [r for r in cell.flag_rows() if r["kind"] == "timeout"]
    assert (failed["processes"], failed["of_processes"], failed["text"]) == (1, 3, "exceeded the cell time limit")


def typed(kind, region, size, text):
    return {"kind": kind, "region": region, "size": size, "text": text}


FLAGS_AS_WORDS = [  # as records before version 4 kept them
    ["drift: second half 12.0% slower than the first", "end_to_end: drift: second half 9.0% faster than the first"],
    ["drift: second half 49.9% faster than the first", "CI not reached (±3.1% > ±2.0%, stopped on budget)"],
    ["bimodal samples (two modes 50% apart, 30/50 in the faster)"]]
FLAGS_TYPED = [  # the sizes alone pick the strongest: the words are not read
    [typed("drift", "compute", 0.12, "drift: second half 12.0% slower than the first"),
     typed("drift", "end_to_end", 0.09, "end_to_end: drift: second half 9.0% faster than the first")],
    [typed("drift", "compute", 0.499, "drift: second half 49.9% faster than the first"),
     typed("not_converged", "compute", 0.031, "CI not reached (±3.1% > ±2.0%, stopped on budget)")],
    [typed("bimodal", "compute", 0.5, "bimodal samples (two modes 50% apart, 30/50 in the faster)")]]


@pytest.mark.parametrize("flags", [FLAGS_AS_WORDS, FLAGS_TYPED], ids=["words", "typed"])
def test_each_kind_of_flag_is_said_once_with_its_strongest_case_and_how_many_processes_saw_it(flags):
    records = make_processes(3, seed=9, median=1e-3)
    for record, seen in zip(records, flags):
        record["diagnostics"] = {"unstable": True, "flags": seen}
    (cell,) = group_typed(records, FAST)
    found = [(r["kind"], r["region"], r["amount"], r["processes"], r["of_processes"], r["text"])
             for r in cell.flag_rows()]
    assert found == [
        ("drift", "compute", 0.499, 2, 3, "drift: second half 49.9% faster than the first"),
        ("drift", "end_to_end", 0.09, 1, 3, "end_to_end: drift: second half 9.0% faster than the first"),
        ("bimodal", "compute", 0.5, 1, 3, "bimodal samples (two modes 50% apart, 30/50 in the faster)"),
    ]
    assert cell.flagged
    assert cell.precision == {"precision_processes": 1, "precision_regions": "compute",
                              "precision_widest_rel_ci": 0.031}


def test_tables_are_reproducible_from_the_same_records():
    records = make_processes(3, process_spread=0.05, seed=4, median=1e-3)
    first = timings_table(group_typed(records, FAST), "m")
    again = timings_table(group_typed(records, FAST), "m")
    assert first.equals(again)


def test_a_cell_whose_processes_happen_to_agree_borrows_its_workers_spread():
    """Three processes that agree closely, among cells of the same worker whose processes
    differ by about 20%: its CI is as wide as the worker's spread warrants."""
    noisy = [rec for i, size in enumerate((64, 128, 256, 512))
             for rec in make_processes(3, process_spread=0.2, seed=20 + i, size=size, median=1e-3)]
    lucky = make_processes(3, process_spread=0.0, seed=99, size=1024, median=1e-3)
    cells = {mc.cell.size: mc for mc in group_typed(noisy + lucky, FAST)}
    alone = group_typed(lucky, FAST)[0]
    assert cells[1024].between_floor > 0 and alone.between_floor == 0
    assert cells[1024].interval("compute").rel_halfwidth > 5 * alone.interval("compute").rel_halfwidth


def test_the_host_peak_is_the_median_of_the_processes_beside_their_least_and_greatest():
    records = make_processes(3)
    for record, peak in zip(records, (1_000_000, 1_100_000, 2_000_000), strict=True):
        record["memory"] = {"host": {"peak_bytes": peak, "method": "tracemalloc"}}
    columns = memory_columns(group_typed(records, Analysis(resamples=100))[0])
    assert (columns["peak_host_bytes"], columns["peak_host_low_bytes"], columns["peak_host_high_bytes"]) == \
        (1_100_000, 1_000_000, 2_000_000)
    assert columns["peak_reason"] == "" and columns["peak_host_method"] == "tracemalloc"


def test_a_host_peak_not_measured_keeps_the_records_reason():
    records = make_processes(2)
    for record in records:
        record["memory"] = {"host": {"peak_bytes": None, "reason": "tracemalloc cannot see this allocator"}}
    columns = memory_columns(group_typed(records, Analysis(resamples=100))[0])
    assert math.isnan(columns["peak_host_bytes"]) and math.isnan(columns["peak_host_low_bytes"])
    assert columns["peak_reason"] == "tracemalloc cannot see this allocator"
