"""Raw records -> tidy tables: `timings.csv` (one row per cell) and `speedups.csv`.

Medians come with percentile-bootstrap CIs of the raw samples; a speedup's CI is the
bootstrap of the ratio of medians, drawing the baseline's and the contender's samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .breakeven import break_even
from .cells import ALL_THREADS, Cell
from .records import TRANSFER_SCHEMA, MalformedRecord, load_record
from .stats import bootstrap_median_ci, bootstrap_ratio_ci
from .transfer import bandwidth_gbs

CELL_COLUMNS = ["op", "library", "device", "dtype", "size", "threads"]
PHASES = ("h2d", "compute", "d2h", "finish", "end_to_end")


@dataclass(frozen=True)
class Analysis:
    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95

    @classmethod
    def from_config(cls, section: dict) -> "Analysis":
        return cls(int(section["bootstrap_resamples"]), int(section["seed"]), float(section["confidence"]))


def load_records(paths, environment: dict | None = None) -> list[dict]:
    """Load every record, rejecting malformed ones and ones from other hardware by name."""
    records = []
    expected = (environment or {}).get("fingerprint") or {}
    for path in map(Path, paths):
        record = load_record(path)
        cell = Cell.from_dict(record["cell"])
        if path.stem != cell.stem or path.parent.name != cell.op:
            raise MalformedRecord(f"{path}: record is for cell {cell.relpath}, not for this file name")
        theirs = (record.get("provenance") or {}).get("fingerprint") or {}
        for key in ("cpu_model", "logical_cores"):
            if expected.get(key) is not None and theirs.get(key) not in (None, expected[key]):
                raise MalformedRecord(
                    f"{path}: measured on {key} {theirs.get(key)!r}, but environment.json "
                    f"records {expected[key]!r}; results of two machines are mixed"
                )
        records.append(record)
    return records


def _samples(record: dict, phase: str) -> list[float]:
    """Per-call samples of a phase; a numpy cell without host work is its own end to end."""
    if phase == "compute":
        return record.get("samples_s") or []
    phases = record.get("phases") or {}
    if phase in phases:
        return phases[phase].get("samples_s") or []
    if phase == "end_to_end" and record["cell"]["library"] == "numpy" and "finish" not in phases:
        return record.get("samples_s") or []
    return []


def _median(samples) -> float:
    return float(np.median(samples)) if len(samples) else math.nan


def _unstable_reason(record: dict) -> str:
    flags = (record.get("diagnostics") or {}).get("flags") or []
    return "; ".join(flags)


def timing_row(record: dict, machine: str, analysis: Analysis) -> dict:
    cell = record["cell"]
    samples = _samples(record, "compute")
    model = record.get("model") or {}
    check = record.get("check") or {}
    stopping = record.get("stopping") or {}
    threads = record.get("threads") or {}
    median = _median(samples)
    ci_low, ci_high = (
        bootstrap_median_ci(samples, analysis.resamples, analysis.confidence, analysis.seed)
        if len(samples) >= 2 else (math.nan, math.nan)
    )
    q1, q3 = (np.percentile(samples, [25, 75]) if len(samples) else (math.nan, math.nan))
    flops = model.get("flops") or math.nan
    memory_bytes = model.get("memory_bytes") or math.nan
    row = {
        "machine": machine,
        **{k: cell[k] for k in CELL_COLUMNS},
        "threads_effective": threads.get("effective"),
        "status": record["status"],
        "reason": record.get("reason", ""),
        "device_name": (record.get("device") or {}).get("name"),
        "n_samples": len(samples),
        "calls_per_sample": record.get("calls_per_sample"),
        "warmup_count": (record.get("warmup") or {}).get("count"),
        "median_s": median,
        "q1_s": float(q1),
        "q3_s": float(q3),
        "ci_low_s": ci_low,
        "ci_high_s": ci_high,
        "rel_ci": stopping.get("rel_ci"),
        "converged": stopping.get("converged"),
        "stop_reason": stopping.get("stop_reason"),
        "gflops": flops / median / 1e9 if median > 0 else math.nan,
        "gflops_ci_low": flops / ci_high / 1e9 if ci_high > 0 else math.nan,
        "gflops_ci_high": flops / ci_low / 1e9 if ci_low > 0 else math.nan,
        "bandwidth_gbs": memory_bytes / median / 1e9 if median > 0 else math.nan,
        "rel_err": check.get("rel_err"),
        "tolerance": check.get("tolerance"),
        "unstable": _unstable_reason(record),
        "measure_s": record.get("measure_s"),
        "import_s": record.get("import_s"),
    }
    for phase in PHASES:
        row[f"{phase}_s"] = _median(_samples(record, phase))
    e2e = _samples(record, "end_to_end")
    row["end_to_end_ci_low_s"], row["end_to_end_ci_high_s"] = (
        bootstrap_median_ci(e2e, analysis.resamples, analysis.confidence, analysis.seed)
        if len(e2e) >= 2 else (math.nan, math.nan)
    )
    copies = np.nansum([row["h2d_s"], row["d2h_s"]])
    row["transfer_fraction"] = (
        copies / row["end_to_end_s"] if cell["device"] != "cpu" and row["end_to_end_s"] > 0 else math.nan
    )
    return row


def timings_table(records: list[dict], machine: str, analysis: Analysis) -> pd.DataFrame:
    rows = [timing_row(r, machine, analysis) for r in records]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = frame["threads"].map(lambda t: 10**9 if t == ALL_THREADS else int(t))
    return frame.assign(_t=order).sort_values(CELL_COLUMNS[:-1] + ["_t"]).drop(columns="_t").reset_index(drop=True)


def _pair_unstable(record: dict, base: dict) -> str:
    """Noise flags of a ratio: the contender's, then the baseline's."""
    return "; ".join(filter(None, [_unstable_reason(record), _unstable_reason(base) and "baseline: " + _unstable_reason(base)]))


def baseline_threads(device: str, threads: str, available: set[str]) -> str | None:
    """Thread label of the numpy baseline: the cell's own on the cpu, all cores for GPUs."""
    if device == "cpu":
        return threads if threads in available else None
    if ALL_THREADS in available:
        return ALL_THREADS
    numeric = sorted((int(t) for t in available if t != ALL_THREADS), reverse=True)
    return str(numeric[0]) if numeric else None


def verdict(lo: float, hi: float) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return "unknown"
    if lo > 1:
        return "faster"
    if hi < 1:
        return "slower"
    return "no measurable difference"


def speedups_table(records: list[dict], machine: str, analysis: Analysis) -> pd.DataFrame:
    """One row per ok cell that has an ok numpy-cpu baseline at the same op, dtype and size."""
    ok = [r for r in records if r["status"] == "ok"]
    baselines = {
        (r["cell"]["op"], r["cell"]["dtype"], r["cell"]["size"], r["cell"]["threads"]): r
        for r in ok
        if r["cell"]["library"] == "numpy" and r["cell"]["device"] == "cpu"
    }
    rows = []
    for record in ok:
        cell = record["cell"]
        if cell["library"] == "numpy":
            continue
        available = {k[3] for k in baselines if k[:3] == (cell["op"], cell["dtype"], cell["size"])}
        label = baseline_threads(cell["device"], cell["threads"], available)
        if label is None:
            continue
        base = baselines[(cell["op"], cell["dtype"], cell["size"], label)]
        speed = bootstrap_ratio_ci(
            _samples(base, "compute"), _samples(record, "compute"),
            analysis.resamples, analysis.confidence, analysis.seed,
        )
        e2e = bootstrap_ratio_ci(
            _samples(base, "end_to_end"), _samples(record, "end_to_end"),
            analysis.resamples, analysis.confidence, analysis.seed,
        )
        rows.append({
            "machine": machine,
            **{k: cell[k] for k in CELL_COLUMNS},
            "threads_effective": (record.get("threads") or {}).get("effective"),
            "device_name": (record.get("device") or {}).get("name"),
            "baseline_threads": label,
            "speedup": speed[0],
            "speedup_ci_low": speed[1],
            "speedup_ci_high": speed[2],
            "speedup_verdict": verdict(speed[1], speed[2]),
            "end_to_end_speedup": e2e[0],
            "end_to_end_speedup_ci_low": e2e[1],
            "end_to_end_speedup_ci_high": e2e[2],
            "end_to_end_verdict": verdict(e2e[1], e2e[2]),
            "median_s": _median(_samples(record, "compute")),
            "baseline_median_s": _median(_samples(base, "compute")),
            "end_to_end_s": _median(_samples(record, "end_to_end")),
            "baseline_end_to_end_s": _median(_samples(base, "end_to_end")),
            "unstable": _pair_unstable(record, base),
        })
    columns = [
        "machine", *CELL_COLUMNS, "threads_effective", "device_name", "baseline_threads", "speedup", "speedup_ci_low", "speedup_ci_high",
        "speedup_verdict", "end_to_end_speedup", "end_to_end_speedup_ci_low",
        "end_to_end_speedup_ci_high", "end_to_end_verdict", "median_s", "baseline_median_s", "end_to_end_s",
        "baseline_end_to_end_s", "unstable",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    order = frame["threads"].map(lambda t: 10**9 if t == ALL_THREADS else int(t))
    frame = frame.assign(_t=order).sort_values(["op", "library", "device", "dtype", "_t", "size"]).drop(columns="_t")
    return with_break_even(frame.reset_index(drop=True))


SERIES = ["op", "library", "device", "dtype", "threads"]


def with_break_even(speedups: pd.DataFrame) -> pd.DataFrame:
    """Add each series' break-even size (end-to-end speedup CI above 1 from there on)."""
    frame = speedups.copy()
    frame["break_even_size"] = pd.Series(dtype=float)
    frame["break_even"] = pd.Series(dtype=str)
    for _, group in frame.groupby(SERIES, sort=False):
        result = break_even(group["size"].tolist(), group["end_to_end_speedup_ci_low"].tolist())
        frame.loc[group.index, "break_even_size"] = result.size
        frame.loc[group.index, "break_even"] = result.describe()
    return frame


def thread_scaling_table(records: list[dict], machine: str, analysis: Analysis) -> pd.DataFrame:
    """CPU cells: how much faster the most threads are than one thread, with a CI."""
    ok = [r for r in records if r["status"] == "ok" and r["cell"]["device"] == "cpu"]
    groups: dict[tuple, dict[str, dict]] = {}
    for record in ok:
        c = record["cell"]
        groups.setdefault((c["op"], c["library"], c["dtype"], c["size"]), {})[c["threads"]] = record
    rows = []
    for (op, library, dtype, size), by_threads in sorted(groups.items()):
        if "1" not in by_threads or len(by_threads) < 2:
            continue
        most = max((t for t in by_threads if t != "1"), key=lambda t: (t == ALL_THREADS, int(t) if t != ALL_THREADS else 0))
        one, many = by_threads["1"], by_threads[most]
        ratio = bootstrap_ratio_ci(
            _samples(one, "compute"), _samples(many, "compute"),
            analysis.resamples, analysis.confidence, analysis.seed,
        )
        rows.append({
            "machine": machine, "op": op, "library": library, "device": "cpu", "dtype": dtype, "size": size,
            "threads": most, "threads_effective": (many.get("threads") or {}).get("effective"),
            "scaling": ratio[0], "scaling_ci_low": ratio[1], "scaling_ci_high": ratio[2],
            "verdict": verdict(ratio[1], ratio[2]),
            "unstable": _pair_unstable(many, one).replace("baseline:", "1 thread:"),
        })
    columns = ["machine", "op", "library", "device", "dtype", "size", "threads", "threads_effective",
               "scaling", "scaling_ci_low", "scaling_ci_high", "verdict", "unstable"]
    return pd.DataFrame(rows, columns=columns)


TRANSFER_COLUMNS = [
    "machine", "device", "device_name", "direction", "memory", "bytes", "status", "reason", "n_samples",
    "median_s", "ci_low_s", "ci_high_s", "gbs", "gbs_ci_low", "gbs_ci_high", "link", "link_gbs", "link_fraction",
]


def load_transfer_records(paths) -> list[dict]:
    records = []
    for path in map(Path, paths):
        record = load_record(path, TRANSFER_SCHEMA)
        if path.stem != record["device"]:
            raise MalformedRecord(f"{path}: record is for device {record['device']}, not for this file name")
        for i, point in enumerate(record["points"]):
            if point["status"] == "ok" and not point.get("samples_s"):
                raise MalformedRecord(f"{path}: malformed record: points.{i} has status ok but no samples")
        records.append(record)
    return records


def transfer_table(records: list[dict], machine: str, analysis: Analysis) -> pd.DataFrame:
    """One row per device, direction, memory kind and size, with GB/s and its CI."""
    rows = []
    for record in records:
        link = record.get("link") or {}
        link_gbs = link.get("gbs") or math.nan
        for point in record["points"]:
            samples = point.get("samples_s") or []
            median = _median(samples)
            lo, hi = (bootstrap_median_ci(samples, analysis.resamples, analysis.confidence, analysis.seed)
                      if len(samples) >= 2 else (math.nan, math.nan))
            gbs = bandwidth_gbs(point["bytes"], median) if samples else math.nan
            rows.append({
                "machine": machine, "device": record["device"], "device_name": record.get("device_name"),
                "direction": point["direction"], "memory": point["memory"], "bytes": point["bytes"],
                "status": point["status"], "reason": point["reason"], "n_samples": len(samples),
                "median_s": median, "ci_low_s": lo, "ci_high_s": hi, "gbs": gbs,
                "gbs_ci_low": bandwidth_gbs(point["bytes"], hi) if samples else math.nan,
                "gbs_ci_high": bandwidth_gbs(point["bytes"], lo) if samples else math.nan,
                "link": link.get("kind"), "link_gbs": link_gbs,
                "link_fraction": gbs / link_gbs if samples and link_gbs == link_gbs else math.nan,
            })
    return pd.DataFrame(rows, columns=TRANSFER_COLUMNS)


def write_tables(record_paths, transfer_paths, environment_path: str, machine: str, analysis: Analysis,
                 outputs: dict[str, str]) -> None:
    """Load the records of one machine and write every table of layout.TABLES."""
    import json

    with open(environment_path, encoding="utf-8") as handle:
        environment = json.load(handle)
    records = load_records(record_paths, environment)
    tables = {
        "timings": timings_table(records, machine, analysis),
        "speedups": speedups_table(records, machine, analysis),
        "thread_scaling": thread_scaling_table(records, machine, analysis),
        "transfer": transfer_table(load_transfer_records(transfer_paths), machine, analysis),
    }
    for name, path in outputs.items():
        tables[name].to_csv(path, index=False)


def read_tables(paths: dict[str, str]) -> dict[str, pd.DataFrame]:
    """Read the named CSV tables back, keeping thread labels and reasons as text."""
    dtypes = {"threads": str, "unstable": str, "reason": str, "break_even": str, "link": str}
    return {
        name: pd.read_csv(path, dtype=dtypes, keep_default_na=False, na_values=[""])
        for name, path in paths.items()
    }
