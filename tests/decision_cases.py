"""Small synthetic speedup and timing rows, and the decisions the rule makes of them: shared by
the tests of the rule (analysis/test_decisions.py) and of its words (report/test_decision_words.py)."""

import math

import pandas as pd
from offloadbench.analysis.columns import STATES
from offloadbench.analysis.decisions import decision_tables
from offloadbench.analysis.tables import with_series_rows
from offloadbench.verdicts import Judging

DELTA = Judging(min_effect=0.05, confidence=0.95)


def cell(variant, size, speedup, low, high, *, device="cpu", threads="1", op="heat", processes=3, weak=False,
         fallback="", compile_s=float("nan"), startup=float("nan"), calls=float("nan"), break_even=float("nan"),
         time_spread=None, device_speedup=math.nan):
    """One speedup row and the timing row of its cell: NumPy takes 1 ms, the cell 1 ms ÷ speedup;
    the cell's own time CI is as wide as its speedup's unless `time_spread` says otherwise."""
    library, _, mode = variant.partition(" ")
    mode = mode or "eager"
    time = 1e-3 / speedup
    spread = time_spread if time_spread is not None else (high / low) ** 0.5
    speed = {
        "machine": "box", "op": op, "library": library, "device": device, "dtype": "float32", "size": size,
        "threads": threads, "mode": mode, "variant": variant, "threads_effective": 2 if threads == "all" else 1,
        "baseline_threads": threads if device == "cpu" else "all", "processes": processes,
        "end_to_end_speedup": speedup, "end_to_end_speedup_ci_low": low, "end_to_end_speedup_ci_high": high,
        "end_to_end_verdict": DELTA.verdict(low, high, speedup), "flagged": weak,
        "shares_cores": False, "compile_fallback": fallback, "compile_s": compile_s, "compiler_startup_s": startup,
        "amortize_calls": calls, "amortize_calls_ci_low": calls * 0.9, "amortize_calls_ci_high": calls * 1.1,
        "break_even_size": break_even, "speedup": device_speedup,
    }
    timing = {"op": op, "library": library, "mode": mode, "device": device, "dtype": "float32", "size": size,
              "threads": threads, "family": "user kernels", "end_to_end_s": time,
              "end_to_end_ci_low_s": time / spread, "end_to_end_ci_high_s": time * spread}
    return speed, timing


def decide(*cells, fault_s: float = math.nan, states: list[dict] | None = None) -> pd.DataFrame:
    """decisions.csv with each decision's sizes, losses and states beside it, as the report
    reads them (`states`: rows of states.csv)."""
    speedups = pd.DataFrame([c[0] for c in cells])
    timings = pd.DataFrame([c[1] for c in cells])
    decisions, sizes, losses = decision_tables(speedups, timings, DELTA, fault_s=fault_s)
    return with_series_rows({"decisions": decisions, "decision_sizes": sizes, "losses": losses,
                             "states": pd.DataFrame(states or [], columns=list(STATES))})["decisions"]


def only(frame: pd.DataFrame) -> pd.Series:
    assert len(frame) == 1, frame
    return frame.iloc[0]

