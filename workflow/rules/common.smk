# Config validation, the grid of cells, the machine label and the target lists.
import json
import os
import shlex
import sys

PACKAGE_DIR = os.path.join(workflow.basedir, "workflow")
# The package lives beside the rules; scripts find it the same way (no install needed).
sys.path.insert(0, PACKAGE_DIR)

# The interpreter and the scripts reach the shell commands through the shell prefix, not
# params: params are rerun triggers, and a new venv or clone path must not re-measure.
shell.prefix(
    "set -euo pipefail; "
    f"OFFLOADBENCH_PYTHON={shlex.quote(sys.executable)}; "
    f"OFFLOADBENCH_SCRIPTS={shlex.quote(os.path.join(PACKAGE_DIR, 'scripts'))}; "
)

from offloadbench import grid as cell_grid
from offloadbench.config import ConfigError, resolve_machine, validate
from offloadbench.layout import FIGURE_NAMES, TABLES

try:
    _validated = validate(config)
except ConfigError as error:
    sys.exit(f"error: {error}")
config.clear()
config.update(_validated)

MACHINE = resolve_machine(config)
OUT = f"{config['results_dir']}/{MACHINE}"
CELLS = cell_grid.expand(config["grid"])
if CELLS.empty:
    sys.exit(
        "error: config key grid: no possible cell (e.g. numpy only runs on the cpu)"
    )


wildcard_constraints:
    op="|".join(sorted(set(CELLS["op"]))),
    cell=r"[a-z]+-[a-z]+-[a-z0-9]+-n\d+-t(\d+|all)",
    figure="|".join(FIGURE_NAMES),
    device="cuda|mps",


def raw_records(wildcards=None):
    return cell_grid.raw_paths(CELLS, f"{OUT}/raw")


def transfer_records(wildcards=None):
    return [
        f"{OUT}/raw/transfer/{device}.json" for device in config["transfer"]["devices"]
    ]


def figure_files(kind):
    return [f"{OUT}/figures/{name}.{kind}" for name in FIGURE_NAMES]


def final_targets():
    return [
        *[f"{OUT}/{table}.csv" for table in TABLES],
        *figure_files("pdf"),
        *figure_files("png"),
        f"{OUT}/report.md",
        f"{OUT}/report.html",
    ]


def bench_threads(wildcards):
    """All local cores: no other job runs beside a measurement (the host lock backs this up)."""
    return max(1, workflow.cores or 1)
