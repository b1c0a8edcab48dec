"""Entry point of the figure rule: draw one figure as PDF and 300-dpi PNG."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.analysis.tables import read_tables
from offloadbench.logs import run_logged
from offloadbench.records import load_judging
from offloadbench.report.figures.draw import draw

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: draw(
        snakemake.wildcards.figure,  # noqa: F821
        read_tables({name: path for name, path in snakemake.input.items() if name != "judging"}),  # noqa: F821
        snakemake.wildcards.machine,  # noqa: F821
        snakemake.output.pdf,  # noqa: F821
        snakemake.output.png,  # noqa: F821
        load_judging(snakemake.input.judging),  # noqa: F821
    ),
    f"figure {snakemake.wildcards.figure} of {snakemake.wildcards.machine}",  # noqa: F821
)
