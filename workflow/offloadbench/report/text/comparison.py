"""The report of a comparison of machines: which machine is faster where, by how much and
with what CI, break-even sizes side by side, the seed claims on each, what differs in
their provenance, and, for two runs of one machine, how well they reproduce."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from ...analysis.columns import interval
from ...analysis.compare import MachineComparison, reproducibility
from ...cells import Cell, thread_sort_key
from ...layout import COMPARE_FIGURE_NAMES
from ...verdicts import FASTER, SAME, SLOWER
from ..captions import COMPARE_CAPTIONS, compare_caption
from ..escape import md_data, md_frame
from ..format import (
    finite,
    fmt_break_even,
    fmt_ci,
    fmt_percent,
    fmt_time,
    fmt_time_ratio,
    fmt_times,
    threads_text,
    variant_of,
    verdict_counts,
    where_phrase,
)
from ..table import markdown_table
from .markdown import figure_lines, write_page
from .seed import check_seed_claims
from .tables import comparison_table


def _series_name(row) -> str:
    threads = "" if row["device"] != "cpu" else f", {threads_text(row['threads'])}"
    return f"{row['op']} with {variant_of(row)} {where_phrase(row['device'])}{threads}, {row['dtype']}"


def machines_section(comparison: MachineComparison) -> list[str]:
    rows = []
    for label in comparison.labels:
        env, timings = comparison.environments[label], comparison.tables[label]["timings"]
        gpus = ", ".join(g.name for g in env.gpus) or "none"
        processes = sorted({int(p) for p in timings.loc[timings["status"] == "ok", "processes"]})
        rows.append({"machine": label, "CPU": env.cpu_model, "cores": env.logical_cores, "GPU": gpus,
                     "PyTorch": env.torch_version, "NumPy": env.numpy_version,
                     "processes per cell": ", ".join(map(str, processes)) or "–"})
    lines = ["## Machines", "", markdown_table(pd.DataFrame(rows)), ""]
    table = comparison.comparison
    for a, b in comparison.same_hardware:
        spread = table.loc[(table["machine_a"] == a) & (table["machine_b"] == b), "between_runs"]
        spread = spread[spread.map(finite)]
        low, high = (math.expm1(float(spread.min())), math.expm1(float(spread.max()))) if not spread.empty else (0, 0)
        differ = fmt_percent(high) if math.isclose(low, high) else f"{fmt_percent(low)} to {fmt_percent(high)}"
        between = (f" Their cells' times differ by {differ} between the two runs (the root mean square of the log "
                   "ratios, in each group of one library, thread count and mode), a state of the machine in each run "
                   "that no interval within a run can see: every ratio's CI below includes it, so no cell is called "
                   "faster or slower for it." if not spread.empty else "")
        lines += [(f"**{a} and {b} record the same hardware** under two labels: this comparison is a "
                   f"reproducibility check of one machine, not a comparison of two.{between}"), ""]
    if len(comparison.labels) > len({x for pair in comparison.same_hardware for x in pair}):
        lines += [("Each machine's intervals cover the processes of its own run. Two runs of one machine can differ "
                  "by several percent more (a virtual machine's speed shifts between runs), which a comparison of "
                  "two different machines cannot tell from their hardware's difference: read a difference within "
                  "a few percent as a difference of these two runs."), ""]
    return lines


def faster_where(comparison: MachineComparison) -> list[str]:
    """Per other machine: the count of verdicts, the extremes, and one line per series."""
    lines = ["## Which machine is faster where", ""]
    table, ci = comparison.comparison, comparison.judging.ci
    reference = comparison.labels[0]
    for other in comparison.labels[1:]:
        part = table[table["machine_b"] == other]
        summary = verdict_counts(part["verdict"], same=SAME)
        lines += [f"### {other} against {reference}", "",
                  (f"Of {len(part)} cells measured on both, {other} is: {summary}. "
                  f"\"Same\" means the whole {comparison.judging.ci} of the time ratio lies within "
                  f"{comparison.judging.delta} of 1."), ""]
        judged = part[part["verdict"].isin([FASTER, SLOWER])]
        if not judged.empty:
            best, worst = judged.loc[judged["ratio"].idxmin()], judged.loc[judged["ratio"].idxmax()]
            lines.append(f"- Largest advantage of {other}: {Cell.from_dict(best).key}, "
                         f"{fmt_time_ratio(best['ratio'], best['ratio_ci_low'], best['ratio_ci_high'], ci)} "
                         f"({fmt_time(best['median_b_s'])} against {fmt_time(best['median_a_s'])}).")
            if worst["ratio"] > 1:
                lines.append(f"- Largest advantage of {reference}: {Cell.from_dict(worst).key}, {other} is "
                             f"{fmt_time_ratio(worst['ratio'], worst['ratio_ci_low'], worst['ratio_ci_high'], ci)}.")
        for _, group in part.groupby(["op", "library", "mode", "device", "dtype", "threads"], sort=True):
            group = group.sort_values("size")
            last = group.iloc[-1]
            verdicts = group["verdict"].value_counts()
            main = verdicts.index[0]
            state = {SAME: "is the same"}.get(main, f"is {main}")
            lines.append(
                f"- {_series_name(last)}: {other} {state} at {verdicts.iloc[0]} of {len(group)} sizes; at n = "
                f"{int(last['size'])}: {fmt_time_ratio(last['ratio'], last['ratio_ci_low'], last['ratio_ci_high'], ci)}."
            )
        lines.append("")
    return lines


def break_even_section(comparison: MachineComparison) -> list[str]:
    rows: dict[tuple, dict] = {}
    for label in comparison.labels:
        speedups = comparison.tables[label]["speedups"]
        gpu = speedups[speedups["device"] != "cpu"]
        for (op, variant, device, dtype), group in gpu.groupby(["op", "variant", "device", "dtype"]):
            first = group.iloc[0]
            rows.setdefault((op, variant, device, dtype), {})[label] = fmt_break_even(first["break_even_size"],
                                                                                      first["break_even_status"])
    lines = ["## Break-even sizes side by side", "",
             ("The size n from which offloading to the GPU pays with the copies counted (the end-to-end speedup's "
             f"{comparison.judging.ci} above 1 from there on), per machine."), ""]
    if not rows:
        return lines + ["_No machine here has a GPU series, so there is no break-even size to compare._", ""]
    frame = pd.DataFrame([{"op": k[0], "run as": k[1], "device": k[2], "dtype": k[3],
                           **{m: v.get(m, "no GPU cell") for m in comparison.labels}} for k, v in sorted(rows.items())])
    return lines + [markdown_table(frame), ""]


def round_trip_section(comparison: MachineComparison) -> list[str]:
    """k*, the calls per round trip that make the copies pay, per GPU series and size, on each machine."""
    rows: dict[tuple, dict] = {}
    for label in comparison.labels:
        speedups = comparison.tables[label]["speedups"]
        if "calls_per_round_trip" not in speedups:
            continue
        gpu = speedups[(speedups["device"] != "cpu") & speedups["calls_per_round_trip"].notna()]
        for _, r in gpu.iterrows():
            key = (r["op"], variant_of(r), r["device"], r["dtype"], int(r["size"]))
            rows.setdefault(key, {})[label] = fmt_ci(*interval(r, "calls_per_round_trip"))
    if not rows:
        return []
    frame = pd.DataFrame([{"op": k[0], "run as": k[1], "device": k[2], "dtype": k[3], "n": k[4],
                           **{m: v.get(m, "–") for m in comparison.labels}} for k, v in sorted(rows.items())])
    return ["## Calls per round trip side by side", "",
            ("k*, the calls the data must stay on the device for one copy in and out to pay, (h2d + d2h) ÷ (NumPy's "
             f"time − the device's compute time), with its {comparison.judging.ci}; at most 1: a copy on every call "
             "pays."), "",
            markdown_table(frame), ""]


def seed_section(comparison: MachineComparison) -> list[str]:
    lines = ["## Seed claims on each machine", ""]
    for label in comparison.labels:
        tables = comparison.tables[label]
        lines += [f"### {label}", "", *check_seed_claims(tables["timings"], tables["speedups"], comparison.judging), ""]
    return lines


def provenance_section(comparison: MachineComparison) -> list[str]:
    lines = ["## What differs in provenance", ""]
    frame = comparison.provenance
    if frame.empty:
        return lines + ["Nothing recorded differs: same hardware, same software, same settings.", ""]
    deciding = int(frame["decides"].sum())
    if deciding:
        lines += [(f"The first {deciding} {'row is' if deciding == 1 else 'rows are'} the hardware that decides which "
                   "instructions the same code runs (the CPU's identity and vector extensions, the SIMD code NumPy "
                   "dispatches to, torch's CPU capability, Inductor's vector instructions, the GPU): where the "
                   "machines' answers differ, look there first."), ""]
    return lines + [markdown_table(frame.drop(columns="decides")), ""]


def reproducibility_section(comparison: MachineComparison) -> list[str]:
    lines = []
    for a, b in comparison.same_hardware:
        if a != comparison.labels[0]:
            continue
        part = comparison.comparison[comparison.comparison["machine_b"] == b]
        r = reproducibility(part, comparison.tables)
        lines += [
            f"## Reproducibility: {b} against {a}", "",
            (f"- {r['inside']} of {r['cells']} medians of {b} ({fmt_percent(r['inside'] / max(1, r['cells']))}) lie inside the "
            f"{comparison.judging.ci} of {a}; the median CI half-width is ±{fmt_percent(r['median_rel_halfwidth'])}."),
            f"- The largest disagreement is {fmt_times(r['worst_ratio'])} ({r['worst_cell']}).",
            (f"- {r['verdicts_changed']} of {r['verdicts']} verdicts (speedups and thread scalings) change; "
             f"{r['contradictions']} contradict each other (faster against slower, or same against either)"
             f"{': ' + ', '.join(r['changed_cells'][:10]) if r['verdicts_changed'] else ''}."),
            (f"- {fmt_percent(r['decided'][0])} of the comparisons of {a} are decided (faster, slower or same), "
             f"{fmt_percent(r['decided'][1])} of {b}'s."),
            *([(f"- Self-comparisons called faster or slower (false verdicts): {a} {r['controls'][0][1]} of "
               f"{r['controls'][0][0]}, {b} {r['controls'][1][1]} of {r['controls'][1][0]}.")]
              if r["controls"][0][0] or r["controls"][1][0] else []), "",
        ]
    return lines


def cells_table(comparison: MachineComparison) -> list[str]:
    """Every cell measured on two machines, from the one spec of the comparison table."""
    table = comparison.comparison
    shown = table.assign(_t=table["threads"].map(thread_sort_key)).sort_values(
        ["machine_b", "op", "library", "mode", "device", "dtype", "_t", "size"])
    a, others = comparison.labels[0], comparison.labels[1:]
    rendered = comparison_table(len(others) == 1).shown(shown, comparison.judging, a=a, b=others[0] if others else "b")
    return [rendered.markdown(), "", rendered.legend, ""]


def escaped(comparison: MachineComparison) -> MachineComparison:
    """The comparison with every string from data made literal Markdown (escape.md_text);
    the labels need not be, as the label rule lets no Markdown special into them."""
    return replace(
        comparison,
        comparison=md_frame(comparison.comparison),
        provenance=md_frame(comparison.provenance),
        tables={label: {name: md_frame(frame) for name, frame in tables.items()}
                for label, tables in comparison.tables.items()},
        environments={label: md_data(env) for label, env in comparison.environments.items()},
    )


def build_markdown(comparison: MachineComparison) -> str:
    comparison = escaped(comparison)
    title = " vs ".join(comparison.labels)
    lines = [
        f"# {title}", "",
        (f"Every cell measured on {comparison.labels[0]} (the reference, A) and on another machine (B), compared: the "
        f"time on B divided by the time on A, with a {comparison.judging.ci} from both machines' two-level "
        "bootstraps (processes, then samples within each). Two machines never take turns, so these ratios are "
        "unpaired: each side's drift stays in its interval. Cells flagged unstable on either machine are "
        f"undecided. Judged with {comparison.judging.describe()}."
        + (f" {comparison.rejudged}" if comparison.rejudged else "")), "",
        *machines_section(comparison),
        *faster_where(comparison),
        *reproducibility_section(comparison),
        *break_even_section(comparison),
        *round_trip_section(comparison),
        *seed_section(comparison),
        *provenance_section(comparison),
        "## Figures", "",
    ]
    lines += figure_lines({name: compare_caption(name, comparison.judging) for name in COMPARE_CAPTIONS})
    lines += ["## Every cell", "", *cells_table(comparison)]
    return "\n".join(lines)


def write_comparison_report(comparison: MachineComparison, md_path: str, html_path: str) -> None:
    write_page(build_markdown(comparison), md_path, html_path, " vs ".join(comparison.labels), COMPARE_FIGURE_NAMES)

