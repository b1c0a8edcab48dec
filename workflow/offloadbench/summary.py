"""Print a short summary of one machine's results: `python -m offloadbench.summary results/<machine>`."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from .aggregate import read_tables
from .report import gpu_findings, markdown_table, speedup_findings


def summarize(folder: Path) -> str:
    tables = read_tables({name: str(folder / f"{name}.csv") for name in ("timings", "speedups")})
    t, s = tables["timings"], tables["speedups"]
    counts = ", ".join(f"{k} {v}" for k, v in t["status"].value_counts().items())
    rows = t[t["status"] == "ok"]
    brief = pd.DataFrame({
        "cell": rows["op"] + " " + rows["library"] + "-" + rows["device"] + " " + rows["dtype"] + " n=" + rows["size"].astype(str) + " t" + rows["threads"],
        "median_s": rows["median_s"].map("{:.4g}".format),
        "end_to_end_s": rows["end_to_end_s"].map("{:.4g}".format),
        "copies": rows["transfer_fraction"].map(lambda v: "–" if pd.isna(v) else f"{v:.0%}"),
        "unstable": rows["unstable"].fillna("").map(lambda v: "yes" if v else ""),
    })
    lines = [f"{folder}: cells {counts}", "", markdown_table(brief), "", *speedup_findings(s), *gpu_findings(t, s)]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m offloadbench.summary results/<machine>")
    print(summarize(Path(sys.argv[1])))
