"""Print a short summary of one machine's results: `python -m offloadbench.report.summary results/<machine>`."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from ...analysis.tables import read_tables
from ...cells import Cell
from ..format import fmt_percent
from .findings import gpu_findings, speedup_findings
from .markdown import markdown_table


def summarize(folder: Path) -> str:
    tables = read_tables({name: str(folder / f"{name}.csv") for name in ("timings", "speedups")})
    t, s = tables["timings"], tables["speedups"]
    counts = ", ".join(f"{k} {v}" for k, v in t["status"].value_counts().items())
    rows = t[t["status"] == "ok"]
    brief = pd.DataFrame({
        "cell": [Cell.from_dict(r).key for _, r in rows.iterrows()],
        "median_s": rows["median_s"].map("{:.4g}".format),
        "end_to_end_s": rows["end_to_end_s"].map("{:.4g}".format),
        "copies": rows["transfer_fraction"].map(fmt_percent),
        "processes": rows["processes"],
        "spread": rows["process_spread"].map(fmt_percent),
        "unstable": rows["unstable"].fillna("").map(lambda v: "yes" if v else ""),
    })
    spread = rows["process_spread"].dropna()
    lines = [f"{folder}: cells {counts}", "", markdown_table(brief), ""]
    if not spread.empty:
        lines.append(f"spread between processes (slowest process median ÷ fastest − 1): median {spread.median():.1%}, "
                     f"largest {spread.max():.1%}")
    return "\n".join(lines + ["", *speedup_findings(s), *gpu_findings(t, s)])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m offloadbench.report.summary results/<machine>")
    print(summarize(Path(sys.argv[1])))
