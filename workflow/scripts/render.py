"""Entry point of the render rule: a results folder or bundle -> its tables, figures and report."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source
from offloadbench.logs import run_logged
from offloadbench.report.publish import render

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: render(
        Source(snakemake.wildcards.source, Path(snakemake.params.folder),  # noqa: F821
               snakemake.config["bundle_limits"]["max_samples"]),  # noqa: F821
        Analysis.from_config(snakemake.params.analysis),  # noqa: F821
        snakemake.params.out,  # noqa: F821
    ),
    f"render of {snakemake.wildcards.source}",  # noqa: F821
)
