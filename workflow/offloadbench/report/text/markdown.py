"""The report: what was found on this machine, in sentences with numbers and 95% CIs.

Built as Markdown from the tables and environment.json, then rendered to one
self-contained HTML file with the figures embedded.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ...analysis.columns import unstable_cells
from ...cells import Cell
from ...layout import TABLES, machine_figures
from ..captions import caption_of
from ..escape import md_data, md_frame, safe_html
from ..format import finite, fmt_time, format_bytes, ratio_of
from .compile_findings import compile_section, kernel_lines
from .conditions import conditions_section
from .findings import (
    gpu_findings,
    offload_section,
    scaling_findings,
    speedup_findings,
    stability_findings,
)
from .ops_findings import bound_lines, missing_baseline_lines, payoff_lines
from .seed import SEED_CLAIM, check_seed_claims


@dataclass
class Inputs:
    machine: str
    environment: dict
    tables: dict[str, pd.DataFrame]  # layout.TABLES
    settings: dict  # the validated config
    rounds: list[dict] = field(default_factory=list)  # raw/rounds/p<k>.json
    settle: dict | None = None  # raw/rounds/settle.json: the extra rounds

    def table(self, name: str) -> pd.DataFrame:
        return self.tables.get(name, pd.DataFrame())

    def escaped(self) -> Inputs:
        """The same inputs with every string from data made literal Markdown (escape.md_text)."""
        return replace(self, environment=md_data(self.environment), rounds=md_data(self.rounds),
                       settle=md_data(self.settle),
                       tables={name: md_frame(frame) for name, frame in self.tables.items()})

    @property
    def timings(self) -> pd.DataFrame:
        return self.table("timings")

    @property
    def speedups(self) -> pd.DataFrame:
        return self.table("speedups")

    @property
    def thread_scaling(self) -> pd.DataFrame:
        return self.table("thread_scaling")

    @property
    def transfer(self) -> pd.DataFrame:
        return self.table("transfer")


def machine_section(env: dict, machine: str) -> list[str]:
    gpus = env.get("gpus") or []
    gpu = ", ".join(f"{g['name']} ({g['total_memory_bytes'] / 2**30:.0f} GiB)" if g.get("total_memory_bytes") else g["name"] for g in gpus) or "none visible to torch"
    blas = env.get("numpy_blas") or {}
    lines = [
        "## Machine",
        "",
        f"- Label: `{machine}` (host `{env.get('hostname')}`), {env.get('os')}",
        f"- CPU: {env.get('cpu_model')}, {env.get('logical_cores')} logical cores ({env.get('usable_cores')} usable), governor {env.get('cpu_governor') or 'not readable'}",
        f"- GPU: {gpu}" + (f", driver {env['nvidia_driver']}" if env.get("nvidia_driver") else ""),
        f"- Software: Python {env.get('python')}, NumPy {env.get('numpy_version')} ({blas.get('name', 'BLAS unknown')} {blas.get('version') or ''}), PyTorch {env.get('torch_version') or 'not installed'}"
        + (f" (CUDA {env['torch_cuda_build']})" if env.get("torch_cuda_build") else ""),
        f"- TF32 for float32 matmuls: {'allowed' if env.get('tf32_matmul_default') else 'off'} by default; cells record their own setting",
        f"- BLAS/OpenMP environment: {', '.join(f'{k}={v}' for k, v in (env.get('blas_env') or {}).items()) or 'nothing set'}",
        f"- Captured at {env.get('captured_at')}",
        "",
    ]
    return lines


def status_section(timings: pd.DataFrame) -> list[str]:
    counts = timings["status"].value_counts()
    lines = ["## Cells", "", "Cells per status: " + ", ".join(f"{status} {counts[status]}" for status in counts.index) + ".", ""]
    bad = timings[timings["status"] != "ok"]
    if not bad.empty:
        lines += ["### Skipped or failed cells", ""]
        for (status, reason), group in bad.groupby(["status", "reason"], dropna=False):
            names = ", ".join(f"`{Cell.from_dict(r).key}`" for _, r in group.iterrows())
            lines.append(f"- **{status}** ({len(group)}): {reason}. Cells: {names}")
        lines.append("")
    unstable = timings[(timings["status"] == "ok") & unstable_cells(timings)]
    if not unstable.empty:
        lines += ["### Unstable cells", ""]
        for _, r in unstable.iterrows():
            lines.append(f"- `{Cell.from_dict(r).key}`: {r['unstable']}")
        lines.append("")
    return lines


def timings_markdown(timings: pd.DataFrame) -> str:
    ok = timings.copy()
    table = pd.DataFrame({
        "op": ok["op"], "library": ok.get("variant", ok["library"]), "device": ok["device"], "dtype": ok["dtype"],
        "n": ok["size"].astype(int), "threads": ok["threads"], "status": ok["status"],
        "median": ok["median_s"].map(fmt_time),
        "95% CI": [f"{fmt_time(lo)}–{fmt_time(hi)}" if finite(lo) else "–" for lo, hi in zip(ok["ci_low_s"], ok["ci_high_s"])],
        "GFLOP/s": ok["gflops"].map(lambda v: f"{v:.1f}" if finite(v) else "–"),
        "end to end": ok["end_to_end_s"].map(fmt_time),
        "copies": ok["transfer_fraction"].map(lambda v: f"{v:.0%}" if finite(v) else "–"),
        "rel. error": ok["rel_err"].map(lambda v: f"{v:.1e}" if finite(v) else "–"),
        "samples": ok["n_samples"].astype(int),
        "stable": [("no" if flags else "yes") if status == "ok" else "–"
                   for flags, status in zip(ok["unstable"].fillna(""), ok["status"])],
    })
    return markdown_table(table)


def speedups_markdown(speedups: pd.DataFrame) -> str:
    if speedups.empty:
        return "_No speedups: no PyTorch cell has a NumPy baseline._"
    table = pd.DataFrame({
        "op": speedups["op"], "library": speedups.get("variant", speedups["library"]), "device": speedups["device"],
        "dtype": speedups["dtype"], "n": speedups["size"].astype(int), "threads": speedups["threads"],
        "speedup": [ratio_of(row) for _, row in speedups.iterrows()],
        "verdict": speedups["speedup_verdict"],
        "end-to-end speedup": [ratio_of(row, "end_to_end_speedup") for _, row in speedups.iterrows()],
        "end-to-end verdict": speedups["end_to_end_verdict"],
        "break-even (copies counted)": speedups["break_even"],
        **({"compile pays back after": speedups["amortize"].fillna("")}
           if "mode" in speedups and (speedups["mode"] == "compiled").any() else {}),
    })
    return markdown_table(table)


def transfer_markdown(transfer: pd.DataFrame) -> str:
    ok = transfer[transfer["status"] == "ok"] if not transfer.empty else transfer
    if ok.empty:
        return "_No copy was measured on this machine (see Does offloading pay?)._"
    table = pd.DataFrame({
        "device": ok["device"], "direction": ok["direction"], "memory": ok["memory"],
        "size": ok["bytes"].map(format_bytes), "median": ok["median_s"].map(fmt_time),
        "GB/s": [f"{v:.2f} ({lo:.2f}–{hi:.2f})" for v, lo, hi in zip(ok["gbs"], ok["gbs_ci_low"], ok["gbs_ci_high"])],
        "of link": ok["link_fraction"].map(lambda v: f"{v:.0%}" if finite(v) else "–"),
    })
    return markdown_table(table)


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def processes_held(timings: pd.DataFrame) -> str:
    """How many processes the records hold per measured cell, as a phrase: what the data
    are, whatever the current config asks for."""
    ok = timings[timings["status"] == "ok"] if "processes" in timings else timings.iloc[0:0]
    counts = ok["processes"].dropna().astype(int).value_counts().sort_index(ascending=False)
    if counts.empty:
        return "no cell was measured"
    if len(counts) == 1:
        p = int(counts.index[0])
        return f"each measured cell was measured in {'one process' if p == 1 else f'{p} independent processes'}"
    parts = [f"{n} cells in {p} process{'es' if p != 1 else ''}" for p, n in counts.items()]
    return "the records hold " + ", ".join(parts)


def method_section(settings: dict, timings: pd.DataFrame) -> list[str]:
    m, a = settings["measure"], settings["analysis"]
    memory = (
        "pinned: the inputs live in pinned memory from the start (copying them there is not timed), "
        "as when an application allocates its buffers pinned. "
        if m["pinned_memory"] else "pageable. "
    )
    measuring = (
        f"As the records show, {processes_held(timings)}. The run goes in rounds, "
        "and every round measures every cell once, in fresh worker processes (one per library, device and thread "
        "count), alone on the machine (a host-wide lock). Within a round, the variants that are compared with each "
        "other (NumPy and PyTorch at the same threads; GPUs and NumPy on all cores) take adjacent turns, in an order "
        "that reverses from round to round, so slow drift of the machine hits both sides of a ratio alike. "
        "Every worker reads, just before and after a cell's sampling, how much CPU time other processes used "
        "(the machine's busy time minus its own); a process that saw more than a tenth of a core used by others "
        "is disturbed. A disturbed process, or one whose median lies far from the cell's others (beyond 20% and "
        "four times the spread its worker's cells typically show), is replaced by a process of an extra round, "
        "and recorded as replaced; "
        f"extra rounds also measure both sides of every comparison still undecided, up to {m['max_processes']} "
        f"processes per cell and {m['extra_time_fraction']:.0%} of the planned rounds' time. "
        "Thread counts are set before NumPy and PyTorch load and read back afterwards. "
        "Inputs are random in [-1, 1), made before timing. Every region is timed with `time.perf_counter_ns` and "
        "the garbage collector off; GPU regions synchronise the device before the clock starts and before it stops. "
        f"A region first runs until two consecutive blocks agree within 5% (warm-up), then repeats calls within a "
        f"sample until a sample lasts at least {m['min_sample_s'] * 1e3:g} ms and the timer's own cost is below 0.1%. "
        f"Samples are taken in interleaved rounds over the regions of a cell until the distribution-free 95% CI of "
        f"every median within the process is within ±{m['target_rel_ci']:.0%} (after at least {m['min_samples']} "
        f"samples and {m['min_sampling_s']:g} s, so that cheap cells also feed the noise checks) or the region's "
        f"{m['budget_s']:g} s budget is spent; every sample is kept in `raw/`. "
        "Cells are flagged unstable when the CI target is not met, the samples have two modes, the second half drifts "
        "from the first, a readable CPU/GPU clock moved by more than 10%, or a process failed. "
        f"Each result is checked against a float64 NumPy reference on {m['check_rows']} sampled rows with a "
        "dtype-aware tolerance; a wrong result is an error, not a speedup. "
        f"TF32 is {'allowed' if m['allow_tf32'] else 'off'}; host memory is {memory}"
        "The copy-out phase and the end-to-end region make a fresh host array each call, as `.cpu().numpy()` does; "
        "the bandwidth sweep copies into reused buffers, so it shows what the link itself sustains."
    )
    intervals = (
        "A cell's time is the geometric mean of its process medians. Its 95% CI, and the CI of every ratio "
        "(speedups, thread scaling, break-even), come from a two-level bootstrap "
        f"({a['bootstrap_resamples']} resamples, seed {a['seed']}): processes are resampled, then samples within each. "
        "Where the processes disagree more than their own noise explains, that spread sets the interval, with "
        "Student's t on the processes' degrees of freedom; otherwise the noise within each process does. "
        "A cell measured in one process has a CI of its within-process noise only, and the tables say so "
        "(`ci_scope`). "
        f"Every ratio gets one of four verdicts, with the minimum effect δ = {a['min_effect']:.0%}: *faster* when "
        "its CI lies above 1 and it is at least 1 + δ; *slower*, the mirror image; *the same* when the whole CI "
        "lies within ±δ of 1 (an equivalence test); *undecided* otherwise, and always when the CI spans more "
        "than 2×, which is never stated as a result."
    )
    return ["## Method", "", measuring, "", intervals, ""]


def build_markdown(inputs: Inputs, figure_dir: str = "figures") -> str:
    inputs = inputs.escaped()
    t, s = inputs.timings, inputs.speedups
    findings = speedup_findings(s) + gpu_findings(t, s) + scaling_findings(inputs.thread_scaling) + stability_findings(t)
    lines = [
        f"# NumPy vs PyTorch on `{inputs.machine}`",
        "",
        "When does moving NumPy work to PyTorch pay off on this machine, and what do the copies to and from the GPU cost?",
        "",
        *machine_section(inputs.environment, inputs.machine),
        "## Key findings",
        "",
        *findings,
        "",
        "## Which operations pay off",
        "",
        *payoff_lines(s),
        *missing_baseline_lines(t),
        *kernel_lines(t),
        "",
        "### What bounds each operation",
        "",
        *bound_lines(t, inputs.table("roofs")),
        "",
        *compile_section(t, s),
        *conditions_section(inputs.environment, inputs.rounds, t, inputs.settle),
        *offload_section(t, s, inputs.transfer),
        "## Seed claims checked",
        "",
        f"> {SEED_CLAIM}",
        "",
        *check_seed_claims(t, s),
        "",
        "## Figures",
        "",
    ]
    lines += figure_lines({name: caption_of(name) for name in machine_figures(inputs.tables)}, figure_dir)
    lines += status_section(t)
    lines += ["## Speedups", "", speedups_markdown(s), "", "## Timings", "", timings_markdown(t), ""]
    lines += ["## Copy bandwidth, every size", "", transfer_markdown(inputs.transfer), ""]
    lines += method_section(inputs.settings, t)
    return "\n".join(lines)


def write_page(text: str, md_path: str, html_path: str, title: str, figures: tuple[str, ...]) -> None:
    """A report as Markdown, and as HTML with its figures embedded: only `figures`, the
    names of the figures this run drew beside it under figures/."""
    Path(md_path).write_text(text, encoding="utf-8")
    out = Path(md_path).parent
    embedded = {f"figures/{name}.png": out / "figures" / f"{name}.png" for name in figures}
    Path(html_path).write_text(safe_html(text, embedded, f"offloadbench — {title}"), encoding="utf-8")


def figure_lines(captions: dict[str, str], figure_dir: str) -> list[str]:
    """Each figure's PNG with its caption, and where its vector version is."""
    lines = []
    for name, caption in captions.items():
        lines += [f"![{name}]({figure_dir}/{name}.png)", "", f"*{name}*: {caption} Vector version: `{figure_dir}/{name}.pdf`.", ""]
    return lines


def write_report(inputs: Inputs, md_path: str, html_path: str) -> None:
    write_page(build_markdown(inputs), md_path, html_path, inputs.machine, tuple(machine_figures(inputs.tables)))


def load_inputs(paths, machine: str, settings: dict) -> Inputs:
    """Read the tables, environment.json and round records named by `paths` (an object with
    attributes, as Snakemake's input)."""
    from ...analysis.tables import read_tables
    from ...records import load_environment, load_round, load_settle

    tables = read_tables({name: getattr(paths, name) for name in TABLES})
    settle = getattr(paths, "settle", None)
    return Inputs(machine, load_environment(paths.environment), tables, settings,
                  [load_round(p) for p in getattr(paths, "rounds", [])], load_settle(settle) if settle else None)
