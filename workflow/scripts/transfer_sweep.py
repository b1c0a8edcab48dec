"""Entry point of the transfer rule: sweep one device's copy bandwidth, write its record.

Run as a plain command (not `script:`), so the job loads neither snakemake nor pandas.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the offloadbench package

from offloadbench.sweep_job import run  # noqa: E402

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
