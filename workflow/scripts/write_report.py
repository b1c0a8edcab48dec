"""Entry point of the report rule: write report.md and report.html."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.report import load_inputs, write_report  # noqa: E402
from offloadbench.scripting import run_logged  # noqa: E402

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: write_report(
        load_inputs(snakemake.input, snakemake.params.machine, snakemake.params.settings),  # noqa: F821
        snakemake.output.md,  # noqa: F821
        snakemake.output.html,  # noqa: F821
    ),
)
