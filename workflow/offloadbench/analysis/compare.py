"""Two or more machines compared cell by cell, the first being the reference (A).

For every cell measured on both A and B: each machine's time with its CI, the ratio of
B's time to A's with a CI (at the judging's level) from both machines' two-level bootstraps, and a verdict:
B is faster, slower, the same (the whole CI within the minimum effect of 1) or undecided
(verdicts.py). A cell flagged unstable on either machine is undecided. Comparing two runs of one
machine under two labels is the reproducibility view: it says which medians of the
second run fall inside the first run's CIs and which verdicts flip.

A cell's CI covers the processes of its own run. Two runs of one machine differ by more: a
VM's speed shifts between runs (one run 7% faster throughout, seen here), and a few ops by
more still, which no interval within a run can see. Where the two record the same hardware,
every difference between them is such a run-to-run difference, so the comparison measures
it (`between_runs`: the root mean square of the cells' log time ratios, robustly, the shift
common to all of them included, in each group of one library, thread count and mode) and
carries it into every ratio's CI: such a comparison
calls no cell faster or slower for a state the machine was in. Between different machines it
cannot be told from the hardware's difference; the report says their CIs cover each run alone.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass
from statistics import NormalDist

import pandas as pd

from ..cells import CELL_COLUMNS, Cell
from ..machine import mismatch
from ..records import Environment
from ..verdicts import FASTER, SLOWER, UNSTABLE, Judging, contradicts, is_decided
from .measured import Analysis, MeasuredCell
from .sources import Source, SourceError

COMPARISON_COLUMNS = [
    *CELL_COLUMNS, "variant", "machine_a", "machine_b", "median_a_s", "ci_a_low_s", "ci_a_high_s", "median_b_s",
    "ci_b_low_s", "ci_b_high_s", "processes_a", "processes_b", "ci_scope", "ratio", "ratio_ci_low",
    "ratio_ci_high", "verdict", "verdict_undecided", "end_to_end_ratio", "end_to_end_ratio_ci_low",
    "end_to_end_ratio_ci_high", "speedup_a", "speedup_b", "b_inside_a_ci", "flagged_a", "flagged_b",
    "between_runs",
]
MAD_TO_SIGMA = 1.4826  # a normal variable's σ from the median of its absolute deviations
# Cells of one library, thread count and mode share a run's state most: on our 2-core VM two
# runs' torch cells on every core differed by 10% (root mean square), NumPy's on one by 6%. A
# group of fewer cells than this takes the spread of all cells.
SPREAD_GROUP = ["library", "threads", "mode"]
MIN_SPREAD_CELLS = 8


def between_runs(log_ratios) -> float:
    """The spread between two runs of one machine, on the log scale: the root mean square of
    the cells' log time ratios, each from 0 (the shift common to every cell counts, as a
    state the machine was in), robustly (the median of their absolute values, scaled)."""
    values = [abs(v) for v in log_ratios if math.isfinite(v)]
    return MAD_TO_SIGMA * float(pd.Series(values).median()) if values else 0.0


def spreads_between_runs(frame: pd.DataFrame) -> pd.Series:
    """Each row's between-run spread (between_runs): that of its group of cells (SPREAD_GROUP),
    or of all cells where its group has fewer than MIN_SPREAD_CELLS."""
    if frame.empty:
        return pd.Series(dtype=float, index=frame.index)
    logs = frame["ratio"].map(lambda r: math.log(r) if r > 0 else math.nan)
    overall = between_runs(logs)
    groups = frame[SPREAD_GROUP].astype(str).agg("/".join, axis=1)
    spread = pd.Series(overall, index=frame.index)
    for _, rows in logs.groupby(groups):
        if rows.notna().sum() >= MIN_SPREAD_CELLS:
            spread[rows.index] = between_runs(rows)
    return spread


def widened(low: float, high: float, point: float, between: float, confidence: float) -> tuple[float, float]:
    """A ratio's CI with the between-run spread `between` (log scale) added in quadrature."""
    if between <= 0 or not all(math.isfinite(v) and v > 0 for v in (low, high, point)):
        return low, high
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    below, above = math.log(point / low), math.log(high / point)
    return point * math.exp(-math.hypot(below, z * between)), point * math.exp(math.hypot(above, z * between))


def compare_pair(a: list[MeasuredCell], b: list[MeasuredCell], names: tuple[str, str], judging: Judging,
                 speedups: tuple[pd.DataFrame, pd.DataFrame], runs_of_one: bool = False) -> pd.DataFrame:
    """One row per cell with status ok on both machines; `runs_of_one`: the two record the
    same hardware, so the spread between their runs goes into every CI (the module's doc)."""
    theirs = {mc.cell: mc for mc in b if mc.status == "ok" and not mc.cell.twin}  # twins: in controls
    speed_a, speed_b = ({Cell.from_dict(row): row["speedup"] for _, row in s.iterrows()} for s in speedups)
    rows = []
    for mine in (mc for mc in a if mc.status == "ok" and not mc.cell.twin):
        other = theirs.get(mine.cell)
        if other is None:
            continue
        time_a, time_b = mine.interval("compute"), other.interval("compute")
        ratio, e2e = other.ratio(mine, "compute"), other.ratio(mine, "end_to_end")
        flagged = {"a": mine.flagged, "b": other.flagged}  # the flags: each machine's timings.csv
        rows.append({
            **mine.cell.as_dict(), "variant": mine.cell.variant, "machine_a": names[0], "machine_b": names[1],
            "median_a_s": time_a.value, "ci_a_low_s": time_a.low, "ci_a_high_s": time_a.high,
            "median_b_s": time_b.value, "ci_b_low_s": time_b.low, "ci_b_high_s": time_b.high,
            "processes_a": time_a.processes, "processes_b": time_b.processes, "ci_scope": ratio.scope,
            "ratio": ratio.value, "ratio_ci_low": ratio.low, "ratio_ci_high": ratio.high,
            "end_to_end_ratio": e2e.value, "end_to_end_ratio_ci_low": e2e.low, "end_to_end_ratio_ci_high": e2e.high,
            "speedup_a": speed_a.get(mine.cell, math.nan), "speedup_b": speed_b.get(mine.cell, math.nan),
            "b_inside_a_ci": bool(time_a.low <= time_b.value <= time_a.high),
            "flagged_a": flagged["a"], "flagged_b": flagged["b"],
        })
    frame = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    frame["between_runs"] = spreads_between_runs(frame) if runs_of_one else 0.0
    judged = []
    for _, row in frame.iterrows():
        between = row["between_runs"]
        low, high = widened(row["ratio_ci_low"], row["ratio_ci_high"], row["ratio"], between, judging.confidence)
        e2e = widened(row["end_to_end_ratio_ci_low"], row["end_to_end_ratio_ci_high"], row["end_to_end_ratio"],
                      between, judging.confidence)
        held = UNSTABLE if row["flagged_a"] or row["flagged_b"] else ""
        judged.append((low, high, *e2e, *judging.judged(low, high, row["ratio"], held=held, time_ratio=True)))
    columns = ["ratio_ci_low", "ratio_ci_high", "end_to_end_ratio_ci_low", "end_to_end_ratio_ci_high", "verdict",
               "verdict_undecided"]
    if judged:
        frame[columns] = pd.DataFrame(judged, columns=columns, index=frame.index)
    return frame


def _cpu_identity(e: Environment) -> str | None:
    c = e.cpu_identity
    parts = [f"{name} {c[name]}" for name in ("family", "model", "stepping") if c.get(name) is not None]
    return " ".join(filter(None, [c.get("vendor"), ", ".join(parts)])) or None


# The hardware that decides which instructions the same code runs (and so an answer): listed
# first, since two CPUs of one model name can differ in them.
DECIDING_FIELDS = {
    "CPU vendor, family, model, stepping": _cpu_identity,
    "CPU vector extensions": lambda e: ", ".join(e.cpu_identity.get("vector_extensions") or ()) or None,
    "NumPy's SIMD targets": lambda e: ", ".join(e.numpy_targets) or None,
    "NumPy's float32 loops": lambda e: ", ".join(f"{k} {v}" for k, v in e.numpy_loops_of("float32").items()) or None,
    "torch's CPU capability": lambda e: e.torch_cpu_capability,
    "Inductor's vector instructions": lambda e: e.vec_isa,
    "GPU (CUDA index, PCI address, NVML index)": lambda e: "; ".join(
        f"{g.name} ({g.cuda_index}, {g.pci_bus_id}, {g.nvml_index})" for g in e.gpus if g.pci_bus_id) or None,
}
# environment.json fields that can explain a difference, and how to show them
PROVENANCE_FIELDS = {
    **DECIDING_FIELDS,
    "CPU": lambda e: e.cpu_model,
    "logical cores": lambda e: e.logical_cores,
    "usable cores": lambda e: e.usable_cores,
    "memory (GiB)": lambda e: round(e.memory_bytes / 2**30) if e.memory_bytes else None,
    "GPU": lambda e: ", ".join(g.name for g in e.gpus) or None,
    "NVIDIA driver": lambda e: e.nvidia_driver,
    "CUDA (torch build)": lambda e: e.torch_cuda_build,
    "PyTorch": lambda e: e.torch_version,
    "NumPy": lambda e: e.numpy_version,
    "NumPy's BLAS": lambda e: " ".join(filter(None, [e.blas_name, e.blas_version])) or None,
    "BLAS thread pools": lambda e: ", ".join(e.threadpools) or None,
    "thread variables": lambda e: ", ".join(f"{k}={v}" for k, v in sorted(e.thread_env.items()) if v) or "none set",
    "torch threads": lambda e: e.torch_threads,
    "TF32 for float32 matmuls": lambda e: e.tf32_matmul_default,
    "BLAS/OpenMP variables": lambda e: ", ".join(f"{k}={v}" for k, v in e.blas_env.items()) or "none set",
    "Python": lambda e: e.python,
    "OS": lambda e: e.os,
    "CPU governor": lambda e: e.cpu_governor,
}


def _settings_of(cells: list[MeasuredCell]) -> dict:
    """What the records say about how they were measured (not in environment.json)."""
    settings = [mc.first.settings for mc in cells if mc.ok]
    return {
        "pinned host memory": sorted({s["pinned_memory"] for s in settings if "pinned_memory" in s}) or None,
        "TF32 used in cells": sorted({s["tf32_matmul"] for s in settings if "tf32_matmul" in s}) or None,
        "processes per cell": sorted({len(mc.ok) for mc in cells if mc.ok}) or None,
    }


def provenance_diff(environments: dict[str, Environment], cells: dict[str, list[MeasuredCell]]) -> pd.DataFrame:
    """Every field that differs between the machines: one row per field, a column per machine;
    the hardware that decides which instructions run first (`decides`)."""
    rows = []
    for field_name, read in PROVENANCE_FIELDS.items():
        values = {label: read(env) for label, env in environments.items()}
        if len({str(v) for v in values.values()}) > 1:
            rows.append({"field": field_name, "decides": field_name in DECIDING_FIELDS,
                         **{k: "" if v is None else str(v) for k, v in values.items()}})
    settings = {label: _settings_of(c) for label, c in cells.items()}
    for field_name in next(iter(settings.values())):
        values = {label: s[field_name] for label, s in settings.items()}
        if len({str(v) for v in values.values()}) > 1:
            rows.append({"field": field_name, "decides": False,
                         **{k: ", ".join(map(str, v or [])) for k, v in values.items()}})
    return pd.DataFrame(rows, columns=["field", "decides", *environments])


def same_hardware(environments: dict[str, Environment]) -> list[tuple[str, str]]:
    """Pairs of labels whose environment.json records the same hardware fingerprint."""
    pairs = []
    for a, b in itertools.combinations(environments, 2):
        fa, fb = environments[a].fingerprint or {}, environments[b].fingerprint or {}
        if environments[a].cpu_model and mismatch(fa, fb) is None and mismatch(fb, fa) is None:
            pairs.append((a, b))
    return pairs


@dataclass
class MachineComparison:
    """Everything a comparison of machines writes, before it is written."""

    labels: list[str]
    comparison: pd.DataFrame  # every machine against the first
    provenance: pd.DataFrame
    tables: dict[str, dict[str, pd.DataFrame]]  # per machine, its own tables
    environments: dict[str, Environment]
    same_hardware: list[tuple[str, str]]
    judging: Judging  # the policy every verdict of it was judged with
    rejudged: str = ""  # which sources' own tables were judged under another policy, in one sentence


def compare(sources: list[Source], analysis: Analysis) -> MachineComparison:
    """Every machine against the first, judged with the analysis' policy."""
    labels = [s.label for s in sources]
    if repeated := sorted(label for label, n in Counter(labels).items() if n > 1):
        raise SourceError(f"the label {repeated[0]!r} is given twice: compare names each machine once")
    environments = {s.label: s.environment() for s in sources}
    cells = {s.label: s.cells(analysis) for s in sources}
    tables = {s.label: s.tables(analysis, cells[s.label]) for s in sources}
    reference = sources[0].label
    identical = same_hardware(environments)
    parts = []
    for other in labels[1:]:
        part = compare_pair(cells[reference], cells[other], (reference, other), analysis.judging,
                            (tables[reference]["speedups"], tables[other]["speedups"]),
                            runs_of_one=(reference, other) in identical)
        if part.empty:
            raise SourceError(f"{reference} and {other} have no measured cell in common (same op, library, "
                              "device, dtype, size and threads): nothing to compare")
        parts.append(part)
    return MachineComparison(labels, pd.concat(parts, ignore_index=True), provenance_diff(environments, cells),
                             tables, environments, identical, analysis.judging,
                             rejudged_line(sources, analysis.judging))


def rejudged_line(sources: list[Source], judging: Judging) -> str:
    """Where a source's own tables were judged under another policy (its judging.json), one
    sentence saying that everything here was judged again under `judging` ("" otherwise)."""
    others = [(s.label, own) for s in sources if (own := s.judging()) is not None and own != judging]
    if not others:
        return ""
    was = "; ".join(f"{label}'s own tables under {own.describe()}" for label, own in others)
    return f"Re-judged here under {judging.describe()} ({was})."


def comparison_verdicts(tables: dict[str, pd.DataFrame]) -> dict[tuple, str]:
    """Every comparison one run judged, by what it compares: each speedup over NumPy, each
    thread scaling and each self-comparison, with its verdict."""
    found = {}
    for kind, name, column in (("speedup", "speedups", "speedup_verdict"), ("scaling", "thread_scaling", "verdict"),
                               ("self-comparison", "controls", "verdict")):
        frame = tables.get(name)
        if frame is not None and not frame.empty:
            found |= {(kind, Cell.from_dict(r)): r[column] for _, r in frame.iterrows()}
    return found


def false_verdicts(tables: dict[str, pd.DataFrame]) -> tuple[int, int]:
    """(self-comparisons, how many of them were called faster or slower) of one run."""
    controls = tables.get("controls")
    if controls is None or controls.empty:
        return 0, 0
    return len(controls), int(controls["verdict"].isin([FASTER, SLOWER]).sum())


def reproducibility(comparison: pd.DataFrame, tables: dict[str, dict[str, pd.DataFrame]]) -> dict:
    """Two runs of one machine: how many medians of the second lie inside the first's CIs,
    the worst disagreement, how many verdicts (speedups, thread scalings, self-comparisons)
    change and how many contradict each other (faster against slower, same against either),
    and each run's false verdicts among its self-comparisons."""
    a, b = comparison["machine_a"].iloc[0], comparison["machine_b"].iloc[0]
    first, second = (comparison_verdicts(tables[m]) for m in (a, b))
    both = [key for key in first if key in second]
    changed = [key for key in both if first[key] != second[key]]
    contradictions = [key for key in both if contradicts(first[key], second[key])]
    flips = [key for key in both if {first[key], second[key]} == {FASTER, SLOWER}]
    worst = comparison["ratio"].map(lambda r: max(r, 1 / r) if r > 0 else math.inf)
    half_widths = ((comparison["ci_a_high_s"] - comparison["ci_a_low_s"]) / 2 / comparison["median_a_s"]).dropna()
    return {
        "cells": len(comparison),
        "inside": int(comparison["b_inside_a_ci"].sum()),
        "worst_ratio": float(worst.max()) if len(worst) else math.nan,
        "worst_cell": Cell.from_dict(comparison.loc[worst.idxmax()]).key if len(worst) else "",
        "median_rel_halfwidth": float(half_widths.median()) if len(half_widths) else math.nan,
        "verdicts": len(both),
        "verdicts_changed": len(changed),
        "changed_cells": [f"{kind} {cell.key}: {first[(kind, cell)]} → {second[(kind, cell)]}" for kind, cell in changed],
        "contradictions": len(contradictions),
        "flips": len(flips),
        "flipped_cells": [f"{kind} {cell.key}" for kind, cell in flips],
        "decided": [sum(is_decided(v) for v in run.values()) / max(1, len(run))
                    for run in (first, second)],
        "controls": [false_verdicts(tables[m]) for m in (a, b)],
    }
