"""The findings sections worded from table values."""

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
