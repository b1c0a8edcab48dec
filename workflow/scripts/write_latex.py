"""Entry point of the latex rule: booktabs tables and claim macros for papers."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.analysis.tables import read_tables
from offloadbench.logs import run_logged
from offloadbench.records import load_judging
from offloadbench.report.text.latex import write_latex

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: write_latex(
        read_tables({name: path for name, path in snakemake.input.items() if name != "judging"}),  # noqa: F821
        Path(snakemake.output.claims).parent,  # noqa: F821
        snakemake.wildcards.machine,  # noqa: F821
        load_judging(snakemake.input.judging),  # noqa: F821
    ),
    f"LaTeX of {snakemake.wildcards.machine}",  # noqa: F821
)
