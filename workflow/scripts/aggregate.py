"""Entry point of the aggregate rule: raw records -> timings, speedups, thread scaling, copies."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.analysis.measured import Analysis, grid_records
from offloadbench.analysis.tables import write_tables
from offloadbench.logs import run_logged
from offloadbench.records import load_environment

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: write_tables(
        grid_records(snakemake.params.raw, snakemake.params.grid, len(snakemake.input.rounds),  # noqa: F821
                     snakemake.params.kernels, load_environment(snakemake.input.environment)),  # noqa: F821
        snakemake.input.transfer,  # noqa: F821
        snakemake.input.roofs,  # noqa: F821
        snakemake.input.environment,  # noqa: F821
        snakemake.wildcards.machine,  # noqa: F821
        Analysis.from_config(snakemake.params.analysis),  # noqa: F821
        {name: path for name, path in snakemake.output.items() if name != "judging"},  # noqa: F821
        snakemake.output.judging,  # noqa: F821
    ),
    f"aggregate of {snakemake.wildcards.machine}",  # noqa: F821
)
