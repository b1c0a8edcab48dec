"""The tables' columns are declared once (analysis/columns.py), with their meaning: the tables
are built in that order and nothing undeclared slips in; estimates and their CIs are read
through one helper."""

import math

import pandas as pd
import pytest
from conftest import gpu_machine_records, group_typed
from offloadbench.analysis.columns import DECLARED, ci_columns, interval, is_weak_row, weak_cells
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.tables import timing_row

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", DECLARED)
def test_tables_are_built_in_the_declared_columns(gpu_tables, name):
    from offloadbench.analysis.tables import roofs_table

    built = gpu_tables[name] if name in gpu_tables else roofs_table([], "gpubox", Analysis(resamples=50))
    assert list(built.columns) == list(DECLARED[name])


@pytest.mark.parametrize("name", DECLARED)
def test_the_shipped_reference_tables_have_the_declared_columns(name):
    written = pd.read_csv(ROOT / "tests" / "data" / "h200" / f"{name}.csv", nrows=0).columns.tolist()
    assert written == list(DECLARED[name])


def test_a_timing_row_holds_no_undeclared_column():
    cells = group_typed(gpu_machine_records(), Analysis(resamples=50), "gpubox")
    for mc in cells:
        assert set(timing_row(mc, "gpubox")) <= set(DECLARED["timings"]), mc.cell.label


@pytest.mark.parametrize("name", DECLARED)
def test_every_column_says_what_it_means(name):
    assert all(isinstance(meaning, str) and len(meaning) > 5 for meaning in DECLARED[name].values())


@pytest.mark.parametrize("name", DECLARED)
def test_every_column_has_a_kind(name):
    from offloadbench.analysis.columns import KINDS, Column

    for column, meaning in DECLARED[name].items():
        assert isinstance(meaning, Column) and meaning.kind.name in KINDS, column


def test_the_column_kinds_have_one_home():
    from offloadbench.analysis import tables

    assert not hasattr(tables, "TEXT_COLUMNS")


@pytest.mark.parametrize("name", DECLARED)
def test_the_shipped_and_the_built_tables_read_back_by_their_kinds(gpu_tables, tmp_path, name):
    from offloadbench.analysis.tables import read_table
    from offloadbench.csvsafe import write_csv

    assert read_table(name, str(ROOT / "tests" / "data" / "h200" / f"{name}.csv")).shape[1] == len(DECLARED[name])
    if name in gpu_tables:
        write_csv(gpu_tables[name], tmp_path / f"{name}.csv")
        assert len(read_table(name, str(tmp_path / f"{name}.csv"))) == len(gpu_tables[name])


def test_the_built_tables_of_every_figure_case_read_back(tmp_path):
    """Every table of the three figure grids (all catalogue ops, kernels, compiled, GPU
    cells) fits its declared kinds as written."""
    import figure_cases
    from offloadbench.analysis.tables import read_table
    from offloadbench.csvsafe import write_csv

    cases = {"default": figure_cases.default_tables(), "catalogue": figure_cases.catalogue_tables(),
             "pages": figure_cases.pages_tables(), "laptop": figure_cases._machine("laptop")[1]}
    for case, tables in cases.items():
        for name, frame in tables.items():
            write_csv(frame, tmp_path / f"{name}.csv")
            assert len(read_table(name, str(tmp_path / f"{name}.csv"))) == len(frame), (case, name)


@pytest.mark.parametrize("name, column, value, words", [
    ("decisions", "from_size", "abc", "holds 'abc' in row 2, not a whole number ≥ 1"),
    ("decisions", "size", "inf", "holds inf in row 2, not a whole number ≥ 1"),
    ("decisions", "op", "", "is empty in row 2 (it needs text)"),
    ("decisions", "speedup", "fast", "holds 'fast' in row 2, not a number"),
    ("decisions", "weak", "yes", "holds 'yes' in row 2, not True or False"),
    ("timings", "n_samples", "2.5", "holds 2.5 in row 2, not a whole number ≥ 0"),
    ("speedups", "speedup", "True", "holds 'True' in row 2, not a number"),
    ("transfer", "bytes", "-1", "holds -1 in row 2, not a whole number ≥ 1"),
])
def test_a_value_that_does_not_fit_its_column_is_one_line(gpu_tables, tmp_path, name, column, value, words):
    from offloadbench.analysis.tables import read_table
    from offloadbench.errors import UserError

    path = tmp_path / f"{name}.csv"
    frame = pd.read_csv(ROOT / "tests" / "data" / "h200" / f"{name}.csv", dtype=str, keep_default_na=False)
    frame.loc[1, column] = value
    frame.to_csv(path, index=False)
    with pytest.raises(UserError) as error:
        read_table(name, str(path))
    assert str(error.value) == f"{path}: the {name} table's column {column!r} {words}; aggregate again"


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
    # a ratio's table says flagged (either cell), as written or read back as text; older ones worded it
    ratios = pd.DataFrame({"flagged": [True, False, "True", "False"], "shares_cores": [False, False, False, True]})
    assert weak_cells(ratios).tolist() == [True, False, True, True]
    assert [is_weak_row(row) for _, row in ratios.iterrows()] == [True, False, True, True]
