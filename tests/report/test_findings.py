"""The findings sections worded from table values, and the escapes of the rows a decision carries."""

import pandas as pd


def test_resident_trips_are_worded_from_their_values():
    from offloadbench.report.text.findings import resident_lines

    cell = {"machine": "m", "op": "heat_step", "library": "torch", "device": "cuda", "dtype": "float32",
            "size": 1024, "threads": "1", "mode": "eager", "variant": "torch"}
    trips = pd.DataFrame([{**cell, "calls": 1, "resident_s": 2.2e-3, "predicted_s": 2.0e-3},
                          {**cell, "calls": 16, "resident_s": 5.0e-3, "predicted_s": float("nan")}])
    (line,) = resident_lines(trips)
    assert "k = 1: 2.2 ms, the phases predict 2 ms (1.10×)" in line and line.endswith("k = 16: 5 ms.")
    assert resident_lines(trips.iloc[:0]) == []


def test_the_escapes_reach_the_rows_a_decision_carries_in_memory():
    from offloadbench.report.escape import md_frame, terminal_frame

    hostile = "numpy\x1b[31m|*x*"
    frame = pd.DataFrame({"op": ["heat"], "state_ratios": [({"base_cell": hostile, "ratio": 1.3},)],
                          "by_size": [((256, "use", hostile),)]})
    shown = terminal_frame(frame)
    assert "\x1b" not in shown["state_ratios"][0][0]["base_cell"] and "\x1b" not in shown["by_size"][0][0][2]
    assert shown["state_ratios"][0][0]["ratio"] == 1.3 and shown["by_size"][0][0][0] == 256
    assert md_frame(frame)["state_ratios"][0][0]["base_cell"] != hostile  # the Markdown specials made literal


def test_the_compilers_start_up_is_one_time_where_every_process_took_as_long():
    from offloadbench.report.text.compile_findings import process_lines

    def timings(*startups):
        return pd.DataFrame([{"mode": "compiled", "status": "ok", "compiler_startup_s": s, "graph_breaks": 0,
                              "recompiles": 0} for s in startups])

    same = " ".join(process_lines(timings(6.0, 6.0)))
    assert "(6 s: its imports" in same and " to " not in same.split("its imports")[0]
    assert "(3 s to 6 s: its imports" in " ".join(process_lines(timings(3.0, 6.0)))
