"""The answer in the terminal: the decision table of a results folder or bundle, one line
per op (and kernel) and place, at most 100 characters wide, then where the report is.
Snakemake prints it after every successful run (onsuccess); `make summary` prints it for
any results folder or bundle, read as untrusted input.

    python -m offloadbench.report.text.summary [results/<machine> | <machine>.tar.gz] [--cells]

`--cells` adds a short table of every measured cell with the spread between its processes
(what `make gpu-check` prints).
"""

from __future__ import annotations

import sys
import tempfile
import textwrap
from pathlib import Path

import pandas as pd

from ...analysis.columns import has_text, unstable_cells
from ...analysis.measured import Analysis
from ...analysis.sources import Source
from ...analysis.tables import StaleTable, read_table, read_tables, with_series_rows
from ...bundles import BUNDLE_SUFFIX, source_label, unpack
from ...cells import CELL_COLUMNS, Cell
from ...errors import UserError, one_line, shown
from ...layout import JUDGING
from ...verdicts import Judging
from ..escape import terminal_frame
from ..format import finite, fmt_percent, fmt_sig, format_bytes
from ..table import markdown_table
from .conditions import controls_warning
from .decisions import plain_table
from .findings import trips_text

WIDTH = 100
USAGE = "usage: python -m offloadbench.report.text.summary [results/<machine> | <machine>.tar.gz] [--cells]"


def answer_tables(folder: Path, label: str, rebuild: bool = False) -> tuple[dict[str, pd.DataFrame], Judging]:
    """A results folder's decisions and self-comparisons, with the policy they were judged
    with: its CSV tables and judging.json, or rebuilt from its raw records under the default
    policy where it has no tables or tables of an older version, or where `rebuild` says to
    (a bundle, whose tables are only what someone else wrote; its records are checked one
    by one)."""
    names = ("decisions", "decision_sizes", "losses", "states", "controls")
    source = Source(label, folder)
    if (folder / "decisions.csv").is_file() and not rebuild:
        try:
            for name in ("decision_sizes", "losses", "states"):  # tables of a version before them
                if not (folder / f"{name}.csv").is_file():
                    raise StaleTable(f"{shown(folder / f'{name}.csv')}: missing; aggregate again")
            judging = source.judging()  # tables say nothing without the policy they were judged with
            if judging is None:
                raise StaleTable(f"{shown(folder / JUDGING)}: missing; aggregate again")
            tables = {name: read_table(name, str(folder / f"{name}.csv")) if (folder / f"{name}.csv").is_file()
                      else pd.DataFrame() for name in names}
            return with_series_rows(tables), judging
        except StaleTable:
            if not source.raw.is_dir():
                raise
    analysis = Analysis()
    tables = source.tables(analysis)
    return with_series_rows({name: tables[name] for name in names}), analysis.judging


def summary_lines(tables: dict[str, pd.DataFrame], judging: Judging, label: str, report: Path | None) -> list[str]:
    """The decision table and where the report is, every text from data made safe to print;
    the self-comparisons' warning first, where they were called faster or slower more often
    than the CIs promise."""
    warning = controls_warning(tables.get("controls", pd.DataFrame()), judging)
    decisions = terminal_frame(tables["decisions"])
    lines = [f"offloadbench: the answer for {shown(label)}", *textwrap.wrap(warning, WIDTH),
             *plain_table(decisions, judging, WIDTH)]
    if report is not None:
        lines.append(f"report: {shown(report)}")
    return lines


def summarize(path: Path) -> list[str]:
    """The summary of a results folder, or of a bundle unpacked (within the default bounds)
    into a temporary folder that is removed afterwards."""
    if path.name.endswith(BUNDLE_SUFFIX) and path.is_file():
        label = source_label(path.name[: -len(BUNDLE_SUFFIX)], f"bundle {shown(path)}")
        with tempfile.TemporaryDirectory(prefix="offloadbench-summary-") as tmp:
            folder = unpack(path, Path(tmp) / "bundle")
            return summary_lines(*answer_tables(folder, label, rebuild=True), label, None)
    if not (path / "environment.json").is_file():
        raise UserError(f"{shown(path)}: neither a results folder (no environment.json) nor a "
                        f"{BUNDLE_SUFFIX} bundle")
    report = path / "report.html"
    lines = summary_lines(*answer_tables(path, path.resolve().name), path.resolve().name,
                          report if report.is_file() else None)
    if report.is_file() and report_is_stale(path):
        lines[-1] += " (made before these tables, from another grid or run: `make run` with its config rebuilds it)"
    return lines


def report_is_stale(folder: Path) -> bool:
    """Whether a folder's report predates its decisions: a later run of another grid (make
    compare measures the default one) rewrote the tables without the report."""
    try:
        return (folder / "report.html").stat().st_mtime < (folder / "decisions.csv").stat().st_mtime
    except OSError:
        return False


def cells_summary(folder: Path) -> str:
    """Every measured cell in one line: its times, copy share, processes and their spread."""
    t = read_tables({"timings": str(folder / "timings.csv")})["timings"]
    counts = ", ".join(f"{k} {v}" for k, v in t["status"].value_counts().items())
    rows = t[t["status"] == "ok"]
    brief = pd.DataFrame({
        "cell": [Cell.from_dict(r).key for _, r in rows.iterrows()],
        "median_s": rows["median_s"].map(lambda v: fmt_sig(v, 4)),
        "end_to_end_s": rows["end_to_end_s"].map(lambda v: fmt_sig(v, 4)),
        "copies": rows["transfer_fraction"].map(fmt_percent),
        "processes": rows["processes"],
        "spread": rows["process_spread"].map(fmt_percent),
        "unstable": unstable_cells(rows).map({True: "yes", False: ""}),
        **({"peak host": rows["peak_host_bytes"].map(_bytes), "peak device": rows["peak_device_bytes"].map(_bytes)}
           if "peak_host_bytes" in rows else {}),
    })
    spread = rows["process_spread"].dropna()
    lines = [f"{shown(folder)}: cells {counts}", "", markdown_table(terminal_frame(brief)), ""]
    if (folder / "resident.csv").is_file():  # a folder of a version before it has none
        trips = read_table("resident", str(folder / "resident.csv"))
        lines += [f"{Cell.from_dict(cell.iloc[0]).key}: resident trips: {trips_text(cell)}"
                  for _, cell in trips.groupby([c for c in CELL_COLUMNS if c in trips], sort=False)]
    lines += [f"{Cell.from_dict(r).key}: no resident trips: {r['resident_reason']}"
              for _, r in rows[has_text(rows, "resident_reason")].iterrows()]
    if not spread.empty:
        lines.append(f"spread between processes (slowest process median ÷ fastest − 1): median "
                     f"{fmt_percent(spread.median())}, largest {fmt_percent(spread.max())}")
    return "\n".join(lines)


def _bytes(value) -> str:
    return format_bytes(value) if finite(value) else "–"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cells = "--cells" in args
    paths = [a for a in args if a != "--cells"]
    if len(paths) > 1:
        print(USAGE, file=sys.stderr)
        return 2
    if not paths:
        from ...config import resolve_machine, validate

        paths = [str(Path(validate({}, read_kernels=False)["results_dir"]) / resolve_machine({"machine": "auto"}))]
    try:
        if cells:
            print(cells_summary(Path(paths[0])))
            print()
        print("\n".join(summarize(Path(paths[0]))))
    except UserError as error:
        print(f"error: {one_line(error, 500)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
