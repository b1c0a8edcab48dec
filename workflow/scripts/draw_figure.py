"""Entry point of the figure rule: draw one figure as PDF and 300-dpi PNG."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.aggregate import read_tables  # noqa: E402
from offloadbench.figures import draw  # noqa: E402
from offloadbench.scripting import run_logged  # noqa: E402

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: draw(
        snakemake.wildcards.figure,  # noqa: F821
        read_tables(dict(snakemake.input.items())),  # noqa: F821
        snakemake.params.machine,  # noqa: F821
        snakemake.output.pdf,  # noqa: F821
        snakemake.output.png,  # noqa: F821
    ),
)
