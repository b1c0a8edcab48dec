"""The columns of `timings.csv`, `speedups.csv`, `thread_scaling.csv` and `decisions.csv`, declared once with
their meaning, in the order the tables have them; how an estimate and its CI are read from
a row; and the flags that make a row weak.

`tables.py` writes the tables in this order and a test checks every written CSV against
these declarations; the README's table of outputs points here.
"""

from __future__ import annotations

import math

import pandas as pd

CELL = {
    "machine": "the machine label (results/<machine>/)",
    "op": "the op of the catalogue, or the name of a user kernel",
    "library": "numpy or torch",
    "device": "cpu, cuda or mps",
    "dtype": "float32, float64, …",
    "size": "n, the op's own size (the matrix or field side for most ops)",
    "threads": "the CPU thread label: a count, or all (every usable core)",
    "mode": "eager, or compiled (torch.compile of the NumPy or the torch code)",
}
VARIANT = {"variant": "the library as it ran: numpy, torch, numpy compiled, torch compiled"}
RATIO_VERDICT = "faster, slower, same (the whole CI within the minimum effect) or undecided"

TIMINGS = {
    **CELL, **VARIANT,
    "family": "the op's family in the catalogue; user kernels for yours",
    "threads_effective": "the thread count that took effect",
    "status": "ok, skipped, oom, timeout or error",
    "reason": "why a cell is not ok, in one line",
    "device_name": "the device's model",
    "processes": "the processes whose medians make the cell's time",
    "ci_scope": "what the CI covers: the spread between processes, or one process's samples only",
    "n_samples": "timing samples over all processes",
    "calls_per_sample": "calls of the op timed as one sample",
    "warmup_count": "warm-up calls of the first process",
    "median_s": "the cell's time per call, the geometric mean of its process medians (s)",
    "q1_s": "first quartile of the pooled samples (s)",
    "q3_s": "third quartile of the pooled samples (s)",
    "ci_low_s": "lower end of the 95% CI of median_s (s)",
    "ci_high_s": "upper end of the 95% CI of median_s (s)",
    "rel_ci": "half-width of that CI relative to median_s",
    "process_spread": "largest over smallest process median, less 1",
    "converged": "whether every process reached the CI target within its budget",
    "gflops": "FLOP model ÷ median_s, in GFLOP/s",
    "gflops_ci_low": "lower end of the 95% CI of gflops",
    "gflops_ci_high": "upper end of the 95% CI of gflops",
    "bandwidth_gbs": "byte model ÷ median_s, in GB/s",
    "intensity": "arithmetic intensity: FLOP per byte of the least memory traffic",
    "rel_err": "the largest relative error against the float64 reference",
    "tolerance": "the dtype-aware tolerance of that error",
    "unstable": "noise flags (each kind once, its strongest case, in how many processes)",
    "replaced": "processes left out and replaced, and why",
    "disturbed_cores": "the most CPU (in cores) other processes used while the cell sampled",
    "precision_notes": "regions whose CI target was not reached in their budget",
    "shares_cores": "whether the cell's threads used every core, shared with the orchestrator",
    "measure_s": "wall time the cell's processes spent measuring it (s)",
    "import_s": "mean time the worker took to import its libraries (s)",
    "host": "the measuring hosts",
    "slurm_job_id": "the SLURM jobs that measured it",
    "h2d_s": "median copy of the inputs host→device (s)",
    "compute_s": "median compute with the data on the device (s)",
    "d2h_s": "median copy of the result device→host (s)",
    "finish_s": "median plotting on the host, for compute-then-plot (s)",
    "end_to_end_s": "median of the three phases timed as one region (s)",
    "end_to_end_ci_low_s": "lower end of the 95% CI of end_to_end_s (s)",
    "end_to_end_ci_high_s": "upper end of the 95% CI of end_to_end_s (s)",
    "transfer_fraction": "share of end_to_end_s spent in the copies",
    "compile_s": "the compile phase: the first call of each compiled form (s)",
    "compile_s_ci_low": "lower end of the 95% CI of compile_s (s)",
    "compile_s_ci_high": "upper end of the 95% CI of compile_s (s)",
    "compiler_startup_s": "the compiler's one-time start-up in the worker (s)",
    "graphs": "graphs TorchDynamo captured",
    "graph_breaks": "graph breaks",
    "first_break": "the first graph break's reason",
    "recompiles": "recompiles while sampling",
    "compile_fallback": "why part of the code ran uncompiled, if it did",
    "compile_backend": "backend (mode)",
    "compile_cache": "cold, or your cache, with its hits",
    "peak_host_bytes": "peak extra host memory of one call, NumPy arrays in and out (median over processes)",
    "peak_host_method": "how it was counted: tracemalloc (NumPy), torch profiler (torch and compiled code)",
    "peak_rss_bytes": "the process's RSS high-water rise in that call: a lower bound, as freed pages are reused",
    "peak_device_bytes": "peak extra device memory of the device-resident call (GPU cells)",
    "peak_vs_numpy": "this cell's peak (device peak on a GPU) ÷ NumPy's host peak at the same op, dtype and size",
    "peak_note": "where its processes disagree about the peak, or why it was not measured",
    "resident_calls": "GPU cells: the most calls k of a resident trip (one copy in, k chained calls, one out)",
    "resident_s": "the median time of that trip (s)",
    "resident_predicted_s": "what the phases predict for it: h2d + k·compute + d2h (s)",
    "resident": "every resident trip measured against its prediction, or why the cell has none",
    "compile_peak_rss_bytes": "compiled cells: the RSS high-water rise of the first call (the compile)",
    "compile_peak_device_bytes": "compiled GPU cells: the device peak of the first call",
}

SPEEDUPS = {
    **CELL, **VARIANT,
    "threads_effective": "the thread count that took effect",
    "device_name": "the device's model",
    "baseline_threads": "the thread label of the NumPy baseline",
    "processes": "the rounds the two cells share",
    "ci_scope": "what the CI covers",
    "speedup": "NumPy's time ÷ this cell's, with the data already on the device",
    "speedup_ci_low": "lower end of its 95% CI, paired by round",
    "speedup_ci_high": "upper end of its 95% CI",
    "speedup_verdict": RATIO_VERDICT,
    "speedup_undecided": "why the speedup is undecided",
    "end_to_end_speedup": "NumPy's time ÷ this cell's with the copies counted",
    "end_to_end_speedup_ci_low": "lower end of its 95% CI",
    "end_to_end_speedup_ci_high": "upper end of its 95% CI",
    "end_to_end_verdict": RATIO_VERDICT,
    "end_to_end_undecided": "why the end-to-end speedup is undecided",
    "median_s": "this cell's time (s)",
    "baseline_median_s": "NumPy's time (s)",
    "end_to_end_s": "this cell's time with the copies (s)",
    "baseline_end_to_end_s": "NumPy's time for the same region (s)",
    "shares_cores": "whether either cell shared its cores with the orchestrator",
    "unstable": "noise flags of the cell, then of the baseline",
    "compile_s": "compiled cells: the compile phase (s)",
    "compile_s_ci_low": "lower end of the 95% CI of compile_s (s)",
    "compile_s_ci_high": "upper end of the 95% CI of compile_s (s)",
    "compiler_startup_s": "the compiler's one-time start-up (s)",
    "amortize_calls": "calls after which the compile has paid for itself",
    "amortize_calls_ci_low": "lower end of its interval",
    "amortize_calls_ci_high": "upper end of its interval",
    "amortize": "the same in words (never, where compiled is not faster)",
    "compile_fallback": "why part of the code ran uncompiled, if it did",
    "calls_per_round_trip": "GPU cells: k*, the calls the data must stay on the device for one copy in and out "
                            "to pay: (h2d + d2h) ÷ (NumPy's time − the device's compute time)",
    "calls_per_round_trip_ci_low": "lower end of its interval",
    "calls_per_round_trip_ci_high": "upper end of its interval",
    "round_trip": "the same in words: pays with a copy on every call, pays once the data stay for at least "
                  "k calls, or never",
    "break_even_size": "the series' smallest size from which the end-to-end CI stays above 1",
    "break_even": "the same in words, or not reached within the grid",
    "break_even_status": "reached, not reached, or from the smallest size",
}

THREAD_SCALING = {
    **{k: v for k, v in CELL.items() if k != "mode"},
    "threads": "the thread label compared with one thread",
    "mode": CELL["mode"], **VARIANT,
    "threads_effective": "the thread count that took effect",
    "processes": "the rounds the two cells share",
    "ci_scope": "what the CI covers",
    "scaling": "time on one thread ÷ time on these threads",
    "scaling_ci_low": "lower end of its 95% CI, paired by round",
    "scaling_ci_high": "upper end of its 95% CI",
    "verdict": RATIO_VERDICT,
    "verdict_undecided": "why the scaling is undecided",
    "shares_cores": "whether the cell shared its cores with the orchestrator",
    "unstable": "noise flags of the cell, then of its one-thread cell",
}

DECISIONS = {
    "machine": CELL["machine"],
    "op": CELL["op"],
    "family": TIMINGS["family"],
    "device": CELL["device"],
    "dtype": CELL["dtype"],
    "threads": "the CPU thread label the decision is for; for a GPU, the host threads of its cells",
    "threads_effective": "the thread count that took effect",
    "baseline_threads": "the thread label of the NumPy baseline (all cores for a GPU)",
    "decision": "use <variant>, stay with NumPy, or cannot tell yet, at the largest size measured",
    "variant": "the variant to use there: numpy, torch, numpy compiled or torch compiled (empty: cannot tell yet)",
    "by_size": "the variant each measured size recommends, as 'n: variant; …' ('?': cannot tell yet)",
    "from_size": "the smallest measured size from which every larger size decides as the largest does",
    "size": "the largest size measured, where the speedup below is stated",
    "compared_variant": "the variant whose speedup is stated: the one to use, or NumPy's best (or most "
                        "promising) alternative",
    "speedup": "its speedup over NumPy at size, end to end (on a GPU with the copies counted)",
    "speedup_ci_low": "lower end of its 95% CI",
    "speedup_ci_high": "upper end of its 95% CI",
    "verdict": RATIO_VERDICT,
    "processes": "the rounds that speedup's two cells share",
    "break_even_size": "a GPU variant's break-even size (the end-to-end CI above 1 from there on)",
    "amortize_calls": "a compiled variant: the calls that pay its compile back at size",
    "amortize_calls_ci_low": "lower end of its interval",
    "amortize_calls_ci_high": "upper end of its interval",
    "amortize_calls_with_startup": "the same for a program's first compiled function, which also pays the "
                                   "compiler's start-up",
    "fits_up_to": "the largest n whose call of the stated variant fits the device's memory (memory.csv)",
    "calls_per_round_trip": "GPU rows: k* of the stated variant at size, the calls per copy in and out that make "
                            "the copies pay",
    "round_trip": "the same in words",
    "undecided_sizes": "the sizes where it cannot tell yet",
    "processes_to_decide": "processes per cell that would likely decide the largest of them, estimated "
                           "from the spread between processes seen",
    "weak": "whether a cell behind the decision is weak (flagged unstable, or sharing its cores)",
}

CONTROLS = {
    **CELL, **VARIANT,
    "processes": "the rounds the cell and its twin share",
    "ci_scope": "what the CI covers",
    "ratio": "the cell's time ÷ its twin's: the same code measured as two cells, so 1 in truth",
    "ratio_ci_low": "lower end of its 95% CI, paired by round",
    "ratio_ci_high": "upper end of its 95% CI",
    "verdict": RATIO_VERDICT,
    "verdict_undecided": "why it is undecided",
    "false_verdict": "whether the verdict is faster or slower: a false one",
    "shares_cores": "whether either copy shared its cores with the orchestrator",
    "unstable": "noise flags of the cell, then of its twin",
    "twin_measure_s": "wall time the twin's processes spent measuring it (s): what the control cost",
}

MEMORY = {
    "machine": CELL["machine"],
    "op": CELL["op"],
    **VARIANT,
    "device": CELL["device"],
    "dtype": CELL["dtype"],
    "sizes": "the sizes whose peak was measured",
    "largest_measured": "the largest of them",
    "peak_bytes": "the peak extra bytes of one call there (on a GPU, on the device)",
    "scale": "results and temporaries of a call, in outputs: the largest measured peak ÷ the outputs' bytes",
    "model_scale": "what the model assumed where nothing was measured",
    "model_error": "how far the model was from the measurement: model ÷ measured, less 1",
    "memory_bytes": "the device's memory (the host's on the cpu), from environment.json",
    "headroom": "the share of that memory kept free",
    "largest_size": "the largest n whose inputs and calibrated results and temporaries fit",
    "largest_size_model": "the same from the model alone, to compare",
}

DECLARED = {"timings": TIMINGS, "speedups": SPEEDUPS, "thread_scaling": THREAD_SCALING, "decisions": DECISIONS,
            "controls": CONTROLS, "memory": MEMORY}

# Estimates whose CI columns do not follow `<column>_ci_low` / `<column>_ci_high`.
CI_COLUMNS = {
    "median_s": ("ci_low_s", "ci_high_s"),
    "end_to_end_s": ("end_to_end_ci_low_s", "end_to_end_ci_high_s"),
}


def ci_columns(column: str) -> tuple[str, str]:
    """The names of the lower and upper end of an estimate's 95% CI."""
    return CI_COLUMNS.get(column, (f"{column}_ci_low", f"{column}_ci_high"))


def interval(row, column: str) -> tuple[float, float, float]:
    """(estimate, CI low, CI high) of a column of a table row; NaN where a bound is missing."""
    low, high = ci_columns(column)

    def number(name: str) -> float:
        try:
            return float(row[name])
        except (KeyError, TypeError, ValueError):
            return math.nan

    return number(column), number(low), number(high)


def interval_frame(frame: pd.DataFrame, column: str, as_names: tuple[str, str, str] = ("value", "lo", "hi")
                   ) -> pd.DataFrame:
    """The estimate and its CI as three columns of a new frame, for drawing."""
    low, high = ci_columns(column)
    return pd.DataFrame({as_names[0]: frame[column], as_names[1]: frame[low], as_names[2]: frame[high]},
                        index=frame.index)


def _text_set(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series(False, index=frame.index)
    return frame[column].fillna("").astype(str) != ""


def unstable_cells(frame: pd.DataFrame) -> pd.Series:
    """Rows flagged by a noise check."""
    return _text_set(frame, "unstable")


def sharing_cells(frame: pd.DataFrame) -> pd.Series:
    """Rows measured on every core, shared with the orchestrator."""
    if "shares_cores" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["shares_cores"].fillna(False).astype(bool)


def weak_cells(frame: pd.DataFrame) -> pd.Series:
    """Rows whose numbers are weak: flagged unstable, or sharing cores with the orchestrator
    (the figures draw them hollow)."""
    return unstable_cells(frame) | sharing_cells(frame)


def is_weak_row(row) -> bool:
    """One row of a table: weak as `weak_cells` says (tables read back hold text)."""
    flags = row.get("unstable")
    return (isinstance(flags, str) and flags != "") or str(row.get("shares_cores")).lower() in ("true", "1", "1.0")


def compile_fallbacks(frame: pd.DataFrame) -> pd.Series:
    """Compiled rows whose code did not all compile (graph breaks, or nothing captured):
    their times are not those of compiled code, so they are no compiled speedup."""
    return _text_set(frame, "compile_fallback")


def falls_back(row) -> bool:
    """A compiled row whose code did not all compile (see compile_fallbacks)."""
    text = row.get("compile_fallback")
    return isinstance(text, str) and text != ""


def without_models(timings: pd.DataFrame) -> list[str]:
    """Ops measured without a FLOP model (user kernels that give none): no throughput."""
    if timings.empty or "gflops" not in timings:
        return []
    ok = timings[timings["status"] == "ok"]
    return sorted(set(ok.loc[ok["gflops"].isna(), "op"]))
