"""The decisions in words: the report's sentences, the decision table in the terminal and
LaTeX with its legend and notes, the lead paragraph and the summary of a folder or bundle,
from the rule's rows on small synthetic tables (decision_cases.py)."""

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from decision_cases import DELTA, cell, decide, only
from offloadbench.analysis.decisions import DEPENDS, STAY, UNSURE, USE
from offloadbench.report.text.decisions import answer, decision_table, lead_paragraph, open_sizes, plain_table
from offloadbench.report.text.latex_macros import decision_macro
from offloadbench.report.text.latex_tables import decisions_tex


def test_numpy_stays_when_nothing_is_or_can_be_faster():
    row = only(decide(cell("torch", 1024, 0.8, 0.75, 0.85)))
    assert row["decision"] == STAY and row["variant"] == "numpy" and row["compared_variant"] == "torch"
    assert "stay with NumPy: at n = 1024 the best alternative, torch, is slower, 0.80×" in answer(row, DELTA)
    # undecided, but its CI never reaches 1 + δ: it cannot pay by the minimum effect either
    row = only(decide(cell("torch", 1024, 0.97, 0.90, 1.04)))
    assert row["decision"] == STAY and row["verdict"] == "undecided"



def test_an_open_case_cannot_tell_yet_and_says_what_would_decide_it():
    row = only(decide(cell("torch", 1024, 1.12, 0.95, 1.32)))
    assert row["decision"] == UNSURE and row["variant"] == "" and open_sizes(row) == [1024]
    assert 3 < row["processes_to_decide"] < 100
    text = answer(row, DELTA)
    assert "cannot tell yet" in text and f"about {int(row['processes_to_decide'])} processes per cell" in text
    assert "estimated from the spread between processes seen, 3 now" in text



def test_an_open_case_whose_cell_was_disturbed_waits_for_a_quieter_machine_not_more_processes():
    speed, timing = cell("torch", 1024, 1.12, 0.95, 1.32)
    row = only(decide((speed | {"disturbed": True}, timing)))
    assert row["decision"] == UNSURE and row["needs_quieter_machine"] and math.isnan(row["processes_to_decide"])
    text = answer(row, DELTA)
    assert "a quieter machine would decide it" in text and "processes per cell would" not in text
    terminal = "\n".join(plain_table(pd.DataFrame([row]), DELTA))
    assert "a quieter machine" in terminal and "A quieter machine would decide it:" in " ".join(terminal.split())
    # an undisturbed open option is the likelier to decide, and says what processes would
    quiet = cell("torch compiled", 1024, 1.10, 0.96, 1.26)
    row = only(decide((speed | {"disturbed": True}, timing), quiet))
    assert row["compared_variant"] == "torch compiled" and not row["needs_quieter_machine"]
    assert 3 < row["processes_to_decide"] < 100



def test_a_ratio_whose_ci_spans_more_than_twice_is_no_number_anywhere():
    row = only(decide(cell("torch", 1024, 2.7, 0.33, 22.9)))
    assert row["decision"] == UNSURE
    for text in (answer(row, DELTA), "\n".join(plain_table(pd.DataFrame([row]), DELTA)), decisions_tex(pd.DataFrame([row]), DELTA)):
        assert "2.7" not in text and "22.9" not in text and "spans" in text



def test_from_which_size_it_pays_and_what_the_smaller_sizes_say():
    frame = decide(cell("torch", 256, 0.8, 0.75, 0.85), cell("torch", 1024, 1.5, 1.4, 1.6),
                   cell("torch", 2048, 2.0, 1.9, 2.1))
    row = only(frame)
    assert row["by_size"] == ((256, STAY, "numpy"), (1024, USE, "torch"), (2048, USE, "torch"))
    assert row["from_size"] == 1024
    assert answer(row, DELTA).startswith("use torch from n = 1024: at n = 2048 it is 2.00× (95% CI 1.90–2.10) as fast")
    assert answer(row, DELTA).endswith("below that, stay with NumPy.")



def test_a_gpu_break_even_between_sizes_is_the_size_it_pays_from():
    row = only(decide(cell("torch", 256, 0.5, 0.45, 0.55, device="cuda", break_even=700.0),
                      cell("torch", 1024, 4.0, 3.8, 4.2, device="cuda", break_even=700.0)))
    assert row["break_even_size"] == 700.0 and row["threads"] == "1" and row["baseline_threads"] == "all"
    assert answer(row, DELTA).startswith("use torch from n ≈ 700: at n = 1024 it is 4.00×")
    assert "with the copies counted" in answer(row, DELTA)



def test_a_weak_headline_carries_one_mark():
    row = only(decide(cell("torch", 1024, 1.5, 1.4, 1.6, weak=True)))
    assert bool(row["weak"]) and answer(row, DELTA).count("†") == 1



def test_the_terminal_table_is_one_line_a_row_within_100_characters_and_inert():
    cells = [cell("torch", n, 1.5, 1.4, 1.6, op=op) for n in (256, 2048)
             for op in ("a_very_long_kernel_name_of_someone", "heat")]
    frame = decide(*cells)
    frame.loc[0, "op"] = "evil\x1b]0;owned\x07\nerror: forged"
    from offloadbench.report.escape import terminal_frame

    lines = plain_table(terminal_frame(frame), DELTA)
    table = lines[:lines.index("notes:")] if "notes:" in lines else lines[:lines.index("")]
    assert len(table) == 2 + len(frame)  # the dtype said once, the header, a line per row; then any notes
    assert all(len(line) <= 100 for line in lines)
    assert not any(ch in "".join(lines) for ch in "\x1b\x07\n") and not any(l.startswith("error") for l in lines)



def test_the_lead_paragraph_answers_for_the_machine():
    frame = decide(cell("torch", 1024, 3.0, 2.9, 3.1), cell("torch", 1024, 0.8, 0.7, 0.9, op="other"))
    text = lead_paragraph(frame, "cuda unavailable", DELTA)
    assert text.startswith("Moving work off NumPy pays in 1 of the 2 cases asked for here: use torch for heat.")
    assert "Stay with NumPy for other" in text and "answers for the CPU only" in text



def test_each_decision_has_its_macro_name():
    row = only(decide(cell("torch", 1024, 3.0, 2.9, 3.1, threads="all")))
    assert decision_macro(row) == "HeatCpuFloatThirtyTwoThreadsAllDecision"



def test_the_summary_of_a_folder_without_decisions_rebuilds_them_from_its_records(tmp_path):
    import shutil

    from offloadbench.report.text.summary import summarize

    folder = tmp_path / "h200"
    shutil.copytree(Path(__file__).parents[1] / "data" / "h200", folder)
    (folder / "decisions.csv").unlink()  # results of a version before the decisions
    lines = summarize(folder)
    assert lines[0] == "offloadbench: the answer for h200"
    matmul_gpu = next(line for line in lines if line.startswith("matmul") and " cuda " in line)
    assert "use torch" in matmul_gpu and "≈ 605" in matmul_gpu and "3.81× (3.42–4.25)" in matmul_gpu
    assert all(len(line) <= 100 for line in lines)



def test_the_summary_of_an_older_versions_tables_rebuilds_them_and_refuses_where_it_cannot(tmp_path):
    """decisions.csv as an earlier version wrote it (the decision in words, no states_answer):
    rebuilt from the folder's raw records; without them, one line says to aggregate again."""
    import shutil

    from offloadbench.records import MalformedRecord
    from offloadbench.report.text.summary import summarize

    folder = tmp_path / "h200"
    shutil.copytree(Path(__file__).parents[1] / "data" / "h200", folder)
    old = pd.read_csv(folder / "decisions.csv", dtype=str, keep_default_na=False).drop(columns=["states_answer"])
    old["decision"] = old["decision"].map({"use": "use torch", "unsure": "cannot tell yet"}).fillna(old["decision"])
    old.to_csv(folder / "decisions.csv", index=False)
    matmul_gpu = next(line for line in summarize(folder) if line.startswith("matmul") and " cuda " in line)
    assert "use torch" in matmul_gpu and "3.81× (3.42–4.25)" in matmul_gpu
    shutil.rmtree(folder / "raw")
    with pytest.raises(MalformedRecord, match="lacks the column 'states_answer'; aggregate again"):
        summarize(folder)



def test_the_summary_of_a_bundle_reads_its_records_not_its_tables(tmp_path):
    import shutil

    from offloadbench.bundles import make_bundle
    from offloadbench.report.text.summary import summarize

    folder = tmp_path / "h200"
    shutil.copytree(Path(__file__).parents[1] / "data" / "h200", folder)
    (folder / "decisions.csv").write_text("machine,op,device,dtype,threads,decision,speedup\nx,\x1b]0;pwn\x07,cpu,"
                                          "float32,1,use evil,99\n")
    bundle = tmp_path / "h200.tar.gz"
    make_bundle(folder, bundle, "h200", "{}")
    text = "\n".join(summarize(bundle))
    assert "use evil" not in text and "\x1b" not in text and "use torch" in text
    assert not list(tmp_path.glob("offloadbench-summary-*"))  # the unpacked copy is gone



def test_a_tampered_decisions_table_prints_inert(tmp_path):
    import shutil

    from offloadbench.report.text.summary import summarize

    folder = tmp_path / "box"
    shutil.copytree(Path(__file__).parents[1] / "data" / "h200", folder)
    frame = pd.read_csv(folder / "decisions.csv", dtype=str)
    frame.loc[0, "op"] = "evil\x1b[31m\nerror: forged line"
    frame.to_csv(folder / "decisions.csv", index=False)
    lines = summarize(folder)
    assert not any("\x1b" in line or line.startswith("error") for line in lines)
    assert any("evil\\x1b" in line for line in lines)



def test_the_legend_explains_only_the_columns_the_table_has():
    shown = decision_table(decide(cell("torch", 256, 1.06, 0.96, 1.17), cell("torch", 1024, 3.0, 2.9, 3.1)), DELTA)
    assert "still open" in shown.cells and "compile pays back after" not in shown.cells
    assert "still open: " in shown.legend and "compile pays back after: " not in shown.legend
    compiled = decision_table(decide(cell("torch compiled", 1024, 6.0, 5.8, 6.2, compile_s=0.8, startup=6.0,
                                          calls=100.0)), DELTA)
    assert "compile pays back after: " in compiled.legend and "still open: " not in compiled.legend



def test_counts_of_calls_keep_every_digit_rounded_up():
    from offloadbench.report.format import fmt_calls

    assert fmt_calls(35_325) == "35,325"  # the report and LaTeX keep every digit
    assert fmt_calls(402_455.2) == "402,456"  # a call is paid back only once it is whole



def test_a_tie_at_the_boundary_is_an_answer_that_asks_for_no_more_processes():
    """A CI within ±δ of its point that straddles 1 + δ: torch is about 5% faster, as close as it
    will get; NumPy stays, and the row, the sentence and the terminal say it is a tie."""
    row = only(decide(cell("torch", 1024, 1.045, 1.015, 1.075)))
    assert row["verdict"] == "undecided" and row["decision"] == STAY
    assert bool(row["tie"]) is True  # a value; the report words it
    assert open_sizes(row) == [] and math.isnan(row["processes_to_decide"])
    assert "the best alternative, torch, is about 4.5% faster; too close to δ = 5% to call, 1.04×" in answer(row, DELTA)
    frame = decide(cell("torch", 1024, 1.045, 1.015, 1.075))
    assert any("about 4.5% faster" in line for line in plain_table(frame, DELTA))
    # wider than ±δ around its point: still open, with what would decide it
    assert only(decide(cell("torch", 1024, 1.05, 0.97, 1.14)))["decision"] == UNSURE



def test_an_answer_that_differs_between_two_states_of_a_cell_says_it_depends():
    speed, timing = cell("torch", 2048, 1.1, 0.8, 1.5)
    row_cell = {k: speed[k] for k in ("machine", "op", "library", "device", "dtype", "size", "threads", "mode",
                                      "variant")}
    states = [{**row_cell, "kind": "speedup", "phase": "end_to_end", "base_cell": "numpy-cpu-float32-n2048-t1",
               "contender_cell": "torch-cpu-float32-n2048-t1", "base_state": state, "contender_state": "",
               "base_state_s": seconds, "contender_state_s": math.nan, "ratio": ratio, "rounds": rounds,
               "of_rounds": 8} for state, seconds, ratio, rounds in (("fast", 20e-3, 0.77, 3), ("slow", 32e-3, 1.35, 5))]
    worded = ("0.77× where numpy-cpu-float32-n2048-t1 ran 20 ms (3 of 8 rounds); "
              "1.35× where numpy-cpu-float32-n2048-t1 ran 32 ms (5 of 8 rounds)")
    depends = {"end_to_end_verdict": "undecided", "states_answer": "depends"}
    row = only(decide((speed | depends, timing), states=states))
    assert row["decision"] == DEPENDS and row["states_answer"] == "depends" and len(row["state_ratios"]) == 2
    text = answer(row, DELTA)
    assert text.startswith(f"it depends on the state of the process: at n = 2048 torch against NumPy is {worded}")
    assert "at n = 2048 two states of a process: 0.77× where" in "\n".join(plain_table(decide(
        (speed | depends, timing), states=states), DELTA))
    assert only(decide((speed | depends, timing), states=[{**s, "size": 1024} for s in states]))["state_ratios"] == ()
    # where both states give the same answer, the verdict stands
    holds = {"states_answer": "holds"}
    assert only(decide(cell("torch", 2048, 2.0, 1.9, 2.1)))["decision"] == USE
    speed, timing = cell("torch", 2048, 2.0, 1.9, 2.1)
    assert only(decide((speed | holds, timing)))["decision"] == USE



def _terminal(frame: pd.DataFrame) -> list[str]:
    return plain_table(frame, DELTA)



def test_a_stay_row_names_the_best_alternative_beside_its_ratio():
    frame = decide(cell("torch", 1024, 0.8, 0.75, 0.85))
    row = next(line for line in plain_table(frame, DELTA) if line.startswith("heat"))
    assert "stay with NumPy" in row and "torch 0.80× (0.75–0.85)" in row
    use = decide(cell("torch", 1024, 3.0, 2.9, 3.1))
    assert "torch 3.00" not in "\n".join(plain_table(use, DELTA))  # the decision names it already



def test_every_note_names_its_size_and_payback_and_open_sizes_are_separate():
    frame = decide(cell("torch compiled", 256, 1.12, 0.95, 1.32, compile_s=0.8, startup=6.0, calls=50.0),
                   cell("torch compiled", 1024, 6.0, 5.8, 6.2, compile_s=0.8, startup=6.0, calls=100.0))
    notes = plain_table(frame, DELTA)
    notes = notes[notes.index("notes:") + 1:]
    assert any(n.startswith("heat cpu 1t: at n = 1024 the compile pays back after 100 calls (850") for n in notes)
    assert any(n.startswith("heat cpu 1t: n = 256 cannot tell yet: about ") for n in notes)
    assert all("n = " in note for note in notes if note.startswith("heat"))



def test_an_open_size_past_the_cap_reads_as_more_than_the_cap():
    frame = decide(cell("torch", 256, 1.06, 0.96, 1.17), cell("torch", 1024, 3.0, 2.9, 3.1))
    needed = int(frame.iloc[0]["processes_to_decide"])
    cap = needed - 1
    frame["process_cap"] = cap
    text = " ".join(line.strip() for line in _terminal(frame))
    assert f"about {needed} processes per cell would likely decide it, more than the run's cap of {cap}" in text
    assert f"≈{needed}" not in text
    assert decision_table(frame, DELTA).cells["still open"].iloc[0] == f"n = 256: more processes than the cap of {cap}"
    frame["process_cap"] = 1000  # within the cap: the estimate itself
    assert decision_table(frame, DELTA).cells["still open"].iloc[0] == f"n = 256: ≈{needed} processes"



def test_a_row_chosen_by_the_simplicity_rule_says_so():
    frame = decide(cell("numpy compiled", 1024, 8.54, 8.0, 9.1), cell("torch compiled", 1024, 8.91, 8.3, 9.5))
    row = only(frame)
    assert row["variant"] == "numpy compiled" and row["simpler_than"] == "torch compiled"
    assert row["simpler_than_speedup"] == pytest.approx(8.91)
    assert "chosen over torch compiled (8.91×), the simpler of two that cannot be told apart" in answer(row, DELTA)
    assert any("at n = 1024 chosen over torch compiled (8.91×)" in line for line in _terminal(frame))
    assert "torch compiled 8.91" in decisions_tex(frame, DELTA)
    assert only(decide(cell("torch", 1024, 3.0, 2.9, 3.1)))["simpler_than"] == ""  # nothing passed over



def test_the_legend_explains_1t_all_n_and_from_n():
    frame = decide(cell("torch", 1024, 3.0, 2.9, 3.1, threads="all"))
    lines = _terminal(frame)
    legend = " ".join(lines[lines.index("") + 1:])
    assert all(word in legend for word in ("1t: one thread", "all: every core (2 threads here)", "n: the op's size",
                                           "from n: the smallest n"))



def test_sharing_cores_on_every_all_threads_row_is_said_once():
    rows = [cell("torch", 1024, 3.0, 2.9, 3.1, threads=t, op=op) for t in ("1", "all") for op in ("a", "b", "c")]
    rows = [(s | {"shares_cores": s["threads"] == "all"}, t) for s, t in rows]
    frame = decide(*rows)
    assert frame["shares_cores"].tolist() == [False, True] * 3
    lines = _terminal(frame)
    assert sum(line.count("†") for line in lines) == 0
    assert " ".join(lines).count("Every all-threads row shared its 2 cores") == 1
    # an unstable cell keeps its own mark, explained once
    rows[0] = (rows[0][0] | {"flagged": True}, rows[0][1])
    lines = _terminal(decide(*rows))
    assert sum(line.count("†") for line in lines) == 2  # the row's and the legend's
    # an all-threads row flagged unstable as well as sharing its cores keeps its mark
    rows[4] = (rows[4][0] | {"flagged": True}, rows[4][1])
    frame = decide(*rows)
    assert frame["flagged"].sum() == 2  # the one-thread row and the all-threads one
    assert sum(line.count("†") for line in _terminal(frame)) == 3
    # where some all-threads row did not share its cores, each sharing row is marked
    rows[3] = (rows[3][0] | {"shares_cores": False}, rows[3][1])
    lines = plain_table(decide(*rows), DELTA)
    assert sum(line.count("†") for line in lines) == 4  # two sharing rows, the unstable one and the legend



def test_sizes_that_decide_otherwise_than_from_n_says_are_listed_by_size():
    mixed = decide(cell("torch", 256, 1.12, 0.95, 1.32), cell("torch", 1024, 1.5, 1.4, 1.6),
                   cell("torch compiled", 2048, 3.0, 2.9, 3.1), cell("torch", 2048, 1.2, 1.15, 1.25))
    notes = " ".join(plain_table(mixed, DELTA))
    assert "by size: n = 256 cannot tell yet; n = 1024 use torch; n = 2048 use torch compiled" in notes
    plain = decide(cell("torch", 256, 0.8, 0.75, 0.85), cell("torch", 1024, 1.5, 1.4, 1.6))
    assert "by size" not in " ".join(plain_table(plain, DELTA))  # NumPy below from n: the row says it all



def test_the_summary_says_when_the_report_predates_the_tables(tmp_path):
    import os
    import shutil

    from offloadbench.report.text.summary import summarize

    folder = tmp_path / "box"
    shutil.copytree(Path(__file__).parents[1] / "data" / "h200", folder)
    (folder / "report.html").write_text("<html></html>")
    os.utime(folder / "report.html", (1_000_000, 1_000_000))  # older than decisions.csv
    assert summarize(folder)[-1].startswith(f"report: {folder / 'report.html'} (made before these tables")
    os.utime(folder / "report.html")  # rebuilt after them
    assert summarize(folder)[-1] == f"report: {folder / 'report.html'}"



def test_the_summary_of_tables_without_their_sizes_rebuilds_them_or_says_what_is_missing(tmp_path):
    import shutil

    from offloadbench.errors import UserError
    from offloadbench.report.text.summary import summarize

    folder = tmp_path / "box"
    shutil.copytree(Path(__file__).parents[1] / "data" / "h200", folder)
    # the intervals and break-even estimates are resampled anew; the decisions and sizes are not
    without_cis = lambda lines: [re.sub(r"\([0-9.–]+\)|≈ [0-9]+", "", line) for line in lines]
    whole = without_cis(summarize(folder))
    (folder / "decision_sizes.csv").unlink()  # tables of the version before it
    assert without_cis(summarize(folder)) == whole  # rebuilt from the raw records, from n included
    shutil.rmtree(folder / "raw")
    with pytest.raises(UserError, match=r"decision_sizes\.csv: missing; aggregate again"):
        summarize(folder)



def test_why_the_losers_lose_is_worded_from_the_loss_values():
    from offloadbench.report.text.decisions import loss_words

    assert loss_words({"variant": "torch", "reason": "copies", "speedup": 3.04, "end_to_end_speedup": 0.617},
                      "cuda") == "torch on cuda computes 3.0× faster than NumPy, but with the copies it is 0.62×"
    pages = {"variant": "torch", "reason": "fresh_pages", "pages_per_call": 4064.0, "against": "numpy",
             "against_pages_per_call": 1008.0, "pages_s": 3.056e-3, "call_s": 18.3e-3}
    assert loss_words(pages, "cpu") == ("torch maps 4,064 fresh pages (15.9 MiB) per call against numpy's 1,008, "
                                        "about 3.06 ms of torch's 18.3 ms a call")
    assert loss_words({**pages, "pages_s": float("nan")}, "cpu").endswith("against numpy's 1,008")
    row = only(decide(cell("torch", 1024, 1.5, 1.4, 1.6),
                      cell("torch compiled", 1024, 9.0, 8.8, 9.2, fallback="graph break: print")))
    assert answer(row, DELTA).endswith("; why the others lose: torch compiled did not all compile "
                                       "(graph break: print).")


def test_a_row_without_an_answer_says_why_in_every_format():
    from offloadbench.analysis.decisions import decision_tables

    speed, timing = cell("torch", 64, 3.0, 2.9, 3.1)
    wrong = "wrong result: relative error 2.00e-03 in argument A exceeds the float32 tolerance 7.80e-06"
    base = {"machine": "box", "op": "jacobi", "mode": "eager", "device": "cpu", "dtype": "float32", "size": 64,
            "threads": "1", "family": "user kernels", "tolerance": 7.8e-6}
    timings = pd.DataFrame([{**timing, "status": "ok", "reason": "", "variant": "torch", "machine": "box"},
                            {**base, "library": "numpy", "variant": "numpy", "status": "ok", "reason": "",
                             "rel_err": 1e-8},
                            {**base, "library": "torch", "variant": "torch", "status": "error", "reason": wrong,
                             "rel_err": 2e-3, "check_failed": True}])
    decisions = decision_tables(pd.DataFrame([speed]), timings, DELTA)[0]
    row = decisions.set_index("op").loc["jacobi"]
    said = ("no answer: every other variant failed the check against float64 (torch: relative error 2.0e-03 "
            "against 7.8e-06 allowed).")
    assert answer(row, DELTA) == said
    lines = plain_table(decisions, DELTA)
    assert any(line.startswith("jacobi") and "no answer: wrong results" in line for line in lines)
    assert any("report's Skipped or failed cells" in line for line in lines)  # where to read more
    assert "no answer: wrong results" in decisions_tex(decisions, DELTA)
    text = lead_paragraph(decisions, None, DELTA)
    assert text.startswith("Moving work off NumPy pays in 1 of the 2 cases asked for here")
    assert "There is no answer for jacobi: the table says why." in text
