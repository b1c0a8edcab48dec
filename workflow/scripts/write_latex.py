"""Entry point of the latex rule: booktabs tables and claim macros for papers."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.analysis.tables import read_tables
from offloadbench.logs import run_logged
from offloadbench.report.text.latex import write_latex

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: write_latex(
        read_tables(dict(snakemake.input.items())),  # noqa: F821
        Path(snakemake.output.claims).parent,  # noqa: F821
        snakemake.wildcards.machine,  # noqa: F821
    ),
)
