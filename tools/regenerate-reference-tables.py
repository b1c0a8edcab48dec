"""Rebuild the tables (and judging.json) of the shipped reference results (tests/data/*/) from their raw records,
after a change to the analysis; a test checks that they match.

    python tools/regenerate-reference-tables.py
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source
from offloadbench.analysis.tables import write_judging, write_table
from offloadbench.layout import JUDGING, TABLES

for folder in sorted(p.parent for p in (ROOT / "tests" / "data").glob("*/environment.json")):
    analysis = Analysis()
    tables = Source(folder.name, folder).tables(analysis)
    for name in TABLES:
        write_table(name, tables[name], folder / f"{name}.csv")
    write_judging(analysis.judging, str(folder / JUDGING))
    print(f"{folder.relative_to(ROOT)}: {', '.join(f'{n} {len(tables[n])}' for n in TABLES)}")
