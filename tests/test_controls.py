"""Self-comparisons (A/A controls): a few cells of every run measured twice, as two cells
with their own processes, whose ratio is 1 in truth; any faster or slower verdict on one is
a false verdict, and the report says how many there were against what the CIs promise."""

import copy

import pandas as pd
from conftest import make_processes
from offloadbench import grid
from offloadbench.analysis.measured import Analysis, group_records
from offloadbench.analysis.settle import comparisons
from offloadbench.analysis.tables import build_tables_of, controls_table
from offloadbench.cells import Cell
from offloadbench.config import measured_grid, validate
from offloadbench.report.text.conditions import controls_line, controls_warning

GRID = {"ops": ["matmul", "sum_rows"], "libraries": ["numpy", "torch"], "devices": ["cpu", "cuda"],
        "dtypes": ["float32"], "sizes": [256, 1024, 2048], "threads": [1, "all"], "modes": ["eager"], "compiled": {},
        "op_max_size": {}}


def test_a_twin_is_a_cell_of_its_own_name_that_reads_back():
    cell = Cell("matmul", "numpy", "cpu", "float32", 256, "1")
    twin = cell.twinned()
    assert twin.key == "matmul/numpy-cpu-float32-n256-t1-aa" and Cell.from_key(twin.key) == twin
    assert twin.original == cell and twin.as_dict()["twin"] is True and "twin" not in cell.as_dict()
    assert Cell.from_dict(twin.as_dict()) == twin


def test_the_controls_span_sizes_and_libraries_on_the_devices_that_can_measure():
    cells = grid.expand({**GRID, "controls": 6}, usable={"cpu"})
    twins = [c for c in cells if c.twin]
    assert len(twins) == 6 and all(t.original in cells for t in twins)
    assert {t.size for t in twins} == {256, 1024, 2048} and {t.library for t in twins} == {"numpy", "torch"}
    assert {t.device for t in twins} == {"cpu"} and all(t.mode == "eager" for t in twins)
    assert grid.expand({**GRID, "controls": 6}, usable={"cpu"}) == cells  # the same in every job
    assert not [c for c in grid.expand(GRID) if c.twin]


def test_the_config_key_reaches_the_grid_the_jobs_expand():
    config = validate({"grid": GRID, "analysis": {"controls": 3}})
    assert measured_grid(config)["controls"] == 3 and "controls" not in config["grid"]
    assert validate({})["analysis"]["controls"] == 8


def twin_of(records):
    twins = copy.deepcopy(records)
    for r in twins:
        r["cell"]["twin"] = True
    return twins


def test_a_control_is_judged_like_any_ratio_and_a_false_verdict_is_counted():
    same = make_processes(3, process_spread=0.01, seed=1, median=1e-3, spread=0.01)
    off = make_processes(3, process_spread=0.01, seed=2, median=2e-3, spread=0.01, op="sum_rows")
    twins = twin_of(make_processes(3, process_spread=0.01, seed=3, median=1e-3, spread=0.01))
    twins += twin_of(make_processes(3, process_spread=0.01, seed=4, median=1e-3, spread=0.01, op="sum_rows"))
    cells = group_records(same + off + twins, Analysis(resamples=300), "box")
    table = controls_table(cells, "box")
    assert list(table["op"]) == ["matmul", "sum_rows"]
    by_op = table.set_index("op")
    assert by_op.loc["matmul", "verdict"] == "same" and not by_op.loc["matmul", "false_verdict"]
    assert by_op.loc["sum_rows", "verdict"] == "faster" and by_op.loc["sum_rows", "false_verdict"]  # a twin 2x faster
    assert {c.kind for c in comparisons(cells)} >= {"self-comparison"}
    tables = build_tables_of(cells, [], [], "box", Analysis(resamples=300))
    assert not tables["timings"].empty and len(tables["timings"]) == 2  # twins are no cells of the tables
    line = controls_line(table, 0.05)[0]
    assert line.startswith("- 2 self-comparisons") and "1 called faster or slower (50%)" in line
    assert "at most 2.5% each way (5% in all)" in line
    assert "Warning: 1 of 2 self-comparisons were called faster or slower" in controls_warning(table)


def test_no_warning_while_the_false_share_stays_within_the_promise():
    table = pd.DataFrame({"verdict": ["same"] * 19 + ["faster"], "false_verdict": [False] * 19 + [True]})
    assert controls_warning(table) == "" and "1 called faster or slower (5%)" in controls_line(table, 0.05)[0]
    assert controls_line(pd.DataFrame(), 0.05) == [] and controls_warning(pd.DataFrame()) == ""
