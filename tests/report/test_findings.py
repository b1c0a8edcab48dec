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


def test_two_compilers_of_the_same_kernel_are_set_side_by_side():
    import pandas as pd
    from offloadbench.report.text.compile_findings import two_compilers
    from offloadbench.verdicts import Judging

    def row(library, mode, speedup, size=2048):
        return {"op": "heat_step", "library": library, "mode": mode, "variant": f"{library} {mode}", "device": "cpu",
                "dtype": "float32", "threads": "1", "size": size, "end_to_end_speedup": speedup,
                "end_to_end_speedup_ci_low": speedup * 0.9, "end_to_end_speedup_ci_high": speedup * 1.1}

    speedups = pd.DataFrame([row("torch", "compiled", 1.2), row("jax", "compiled", 3.0),
                             row("numpy", "compiled", 5.0),  # torch's compiler again: not a second compiler
                             row("jax", "compiled", 9.0, size=256)])  # not the largest size
    [line] = two_compilers(speedups, Judging())
    assert line.startswith("- heat_step on the cpu, 1 thread (float32, n = 2048): jax compiled 3")
    assert "torch compiled 1.2" in line and "jax compiled runs 2.5× as fast as torch compiled" in line
    assert "numpy compiled" not in line
    assert two_compilers(speedups[speedups["library"] != "jax"], Judging()) == []
