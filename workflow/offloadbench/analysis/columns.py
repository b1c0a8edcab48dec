"""The columns of every table (`timings.csv`, `speedups.csv`, `thread_scaling.csv`,
`decisions.csv`, …), declared once with their meaning and their kind, in the order the
tables have them; how an estimate and its CI are read from a row; and the flags that make a
row weak.

`tables.py` writes the tables in this order and a test checks every written CSV against
these declarations; docs/outputs.md points here. Each meaning carries its
column's kind (text, integer, number or boolean, whether a row may leave it empty, and
for numbers whether it must be finite and its least value): `tables.read_table` reads a
table back by them and refuses, in one line, a value that does not fit its column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Self

import numpy as np
import pandas as pd

from ..verdicts import FASTER

TEXT, INTEGER, NUMBER, BOOLEAN = "text", "integer", "number", "boolean"
KINDS = (TEXT, INTEGER, NUMBER, BOOLEAN)


@dataclass(frozen=True)
class Kind:
    """What a column holds: `name` one of TEXT, INTEGER (a finite whole number), NUMBER (±inf
    allowed unless `finite`) or BOOLEAN (True or False); `empty` whether a row may leave it
    empty; `minimum` the least number it takes."""

    name: str
    empty: bool = True
    finite: bool = False
    minimum: float | None = None

    def described(self) -> str:
        """"a whole number ≥ 1", "a finite number", "True or False", "text"."""
        if self.name == INTEGER:
            return "a whole number" + (f" ≥ {self.minimum:g}" if self.minimum is not None else "")
        if self.name == NUMBER:
            least = f" ≥ {self.minimum:g}" if self.minimum is not None else ""
            return f"a {'finite ' if self.finite else ''}number{least}"
        return "True or False" if self.name == BOOLEAN else "text"


class Column(str):
    """A declared column's meaning, with its kind (`.kind`)."""

    kind: Kind

    def __new__(cls, meaning: str, kind: Kind) -> Self:
        column = super().__new__(cls, meaning)
        column.kind = kind
        return column

    def __reduce__(self):  # copies and pickles keep the kind
        return Column, (str(self), self.kind)


UNDECIDED_WHY = ("why the {} is undecided (empty where decided): no_ci, tie (at the boundary), too_wide (a CI "
                 "wider than the widest result), across_one (the CI holds 1 and reaches beyond ±δ), below_delta (real, "
                 "but maybe smaller than δ), unstable (a side's processes disagree or were disturbed) or "
                 "depends_on_state (the answer differs between a side's two states)")
STATES_ANSWER = ("where a side has two states, whether the {} holds in both: holds, depends (each state two rounds "
                 "or more) or one_round (one state seen in a single round)")

def text(meaning: str, *, empty: bool = True) -> Column:
    return Column(meaning, Kind(TEXT, empty))


def integer(meaning: str, *, minimum: int = 0, empty: bool = True) -> Column:
    return Column(meaning, Kind(INTEGER, empty, True, minimum))


def number(meaning: str, *, finite: bool = False, minimum: float | None = None, empty: bool = True) -> Column:
    return Column(meaning, Kind(NUMBER, empty, finite, minimum))


def boolean(meaning: str, *, empty: bool = True) -> Column:
    return Column(meaning, Kind(BOOLEAN, empty))


# Estimates whose CI columns do not follow `<column>_ci_low` / `<column>_ci_high`.
CI_COLUMNS = {
    "median_s": ("ci_low_s", "ci_high_s"),
    "end_to_end_s": ("end_to_end_ci_low_s", "end_to_end_ci_high_s"),
    "value": ("ci_low", "ci_high"),  # a roof
}


def ci_columns(column: str) -> tuple[str, str]:
    """The names of the lower and upper end of an estimate's CI."""
    return CI_COLUMNS.get(column, (f"{column}_ci_low", f"{column}_ci_high"))


def estimate(column: str, meaning: Column, of: str = "its CI") -> dict[str, Column]:
    """An estimate's column, then the lower and upper end of `of` (its CI, `ci_columns`)."""
    low, high = ci_columns(column)
    return {column: meaning, low: number(f"lower end of {of}"), high: number(f"upper end of {of}")}


CELL = {
    "machine": text("the machine label (results/<machine>/)", empty=False),
    "op": text("the op of the catalogue, or the name of a user kernel", empty=False),
    "library": text("numpy or torch", empty=False),
    "device": text("cpu, cuda or mps", empty=False),
    "dtype": text("float32, float64, …", empty=False),
    "size": integer("n, the op's own size (the matrix or field side for most ops)", minimum=1, empty=False),
    "threads": text("the CPU thread label: a count, or all (every usable core)", empty=False),
    "mode": text("eager, or compiled (torch.compile of the NumPy or the torch code)", empty=False),
}
VARIANT = {"variant": text("the library as it ran: numpy, torch, numpy compiled, torch compiled", empty=False)}
RATIO_VERDICT = text("faster, slower, same (the whole CI within the minimum effect) or undecided")

TIMINGS = {
    **CELL, **VARIANT,
    "family": text("the op's family in the catalogue; user kernels for yours"),
    "threads_effective": integer("the thread count that took effect"),
    "status": text("ok, skipped, oom, timeout or error", empty=False),
    "reason": text("why a cell is not ok, in one line"),
    "device_name": text("the device's model"),
    "processes": integer("the processes whose medians make the cell's time"),
    "ci_scope": text("what the CI covers: the spread between processes, or one process's samples only"),
    "n_samples": integer("timing samples over all processes"),
    "calls_per_sample": integer("calls of the op timed as one sample", minimum=1),
    "warmup_count": integer("warm-up calls of the first process"),
    "median_s": number("the cell's time per call, the geometric mean of its process medians (s)"),
    "q1_s": number("first quartile of the pooled samples (s)"),
    "q3_s": number("third quartile of the pooled samples (s)"),
    "ci_low_s": number("lower end of the CI of median_s (s)"),
    "ci_high_s": number("upper end of the CI of median_s (s)"),
    "rel_ci": number("half-width of that CI relative to median_s"),
    "process_spread": number("largest over smallest process median, less 1"),
    "converged": boolean("whether every process reached the CI target within its budget"),
    **estimate("gflops", number("FLOP model ÷ median_s, in GFLOP/s"), "the CI of gflops"),
    "bandwidth_gbs": number("byte model ÷ median_s, in GB/s"),
    "intensity": number("arithmetic intensity: FLOP per byte of the least memory traffic"),
    "rel_err": number("the largest relative error against the float64 reference"),
    "tolerance": number("the dtype-aware tolerance of that error"),
    "check_failed": boolean("whether a process's result missed that tolerance (the cell is an error, never a "
                            "speedup)"),
    "returns": text("a kernel: the floating dtypes it returns other than the cell's (\"float64\": it accumulates "
                    "in float64); empty where it returns the cell's"),
    "changes": text("a kernel: the arguments a call updates in place, which are outputs (checked, and copied back "
                    "from a GPU)"),
    "timed_per_call": boolean("whether each call was timed alone, the arguments it changes put back before it "
                              "outside the clock (a kernel that updates its arguments), not a block of calls"),
    "restore_s": number("what putting those arguments back costs per call, outside every timed region (s)"),
    "inputs_bytes": number("bytes of the call's input arrays as given (scalars hold none)", minimum=0),
    "result_bytes": number("bytes of the arrays a call returns (new arrays; arguments it changes are not counted)",
                           minimum=0),
    "inputs_degree": integer("a kernel: the power of n its inputs grow with (2 for matrices), fitted to their bytes "
                             "at its size and a few small ones its worker drew"),
    "flagged": boolean("whether a noise check flagged the cell (what it found: flags.csv)"),
    # where its processes fall into two groups far apart (each state's processes, by round)
    "state_fast_s": number("the fast state's time: the geometric mean of its process medians (s)"),
    "state_fast_faults_per_call": number("the fresh pages one call maps in the fast state"),
    "state_fast_rounds": text("the fast state's rounds, in order (\"1 2 4\")"),
    "state_slow_s": number("the slow state's time (s)"),
    "state_slow_faults_per_call": number("the fresh pages one call maps in the slow state"),
    "state_slow_rounds": text("the slow state's rounds, in order"),
    "disturbed_cores": number("the most CPU (in cores) other processes used while the cell sampled"),
    # a note, not a flag: where a region's median in a process missed the CI target in its budget
    "precision_processes": integer("the processes in which a region missed the CI target in its budget"),
    "precision_regions": text("those regions (compute, end_to_end, …)"),
    "precision_widest_rel_ci": number("the widest of their CIs, as a half-width relative to the median (inf: "
                                      "too few samples for one)"),
    "shares_cores": boolean("whether the cell's threads used every core, shared with the orchestrator"),
    "faults_per_call": number("fresh pages one call maps (minor page faults per call): the median of its samples, "
                              "then over its processes", minimum=0),
    "allocator": text("glibc's malloc state in its workers (measure.allocator: steady or adaptive; empty: "
                      "records from before the setting)"),
    "measure_s": number("wall time the cell's processes spent measuring it (s)"),
    "import_s": number("mean time the worker took to import its libraries (s)"),
    "host": text("the measuring hosts"),
    "slurm_job_id": text("the SLURM jobs that measured it"),
    "h2d_s": number("median copy of the inputs host→device (s)"),
    "compute_s": number("median compute with the data on the device (s)"),
    "d2h_s": number("median copy of the result device→host (s)"),
    "finish_s": number("median plotting on the host, for compute-then-plot (s)"),
    "end_to_end_s": number("median of the three phases timed as one region (s)"),
    "conversion_s": number("a torch cell on the cpu: wrapping NumPy's arrays as tensors and back, per call, timed "
                           "apart; in its time, not the function's own (s)"),
    "end_to_end_ci_low_s": number("lower end of the CI of end_to_end_s (s)"),
    "end_to_end_ci_high_s": number("upper end of the CI of end_to_end_s (s)"),
    "transfer_fraction": number("share of end_to_end_s spent in the copies"),
    **estimate("compile_s", number("the compile phase: the first call of each compiled form (s)"),
               "the CI of compile_s (s)"),
    "compiler_startup_s": number("the compiler's one-time start-up in the worker (s)"),
    "graphs": integer("graphs TorchDynamo captured"),
    "graph_breaks": integer("graph breaks"),
    "first_break": text("the first graph break's reason"),
    "recompiles": integer("recompiles while sampling"),
    "compile_fallback": text("why part of the code ran uncompiled, if it did"),
    "compile_backend": text("backend (mode)"),
    "compile_cache_cold": boolean("whether every process compiled with an empty on-disk cache (compile.cold_cache; "
                                  "false: your cache)"),
    "compile_processes": integer("the processes that compiled it"),
    "compile_cache_reused": integer("of those, the processes whose compile hit the cache an earlier process of the "
                                    "run filled"),
    "compile_cache_hits": integer("the compile cache's hits over those processes"),
    "peak_host_bytes": number("peak extra host memory of one call, NumPy arrays in and out (median over processes)"),
    "peak_host_method": text("how it was counted: tracemalloc (NumPy), torch profiler (torch and compiled code)"),
    "peak_rss_bytes": number("the process's RSS high-water rise in that call: a lower bound, as freed pages are "
                             "reused"),
    "peak_device_bytes": number("peak extra device memory of the device-resident call (GPU cells)"),
    "peak_vs_numpy": number("this cell's peak (device peak on a GPU) ÷ NumPy's host peak at the same op, dtype "
                            "and size"),
    "peak_host_low_bytes": number("the least of the processes' host peaks"),
    "peak_host_high_bytes": number("the greatest of the processes' host peaks"),
    "peak_reason": text("why the host peak was not measured, as the records say"),
    "resident_reason": text("GPU cells: why the cell has no resident trips, as the records say (its trips: "
                            "resident.csv)"),
    "not_for": boolean("skipped because its library cannot run the code as written (a kernel that updates its "
                       "arguments, for JAX; the reason says why)"),
    "compile_peak_rss_bytes": number("compiled cells: the RSS high-water rise of the first call (the compile)"),
    "compile_peak_device_bytes": number("compiled GPU cells: the device peak of the first call"),
}

SPEEDUPS = {
    **CELL, **VARIANT,
    "threads_effective": TIMINGS["threads_effective"],
    "device_name": TIMINGS["device_name"],
    "baseline_threads": text("the thread label of the NumPy baseline"),
    "processes": integer("the rounds the two cells share"),
    "ci_scope": text("what the CI covers"),
    "pairing": text("how the ratio's CI was formed: paired in time (the two cells took turns in one bout, each "
                    "round), paired by round (records from before bouts), or unpaired"),
    **estimate("speedup", number("NumPy's time ÷ this cell's, with the data already on the device")),
    "speedup_verdict": RATIO_VERDICT,
    "speedup_undecided": text(UNDECIDED_WHY.format("speedup")),
    **estimate("end_to_end_speedup", number("NumPy's time ÷ this cell's with the copies counted")),
    "end_to_end_verdict": RATIO_VERDICT,
    "end_to_end_undecided": text(UNDECIDED_WHY.format("end-to-end speedup")),
    "median_s": number("this cell's time (s)"),
    "baseline_median_s": number("NumPy's time (s)"),
    "end_to_end_s": number("this cell's time with the copies (s)"),
    "baseline_end_to_end_s": number("NumPy's time for the same region (s)"),
    "shares_cores": boolean("whether either cell shared its cores with the orchestrator"),
    "disturbed": boolean("whether either cell still counts disturbed processes in half or more of its count: its "
                         "verdict waits for a quieter machine"),
    "flagged": boolean("whether a noise check flagged the cell or the baseline (the flags: timings.csv's unstable)"),
    "states_answer": text(STATES_ANSWER.format("verdict")),
    **estimate("compile_s", number("compiled cells: the compile phase (s)"), "the CI of compile_s (s)"),
    "compiler_startup_s": number("the compiler's one-time start-up (s)"),
    **estimate("amortize_calls", number("calls after which the compile has paid for itself (inf: never, not "
                                        "faster)"), "its interval"),
    "compile_fallback": TIMINGS["compile_fallback"],
    **estimate("calls_per_round_trip", number("GPU cells: k*, the calls the data must stay on the device for one "
                                              "copy in and out to pay: (h2d + d2h) ÷ (NumPy's time − the device's "
                                              "compute time)"), "its interval"),
    "break_even_size": number("the series' smallest size from which the end-to-end CI stays above 1"),
    "break_even_status": text("reached, not reached, or from the smallest size"),
}

THREAD_SCALING = {
    **{k: v for k, v in CELL.items() if k != "mode"},
    "threads": text("the thread label compared with one thread", empty=False),
    "mode": CELL["mode"], **VARIANT,
    "threads_effective": TIMINGS["threads_effective"],
    "processes": SPEEDUPS["processes"],
    "ci_scope": text("what the CI covers"),
    "pairing": SPEEDUPS["pairing"],
    **estimate("scaling", number("time on one thread ÷ time on these threads")),
    "verdict": RATIO_VERDICT,
    "verdict_undecided": text(UNDECIDED_WHY.format("scaling")),
    "shares_cores": boolean("whether the cell shared its cores with the orchestrator"),
    "flagged": boolean("whether a noise check flagged the cell or its one-thread cell (the flags: timings.csv's "
                       "unstable)"),
    "states_answer": text(STATES_ANSWER.format("verdict")),
}

DECISIONS = {
    "machine": CELL["machine"],
    "op": CELL["op"],
    "family": TIMINGS["family"],
    "device": CELL["device"],
    "dtype": CELL["dtype"],
    "threads": text("the CPU thread label the decision is for; for a GPU, the host threads of its cells"),
    "threads_effective": TIMINGS["threads_effective"],
    "baseline_threads": text("the thread label of the NumPy baseline (all cores for a GPU)"),
    "decision": text("at the largest size measured: use (the variant in `variant`), stay (with NumPy), unsure "
                     "(cannot tell yet), depends (on the state a process is in), or none (no answer: no variant "
                     "has a speedup at any size; why: no_answer)", empty=False),
    "variant": text("the variant to use there: a library, eager or compiled (numpy, torch, jax, numpy compiled, "
                    "…; empty: cannot tell yet)"),
    "from_size": integer("the smallest measured size from which every larger size decides as the largest does",
                         minimum=1, empty=False),
    "size": integer("the largest size measured, where the speedup below is stated", minimum=1, empty=False),
    "compared_variant": text("the variant whose speedup is stated: the one to use, or NumPy's best (or most "
                             "promising) alternative"),
    **estimate("speedup", number("its speedup over NumPy at size, end to end (on a GPU with the copies "
                                 "counted)")),
    "verdict": RATIO_VERDICT,
    "processes": integer("the rounds that speedup's two cells share"),
    "break_even_size": number("a GPU variant's break-even size (the end-to-end CI above 1 from there on)"),
    **estimate("amortize_calls", number("a compiled variant: the calls that pay its compile back at size"),
               "its interval"),
    "amortize_calls_with_startup": number("the same for a program's first compiled function, which also pays the "
                                          "compiler's start-up"),
    "fits_up_to": number("the largest n whose call of the stated variant fits the device's memory (memory.csv)"),
    "calls_per_round_trip": number("GPU rows: k* of the stated variant at size, the calls per copy in and out that "
                                   "make the copies pay"),
    "processes_to_decide": number("processes per cell that would likely decide the largest of them, estimated "
                                  "from the spread between processes seen"),
    "needs_quieter_machine": boolean("whether that size waits for a quieter machine rather than more processes: "
                                     "half or more of a cell's processes were disturbed by other programs"),
    "process_cap": integer("the run's measure.max_processes: the most processes per cell it allowed", minimum=1),
    "weak": boolean("whether a cell behind the decision is weak (flagged unstable, or sharing its cores)"),
    "flagged": boolean("whether a cell behind the decision is flagged unstable by a noise check (its † stays where "
                       "the sharing of cores is said once)"),
    "shares_cores": boolean("whether a cell behind the decision shared its cores with the orchestrator (every "
                            "all-threads cell on a machine with few cores)"),
    "simpler_than": text("where the simplicity rule chose the stated variant: the faster-looking variant it was "
                         "chosen over, since the two cannot be told apart"),
    "simpler_than_speedup": number("that variant's speedup over NumPy at size"),
    "tie": boolean("the stated speedup is a tie at the boundary (its CI within ±δ of its point, but across 1 ± δ): "
                   "no number of processes would decide it"),
    "states_answer": text(STATES_ANSWER.format("decision")),
    "no_answer": text("where decision is none, why: baseline_failed (NumPy itself failed at every size), "
                      "check_failed (every other variant's cell failed its check against float64), failed (they "
                      "failed otherwise: an error, out of memory, a timeout), skipped (none was measured) or "
                      "no_variant (none but NumPy was asked for)"),
    "no_answer_status": text("the status of the cell that says why (error, oom, timeout, skipped)"),
    "no_answer_reason": text("that cell's own reason, in one line, as its record says"),
    "no_answer_variants": text("the variants whose cells failed or were skipped"),
    "no_answer_rel_err": number("for a failed check: the worst relative error against float64"),
    "no_answer_tolerance": number("and the tolerance it missed"),
    "not_for": text("the libraries that cannot run the code as written, each with its reason (\"not for jax: the "
                    "kernel updates its argument u in place, …\"), from their skipped cells"),
}

CONTROLS = {
    **CELL, **VARIANT,
    "processes": integer("the rounds the cell and its twin share"),
    "ci_scope": text("what the CI covers"),
    "pairing": SPEEDUPS["pairing"],
    **estimate("ratio", number("the cell's time ÷ its twin's: the same code measured as two cells, so 1 in "
                               "truth")),
    "verdict": RATIO_VERDICT,
    "verdict_undecided": text(UNDECIDED_WHY.format("verdict")),
    "false_verdict": boolean("whether the verdict is faster or slower: a false one"),
    "shares_cores": boolean("whether either copy shared its cores with the orchestrator"),
    "flagged": boolean("whether a noise check flagged the cell or its twin (the flags: timings.csv's unstable)"),
    "states_answer": text(STATES_ANSWER.format("verdict")),
    "twin_measure_s": number("wall time the twin's processes spent measuring it (s): what the control cost"),
    "carry_over": number("the cell's and its twin's time in the cycles of their bouts that came right after a "
                         "multi-threaded OpenMP worker (torch, compiled code) ÷ their time in the other cycles: "
                         "what the pause between turns leaves of a spinning thread pool (1: nothing)"),
    "carry_over_ci_low": number("lower end of its CI, across processes"),
    "carry_over_ci_high": number("upper end of its CI"),
}

MEMORY = {
    "machine": CELL["machine"],
    "op": CELL["op"],
    **VARIANT,
    "device": CELL["device"],
    "dtype": CELL["dtype"],
    "sizes": text("the sizes whose peak was measured"),
    "largest_measured": integer("the largest of them", minimum=1, empty=False),
    "peak_bytes": number("the peak extra bytes of one call there (on a GPU, on the device)", finite=True,
                         minimum=0, empty=False),
    "peak_doubted": boolean("whether a peak below the bytes the call returns was read (allocations the reading "
                            "missed); the returned bytes stand in for it"),
    "inputs_bytes": number("the bytes of the call's inputs there", minimum=0),
    "inputs_degree": integer("a kernel: the power of n its inputs grow with"),
    "extra_degree": integer("a kernel: the power of n its extra bytes grow with, where two sizes or more were measured "
                             "(else taken as its inputs')"),
    "scale": number("an op of the catalogue: results and temporaries of a call, in outputs: the largest measured "
                    "peak ÷ the outputs' bytes"),
    "model_scale": number("what the model assumed where nothing was measured"),
    "model_error": number("how far the model was from the measurement: model ÷ measured, less 1"),
    "memory_bytes": number("the device's memory (the host's on the cpu), from environment.json", finite=True,
                           minimum=0),
    "headroom": number("the share of that memory kept free", finite=True, minimum=0),
    "largest_size": number("the largest n whose inputs and measured results and temporaries fit"),
    "largest_size_model": number("the same from the model alone, to compare"),
}

TRANSFER = {
    "machine": CELL["machine"],
    "device": CELL["device"],
    "device_name": TIMINGS["device_name"],
    "direction": text("h2d (host→device) or d2h (device→host)"),
    "memory": text("the host memory kind: pageable or pinned"),
    "bytes": integer("bytes of one copy", minimum=1, empty=False),
    "status": text("ok, or skipped with a reason", empty=False),
    "reason": text("why a point is not ok, in one line"),
    "n_samples": integer("timing samples of the copy"),
    **estimate("median_s", number("median time of one copy (s)"), "the CI of median_s (s)"),
    **estimate("gbs", number("bytes ÷ median_s, in GB/s"), "the CI of gbs"),
    "link": text("the host↔device link as read (e.g. PCIe gen 5 x16)"),
    "link_gbs": number("the link's theoretical rate in GB/s"),
    "link_fraction": number("gbs ÷ link_gbs"),
}

ROOFS = {
    "machine": CELL["machine"],
    "device": CELL["device"],
    "device_name": TIMINGS["device_name"],
    "library": text("numpy or torch"),
    "kind": text("memory (a STREAM-style triad), compute (a matmul), or pages (mapping fresh pages)"),
    "dtype": text("the element type of the point"),
    "size": integer("the triad's array length or the matmul's side", minimum=1),
    "status": text("ok, or skipped with a reason", empty=False),
    "reason": text("why a point is not ok, in one line"),
    "n_samples": integer("timing samples of the point"),
    **estimate("value", number("the roof: GB/s for memory, GFLOP/s for compute; ns per fresh page for pages")),
    "unit": text("GB/s or GFLOP/s"),
}

# What each measured size of a decision's series says, a row per size (decisions.csv states
# the largest): the series' key as in DECISIONS, the size, and its decision and variant.
DECISION_SIZES = {
    **{name: DECISIONS[name] for name in ("machine", "op", "device", "dtype", "threads")},
    "size": integer("a measured size of the series", minimum=1, empty=False),
    "decision": DECISIONS["decision"],
    "variant": DECISIONS["variant"],
}

# Why the variants that lose at a decision's size do, where the records say: a row per
# variant and reason, keyed by the decision's series as in DECISIONS (the report words them).
LOSSES = {
    **{name: DECISIONS[name] for name in ("machine", "op", "device", "dtype", "threads")},
    "variant": text("the variant that loses", empty=False),
    "reason": text("compile_fallback (its code did not all compile), copies (it computes faster than NumPy, but "
                   "not with the copies counted) or fresh_pages (it maps far more fresh pages per call than the one "
                   "it loses to, at a cost that matters)", empty=False),
    "compile_fallback": TIMINGS["compile_fallback"],
    "speedup": number("copies: its speedup over NumPy with the data already on the device"),
    "end_to_end_speedup": number("copies: its speedup over NumPy with the copies counted"),
    "pages_per_call": number("fresh_pages: the fresh pages it maps per call"),
    "against": text("fresh_pages: the variant it loses to (numpy where none wins)"),
    "against_pages_per_call": number("fresh_pages: the fresh pages that one maps per call"),
    "pages_s": number("fresh_pages: seconds its extra pages cost a call (empty where a page's cost is not measured)"),
    "call_s": number("fresh_pages: its seconds per call"),
}

RESIDENT = {
    **CELL, **VARIANT,
    "calls": integer("k: the calls of one resident trip (one copy in, k calls chained on the device, one copy out)",
                     minimum=1, empty=False),
    "resident_s": number("the trip's time: the geometric mean of its process medians (s)"),
    "predicted_s": number("what the phases predict for it: h2d + k·compute + d2h (s)"),
}

STATES = {
    **CELL, **VARIANT,
    "kind": text("the comparison: speedup, thread scaling or self-comparison", empty=False),
    "phase": text("the timed region its ratio is of: end_to_end or compute", empty=False),
    "base_cell": text("the baseline's cell (NumPy's; one thread; the cell a twin copies)", empty=False),
    "contender_cell": text("the contender's cell (the row's; the twin)", empty=False),
    "base_state": text("fast or slow: the baseline's state in these rounds (empty: it has one)"),
    "contender_state": text("fast or slow: the contender's state in these rounds (empty: it has one)"),
    "base_state_s": number("the baseline's time in that state (s)"),
    "contender_state_s": number("the contender's time in that state (s)"),
    "ratio": number("the baseline's time over the contender's in these rounds (above 1: the contender is faster)"),
    "rounds": integer("the rounds behind that ratio", minimum=1, empty=False),
    "of_rounds": integer("the rounds both sides ran in", minimum=1, empty=False),
}

FLAGS = {
    **CELL, **VARIANT,
    "kind": text("what was found: a noise check's kind (bimodal, drift, cpu_clock, gpu_clock, disturbed), "
                 "disagree or two_differ (processes that still disagree), or a failed process's status", empty=False),
    "region": text("the timed region it was found in (empty: the whole sampling window)"),
    "amount": number("how much, as a fraction: the drift, the gap between modes, the clock's change, the cores "
                     "others used (the strongest case)"),
    "processes": integer("the processes it was seen in (that disagree, failed or were left out)"),
    "of_processes": integer("of how many"),
    "factor": number("how far apart the processes lie (for a process left out: from the others; empty where it "
                     "was disturbed)"),
    "left_out_round": integer("a process left out: its round (empty: a flag on the counted processes)"),
    "replaced": boolean("a process left out: whether an extra process took its place"),
    "text": text("the worker's own words for the flag (its strongest case)"),
}

DECLARED = {"timings": TIMINGS, "speedups": SPEEDUPS, "thread_scaling": THREAD_SCALING, "decisions": DECISIONS,
            "decision_sizes": DECISION_SIZES, "losses": LOSSES, "controls": CONTROLS, "memory": MEMORY,
            "resident": RESIDENT, "states": STATES, "flags": FLAGS, "transfer": TRANSFER, "roofs": ROOFS}


def kinds(name: str) -> dict[str, Kind]:
    """The kind of each declared column of table `name` (none for a table not declared, nor
    for a column declared as plain text without one: tests/analysis/test_columns.py asks for one)."""
    return {column: meaning.kind for column, meaning in DECLARED.get(name, {}).items() if isinstance(meaning, Column)}


def with_whole_numbers(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Table `name` with its integer columns as whole numbers, empty where there is none
    (pandas makes a column with a gap float, and would write 3 as 3.0)."""
    whole = [column for column, kind in kinds(name).items() if kind.name == INTEGER and column in frame]
    return frame.astype(dict.fromkeys(whole, "Int64"))


# A table not declared here keeps every column that is text in some declared table as text.
ANY_TEXT = {column for table in DECLARED for column, kind in kinds(table).items() if kind.name == TEXT}


def read_dtypes(name: str) -> dict[str, type]:
    """The dtypes that read a CSV of table `name` back (pandas.read_csv's `dtype`): its text
    columns as text, so that a thread label "1" or a reason "-2" stays what was written."""
    text_columns = [c for c, kind in kinds(name).items() if kind.name == TEXT] if name in DECLARED else ANY_TEXT
    return dict.fromkeys(text_columns, str)


def misfits(values: pd.Series, kind: Kind) -> np.ndarray:
    """Which values of a column read back from CSV do not fit its kind (a boolean mask)."""
    empty = values.isna().to_numpy()
    bad = np.zeros(len(values), dtype=bool)
    if kind.name == BOOLEAN and not pd.api.types.is_bool_dtype(values):  # a cell that is neither left it text
        bad = ~values.map(lambda v: isinstance(v, (bool, np.bool_)) or v in ("True", "False")).to_numpy(dtype=bool)
        bad &= ~empty
    elif kind.name in (INTEGER, NUMBER):
        if pd.api.types.is_bool_dtype(values):
            bad = ~empty
        else:
            if not pd.api.types.is_numeric_dtype(values):  # a cell that is no number left the column text
                bad = values.map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy(dtype=bool)
                values = pd.to_numeric(values, errors="coerce")
            x = values.to_numpy(dtype=float)
            with np.errstate(invalid="ignore"):
                bad = bad | (np.isnan(x) & ~empty)
                if kind.name == INTEGER or kind.finite:
                    bad |= np.isinf(x)
                if kind.name == INTEGER:
                    bad |= np.isfinite(x) & (np.mod(x, 1) != 0)
                if kind.minimum is not None:
                    bad |= x < kind.minimum
    if not kind.empty:
        bad |= empty
    return bad


def first_misfit(frame: pd.DataFrame, name: str) -> tuple[str, int, object, Kind] | None:
    """The first declared column of a table read back whose value does not fit its kind:
    (column, position of the row, the value, the kind), or None where every value fits."""
    for column, kind in kinds(name).items():
        if column not in frame.columns or (kind.name == TEXT and kind.empty):
            continue
        values = frame[column]
        if isinstance(values, pd.DataFrame):  # a column name the CSV repeats
            values = values.iloc[:, 0]
        bad = misfits(values, kind)
        if bad.any():
            row = int(np.argmax(bad))
            return column, row, values.iloc[row], kind
    return None


def interval(row, column: str) -> tuple[float, float, float]:
    """(estimate, CI low, CI high) of a column of a table row; NaN where a bound is missing."""
    low, high = ci_columns(column)

    def number(name: str) -> float:
        try:
            return float(row[name])
        except (KeyError, TypeError, ValueError):
            return math.nan

    return number(column), number(low), number(high)


def interval_frame(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """The estimate and its CI as three columns of a new frame (value, lo, hi), for drawing."""
    low, high = ci_columns(column)
    return pd.DataFrame({"value": frame[column], "lo": frame[low], "hi": frame[high]}, index=frame.index)


TRUE_TEXTS = ("true", "1", "1.0")  # a boolean column's true value, as written or read back as text


def has_text(frame: pd.DataFrame, column: str) -> pd.Series:
    """Rows whose text column `column` says something (all False where it is absent)."""
    if column not in frame:
        return pd.Series(False, index=frame.index)
    values = frame[column]
    return values.notna() & (values.astype(str) != "")


def true_cells(frame: pd.DataFrame, column: str) -> pd.Series:
    """Rows whose boolean column `column` is true, as written or read back as text (all False
    where the table is older than the column): `flag` over a whole frame."""
    if column not in frame:
        return pd.Series(False, index=frame.index)
    return frame[column].map(lambda v: str(v).lower() in TRUE_TEXTS).astype(bool)


def unstable_cells(frame: pd.DataFrame) -> pd.Series:
    """Rows flagged by a noise check: `flagged` (a ratio's: either cell; older tables
    worded the flags in `unstable`)."""
    return has_text(frame, "unstable") | true_cells(frame, "flagged")


def sharing_cells(frame: pd.DataFrame) -> pd.Series:
    """Rows measured on every core, shared with the orchestrator."""
    return true_cells(frame, "shares_cores")


def weak_cells(frame: pd.DataFrame) -> pd.Series:
    """Rows whose numbers are weak: flagged unstable, or sharing cores with the orchestrator
    (the figures draw them hollow)."""
    return unstable_cells(frame) | sharing_cells(frame)


def flag(row, column: str) -> bool:
    """A boolean column of one row, as written or read back as text; False where the table
    is older than the column."""
    return str(row.get(column)).lower() in TRUE_TEXTS


def text_of(value) -> str:
    """A text cell of a table read back from CSV: "" where it is empty (NaN)."""
    return value if isinstance(value, str) else ""


def is_flagged_row(row) -> bool:
    """One row of a table: flagged as `unstable_cells` says (tables read back hold text)."""
    return text_of(row.get("unstable")) != "" or flag(row, "flagged")


def is_weak_row(row) -> bool:
    """One row of a table: weak as `weak_cells` says."""
    return is_flagged_row(row) or flag(row, "shares_cores")


def compile_fallbacks(frame: pd.DataFrame) -> pd.Series:
    """Compiled rows whose code did not all compile (graph breaks, or nothing captured):
    their times are not those of compiled code, so they are no compiled speedup."""
    return has_text(frame, "compile_fallback")


def headline(speedups: pd.DataFrame):
    """The largest speedup over NumPy, as the decisions count it: end to end (host arrays in
    and out, on a GPU the copies counted), among the cells decided faster end to end,
    compiled cells whose code fell back left out. The row, or None where nothing is faster.
    Every place that states "the largest speedup" takes it from here."""
    if speedups.empty or "end_to_end_verdict" not in speedups.columns:
        return None
    rows = speedups[(speedups["end_to_end_verdict"] == FASTER) & ~compile_fallbacks(speedups)]
    values = pd.to_numeric(rows["end_to_end_speedup"], errors="coerce")
    return rows.loc[values.idxmax()] if values.notna().any() else None


def falls_back(row) -> bool:
    """A compiled row whose code did not all compile (see compile_fallbacks)."""
    return text_of(row.get("compile_fallback")) != ""


def without_models(timings: pd.DataFrame) -> list[str]:
    """Ops measured without a FLOP model (user kernels that give none): no throughput."""
    if timings.empty or "gflops" not in timings:
        return []
    ok = timings[timings["status"] == "ok"]
    return sorted(set(ok.loc[ok["gflops"].isna(), "op"]))
