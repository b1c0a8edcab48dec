"""Entry point of the report rule: write report.md and report.html."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.logs import run_logged
from offloadbench.report.text.markdown import load_inputs, write_report

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: write_report(
        load_inputs(snakemake.input, snakemake.wildcards.machine, snakemake.params.analysis),  # noqa: F821
        snakemake.output.md,  # noqa: F821
        snakemake.output.html,  # noqa: F821
    ),
    f"report of {snakemake.wildcards.machine}",  # noqa: F821
)
