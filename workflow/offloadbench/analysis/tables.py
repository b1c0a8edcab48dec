"""Raw records -> tidy tables: `timings.csv` (one row per cell), `speedups.csv`,
`thread_scaling.csv` and `transfer.csv`.

A cell's time is the geometric mean of its process medians, with a CI from the two-level
bootstrap (`stats`); a ratio of two cells (a speedup, thread scaling) takes its CI from
both cells' draws. Cells measured in one process say so in `ci_scope`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, astuple

import numpy as np
import pandas as pd

from ..catalogue import SPECS
from ..cells import CELL_COLUMNS, thread_sort_key
from ..compared import baseline_rows, control_pairs, scaling_pairs, speedup_pairs
from ..csvsafe import read_csv_text, write_csv
from ..errors import one_line
from ..kernels import FAMILY as KERNEL_FAMILY
from ..logs import stage
from ..reading import UnreadableFile, read_regular
from ..records import (
    ROOFS_SCHEMA,
    TRANSFER_SCHEMA,
    DeviceRecord,
    Environment,
    MalformedRecord,
    load_device_record,
    load_environment,
    write_json_atomic,
)
from ..stats import MIN_PAIRED, Interval, median_and_ci, stream_for
from ..verdicts import FASTER, SLOWER, Judging
from ..verdicts import method as verdicts_method
from .breakeven import break_even
from .columns import (
    CONTROLS,
    DECISION_SIZES,
    DECISIONS,
    FLAGS,
    LOSSES,
    RESIDENT,
    ROOFS,
    SPEEDUPS,
    STATES,
    THREAD_SCALING,
    TIMINGS,
    TRANSFER,
    ci_columns,
    first_misfit,
    read_dtypes,
    with_whole_numbers,
)
from .compile_cost import amortization, compile_interval
from .decisions import decision_tables
from .measured import Analysis, MeasuredCell, carry_over, faults_per_call, load_cells
from .memory_fit import memory_table
from .pairs import CONTROL, SCALING, SPEEDUP, Comparison, by_state, compared
from .processes import method as processes_method
from .roofline import page_cost_s
from .round_trip import NOT_MEASURED, calls_per_round_trip

PHASES = ("h2d", "compute", "d2h", "finish", "end_to_end")
SERIES = ["op", "library", "mode", "device", "dtype", "threads"]


def _joined(values) -> str:
    return ", ".join(sorted({str(v) for v in values if v}))


def family_of(mc: MeasuredCell) -> str:
    """The op's family: the catalogue's, or the one a user kernel's records give."""
    return SPECS[mc.cell.op].family if mc.cell.op in SPECS else mc.first.family or KERNEL_FAMILY


def compile_columns(mc: MeasuredCell) -> dict:
    """A compiled cell's compile phase, what Dynamo did and the compiler's cache, over its
    processes (empty for eager cells)."""
    phases = [r.compile for r in mc.ok if r.compile is not None]
    if not mc.cell.compiled or not phases:
        return {}
    compile_time = compile_interval(mc, mc.analysis.confidence)
    first = [r for r in mc.ok if r.compile is not None and r.compile.cache_hits == 0] or mc.ok
    startups = [r.compiler_startup_s for r in first if r.compiler_startup_s is not None]
    return {
        "compile_s": compile_time.value, "compile_s_ci_low": compile_time.low, "compile_s_ci_high": compile_time.high,
        "compiler_startup_s": float(np.mean(startups)) if startups else math.nan,
        "graphs": max(p.graphs for p in phases),
        "graph_breaks": max(p.graph_breaks for p in phases),
        "first_break": next((p.first_break for p in phases if p.first_break), ""),
        "recompiles": max(p.recompiles for p in phases),
        "compile_fallback": next((p.fallback for p in phases if p.fallback), ""),
        "compile_backend": f"{phases[0].backend} ({phases[0].mode})",
        "compile_cache_cold": all(p.cache_cold for p in phases),
        "compile_processes": len(phases),
        "compile_cache_reused": sum(p.cache_hits > 0 for p in phases),
        "compile_cache_hits": sum(p.cache_hits for p in phases),
    }


def _median_of(values) -> float:
    """The median of the values a record holds (None: not measured)."""
    found = [float(v) for v in values if v is not None]
    return float(np.median(found)) if found else math.nan


def memory_columns(mc: MeasuredCell) -> dict:
    """Peak memory over the cell's processes (each measured in an untimed call)."""
    host = [r.host_peak for r in mc.counted]
    peaks = [h.peak_bytes for h in host if h.peak_bytes is not None]
    compiles = [r.compile for r in mc.counted if r.compile is not None]
    return {
        "peak_host_bytes": _median_of(peaks),
        "peak_host_method": next((h.method for h in host if h.method), ""),
        "peak_rss_bytes": _median_of(h.rss_hwm_bytes for h in host),
        "peak_device_bytes": _median_of(r.device_peak.peak_bytes for r in mc.counted),
        "peak_host_low_bytes": min(peaks, default=math.nan),
        "peak_host_high_bytes": max(peaks, default=math.nan),
        "peak_reason": "" if peaks else next((h.reason for h in host if h.reason), ""),
        "compile_peak_rss_bytes": _median_of(c.rss_hwm_bytes for c in compiles),
        "compile_peak_device_bytes": _median_of(c.device_peak_bytes for c in compiles),
    }


def state_columns(mc: MeasuredCell) -> dict:
    """A cell whose processes fall into two states far apart: each state's time, fresh pages
    per call and rounds (NaN and "" where it has one state)."""
    states, found = mc.states, {}
    for state in ("fast", "slow"):
        found |= {f"state_{state}_s": states.time_s(state) if states else math.nan,
                  f"state_{state}_faults_per_call": faults_per_call(getattr(states, state)) if states else math.nan,
                  f"state_{state}_rounds": states.rounds(state) if states else ""}
    return found


def resident_rows(mc: MeasuredCell, machine: str) -> list[dict]:
    """A GPU cell's resident trips, one row per k: the measured time against what its phases
    predict, h2d + k·compute + d2h."""
    h2d, compute, d2h = (mc.median(phase) for phase in ("h2d", "compute", "d2h"))
    return [{**_cell_columns(mc, machine), "calls": k, "resident_s": mc.median(f"resident_{k}"),
             "predicted_s": h2d + k * compute + d2h}
            for k in sorted({k for r in mc.counted for k in r.resident_calls()})]


def resident_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """resident.csv: every GPU cell's resident trips (`columns.RESIDENT`)."""
    rows = [row for mc in cells if mc.ok for row in resident_rows(mc, machine)]
    return _sorted(pd.DataFrame(rows, columns=list(RESIDENT)), [*CELL_COLUMNS, "calls"])


def flags_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """flags.csv: what the noise checks found in each cell, and the processes left out
    (`columns.FLAGS`): by cell, each cell's rows in the order the report names them."""
    rows = [{**_cell_columns(mc, machine), **row} for mc in cells if mc.ok for row in mc.flag_rows()]
    return _sorted(pd.DataFrame(rows, columns=list(FLAGS)), CELL_COLUMNS)


def with_peak_vs_numpy(frame: pd.DataFrame) -> pd.DataFrame:
    """Each cell's peak (on a GPU, its device peak) against NumPy's host peak of the same
    op, dtype and size: how much more memory the variant needs."""
    if frame.empty:
        return frame
    numpy = frame[baseline_rows(frame)]
    base = numpy.groupby(["op", "dtype", "size"])["peak_host_bytes"].median()
    own = frame["peak_device_bytes"].where(frame["device"] != "cpu", frame["peak_host_bytes"])
    reference = base.reindex(pd.MultiIndex.from_frame(frame[["op", "dtype", "size"]])).to_numpy(dtype=float)
    return frame.assign(peak_vs_numpy=own.to_numpy(dtype=float) / np.where(reference > 0, reference, math.nan))


def _cell_columns(mc: MeasuredCell, machine: str) -> dict:
    """The columns that name a row's cell: its machine, the cell's own and its variant."""
    return {"machine": machine, **mc.cell.as_dict(), "variant": mc.cell.variant}


def timing_row(mc: MeasuredCell, machine: str) -> dict:
    first = mc.first
    compute = mc.interval("compute")
    pooled = [s for g in mc.groups("compute") for s in g]
    q1, q3 = np.percentile(pooled, [25, 75]) if pooled else (math.nan, math.nan)
    medians = mc.process_medians()
    flops, traffic = first.model.flops or math.nan, first.model.traffic_bytes or math.nan
    median = compute.value
    checked = mc.ok or [r for r in mc.records if r.check.rel_err is not None]
    row = {
        **_cell_columns(mc, machine),
        "family": family_of(mc),
        "threads_effective": first.threads_effective,
        "status": mc.status,
        "reason": mc.reason,
        "device_name": first.device_name,
        "processes": len(medians),
        "ci_scope": compute.scope if medians else "",
        "n_samples": len(pooled),
        "calls_per_sample": first.calls_per_sample,
        "warmup_count": first.warmup_count,
        "median_s": median,
        "q1_s": float(q1),
        "q3_s": float(q3),
        "ci_low_s": compute.low,
        "ci_high_s": compute.high,
        "rel_ci": compute.rel_halfwidth,
        "process_spread": max(medians) / min(medians) - 1 if len(medians) > 1 else math.nan,
        "converged": all(r.converged for r in mc.ok) if mc.ok else None,
        **_with_ci("gflops", *(flops / t / 1e9 if t > 0 else math.nan for t in (median, compute.high, compute.low))),
        "bandwidth_gbs": traffic / median / 1e9 if median > 0 else math.nan,
        "intensity": flops / traffic if traffic > 0 else math.nan,
        # a cell that failed its check keeps the error it failed with
        "rel_err": max((r.check.rel_err or 0.0 for r in checked), default=math.nan),
        "tolerance": checked[0].check.tolerance if checked else first.check.tolerance,
        "check_failed": any(r.check.failed for r in mc.records),
        "returns": _joined(d for r in mc.ok for d in r.returns),
        "changes": ", ".join(first.changes),
        "timed_per_call": any(r.per_call for r in mc.ok),
        "restore_s": _median_of(r.restore_s for r in mc.ok),
        "inputs_bytes": _median_of(r.model.h2d_bytes for r in mc.ok),
        "result_bytes": _median_of(r.model.result_bytes for r in mc.ok),
        "inputs_degree": max((r.model.inputs_degree for r in mc.ok if r.model.inputs_degree is not None),
                             default=math.nan),
        "flagged": mc.flagged,
        **state_columns(mc),
        "disturbed_cores": mc.disturbed_cores,
        **mc.precision,
        "shares_cores": mc.shares_cores,
        "faults_per_call": faults_per_call(mc.counted),
        "conversion_s": _median_of(r.conversion_s for r in mc.ok),
        "allocator": _joined(r.settings.get("allocator") for r in mc.records),
        "measure_s": sum(r.measure_s or 0.0 for r in mc.records),
        "import_s": float(np.mean([r.import_s for r in mc.ok if r.import_s is not None] or [math.nan])),
        "host": _joined(r.host for r in mc.records),
        "slurm_job_id": _joined(r.slurm_job_id for r in mc.records),
    }
    row.update(compile_columns(mc))
    row.update(memory_columns(mc))
    row["resident_reason"] = next((r.resident_reason for r in mc.counted if r.resident_reason), "")
    row["not_for"] = any(r.not_for for r in mc.records)
    for phase in PHASES:
        row[f"{phase}_s"] = mc.median(phase)
    e2e = mc.interval("end_to_end")
    row["end_to_end_ci_low_s"], row["end_to_end_ci_high_s"] = e2e.low, e2e.high
    copies = np.nansum([row["h2d_s"], row["d2h_s"]])
    on_device = mc.cell.device != "cpu" and row["end_to_end_s"] > 0
    row["transfer_fraction"] = copies / row["end_to_end_s"] if on_device else math.nan
    return row


def _sorted(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The rows sorted by the columns `by`, thread labels in their order (1, 2, …, all)."""
    by_threads = frame.sort_values(by, key=lambda c: c.map(thread_sort_key) if c.name == "threads" else c,
                                   kind="stable")
    return by_threads.reset_index(drop=True)


def timings_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """One row per cell, in the declared columns (`columns.TIMINGS`; eager cells leave the
    compile columns empty)."""
    rows = []
    for mc in cells:
        with stage(f"the timings of cell {mc.cell.key}"):
            rows.append(timing_row(mc, machine))
    frame = pd.DataFrame(rows, columns=list(TIMINGS))
    return _sorted(with_peak_vs_numpy(frame), CELL_COLUMNS)


def _with_ci(column: str, value: float, low: float, high: float) -> dict:
    """An estimate's column and its CI's (`columns.ci_columns`)."""
    low_name, high_name = ci_columns(column)
    return {column: value, low_name: low, high_name: high}


def _judged_columns(comparison: Comparison, column: str, verdict: str = "verdict",
                    undecided: str = "verdict_undecided") -> dict:
    """A judged ratio's columns: the rounds behind it, what its CI covers and how it was
    paired, the ratio with its CI, its verdict and why it is undecided, and whether it holds
    in a side's two states (the ratio in each: states.csv)."""
    ratio = comparison.ratio
    return {"processes": ratio.processes, "ci_scope": ratio.scope, "pairing": ratio.pairing,
            **_with_ci(column, ratio.value, ratio.low, ratio.high), verdict: comparison.verdict,
            undecided: comparison.why, "states_answer": comparison.states_answer}


def speedups_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """One row per ok cell other than the baseline (torch eager and compiled, numpy compiled)
    that has an ok numpy-eager cpu baseline at the same op, dtype and size."""
    rows = []
    for mc, base, label in speedup_pairs(cells):
        with stage(f"the speedup of cell {mc.cell.key}"):
            rows.append(speedup_row(mc, base, label, machine))
    columns = [c for c in SPEEDUPS if not c.startswith("break_even")]  # those follow per series
    frame = _sorted(pd.DataFrame(rows, columns=columns), [*SERIES, "size"])
    return with_break_even(frame)


def speedup_row(mc: MeasuredCell, base: MeasuredCell, label: str, machine: str) -> dict:
    """One cell against its NumPy baseline (of `label` threads)."""
    judging = mc.analysis.judging
    speed, e2e = compared(SPEEDUP, base, mc, "compute"), compared(SPEEDUP, base, mc, "end_to_end")
    compiled = compile_columns(mc)
    amortized = astuple(amortization(compile_interval(mc, judging.confidence), base.interval("compute"),
                                     speed.ratio)) if compiled else (math.nan,) * 3
    trip = calls_per_round_trip(mc.interval("h2d"), mc.interval("d2h"), base.interval("compute"),
                                mc.interval("compute")) if mc.cell.is_gpu else NOT_MEASURED
    return {
        **_cell_columns(mc, machine),
        "threads_effective": mc.first.threads_effective,
        "device_name": mc.first.device_name,
        "baseline_threads": label,
        **_judged_columns(speed, "speedup", "speedup_verdict", "speedup_undecided"),
        **_with_ci("end_to_end_speedup", e2e.ratio.value, e2e.ratio.low, e2e.ratio.high),
        "end_to_end_verdict": e2e.verdict, "end_to_end_undecided": e2e.why,
        "median_s": mc.median("compute"),
        "baseline_median_s": base.median("compute"),
        "end_to_end_s": mc.median("end_to_end"),
        "baseline_end_to_end_s": base.median("end_to_end"),
        "shares_cores": mc.shares_cores or base.shares_cores,
        "disturbed": mc.judgement.disturbed or base.judgement.disturbed,
        "flagged": mc.flagged or base.flagged,
        "states_answer": (e2e if e2e.states else speed).states_answer,
        **{name: compiled.get(name, math.nan) for name in ("compile_s", "compile_s_ci_low", "compile_s_ci_high",
                                                           "compiler_startup_s")},
        **_with_ci("amortize_calls", *amortized),
        "compile_fallback": compiled.get("compile_fallback", ""),
        **_with_ci("calls_per_round_trip", *astuple(trip)),
    }


def with_break_even(speedups: pd.DataFrame) -> pd.DataFrame:
    """Add each series' break-even size (end-to-end speedup CI above 1 from there on)."""
    frame = speedups.copy()
    frame["break_even_size"] = pd.Series(dtype=float)
    frame["break_even_status"] = pd.Series(dtype=str)  # reached, not reached, from the smallest size
    for _, group in frame.groupby(SERIES, sort=False):
        result = break_even(group["size"].tolist(), group["end_to_end_speedup_ci_low"].tolist())
        frame.loc[group.index, "break_even_size"] = result.size
        frame.loc[group.index, "break_even_status"] = result.status
    return frame


def controls_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """Every self-comparison (A/A control): a cell against its twin, judged like any ratio.
    A faster or slower verdict here is a false one."""
    rows = []
    for original, twin in control_pairs(cells):
        control, carried = compared(CONTROL, original, twin), carry_over([original, twin])
        rows.append({
            **_cell_columns(original, machine),
            **_judged_columns(control, "ratio"),
            "false_verdict": control.verdict in (FASTER, SLOWER),
            "shares_cores": original.shares_cores or twin.shares_cores,
            "flagged": original.flagged or twin.flagged,
            "twin_measure_s": sum(r.measure_s or 0.0 for r in twin.records),
            **_with_ci("carry_over", carried.value, carried.low, carried.high),
        })
    return pd.DataFrame(rows, columns=list(CONTROLS))


def states_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """states.csv: where a side of a comparison has two states, its ratio in each (a row per
    state pair), on the row of the table that judges it: the contender of a speedup (end to
    end where its copies show them), the most threads of a thread scaling, the cell of a
    self-comparison."""
    rows, regular = [], [mc for mc in cells if not mc.cell.twin]  # a twin is only ever its cell's control
    pairs = [(SPEEDUP, mc, base, mc, ["end_to_end", "compute"]) for mc, base, _ in speedup_pairs(regular)]
    pairs += [(SCALING, many, one, many, ["compute"]) for one, many in scaling_pairs(regular)]
    pairs += [(CONTROL, original, original, twin, ["compute"]) for original, twin in control_pairs(cells)]
    for kind, row_cell, base, contender, phases in pairs:
        found = next(((phase, states) for phase in phases if (states := by_state(base, contender, phase)[1])), None)
        if found:
            phase, states = found
            rows += [{**_cell_columns(row_cell, machine), "kind": kind, "phase": phase, "base_cell": base.cell.stem,
                      "contender_cell": contender.cell.stem, **asdict(state)} for state in states]
    return _sorted(pd.DataFrame(rows, columns=list(STATES)), [*CELL_COLUMNS, "kind"])


def thread_scaling_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """CPU cells: how much faster the most threads are than one thread, with a CI."""
    rows = [{
        **_cell_columns(many, machine),
        "threads_effective": many.first.threads_effective,
        **_judged_columns(compared(SCALING, one, many), "scaling"),
        "shares_cores": many.shares_cores,
        "flagged": many.flagged or one.flagged,
    } for one, many in scaling_pairs(cells)]  # CPU cells, none a twin
    return pd.DataFrame(rows, columns=list(THREAD_SCALING))


def _rate(work, samples: list[float], analysis: Analysis, name: str) -> tuple[Interval, float, float, float]:
    """A point's median time per call with its CI, and `work` (bytes, FLOP) per second in
    units of 1e9 with the CI (the CI's ends swap: a longer time is a lower rate)."""
    time = median_and_ci(samples, analysis.resamples, analysis.confidence, stream_for(analysis.random_state, name))
    if not samples or not work:
        return time, math.nan, math.nan, math.nan
    return time, work / time.value / 1e9, work / time.high / 1e9, work / time.low / 1e9


def _point_rows(records: list[DeviceRecord], machine: str):
    """Each point of the records, with its record and the columns every point's row starts with."""
    for record in records:
        for point in record.points:
            yield record, point, {"machine": machine, "device": record.device, "device_name": record.device_name,
                                  "status": point.status, "reason": point.reason, "n_samples": len(point.samples_s)}


def transfer_table(records: list[DeviceRecord], machine: str, analysis: Analysis) -> pd.DataFrame:
    """One row per device, direction, memory kind and size, with GB/s and its CI."""
    rows = []
    for record, point, row in _point_rows(records, machine):
        link_gbs = record.link_gbs or math.nan
        name = f"transfer/{record.device}/{point.direction}/{point.memory}/{point.bytes}"
        time, gbs, gbs_low, gbs_high = _rate(point.bytes, point.samples_s, analysis, name)
        rows.append({
            **row, "direction": point.direction, "memory": point.memory, "bytes": point.bytes,
            "median_s": time.value, "ci_low_s": time.low, "ci_high_s": time.high, "gbs": gbs,
            "gbs_ci_low": gbs_low, "gbs_ci_high": gbs_high, "link": record.link_kind, "link_gbs": link_gbs,
            "link_fraction": gbs / link_gbs if point.samples_s and math.isfinite(link_gbs) else math.nan,
        })
    return pd.DataFrame(rows, columns=list(TRANSFER))


def roofs_table(records: list[DeviceRecord], machine: str, analysis: Analysis) -> pd.DataFrame:
    """Memory roofs in GB/s and compute roofs in GFLOP/s, with the CI of the median call."""
    rows = []
    for record, point, row in _point_rows(records, machine):
        name = f"roofs/{record.device}/{point.library}/{point.kind}/{point.dtype}"
        work = point.bytes if point.kind == "memory" else point.flops
        time, value, low, high = _rate(work, point.samples_s, analysis, name)
        if point.kind == "pages":  # nanoseconds per fresh page
            value, low, high = (t / (point.size or 1) * 1e9 for t in (time.value, time.low, time.high))
        rows.append({
            **row, "library": point.library, "kind": point.kind, "dtype": point.dtype, "size": point.size,
            "value": value, "ci_low": low, "ci_high": high,
            "unit": {"memory": "GB/s", "pages": "ns per fresh page"}.get(point.kind, "GFLOP/s"),
        })
    return pd.DataFrame(rows, columns=list(ROOFS))


def process_cap(cells: list[MeasuredCell]) -> int | None:
    """The most processes per cell the run allowed (measure.max_processes, as its records say)."""
    caps = [r.settings.get("max_processes") for mc in cells for r in mc.records]
    return max((c for c in caps if isinstance(c, int) and not isinstance(c, bool) and c > 0), default=None)


def build_tables_of(cells: list[MeasuredCell], transfer_paths, roof_paths, machine: str,
                    analysis: Analysis, environment: Environment | None = None) -> dict[str, pd.DataFrame]:
    regular = [mc for mc in cells if not mc.cell.twin]  # a twin is only ever its cell's control
    with stage("timings.csv"):
        timings = timings_table(regular, machine)
    with stage("speedups.csv"):
        speedups = speedups_table(regular, machine)
    with stage("memory.csv"):
        memory = memory_table(timings, environment, machine)
    with stage("resident.csv, states.csv and flags.csv"):
        resident, states = resident_table(regular, machine), states_table(cells, machine)
        flags = flags_table(regular, machine)
    with stage("thread_scaling.csv and controls.csv"):
        scaling, controls = thread_scaling_table(regular, machine), controls_table(cells, machine)
    roofs = roofs_table([load_device_record(p, ROOFS_SCHEMA) for p in roof_paths], machine, analysis)
    with stage("decisions.csv"):
        decisions, decision_sizes, losses = decision_tables(speedups, timings, analysis.judging, machine, memory,
                                                            page_cost_s(roofs), process_cap(cells))
    return {
        "timings": timings,
        "speedups": speedups,
        "thread_scaling": scaling,
        "controls": controls,
        "memory": memory,
        "resident": resident,
        "states": states,
        "flags": flags,
        "decisions": decisions,
        "decision_sizes": decision_sizes,
        "losses": losses,
        "transfer": transfer_table([load_device_record(p, TRANSFER_SCHEMA) for p in transfer_paths], machine, analysis),
        "roofs": roofs,
    }


def with_thresholds(judging: Judging) -> Judging:
    """The policy with the analysis's thresholds this code builds tables with (which
    processes count, the fewest rounds of a paired ratio, the widest CI that is a result)."""
    return judging.with_method({**processes_method(), **verdicts_method(), "min_paired_rounds": MIN_PAIRED})


def write_judging(judging: Judging, path: str) -> None:
    """judging.json: the policy, and the analysis's thresholds the tables were built with."""
    write_json_atomic(path, {"kind": "judging", **with_thresholds(judging).as_json()})


def write_table(name: str, frame: pd.DataFrame, path) -> None:
    """Table `name` as a CSV file, its integer columns written as whole numbers."""
    write_csv(with_whole_numbers(name, frame), path)


def write_tables(record_paths, transfer_paths, roof_paths, environment_path: str, machine: str, analysis: Analysis,
                 outputs: dict[str, str], judging_path: str | None = None) -> None:
    """The tables of one machine, and the judging policy they were judged with beside them
    (judging.json), so that what reads them labels every interval at its level."""
    environment = load_environment(environment_path)
    cells = load_cells(record_paths, environment, analysis)
    tables = build_tables_of(cells, transfer_paths, roof_paths, machine, analysis, environment)
    for name, path in outputs.items():
        write_table(name, tables[name], path)
    if judging_path:
        write_judging(analysis.judging, judging_path)


MAX_TABLE_BYTES = 256 * 2**20  # a timings.csv of 100,000 cells is about 200 MB
# The columns a reader of each table relies on; a table without them is refused by name.
REQUIRED_COLUMNS = {
    "timings": ["machine", "op", "library", "device", "dtype", "size", "threads", "status", "median_s"],
    "speedups": ["machine", "op", "library", "device", "dtype", "size", "threads", "speedup"],
    "thread_scaling": ["machine", "op", "library", "dtype", "size", "threads", "scaling"],
    # every column report/text/decisions.py reads: the summary prints a folder's own decisions.csv
    "decisions": [c for c in DECISIONS if c not in ("family", "baseline_threads", "amortize_calls_ci_low",
                                                    "amortize_calls_ci_high")],
    "decision_sizes": list(DECISION_SIZES),
    "losses": list(LOSSES),
    "controls": ["machine", "op", "library", "device", "size", "threads", "ratio", "verdict"],
    "memory": ["machine", "op", "variant", "device", "dtype", "scale", "largest_size"],
    "resident": list(RESIDENT),
    "states": list(STATES),
    "flags": list(FLAGS),
    "transfer": ["device", "status"],
    "roofs": ["device", "status"],
}


class StaleTable(MalformedRecord):
    """A table that lacks a column its readers need or holds a value of another kind: one
    written by another version; its raw records can build it again."""


def read_table(name: str, path: str) -> pd.DataFrame:
    """Read one CSV table back (a regular file, at most MAX_TABLE_BYTES), keeping its text
    columns (thread labels, reasons) as text, and the cells csvsafe made inert as they were;
    one line names the file when it cannot be read or parsed, lacks a column its readers
    need, or holds a value that does not fit its column's declared kind (`columns.DECLARED`:
    a size that is no positive whole number, text where a number belongs, an empty op)."""
    try:
        frame = read_csv_text(read_regular(path, MAX_TABLE_BYTES, "a table"), dtype=read_dtypes(name),
                              keep_default_na=False, na_values=[""])
    except UnreadableFile as error:
        raise MalformedRecord(str(error)) from None
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()
    except (OSError, ValueError, pd.errors.ParserError) as error:
        raise MalformedRecord(f"{path}: not a readable {name} table ({str(error).splitlines()[0][:200]})") from None
    missing = [c for c in REQUIRED_COLUMNS.get(name, []) if c not in frame.columns]
    if missing and len(frame.columns):
        raise StaleTable(f"{path}: the {name} table lacks the column {missing[0]!r}; aggregate again")
    misfit = first_misfit(frame, name)
    if misfit:
        column, row, value, kind = misfit
        said = (f"is empty in row {row + 1} (it needs {kind.described()})" if pd.isna(value) else
                f"holds {one_line(repr(value) if isinstance(value, str) else value, 80)} in row {row + 1}, not "
                f"{kind.described()}")
        raise StaleTable(f"{path}: the {name} table's column {column!r} {said}; aggregate again")
    return frame


def read_tables(paths: dict[str, str]) -> dict[str, pd.DataFrame]:
    """Read the named CSV tables back (see read_table), each decision with its sizes'
    answers and losses (with_series_rows)."""
    return with_series_rows({name: read_table(name, path) for name, path in paths.items()})


def with_series_rows(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The tables, with each decision's rows of the tables keyed by its series beside it, in
    memory, where they are there: `by_size`, decision_sizes.csv's as a tuple of (size,
    decision, variant), smallest first; `losses`, losses.csv's as a tuple of dicts; and
    `state_ratios`, states.csv's rows of the stated speedup, as a tuple of dicts."""
    decisions = tables.get("decisions")
    if decisions is None:
        return tables
    key = ["op", "device", "dtype", "threads"]

    def beside(frame: pd.DataFrame) -> list[tuple]:
        found: dict[tuple, list] = {}
        for row in frame.to_dict("records"):
            found.setdefault(tuple(str(row[k]) for k in key), []).append(row)
        return [tuple(found.get(tuple(str(r[k]) for k in key), ())) for r in decisions.to_dict("records")]

    columns = {}
    if tables.get("decision_sizes") is not None:
        columns["by_size"] = [tuple(sorted((int(r["size"]), str(r["decision"]), "" if pd.isna(r["variant"])
                                            else str(r["variant"])) for r in rows))
                              for rows in beside(tables["decision_sizes"])]
    if tables.get("losses") is not None:
        columns["losses"] = beside(tables["losses"])
    if tables.get("states") is not None:
        stated = [(int(r["size"]), str(r["compared_variant"])) for r in decisions.to_dict("records")]
        speedups = tables["states"][tables["states"]["kind"].astype(str) == SPEEDUP]
        columns["state_ratios"] = [tuple(s for s in rows if (int(s["size"]), str(s["variant"])) == at)
                                   for rows, at in zip(beside(speedups), stated, strict=True)]
    return {**tables, "decisions": decisions.assign(**{name: pd.Series(values, index=decisions.index, dtype=object)
                                                       for name, values in columns.items()})}
