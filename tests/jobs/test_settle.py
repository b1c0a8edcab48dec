"""Replacing processes that disagree, and extra rounds until the verdicts settle, on
synthetic records: the rule picks the outlier, the replacement is recorded, undecided
comparisons get another round and decided ones do not, the cap holds, and an interrupted
settling plans the same round again."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FINGERPRINT, group_typed, make_processes, make_record, typed
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.processes import judge
from offloadbench.analysis.settle import PARTNER, REPLACES, plan_round
from offloadbench.analysis.tables import speedups_table, states_table, timings_table
from offloadbench.cells import Cell
from offloadbench.jobs import settle as settle_job
from offloadbench.measure import disturbance
from offloadbench.records import SettleRecord, load_settle
from offloadbench.records.types import WouldDecide
from offloadbench.report.text.conditions import left_out_phrase, settle_lines
from offloadbench.verdicts import DEPENDS_ON_STATE, UNSTABLE
from rounds import SETTINGS, settings_file

FAST = Analysis(resamples=300)
NUMPY = Cell("matmul", "numpy", "cpu", "float32", 256, "1")
TORCH = Cell("matmul", "torch", "cpu", "float32", 256, "1")


def processes(median, n=3, spread=0.01, process_spread=0.0, seed=0, library="numpy", rounds=3):
    records = make_processes(n, process_spread=process_spread, seed=seed, median=median, spread=spread,
                             library=library)
    for r in records:
        r["process"]["processes"] = rounds
    return records


def grouped(*sets):
    return {mc.cell: mc for mc in group_typed([r for s in sets for r in s], FAST)}


def drifting(record: dict) -> dict:
    return {**record, "diagnostics": {"unstable": True, "flags": ["drift: second half 40.0% slower than the first"]}}


def test_the_rule_picks_the_outlying_process_and_a_minority_at_most():
    logs = [math.log(v) for v in (1.00e-3, 1.02e-3, 15e-3)]
    records = typed([make_record(), make_record(), drifting(make_record())])
    verdict = judge(records, logs, planned=3, typical_spread=0.02)
    (wanted,) = verdict.wanted
    assert (wanted.index, wanted.flag.kind) == (2, "drift") and wanted.factor == pytest.approx(14.85, abs=0.01)
    assert verdict.counted == (0, 1, 2)  # not replaced yet: nothing is dropped without a replacement
    assert (verdict.disagree.processes, verdict.disagree.of, verdict.disagree.fault) == (1, 3, wanted.flag)
    replaced = judge(typed([make_record(), make_record(), drifting(make_record()), make_record()]),
                     [*logs, math.log(0.99e-3)], planned=3, typical_spread=0.02)
    assert replaced.counted == (0, 1, 3) and replaced.left_out[0].index == 2 and not replaced.disagree
    # agreeing processes within 20% are never outliers, however small the typical spread
    assert not judge(records, [math.log(v) for v in (1.0, 1.1, 1.18)], 3, 0.001).left_out
    assert not judge(records, [math.log(v) for v in (1.0, 1.1, 1.18)], 3, 0.001).wanted


def test_a_process_far_from_the_others_for_no_reason_of_its_own_is_kept_as_a_state():
    """The issue's NumPy heat step: one process at 3.1 ms a call, seven at 7-8 ms, each steady.
    The fast one is the function's speed in a program of its own: kept, and the cell has two
    states, whichever side the majority is on."""
    logs = [math.log(v) for v in (7.2e-3, 7.5e-3, 3.1e-3, 7.9e-3, 7.4e-3, 7.0e-3, 7.7e-3, 7.3e-3)]
    verdict = judge(typed([make_record() for _ in logs]), logs, planned=8, typical_spread=0.02)
    assert not verdict.left_out and not verdict.wanted and not verdict.disagree
    assert verdict.counted == tuple(range(8)) and verdict.states == ((2,), (0, 1, 3, 4, 5, 6, 7))
    # close processes are one state; two far apart disagree (which is right cannot be told)
    assert judge(typed([make_record()] * 3), [math.log(v) for v in (1.0, 1.1, 1.18)], 3, 0.001).states is None
    two = judge(typed([make_record()] * 2), [math.log(v) for v in (1.0, 2.0)], 2, 0.01)
    assert two.disagree and two.states is None


def test_a_cell_in_two_states_reports_both_and_judges_its_comparisons_in_each():
    base = processes(1e-3, n=6, rounds=6)
    for k, r in enumerate(base):  # rounds 1 and 2: NumPy in a slow state, mapping fresh pages
        slow = k < 2
        r["samples_s"] = [s * (1.6 if slow else 1.0) for s in r["samples_s"]]
        r["phases"] = {"compute": {"samples_s": r["samples_s"], "calls_per_sample": 1, "warmup_s": [],
                                   "faults_per_call": [4096.0 if slow else 0.0] * len(r["samples_s"]),
                                   "rel_ci": 0.01, "converged": True}}
    torch = processes(1.2e-3, n=6, library="torch", seed=5, rounds=6)  # faster than the slow state only
    cells = grouped(base, torch)
    states = cells[NUMPY].states
    assert [r.round for r in states.fast] == [3, 4, 5, 6] and [r.round for r in states.slow] == [1, 2]
    timings = timings_table(list(cells.values()), "m").set_index("library")
    timing = timings.loc["numpy"]
    assert timing["state_fast_s"] == pytest.approx(1.0e-3, rel=0.05)
    assert timing["state_slow_s"] == pytest.approx(1.6e-3, rel=0.05)
    assert (timing["state_fast_rounds"], timing["state_slow_rounds"]) == ("3 4 5 6", "1 2")
    assert (timing["state_fast_faults_per_call"], timing["state_slow_faults_per_call"]) == (0, 4096)
    assert math.isnan(timings.loc["torch", "state_slow_s"]) and timings.loc["torch", "state_slow_rounds"] == ""
    row = speedups_table(list(cells.values()), "m").iloc[0]
    assert row["speedup_verdict"] == "undecided" and row["states_answer"] == "depends"
    fast, slow = states_table(list(cells.values()), "m").to_dict("records")
    assert (fast["base_state"], fast["contender_state"], slow["base_state"]) == ("fast", "", "slow")
    assert slow["ratio"] == pytest.approx(1.33, abs=0.05) and (slow["rounds"], slow["of_rounds"]) == (2, 6)
    assert fast["ratio"] == pytest.approx(0.83, abs=0.05) and fast["rounds"] == 4
    assert slow["base_cell"] == "numpy-cpu-float32-n256-t1" and slow["base_state_s"] == pytest.approx(1.6e-3, rel=0.05)
    assert fast["kind"] == "speedup" and fast["library"] == "torch" and math.isnan(fast["contender_state_s"])
    # a speedup that holds in both states keeps its verdict
    faster = processes(0.3e-3, n=6, library="torch", seed=5, rounds=6)
    row = speedups_table(list(grouped(base, faster).values()), "m").iloc[0]
    assert row["speedup_verdict"] == "faster" and row["states_answer"] == "holds"
    plan = plan_round(list(cells.values()), max_processes=8)
    assert not plan.undecided  # more processes would not change that it depends on the state


def test_a_disturbed_process_is_replaced_and_the_replacement_recorded():
    records = processes(1e-3, n=4)
    records[1]["disturbance"] = {"disturbed": True, "others_cores": 0.9, "cpu_pressure": 0.15, "window_s": 1.0}
    flag = disturbance.flag_for(records[1]["disturbance"])  # as the worker words it
    records[1]["diagnostics"] = {"unstable": True, "flags": [flag.to_json()]}
    records[1]["samples_s"] = [s * 3 for s in records[1]["samples_s"]]
    mc = grouped(records)[NUMPY]
    # the process is named with its flag's own words: one wording, one pressure threshold
    (left,) = [row for row in mc.flag_rows() if row["left_out_round"] is not None]
    assert (left["left_out_round"], left["replaced"], left["text"], left["processes"], left["of_processes"]) == \
        (2, True, flag.text, 1, 4)
    assert left_out_phrase([left]) == f"1 of 4 processes replaced (round 2: {flag.text})"
    assert "waited" not in flag.text  # 15% is under the threshold of a disturbing pressure
    assert [r.round for r in mc.counted] == [1, 3, 4]
    assert mc.median("compute") == mc.median("compute") and abs(mc.median("compute") / 1e-3 - 1) < 0.05
    assert mc.disturbed_cores == 0.9


def test_a_verdict_never_rests_on_a_cell_disturbed_in_half_its_processes():
    """Disturbed processes that could not be replaced (the cap reached) stay counted; where
    they are half or more, the cell's comparisons are undecided whatever their CI, and the
    reason names the disturbance. One disturbed process of four leaves the verdict alone."""
    def speedup(disturbed_rounds):
        base = processes(1e-3, n=4, rounds=4)
        for r in base:
            if r["process"]["round"] in disturbed_rounds:
                r["disturbance"] = {"disturbed": True, "others_cores": 0.61, "window_s": 1.0}
        cells = grouped(base, processes(0.5e-3, n=4, library="torch", seed=5, rounds=6))
        return speedups_table(list(cells.values()), "m").iloc[0], cells[NUMPY]

    row, numpy = speedup({1, 2})
    assert row["speedup_verdict"] == "undecided"
    assert row["speedup_undecided"] == UNSTABLE
    assert numpy.unsettled and numpy.judgement.disturbed and numpy.judgement.disagree is None
    assert len(numpy.counted) == 4  # kept, for lack of replacements: the verdict, not the data, gives way
    row, numpy = speedup({1})
    assert row["speedup_verdict"] == "faster" and not numpy.unsettled


def test_an_outlier_makes_a_plan_that_replaces_it_beside_its_partner():
    base = processes(1e-3)
    base[1]["samples_s"] = [s * 1600 for s in base[1]["samples_s"]]  # the disturbed matmul of the issue
    base[1] = drifting(base[1])  # its own samples show why
    torch = processes(0.5e-3, library="torch", seed=5)
    cells = list(grouped(base, torch).values())
    plan = plan_round(cells, max_processes=6)
    assert plan.replacing == {NUMPY.key: 2} and plan.cells[NUMPY] == REPLACES  # the process of round 2
    (out,) = cells[0].judgement.wanted
    assert out.factor == pytest.approx(1601.74, abs=0.01) and out.flag.kind == "drift"
    assert set(plan.cells) == {NUMPY, TORCH}  # the partner shares the round: their ratio stays paired
    # before it is replaced, the verdict is undecided, not a wild ratio
    row = speedups_table(cells, "m").iloc[0]
    assert row["speedup_verdict"] == "undecided" and row["speedup_undecided"] == UNSTABLE
    assert cells[0].unsettled and cells[0].judgement.disagree is not None and not cells[1].unsettled


def test_undecided_comparisons_get_another_round_and_decided_ones_do_not():
    decided = list(grouped(processes(1e-3), processes(0.5e-3, library="torch", seed=3)).values())
    assert plan_round(decided, max_processes=6).cells == {}
    close = list(grouped(processes(1e-3, process_spread=0.06, seed=1),
                         processes(0.89e-3, library="torch", seed=2, process_spread=0.06)).values())
    plan = plan_round(close, max_processes=6)
    assert set(plan.cells) == {NUMPY, TORCH} and plan.undecided == [f"speedup of {TORCH.key}"]
    capped = plan_round(close, max_processes=3)
    assert capped.cells == {} and capped.capped and "speedup of" in capped.capped[0]


def test_a_comparison_more_processes_cannot_decide_within_the_cap_is_not_measured_again():
    """A ratio of 1.01 with 6% between processes needs far more than 6 processes to be shown
    the same: no extra round goes to it, and the plan says what would decide it."""
    tied = list(grouped(processes(1e-3, process_spread=0.06, seed=1),
                        processes(0.99e-3, library="torch", seed=2, process_spread=0.06)).values())
    plan = plan_round(tied, max_processes=6)
    assert plan.cells == {} and list(plan.cannot_decide) == [f"speedup of {TORCH.key}"]
    would = plan.cannot_decide[f"speedup of {TORCH.key}"]
    assert would["processes"] > 6 and would["shares_cores"] is False


@pytest.mark.parametrize("advice", [
    {"a": {"processes": 40, "shares_cores": True}, "b": {"processes": None, "shares_cores": False}},
    {"a": "about 40 processes per cell would; its cells use every core, shared with the orchestrator, so fewer "
          "threads than cores (or a machine with more) would measure them alone",
     "b": "no number of processes would"}], ids=["typed", "words"])
def test_the_report_words_what_would_decide_from_the_settle_records_values(advice):
    settle = SettleRecord.from_json({"planned_rounds": 3, "max_processes": 6, "cannot_decide": advice})
    assert settle.cannot_decide == {"a": WouldDecide(40, True), "b": WouldDecide(None, False)}
    (line,) = [line for line in settle_lines(settle, pd.DataFrame(), pd.DataFrame()) if "cannot be decided" in line]
    assert "a: about 40 processes per cell would (a); b: no number of processes would." in line
    assert line.count("fewer threads than cores") == 1


def test_the_likeliest_decisions_go_first_when_the_budget_buys_only_some():
    """Two undecided comparisons, one of them nearly decided: a budget for two cells buys that one."""
    near = processes(1e-3, process_spread=0.06, seed=2) + processes(0.90e-3, library="torch", seed=3,
                                                                    process_spread=0.06)  # needs about 4
    far = [dict(r, cell={**r["cell"], "op": "fft2"}) for r in
           processes(1e-3, process_spread=0.08, seed=3) + processes(0.80e-3, library="torch", seed=4,
                                                                    process_spread=0.08)]  # needs about 5
    cells = list(grouped(near, far).values())
    plan = plan_round(cells, max_processes=6)
    assert plan.undecided[0] == f"speedup of {TORCH.key}" and len(plan.undecided) == 2
    cut = plan.within(lambda chosen: len(chosen) <= 2)
    assert cut.undecided == [f"speedup of {TORCH.key}"] and set(cut.cells) == {NUMPY, TORCH}


def write(raw: Path, records):
    for r in records:
        c = Cell.from_dict(r["cell"])
        path = raw / c.key / f"p{r['process']['round']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r))


def test_an_interrupted_settling_plans_the_same_round_again_and_the_cap_ends_it(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    base = processes(1e-3)
    base[2]["samples_s"] = [s * 40 for s in base[2]["samples_s"]]
    base[2] = drifting(base[2])
    write(raw, base + processes(0.5e-3, library="torch", seed=4))
    (raw / "rounds").mkdir(parents=True)
    for k in (1, 2, 3):
        (raw / "rounds" / f"round-{k}.json").write_text(json.dumps({"kind": "round", "round": k, "took_s": 100.0}))
    environment = tmp_path / "environment.json"
    environment.write_text(json.dumps({"fingerprint": FINGERPRINT}))
    grid = {"ops": ["matmul"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
            "sizes": [256], "threads": [1], "modes": ["eager"], "compiled": {}, "op_max_size": {}}
    argv = ["--machine", "m", "--grid", json.dumps(grid),
            "--settings", str(settings_file(tmp_path, {**SETTINGS, "processes": 3, "max_processes": 5,
                                                       "extra_time_fraction": 5.0})),
            "--analysis", json.dumps({"bootstrap_resamples": 300, "random_state": 0, "confidence": 0.95, "min_effect": 0.05}),
            "--environment", str(environment), "--raw", str(raw), "--out", str(tmp_path / "settle.json")]
    asked = []

    def interrupted(self, k, chosen):
        asked.append((k, sorted(c.key for c in chosen)))
        return 130  # as if the user pressed Ctrl-C in the middle of the round

    monkeypatch.setattr(settle_job.Settling, "measure", interrupted)
    assert settle_job.main(argv) == 130
    assert settle_job.main(argv) == 130
    assert asked[0] == asked[1] == (4, sorted([NUMPY.key, TORCH.key]))

    def measured(self, k, chosen):  # the round finishes: a process that agrees, for each cell
        asked.append((k, sorted(c.key for c in chosen)))
        for cell in chosen:
            rng = np.random.default_rng(k)
            median = 1e-3 if cell.library == "numpy" else 0.5e-3
            record = make_record(library=cell.library, median=median, seed=int(rng.integers(1000)), round=k, rounds=3)
            write(raw, [record])
        (raw / "rounds" / f"extra-{k}.json").write_text(json.dumps({"kind": "round", "round": k, "took_s": 5.0, "extra": True}))
        return 0

    monkeypatch.setattr(settle_job.Settling, "measure", measured)
    assert settle_job.main(argv) == 0
    summary = load_settle(tmp_path / "settle.json")  # as the report reads it: through its schema
    assert [r["round"] for r in summary.extra_rounds] == [4]
    assert summary.extra_rounds[0]["replacing"] == {NUMPY.key: 3}
    assert summary.extra_rounds[0]["why"] == {NUMPY.key: REPLACES, TORCH.key: PARTNER}
    assert summary.undecided_at_end == ()


def test_the_time_budget_comes_from_the_records_and_stops_the_extra_rounds(tmp_path, monkeypatch):
    """A planned round rerun with nothing to do keeps its records' seconds: the budget holds."""
    raw = tmp_path / "raw"
    write(raw, processes(1e-3, process_spread=0.06, seed=1) + processes(0.89e-3, library="torch", seed=2,
                                                                         process_spread=0.06))
    (raw / "rounds").mkdir(parents=True)
    environment = tmp_path / "environment.json"
    environment.write_text(json.dumps({"fingerprint": FINGERPRINT}))
    grid = {"ops": ["matmul"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
            "sizes": [256], "threads": [1], "modes": ["eager"], "compiled": {}, "op_max_size": {}}
    base = ["--machine", "m", "--grid", json.dumps(grid), "--environment", str(environment), "--raw", str(raw),
            "--analysis", json.dumps({"bootstrap_resamples": 300, "random_state": 0, "confidence": 0.95, "min_effect": 0.05}),
            "--out", str(tmp_path / "settle.json")]
    monkeypatch.setattr(settle_job.Settling, "measure", lambda self, k, chosen: 1)  # must not be reached
    settings = {**SETTINGS, "processes": 3, "max_processes": 6, "extra_time_fraction": 0.5}  # 6 s: a 3 s budget
    assert settle_job.main([*base, "--settings", str(settings_file(tmp_path, settings))]) == 0
    summary = json.loads((tmp_path / "settle.json").read_text())
    assert summary["extra_rounds"] == [] and "time budget" in summary["stopped"] and summary["budget_s"] == 3.0
    assert summary["undecided_at_end"] == [f"speedup of {TORCH.key}"]


def test_a_cell_of_eight_processes_leaves_out_one_with_a_fault_of_its_own_without_a_replacement():
    logs = [math.log(v) for v in (1.0, 1.02, 0.98, 1.01, 1.6, 0.99, 1.03, 1.0)]
    records = typed([drifting(make_record()) if k == 4 else make_record() for k in range(8)])
    verdict = judge(records, logs, planned=8, typical_spread=0.02)
    assert verdict.counted == (0, 1, 2, 3, 5, 6, 7) and verdict.left_out[0].index == 4 and not verdict.disagree
    three = judge(records[:3] + records[4:5], logs[:3] + logs[4:5], planned=4, typical_spread=0.02)
    assert three.counted == (0, 1, 2)  # 3 of 4 are enough to go on
    assert judge(records[:2] + records[4:5], logs[:2] + logs[4:5], 3, 0.02).wanted  # 2 of 3 are not


def test_a_state_seen_in_one_round_only_is_said_but_leaves_the_verdict_to_the_interval():
    base = processes(1e-3, n=8, rounds=8)
    base[0]["samples_s"] = [s * 1.6 for s in base[0]["samples_s"]]  # round 1 only
    torch = processes(1.2e-3, n=8, library="torch", seed=5, rounds=8)
    row = speedups_table(list(grouped(base, torch).values()), "m").iloc[0]
    assert row["states_answer"] == "one_round" and row["speedup_undecided"] != DEPENDS_ON_STATE


def test_a_round_the_whole_group_ran_slower_in_is_no_state_of_one_cell():
    """A VM slower for all of round 3: every cell of the bout slower by 1.6×. Pairing cancels it;
    the outlier rule and the states see the processes' own medians, which agree."""
    sets = [processes(1e-3, n=6, rounds=6), processes(0.5e-3, n=6, library="torch", seed=5, rounds=6),
            make_processes(6, seed=7, median=0.7e-3, threads="all")]
    for records in sets:
        records[2]["samples_s"] = [s * 1.6 for s in records[2]["samples_s"]]
    cells = grouped(*sets)
    assert all(mc.states is None and not mc.judgement.left_out for mc in cells.values())
    assert cells[NUMPY].round_speed[3] == pytest.approx(math.log(1.6) * 5 / 6, rel=0.1)


def test_one_extra_round_is_said_in_the_singular():
    settle = SettleRecord.from_json({"planned_rounds": 3, "max_processes": 6, "comparisons": 10, "spent_s": 2.0,
                                     "budget_s": 60.0, "extra_rounds": [{"round": 4}], "undecided_at_start": ["a"],
                                     "rounds_needed": {"a": 1}, "stopped": "every verdict settled"})
    (line,) = settle_lines(settle, pd.DataFrame(), pd.DataFrame())
    assert "1 comparison needed up to 1 more round (1 extra round, 2 s of a 1m00s budget)" in line
