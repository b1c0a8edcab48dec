"""Raw records -> tidy tables: `timings.csv` (one row per cell), `speedups.csv`,
`thread_scaling.csv` and `transfer.csv`.

A cell's time is the geometric mean of its process medians, with a CI from the two-level
bootstrap (`stats`); a ratio of two cells (a speedup, thread scaling) takes its CI from
both cells' draws. Cells measured in one process say so in `ci_scope`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..catalogue import SPECS
from ..cells import CELL_COLUMNS, thread_sort_key
from ..csvsafe import read_csv_text, write_csv
from ..kernels import FAMILY as KERNEL_FAMILY
from ..reading import UnreadableFile, read_regular
from ..records import ROOFS_SCHEMA, TRANSFER_SCHEMA, MalformedRecord, load_environment, load_record
from ..stats import Interval, median_and_ci, seed_for
from ..units import fmt_time, format_bytes
from ..verdicts import FASTER, SLOWER
from .breakeven import break_even
from .columns import CONTROLS, SPEEDUPS, THREAD_SCALING, TIMINGS, ci_columns
from .compile_cost import amortization, compile_interval
from .decisions import decisions_table
from .measured import Analysis, MeasuredCell, load_cells
from .memory_fit import memory_table
from .pairs import control_pairs, pair_verdict, scaling_pairs, speedup_pairs
from .round_trip import NOT_MEASURED, calls_per_round_trip

PHASES = ("h2d", "compute", "d2h", "finish", "end_to_end")
SERIES = ["op", "library", "mode", "device", "dtype", "threads"]


def _verdict_columns(name: str, ratio, min_effect: float, *sides: MeasuredCell) -> dict:
    """`<name>_verdict` (faster, slower, same, undecided) and why it is undecided."""
    word, why = pair_verdict(ratio, min_effect, *sides)
    return {f"{name}_verdict": word, f"{name}_undecided": why}


def _joined(values) -> str:
    return ", ".join(sorted({str(v) for v in values if v}))


def family_of(mc: MeasuredCell) -> str:
    """The op's family: the catalogue's, or the one a user kernel's records give."""
    if mc.cell.op in SPECS:
        return SPECS[mc.cell.op].family
    return (mc.first.get("op_info") or {}).get("family") or KERNEL_FAMILY


def compile_columns(mc: MeasuredCell, confidence: float) -> dict:
    """A compiled cell's compile phase, what Dynamo did and the compiler's cache, over its
    processes (empty for eager cells)."""
    phases = [r.get("compile") or {} for r in mc.ok]
    if not mc.cell.compiled or not any(phases):
        return {}
    compile_time = compile_interval(mc, confidence)
    hits = sum((p.get("cache") or {}).get("hits", 0) for p in phases)
    cold = all((p.get("cache") or {}).get("cold", True) for p in phases)
    startups = [r["compiler_startup_s"] for r in mc.ok if isinstance(r.get("compiler_startup_s"), (int, float))]
    return {
        "compile_s": compile_time.value, "compile_s_ci_low": compile_time.low, "compile_s_ci_high": compile_time.high,
        "compiler_startup_s": float(np.mean(startups)) if startups else math.nan,
        "graphs": max(p.get("graphs", 0) for p in phases),
        "graph_breaks": max(p.get("graph_breaks", 0) for p in phases),
        "first_break": next((p["first_break"] for p in phases if p.get("first_break")), ""),
        "recompiles": max(p.get("recompiles", 0) for p in phases),
        "compile_fallback": next((p["fallback"] for p in phases if p.get("fallback")), ""),
        "compile_backend": f"{phases[0].get('backend')} ({phases[0].get('mode')})",
        "compile_cache": ("cold" if cold else "your cache") + (f", {hits} hits" if hits else ""),
    }


def _median_of(values) -> float:
    found = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return float(np.median(found)) if found else math.nan


def memory_columns(mc: MeasuredCell) -> dict:
    """Peak memory over the cell's processes (each measured in an untimed call)."""
    readings = [r.get("memory") or {} for r in mc.counted]
    host = [m.get("host") or {} for m in readings]
    device = [m.get("device") or {} for m in readings]
    compiles = [(r.get("compile") or {}).get("memory") or {} for r in mc.counted]
    peaks = [h["peak_bytes"] for h in host if isinstance(h.get("peak_bytes"), int)]
    note = ""
    if peaks and max(peaks) > 1.25 * max(1, min(peaks)):
        note = f"processes disagree: {format_bytes(min(peaks))} to {format_bytes(max(peaks))}"
    elif host and not peaks:
        note = next((h.get("reason") for h in host if h.get("reason")), "not measured")
    return {
        "peak_host_bytes": _median_of(peaks),
        "peak_host_method": next((h["method"] for h in host if h.get("method")), ""),
        "peak_rss_bytes": _median_of(h.get("rss_hwm_bytes") for h in host),
        "peak_device_bytes": _median_of(d.get("peak_bytes") for d in device),
        "peak_note": note,
        "compile_peak_rss_bytes": _median_of(c.get("rss_hwm_bytes") for c in compiles),
        "compile_peak_device_bytes": _median_of(c.get("device_peak_bytes") for c in compiles),
    }


def resident_columns(mc: MeasuredCell) -> dict:
    """A GPU cell's resident trips against what its phases predict, h2d + k·compute + d2h."""
    calls = sorted({int(name.split("_", 1)[1]) for r in mc.counted for name in (r.get("phases") or {})
                    if name.startswith("resident_") and name.split("_", 1)[1].isdigit()})
    reason = next(((r.get("resident") or {}).get("reason") for r in mc.counted if r.get("resident")), "")
    if not calls:
        return {"resident_calls": math.nan, "resident_s": math.nan, "resident_predicted_s": math.nan,
                "resident": reason}
    h2d, compute, d2h = (mc.median(phase) for phase in ("h2d", "compute", "d2h"))
    parts, last = [], {}
    for k in calls:
        measured, predicted = mc.median(f"resident_{k}"), h2d + k * compute + d2h
        parts.append(f"k = {k}: {fmt_time(measured)}, the phases predict {fmt_time(predicted)} "
                     f"({measured / predicted:.2f}×)" if predicted > 0 else f"k = {k}: {fmt_time(measured)}")
        last = {"resident_calls": k, "resident_s": measured, "resident_predicted_s": predicted}
    return {**last, "resident": "; ".join(parts)}


def with_peak_vs_numpy(frame: pd.DataFrame) -> pd.DataFrame:
    """Each cell's peak (on a GPU, its device peak) against NumPy's host peak of the same
    op, dtype and size: how much more memory the variant needs."""
    if frame.empty:
        return frame
    numpy = frame[(frame["library"] == "numpy") & (frame["mode"] == "eager") & (frame["device"] == "cpu")]
    base = numpy.groupby(["op", "dtype", "size"])["peak_host_bytes"].median()
    own = frame["peak_device_bytes"].where(frame["device"] != "cpu", frame["peak_host_bytes"])
    keys = pd.MultiIndex.from_frame(frame[["op", "dtype", "size"]])
    reference = base.reindex(keys).to_numpy(dtype=float)
    frame = frame.copy()
    frame["peak_vs_numpy"] = np.where(reference > 0, own.to_numpy(dtype=float) / np.where(reference > 0, reference, 1),
                                      math.nan)
    return frame


def timing_row(mc: MeasuredCell, machine: str, confidence: float = 0.95) -> dict:
    first = mc.first
    model = first.get("model") or {}
    threads = first.get("threads") or {}
    compute = mc.interval("compute")
    pooled = [s for g in mc.groups("compute") for s in g]
    q1, q3 = np.percentile(pooled, [25, 75]) if pooled else (math.nan, math.nan)
    medians = mc.process_medians()
    flops, traffic = model.get("flops") or math.nan, model.get("traffic_bytes") or math.nan
    median = compute.value
    row = {
        "machine": machine,
        **mc.cell.as_dict(),
        "variant": mc.cell.variant,
        "family": family_of(mc),
        "threads_effective": threads.get("effective"),
        "status": mc.status,
        "reason": mc.reason,
        "device_name": (first.get("device") or {}).get("name"),
        "processes": len(medians),
        "ci_scope": compute.scope if medians else "",
        "n_samples": len(pooled),
        "calls_per_sample": first.get("calls_per_sample"),
        "warmup_count": (first.get("warmup") or {}).get("count"),
        "median_s": median,
        "q1_s": float(q1),
        "q3_s": float(q3),
        "ci_low_s": compute.low,
        "ci_high_s": compute.high,
        "rel_ci": compute.rel_halfwidth,
        "process_spread": max(medians) / min(medians) - 1 if len(medians) > 1 else math.nan,
        "converged": all((r.get("stopping") or {}).get("converged") for r in mc.ok) if mc.ok else None,
        "gflops": flops / median / 1e9 if median > 0 else math.nan,
        "gflops_ci_low": flops / compute.high / 1e9 if compute.high > 0 else math.nan,
        "gflops_ci_high": flops / compute.low / 1e9 if compute.low > 0 else math.nan,
        "bandwidth_gbs": traffic / median / 1e9 if median > 0 else math.nan,
        "intensity": flops / traffic if traffic > 0 else math.nan,
        "rel_err": max(((r.get("check") or {}).get("rel_err") or 0.0 for r in mc.ok), default=math.nan),
        "tolerance": (first.get("check") or {}).get("tolerance"),
        "unstable": "; ".join(mc.flags),
        "replaced": mc.replaced,
        "disturbed_cores": mc.disturbed_cores,
        "precision_notes": "; ".join(mc.precision_notes),
        "shares_cores": mc.shares_cores,
        "measure_s": sum(r.get("measure_s") or 0.0 for r in mc.records),
        "import_s": float(np.mean([r["import_s"] for r in mc.ok if r.get("import_s") is not None] or [math.nan])),
        "host": _joined((r.get("process") or {}).get("host") or (r.get("provenance") or {}).get("hostname") for r in mc.records),
        "slurm_job_id": _joined((r.get("process") or {}).get("slurm_job_id") for r in mc.records),
    }
    row.update(compile_columns(mc, confidence))
    row.update(memory_columns(mc))
    row.update(resident_columns(mc))
    for phase in PHASES:
        row[f"{phase}_s"] = mc.median(phase)
    e2e = mc.interval("end_to_end")
    row["end_to_end_ci_low_s"], row["end_to_end_ci_high_s"] = e2e.low, e2e.high
    copies = np.nansum([row["h2d_s"], row["d2h_s"]])
    on_device = mc.cell.device != "cpu" and row["end_to_end_s"] > 0
    row["transfer_fraction"] = copies / row["end_to_end_s"] if on_device else math.nan
    return row


def _sorted(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    if frame.empty:
        return frame
    key = frame["threads"].map(thread_sort_key)
    return frame.assign(_t=key).sort_values([c if c != "threads" else "_t" for c in by]).drop(columns="_t").reset_index(drop=True)


def timings_table(cells: list[MeasuredCell], machine: str, confidence: float = 0.95) -> pd.DataFrame:
    """One row per cell, in the declared columns (`columns.TIMINGS`; eager cells leave the
    compile columns empty)."""
    frame = pd.DataFrame([timing_row(mc, machine, confidence) for mc in cells], columns=list(TIMINGS))
    return _sorted(with_peak_vs_numpy(frame), CELL_COLUMNS)


def _pair_flags(contender: MeasuredCell, base: MeasuredCell, base_name: str = "baseline") -> str:
    """Noise flags of a ratio: the contender's, then the baseline's."""
    theirs = "; ".join(base.flags)
    return "; ".join(filter(None, ["; ".join(contender.flags), theirs and f"{base_name}: {theirs}"]))


def _ratio_columns(prefix: str, interval: Interval) -> dict:
    low, high = ci_columns(prefix)
    return {prefix: interval.value, low: interval.low, high: interval.high}


def speedups_table(cells: list[MeasuredCell], machine: str, confidence: float = 0.95) -> pd.DataFrame:
    """One row per ok cell other than the baseline (torch eager and compiled, numpy compiled)
    that has an ok numpy-eager cpu baseline at the same op, dtype and size."""
    rows = []
    for mc, base, label in speedup_pairs(cells):
        cell = mc.cell
        speed = base.ratio(mc, "compute")
        e2e = base.ratio(mc, "end_to_end")
        compiled = compile_columns(mc, confidence)
        amortized = amortization(compile_interval(mc, confidence), base.interval("compute"), speed) \
            if compiled else None
        trip = calls_per_round_trip(mc.interval("h2d"), mc.interval("d2h"), base.interval("compute"),
                                    mc.interval("compute")) if cell.is_gpu else NOT_MEASURED
        rows.append({
            "machine": machine,
            **cell.as_dict(),
            "variant": cell.variant,
            "threads_effective": (mc.first.get("threads") or {}).get("effective"),
            "device_name": (mc.first.get("device") or {}).get("name"),
            "baseline_threads": label,
            "processes": speed.processes,
            "ci_scope": speed.scope,
            **_ratio_columns("speedup", speed),
            **_verdict_columns("speedup", speed, mc.analysis.min_effect, mc, base),
            **_ratio_columns("end_to_end_speedup", e2e),
            **_verdict_columns("end_to_end", e2e, mc.analysis.min_effect, mc, base),
            "median_s": mc.median("compute"),
            "baseline_median_s": base.median("compute"),
            "end_to_end_s": mc.median("end_to_end"),
            "baseline_end_to_end_s": base.median("end_to_end"),
            "shares_cores": mc.shares_cores or base.shares_cores,
            "unstable": _pair_flags(mc, base),
            "compile_s": compiled.get("compile_s", math.nan),
            "compile_s_ci_low": compiled.get("compile_s_ci_low", math.nan),
            "compile_s_ci_high": compiled.get("compile_s_ci_high", math.nan),
            "compiler_startup_s": compiled.get("compiler_startup_s", math.nan),
            "amortize_calls": amortized.calls if amortized else math.nan,
            "amortize_calls_ci_low": amortized.low if amortized else math.nan,
            "amortize_calls_ci_high": amortized.high if amortized else math.nan,
            "amortize": amortized.text if amortized else "",
            "compile_fallback": compiled.get("compile_fallback", ""),
            "calls_per_round_trip": trip.calls,
            "calls_per_round_trip_ci_low": trip.low,
            "calls_per_round_trip_ci_high": trip.high,
            "round_trip": "" if math.isnan(trip.calls) else trip.words,
        })
    columns = [c for c in SPEEDUPS if not c.startswith("break_even")]  # those follow per series
    frame = _sorted(pd.DataFrame(rows, columns=columns), ["op", "library", "mode", "device", "dtype", "threads", "size"])
    return with_break_even(frame)


def with_break_even(speedups: pd.DataFrame) -> pd.DataFrame:
    """Add each series' break-even size (end-to-end speedup CI above 1 from there on)."""
    frame = speedups.copy()
    frame["break_even_size"] = pd.Series(dtype=float)
    frame["break_even"] = pd.Series(dtype=str)
    frame["break_even_status"] = pd.Series(dtype=str)  # reached, not reached, from the smallest size
    for _, group in frame.groupby(SERIES, sort=False):
        result = break_even(group["size"].tolist(), group["end_to_end_speedup_ci_low"].tolist())
        frame.loc[group.index, "break_even_size"] = result.size
        frame.loc[group.index, "break_even"] = result.describe()
        frame.loc[group.index, "break_even_status"] = result.status
    return frame


def controls_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """Every self-comparison (A/A control): a cell against its twin, judged like any ratio.
    A faster or slower verdict here is a false one."""
    rows = []
    for original, twin in control_pairs(cells):
        ratio = original.ratio(twin, "compute")
        word, why = pair_verdict(ratio, twin.analysis.min_effect, original, twin)
        rows.append({
            "machine": machine, **original.cell.as_dict(), "variant": original.cell.variant,
            "processes": ratio.processes, "ci_scope": ratio.scope, **_ratio_columns("ratio", ratio),
            "verdict": word, "verdict_undecided": why, "false_verdict": word in (FASTER, SLOWER),
            "shares_cores": original.shares_cores or twin.shares_cores,
            "unstable": _pair_flags(original, twin, "twin"),
            "twin_measure_s": sum(r.get("measure_s") or 0.0 for r in twin.records),
        })
    return pd.DataFrame(rows, columns=list(CONTROLS))


def thread_scaling_table(cells: list[MeasuredCell], machine: str) -> pd.DataFrame:
    """CPU cells: how much faster the most threads are than one thread, with a CI."""
    rows = []
    for one, many in scaling_pairs(cells):
        c = many.cell
        ratio = one.ratio(many, "compute")
        rows.append({
            "machine": machine, "op": c.op, "library": c.library, "device": "cpu", "dtype": c.dtype, "size": c.size,
            "threads": c.threads, "mode": c.mode, "variant": many.cell.variant, "threads_effective": (many.first.get("threads") or {}).get("effective"),
            "processes": ratio.processes, "ci_scope": ratio.scope,
            **_ratio_columns("scaling", ratio),
            **dict(zip(("verdict", "verdict_undecided"),
                       _verdict_columns("scaling", ratio, many.analysis.min_effect, one, many).values(), strict=True)),
            "shares_cores": many.shares_cores,
            "unstable": _pair_flags(many, one, "1 thread"),
        })
    return pd.DataFrame(rows, columns=list(THREAD_SCALING))


TRANSFER_COLUMNS = [
    "machine", "device", "device_name", "direction", "memory", "bytes", "status", "reason", "n_samples",
    "median_s", "ci_low_s", "ci_high_s", "gbs", "gbs_ci_low", "gbs_ci_high", "link", "link_gbs", "link_fraction",
]


def _rate(work, samples: list[float], analysis: Analysis, name: str) -> tuple[Interval, float, float, float]:
    """A point's median time per call with its CI, and `work` (bytes, FLOP) per second in
    units of 1e9 with the CI (the CI's ends swap: a longer time is a lower rate)."""
    time = median_and_ci(samples, analysis.resamples, analysis.confidence, seed_for(analysis.seed, name))
    if not samples or not work:
        return time, math.nan, math.nan, math.nan
    return time, work / time.value / 1e9, work / time.high / 1e9, work / time.low / 1e9


def transfer_table(records: list[dict], machine: str, analysis: Analysis) -> pd.DataFrame:
    """One row per device, direction, memory kind and size, with GB/s and its CI."""
    rows = []
    for record in records:
        link = record.get("link") or {}
        link_gbs = link.get("gbs") or math.nan
        for point in record["points"]:
            samples = point.get("samples_s") or []
            name = f"transfer/{record['device']}/{point['direction']}/{point['memory']}/{point['bytes']}"
            time, gbs, gbs_low, gbs_high = _rate(point["bytes"], samples, analysis, name)
            rows.append({
                "machine": machine, "device": record["device"], "device_name": record.get("device_name"),
                "direction": point["direction"], "memory": point["memory"], "bytes": point["bytes"],
                "status": point["status"], "reason": point["reason"], "n_samples": len(samples),
                "median_s": time.value, "ci_low_s": time.low, "ci_high_s": time.high, "gbs": gbs,
                "gbs_ci_low": gbs_low, "gbs_ci_high": gbs_high,
                "link": link.get("kind"), "link_gbs": link_gbs,
                "link_fraction": gbs / link_gbs if samples and math.isfinite(link_gbs) else math.nan,
            })
    return pd.DataFrame(rows, columns=TRANSFER_COLUMNS)


ROOFS_COLUMNS = ["machine", "device", "device_name", "library", "kind", "dtype", "size", "status", "reason",
                 "n_samples", "value", "ci_low", "ci_high", "unit"]


def load_device_records(paths, schema) -> list[dict]:
    """Per-device records (copy sweeps, roofs), each stored under its device's name."""
    records = []
    for path in paths:
        record = load_record(path, schema)
        if not str(path).endswith(f"/{record['device']}.json"):
            raise MalformedRecord(f"{path}: record is for device {record['device']}, not for this file name")
        records.append(record)
    return records


def roofs_table(records: list[dict], machine: str, analysis: Analysis) -> pd.DataFrame:
    """Memory roofs in GB/s and compute roofs in GFLOP/s, with the CI of the median call."""
    rows = []
    for record in records:
        for point in record["points"]:
            samples = point.get("samples_s") or []
            name = f"roofs/{record['device']}/{point['library']}/{point['kind']}/{point['dtype']}"
            work = point.get("bytes") if point["kind"] == "memory" else point.get("flops")
            _, value, low, high = _rate(work, samples, analysis, name)
            rows.append({
                "machine": machine, "device": record["device"], "device_name": record.get("device_name"),
                "library": point["library"], "kind": point["kind"], "dtype": point["dtype"], "size": point.get("size"),
                "status": point["status"], "reason": point["reason"], "n_samples": len(samples),
                "value": value, "ci_low": low, "ci_high": high,
                "unit": "GB/s" if point["kind"] == "memory" else "GFLOP/s",
            })
    return pd.DataFrame(rows, columns=ROOFS_COLUMNS)


def build_tables_of(cells: list[MeasuredCell], transfer_paths, roof_paths, machine: str,
                    analysis: Analysis, environment: dict | None = None) -> dict[str, pd.DataFrame]:
    regular = [mc for mc in cells if not mc.cell.twin]  # a twin is only ever its cell's control
    timings = timings_table(regular, machine, analysis.confidence)
    speedups = speedups_table(regular, machine, analysis.confidence)
    memory = memory_table(timings, environment, machine)
    return {
        "timings": timings,
        "speedups": speedups,
        "thread_scaling": thread_scaling_table(regular, machine),
        "controls": controls_table(cells, machine),
        "memory": memory,
        "decisions": decisions_table(speedups, timings, analysis.min_effect, machine, memory),
        "transfer": transfer_table(load_device_records(transfer_paths, TRANSFER_SCHEMA), machine, analysis),
        "roofs": roofs_table(load_device_records(roof_paths, ROOFS_SCHEMA), machine, analysis),
    }


def write_tables(record_paths, transfer_paths, roof_paths, environment_path: str, machine: str, analysis: Analysis,
                 outputs: dict[str, str]) -> None:
    environment = load_environment(environment_path)
    cells = load_cells(record_paths, environment, analysis)
    tables = build_tables_of(cells, transfer_paths, roof_paths, machine, analysis, environment)
    for name, path in outputs.items():
        write_csv(tables[name], path)


TEXT_COLUMNS = {"threads": str, "mode": str, "variant": str, "family": str, "amortize": str, "compile_fallback": str,
                "first_break": str, "compile_backend": str, "compile_cache": str, "unstable": str, "replaced": str, "speedup_undecided": str, "end_to_end_undecided": str,
                "verdict_undecided": str, "precision_notes": str, "reason": str, "break_even": str, "break_even_status": str, "link": str,
                "ci_scope": str, "host": str, "slurm_job_id": str, "baseline_threads": str, "decision": str,
                "by_size": str, "compared_variant": str, "undecided_sizes": str, "verdict": str,
                "peak_host_method": str, "peak_note": str, "round_trip": str, "sizes": str, "resident": str}


MAX_TABLE_BYTES = 256 * 2**20  # a timings.csv of 100,000 cells is about 200 MB
# The columns a reader of each table relies on; a table without them is refused by name.
REQUIRED_COLUMNS = {
    "timings": ["machine", "op", "library", "device", "dtype", "size", "threads", "status", "median_s"],
    "speedups": ["machine", "op", "library", "device", "dtype", "size", "threads", "speedup"],
    "thread_scaling": ["machine", "op", "library", "dtype", "size", "threads", "scaling"],
    "decisions": ["machine", "op", "device", "dtype", "threads", "decision", "speedup"],
    "controls": ["machine", "op", "library", "device", "size", "threads", "ratio", "verdict"],
    "memory": ["machine", "op", "variant", "device", "dtype", "scale", "largest_size"],
    "transfer": ["device", "status"],
    "roofs": ["device", "status"],
}


def read_table(name: str, path: str) -> pd.DataFrame:
    """Read one CSV table back (a regular file, at most MAX_TABLE_BYTES), keeping thread
    labels and reasons as text, and the cells csvsafe made inert as they were; one line
    names the file when it cannot be read or parsed or lacks a column its readers need."""
    try:
        frame = read_csv_text(read_regular(path, MAX_TABLE_BYTES, "a table"), dtype=TEXT_COLUMNS,
                              keep_default_na=False, na_values=[""])
    except UnreadableFile as error:
        raise MalformedRecord(str(error)) from None
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()
    except (OSError, ValueError, pd.errors.ParserError) as error:
        raise MalformedRecord(f"{path}: not a readable {name} table ({str(error).splitlines()[0][:200]})") from None
    missing = [c for c in REQUIRED_COLUMNS.get(name, []) if c not in frame.columns]
    if missing and len(frame.columns):
        raise MalformedRecord(f"{path}: the {name} table lacks the column {missing[0]!r}; aggregate again")
    return frame


def read_tables(paths: dict[str, str]) -> dict[str, pd.DataFrame]:
    """Read the named CSV tables back (see read_table)."""
    return {name: read_table(name, path) for name, path in paths.items()}
