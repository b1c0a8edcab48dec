"""Entry point of the settings rule: the run's measure and compile settings, once, in
settings.json (offloadbench.run_settings), for every job that measures."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.logs import run_logged
from offloadbench.run_settings import RunSettings

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: RunSettings.from_sections(snakemake.params.measure, snakemake.params.compile).write(  # noqa: F821
        snakemake.output[0]  # noqa: F821
    ),
    f"settings of {snakemake.wildcards.machine}",  # noqa: F821
)
