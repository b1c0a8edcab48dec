"""Entry point of the environment rule: write this machine's provenance once."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - the offloadbench package

from offloadbench.provenance import capture_environment_file  # noqa: E402
from offloadbench.scripting import run_logged  # noqa: E402

run_logged(
    snakemake.log[0],  # noqa: F821 - injected by snakemake
    lambda: capture_environment_file(snakemake.output[0], snakemake.params.machine),  # noqa: F821
)
