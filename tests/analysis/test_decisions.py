"""The decision rule on small synthetic tables, and the estimate of the processes that would
decide an open case (its words: report/test_decision_words.py)."""

import math

import pandas as pd
import pytest
from decision_cases import DELTA, cell, decide, only
from offloadbench.analysis.columns import DECISIONS
from offloadbench.analysis.decisions import STAY, UNSURE, USE, decision_tables
from offloadbench.analysis.tables import with_series_rows
from offloadbench.stats import independent_ratio, processes_to_decide
from offloadbench.verdicts import MAX_CI_SPAN


def test_the_fastest_variant_decided_faster_is_used():
    row = only(decide(cell("torch", 1024, 3.0, 2.9, 3.1), cell("torch compiled", 1024, 6.0, 5.8, 6.2,
                                                                  compile_s=0.8, startup=6.0, calls=100.0)))
    assert row["decision"] == USE and row["variant"] == "torch compiled"
    assert row["speedup"] == 6.0 and row["verdict"] == "faster"
    assert row["amortize_calls"] == 100.0 and row["amortize_calls_with_startup"] == pytest.approx(100 * 6.8 / 0.8)



def test_a_simpler_variant_that_cannot_be_told_apart_from_the_fastest_is_preferred():
    row = only(decide(cell("torch", 1024, 3.0, 2.8, 3.2), cell("torch compiled", 1024, 3.1, 2.9, 3.3),
                      cell("numpy compiled", 1024, 3.05, 2.85, 3.25)))
    assert row["variant"] == "torch"  # NumPy, torch eager, numpy compiled, torch compiled
    row = only(decide(cell("numpy compiled", 1024, 3.05, 2.85, 3.25), cell("torch compiled", 1024, 3.1, 2.9, 3.3)))
    assert row["variant"] == "numpy compiled"  # compiled NumPy keeps the NumPy code



def test_a_simpler_variant_must_itself_be_faster_than_numpy():
    row = only(decide(cell("torch", 1024, 1.3, 0.9, 1.8), cell("torch compiled", 1024, 1.5, 1.4, 1.6)))
    assert row["variant"] == "torch compiled"



def test_code_that_did_not_all_compile_is_never_the_answer():
    row = only(decide(cell("torch", 1024, 1.5, 1.4, 1.6),
                      cell("torch compiled", 1024, 9.0, 8.8, 9.2, fallback="graph break: print")))
    assert row["variant"] == "torch"



def test_one_row_per_op_device_dtype_and_cpu_thread_count():
    frame = decide(cell("torch", 1024, 1.5, 1.4, 1.6, threads="1"), cell("torch", 1024, 0.8, 0.7, 0.9, threads="all"),
                   cell("torch", 1024, 5.0, 4.5, 5.5, device="cuda"),
                   cell("torch", 1024, 2.0, 1.9, 2.1, op="other"))
    assert list(frame.columns) == [*DECISIONS, "by_size", "losses", "state_ratios"]  # the side tables' rows
    assert [len(answers) for answers in frame["by_size"]] == [1, 1, 1, 1]
    assert [(r.op, r.device, r.threads) for r in frame.itertuples()] == [
        ("heat", "cpu", "1"), ("heat", "cpu", "all"), ("heat", "cuda", "1"), ("other", "cpu", "1")]
    assert list(frame["decision"]) == [USE, STAY, USE, USE] and list(frame["variant"])[::2] == ["torch", "torch"]



def test_an_independent_ratio_adds_the_two_intervals_on_the_log_scale():
    value, low, high = independent_ratio((2.0, 2.0 / 1.1, 2.0 * 1.1), (1.0, 1 / 1.1, 1.2))
    assert value == pytest.approx(2.0)
    assert math.log(high / value) == pytest.approx(math.hypot(math.log(1.1), math.log(1.1)))
    assert math.log(value / low) == pytest.approx(math.hypot(math.log(1.1), math.log(1.2)))
    assert all(math.isnan(v) for v in independent_ratio((1.0, math.nan, 2.0), (1.0, 0.9, 1.1)))



def test_processes_to_decide_follow_the_spread_and_the_distance_from_the_boundary():
    near = processes_to_decide(0.95, 1.32, 1.12, 3, DELTA, MAX_CI_SPAN)
    wide = processes_to_decide(0.80, 1.57, 1.12, 3, DELTA, MAX_CI_SPAN)
    far = processes_to_decide(0.95, 1.89, 1.34, 3, DELTA, MAX_CI_SPAN)
    assert 3 < near < wide and far < wide
    assert processes_to_decide(1.0, 1.1, 1.0499, 3, DELTA, MAX_CI_SPAN) == math.inf  # just inside δ: never
    assert math.isnan(processes_to_decide(0.9, 1.2, 1.05, 1, DELTA, MAX_CI_SPAN))  # one process: no spread known



def test_a_decisions_sizes_come_back_from_their_csv_as_they_were_built(tmp_path):
    from offloadbench.analysis.tables import read_tables
    from offloadbench.csvsafe import write_csv

    cells = (cell("torch", 256, 0.8, 0.75, 0.85), cell("torch", 1024, 1.5, 1.4, 1.6), cell("torch", 2048, 1.0, 0.5, 2.0))
    decisions, sizes, _ = decision_tables(pd.DataFrame([c[0] for c in cells]), pd.DataFrame([c[1] for c in cells]),
                                          DELTA)
    assert list(sizes["size"]) == [256, 1024, 2048] and list(sizes["decision"]) == [STAY, USE, UNSURE]
    for name, frame in (("decisions", decisions), ("decision_sizes", sizes)):
        write_csv(frame, tmp_path / f"{name}.csv")
    read = read_tables({name: str(tmp_path / f"{name}.csv") for name in ("decisions", "decision_sizes")})
    built = with_series_rows({"decisions": decisions, "decision_sizes": sizes})
    assert list(read["decisions"]["by_size"]) == list(built["decisions"]["by_size"]) == [
        ((256, STAY, "numpy"), (1024, USE, "torch"), (2048, UNSURE, ""))]



def test_why_the_losers_lose_is_given_as_values():
    """losses.csv: a compiled variant whose code did not all compile, and a GPU variant that
    computes faster than NumPy but loses once the copies count, each a row of values."""
    from offloadbench.analysis.decisions import COMPILE_FALLBACK, COPIES

    row = only(decide(cell("torch", 1024, 1.5, 1.4, 1.6),
                      cell("torch compiled", 1024, 9.0, 8.8, 9.2, fallback="graph break: print")))
    assert [(l["variant"], l["reason"], l["compile_fallback"]) for l in row["losses"]] == [
        ("torch compiled", COMPILE_FALLBACK, "graph break: print")]
    row = only(decide(cell("torch", 1024, 0.6, 0.55, 0.65, device="cuda", device_speedup=3.0)))
    assert row["decision"] == STAY
    assert [(l["variant"], l["reason"], l["speedup"], l["end_to_end_speedup"]) for l in row["losses"]] == [
        ("torch", COPIES, 3.0, 0.6)]
    assert only(decide(cell("torch", 1024, 1.5, 1.4, 1.6, device="cuda", device_speedup=3.0)))["losses"] == ()


def test_a_loser_that_maps_far_more_fresh_pages_loses_to_them_where_they_cost_enough():
    from offloadbench.analysis.decisions import FRESH_PAGES, pages_loss

    loser = pd.Series({"faults_per_call": 4064.0, "median_s": 18.3e-3})
    winner = pd.Series({"faults_per_call": 1008.0, "median_s": 12e-3})
    loss = pages_loss(loser, winner, "torch", "numpy", fault_s=1e-6)
    assert loss["reason"] == FRESH_PAGES and (loss["pages_per_call"], loss["against_pages_per_call"]) == (4064, 1008)
    assert loss["pages_s"] == pytest.approx(3056e-6) and loss["call_s"] == 18.3e-3
    assert pages_loss(loser, winner, "torch", "numpy", fault_s=1e-8) is None  # 31 µs: under 5% of its time
    assert math.isnan(pages_loss(loser, winner, "torch", "numpy", fault_s=math.nan)["pages_s"])  # cost not known
    assert pages_loss(loser, pd.Series({"faults_per_call": 3000.0}), "torch", "numpy", 1e-6) is None  # not 2× as many


def test_a_decisions_losses_come_back_from_their_csv(tmp_path):
    from offloadbench.analysis.tables import read_tables
    from offloadbench.csvsafe import write_csv

    cells = (cell("torch", 1024, 0.6, 0.55, 0.65, device="cuda", device_speedup=3.0),)
    tables = dict(zip(("decisions", "decision_sizes", "losses"), decision_tables(
        pd.DataFrame([c[0] for c in cells]), pd.DataFrame([c[1] for c in cells]), DELTA), strict=True))
    for name, frame in tables.items():
        write_csv(frame, tmp_path / f"{name}.csv")
    read = read_tables({name: str(tmp_path / f"{name}.csv") for name in tables})
    (loss,) = read["decisions"]["losses"].iloc[0]
    assert (loss["variant"], loss["reason"], loss["speedup"], loss["end_to_end_speedup"]) == ("torch", "copies", 3.0, 0.6)


def _timing(op, library, status="ok", reason="", mode="eager", device="cpu", size=64, rel_err=1e-7, tolerance=1e-5):
    return {"machine": "box", "op": op, "library": library, "mode": mode, "device": device, "dtype": "float32",
            "size": size, "threads": "1", "variant": library if mode == "eager" else f"{library} {mode}",
            "family": "user kernels", "status": status, "reason": reason, "rel_err": rel_err, "tolerance": tolerance,
            "check_failed": rel_err > tolerance}


def test_every_op_asked_for_has_a_row_and_one_without_a_speedup_says_why():
    wrong = "wrong result: relative error 2.00e-03 in argument A exceeds the float32 tolerance 7.80e-06"
    timings = pd.DataFrame([
        _timing("jacobi", "numpy"), _timing("jacobi", "torch", "error", wrong, rel_err=2e-3, tolerance=7.8e-6),
        _timing("jacobi", "torch", "error", wrong, mode="compiled", rel_err=1e-3, tolerance=7.8e-6),
        _timing("broken", "numpy", "error", "ValueError during warm-up compute: no"), _timing("broken", "torch"),
        _timing("plain", "numpy"),  # a kernel without xp, eager only: nothing but NumPy ran
        _timing("crashes", "numpy"), _timing("crashes", "torch", "oom", "out of memory during warm-up: ..."),
        _timing("jacobi", "torch", "skipped", "cuda unavailable: no CUDA device is visible", device="cuda"),
    ])
    decisions, sizes, _ = decision_tables(pd.DataFrame(), timings, DELTA)
    rows = decisions.set_index("op")
    assert set(rows.index) == {"jacobi", "broken", "plain", "crashes"}  # the absent GPU adds no row
    assert (rows["decision"] == "none").all() and sizes.empty
    assert rows.loc["jacobi", "no_answer"] == "check_failed"
    assert rows.loc["jacobi", "no_answer_rel_err"] == 2e-3 and rows.loc["jacobi", "no_answer_tolerance"] == 7.8e-6
    assert rows.loc["jacobi", "no_answer_variants"] == "torch, torch compiled"
    assert rows.loc["broken", "no_answer"] == "baseline_failed" and "ValueError" in rows.loc["broken", "no_answer_reason"]
    assert rows.loc["plain", "no_answer"] == "no_variant"
    assert rows.loc["crashes", "no_answer"] == "failed" and rows.loc["crashes", "no_answer_status"] == "oom"


def test_a_series_with_a_speedup_keeps_its_decision_beside_one_without():
    speed, timing = cell("torch", 64, 3.0, 2.9, 3.1, op="fast")
    timings = pd.DataFrame([{**timing, "status": "ok", "reason": "", "variant": "torch", "machine": "box"},
                            _timing("slow", "numpy"), _timing("slow", "torch", "error", "TypeError during warm-up")])
    decisions, _, _ = decision_tables(pd.DataFrame([speed]), timings, DELTA)
    assert dict(zip(decisions["op"], decisions["decision"], strict=True)) == {"fast": USE, "slow": "none"}
