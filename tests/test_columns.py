"""The tables' columns are declared once (analysis/columns.py), with their meaning: the tables
are built in that order and nothing undeclared slips in; estimates and their CIs are read
through one helper."""

import math

import pandas as pd
import pytest
from conftest import gpu_machine_records
from offloadbench.analysis.columns import DECLARED, ci_columns, interval, weak_cells
from offloadbench.analysis.measured import Analysis, group_records
from offloadbench.analysis.tables import timing_row

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", DECLARED)
def test_tables_are_built_in_the_declared_columns(gpu_tables, name):
    assert list(gpu_tables[name].columns) == list(DECLARED[name])


@pytest.mark.parametrize("name", DECLARED)
def test_the_shipped_reference_tables_have_the_declared_columns(name):
    written = pd.read_csv(ROOT / "tests" / "data" / "h200" / f"{name}.csv", nrows=0).columns.tolist()
    assert written == list(DECLARED[name])


def test_a_timing_row_holds_no_undeclared_column():
    cells = group_records(gpu_machine_records(), Analysis(resamples=50), "gpubox")
    for mc in cells:
        assert set(timing_row(mc, "gpubox")) <= set(DECLARED["timings"]), mc.cell.label


@pytest.mark.parametrize("name", DECLARED)
def test_every_column_says_what_it_means(name):
    assert all(isinstance(meaning, str) and len(meaning) > 5 for meaning in DECLARED[name].values())


@pytest.mark.parametrize("name", DECLARED)
def test_every_ci_column_belongs_to_a_declared_estimate(name):
    columns = DECLARED[name]
    estimates = [c for c in columns if all(end in columns for end in ci_columns(c))]
    ends = {end for c in estimates for end in ci_columns(c)}
    assert {c for c in columns if "ci_low" in c or "ci_high" in c} == ends


def test_interval_reads_an_estimate_and_its_ci():
    row = pd.Series({"median_s": 2.0, "ci_low_s": 1.5, "ci_high_s": 2.5, "speedup": 3.0, "speedup_ci_low": 2.0,
                     "speedup_ci_high": "x"})
    assert interval(row, "median_s") == (2.0, 1.5, 2.5)
    value, low, high = interval(row, "speedup")
    assert (value, low) == (3.0, 2.0) and math.isnan(high)
    assert all(math.isnan(v) for v in interval(row, "gflops"))


def test_weak_rows_are_the_unstable_and_those_sharing_cores():
    frame = pd.DataFrame({"unstable": ["", "two modes", None, ""], "shares_cores": [False, False, True, None]})
    assert weak_cells(frame).tolist() == [False, True, True, False]
