"""Self-comparisons (A/A controls): in every group, its NumPy cell measured twice, as two
cells in two worker processes taking turns in the group's bout, whose ratio is 1 in truth;
any faster or slower verdict on one is a false verdict, and the report states the run's
false-verdict rate with an exact binomial interval against what the CIs promise."""

import copy
from collections import Counter

import pandas as pd
from conftest import group_typed, make_processes
from offloadbench import grid
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.pairs import comparisons
from offloadbench.analysis.tables import build_tables_of, controls_table
from offloadbench.cells import Cell
from offloadbench.config import measured_grid, validate
from offloadbench.report.text.conditions import controls_line, controls_warning
from offloadbench.verdicts import Judging

GRID = {"ops": ["matmul", "sum_rows"], "libraries": ["numpy", "torch"], "devices": ["cpu", "cuda"],
        "dtypes": ["float32"], "sizes": [256, 1024, 2048], "threads": [1, "all"], "modes": ["eager"], "compiled": {},
        "op_max_size": {}}


def test_a_twin_is_a_cell_of_its_own_name_that_reads_back():
    cell = Cell("matmul", "numpy", "cpu", "float32", 256, "1")
    twin = cell.twinned()
    assert twin.key == "matmul/numpy-cpu-float32-n256-t1-aa" and Cell.from_key(twin.key) == twin
    assert twin.original == cell and twin.as_dict()["twin"] is True and "twin" not in cell.as_dict()
    assert Cell.from_dict(twin.as_dict()) == twin


def test_every_group_gets_a_twin_of_its_numpy_cell_at_each_thread_count_by_default():
    cells = grid.expand({**GRID, "controls": "all"}, usable={"cpu"})
    twins = [c for c in cells if c.twin]
    assert len({c.group for c in cells}) == 6 and len(twins) == 12 and all(t.original in cells for t in twins)
    assert {(t.group, t.threads) for t in twins} == {(c.group, c.threads) for c in cells
                                                      if c.library == "numpy" and not c.twin}
    assert {t.size for t in twins} == {256, 1024, 2048} and {t.library for t in twins} == {"numpy"}
    assert {t.device for t in twins} == {"cpu"} and all(t.mode == "eager" for t in twins)
    assert grid.expand({**GRID, "controls": "all"}, usable={"cpu"}) == cells  # the same in every job
    assert not [c for c in grid.expand(GRID) if c.twin]


def test_a_count_of_controls_spreads_them_over_the_groups_by_size():
    twins = [c for c in grid.expand({**GRID, "controls": 3}, usable={"cpu"}) if c.twin]
    assert len(twins) == 3 and {t.size for t in twins} == {256, 1024, 2048}
    assert {t.threads for t in twins} == {"1", "all"}  # the thread counts in turn over the chosen groups


def test_controls_beyond_one_per_group_give_groups_their_other_thread_count():
    six = [c for c in grid.expand({**GRID, "controls": 6}, usable={"cpu"}) if c.twin]
    assert len({t.group for t in six}) == 6 and {t.threads for t in six} == {"1", "all"}
    nine = [c for c in grid.expand({**GRID, "controls": 9}, usable={"cpu"}) if c.twin]
    assert set(six) < set(nine) and len(nine) == 9  # the first pass kept, three groups given their second
    assert sorted(Counter(t.group for t in nine).values()) == [1, 1, 1, 2, 2, 2]
    assert all(len({t.threads for t in nine if t.group == g}) == n for g, n in Counter(t.group for t in nine).items())
    assert len([c for c in grid.expand({**GRID, "controls": 50}, usable={"cpu"}) if c.twin]) == 12  # at most all


def test_the_config_key_reaches_the_grid_the_jobs_expand():
    config = validate({"grid": GRID, "analysis": {"controls": 3}})
    assert measured_grid(config)["controls"] == 3 and "controls" not in config["grid"]
    assert validate({})["analysis"]["controls"] == "all"


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
    cells = group_typed(same + off + twins, Analysis(resamples=300), "box")
    table = controls_table(cells, "box")
    assert list(table["op"]) == ["matmul", "sum_rows"]
    by_op = table.set_index("op")
    assert by_op.loc["matmul", "verdict"] == "same" and not by_op.loc["matmul", "false_verdict"]
    assert by_op.loc["sum_rows", "verdict"] == "faster" and by_op.loc["sum_rows", "false_verdict"]  # a twin 2x faster
    assert {c.kind for c in comparisons(cells)} >= {"self-comparison"}
    tables = build_tables_of(cells, [], [], "box", Analysis(resamples=300))
    assert not tables["timings"].empty and len(tables["timings"]) == 2  # twins are no cells of the tables
    line = controls_line(table, Judging())[0]
    assert line.startswith("- 2 self-comparisons") and "1 of 2 (50%; 95% CI 1.3%–99%) called faster or slower" in line
    assert "at most 2.5% each way (5% in all)" in line
    warning = controls_warning(table, Judging())  # 1 of 2 may be chance: too few to tell from 5%
    assert warning.startswith("Note: 1 of 2 (50%; 95% CI 1.3%–99%) self-comparisons were called faster or slower")
    assert "too few to tell" in warning


def test_a_false_share_beyond_doubt_above_the_promise_warns_for_every_verdict():
    table = pd.DataFrame({"verdict": ["same"] * 14 + ["faster"] * 6, "false_verdict": [False] * 14 + [True] * 6})
    warning = controls_warning(table, Judging())
    assert warning.startswith("Warning: 6 of 20 (30%; 95% CI") and "measure again on a quieter machine" in warning


def test_no_warning_while_the_false_share_stays_within_the_promise():
    table = pd.DataFrame({"verdict": ["same"] * 19 + ["faster"], "false_verdict": [False] * 19 + [True]})
    assert controls_warning(table, Judging()) == ""
    assert "1 of 20 (5%; 95% CI 0.13%–25%) called faster" in controls_line(table, Judging())[0]
    assert controls_line(pd.DataFrame(), Judging()) == [] and controls_warning(pd.DataFrame(), Judging()) == ""
