"""Entry point of the compare rule: several machines' results -> results/compare/<A>-vs-<B>/."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source
from offloadbench.logs import run_logged
from offloadbench.report.publish import write_comparison

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: write_comparison(
        [Source(label, Path(folder), budget) for label, folder, budget in snakemake.params.sources],  # noqa: F821
        Analysis.from_config(snakemake.params.analysis),  # noqa: F821
        snakemake.params.out,  # noqa: F821
    ),
    f"compare into {snakemake.params.out}",  # noqa: F821
)
