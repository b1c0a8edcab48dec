# Config validation, the grid of cells, the machine labels and the target lists.
import json
import os
import shlex
import sys
from pathlib import Path

PACKAGE_DIR = os.path.join(workflow.basedir, "workflow")
# The package lives beside the rules; scripts find it the same way (no install needed).
sys.path.insert(0, PACKAGE_DIR)

# Jobs run `python` from their own environment (the venv, or --sdm conda/apptainer);
# the package reaches them through PYTHONPATH, not an interpreter's path.
shell.prefix(
    f"set -euo pipefail; export PYTHONPATH={shlex.quote(PACKAGE_DIR)}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; "
)

from offloadbench import grid
from offloadbench.bundles import BundleError, resolve_sources
from offloadbench.config import ConfigError, resolve_machine, validate
from offloadbench.layout import FIGURE_NAMES, TABLES, record_relpath, round_relpath
from offloadbench.report.captions import CAPTIONS

try:
    _validated = validate(config)
except ConfigError as error:
    sys.exit(f"error: {error}")
config.clear()
config.update(_validated)

RESULTS = config["results_dir"]
MACHINES = [resolve_machine(config)]
OUT = f"{RESULTS}/{{machine}}"
CELLS = grid.expand(config["grid"])
ROUNDS = list(range(1, config["measure"]["processes"] + 1))
if not CELLS:
    sys.exit(
        "error: config key grid: no possible cell (e.g. numpy only runs on the cpu)"
    )
try:
    COMPARED = resolve_sources(
        [MACHINES[0] if e == "auto" else e for e in config["compare"]],
        RESULTS,
        MACHINES,
        "compare",
    )
    RENDERED = resolve_sources(config["render"], RESULTS, MACHINES, "render")
except BundleError as error:
    sys.exit(f"error: {error}")
BUNDLED = {s.label: s.bundle for s in COMPARED + RENDERED if s.bundle}
COMPARISON = f"{RESULTS}/compare/{'-vs-'.join(s.label for s in COMPARED)}"


wildcard_constraints:
    machine=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    round=r"\d+",
    figure="|".join(FIGURE_NAMES),
    device="cuda|mps",
    roof_device="cpu|cuda|mps",
    source=r"[A-Za-z0-9][A-Za-z0-9_.-]*",


def round_records(round_index):
    """Every cell's record of one round, as patterns over {machine}."""
    return [f"{OUT}/raw/{record_relpath(cell, round_index)}" for cell in CELLS]


def all_records(wildcards):
    return [
        path.format(machine=wildcards.machine)
        for r in ROUNDS
        for path in round_records(r)
    ]


def previous_round(wildcards):
    """Rounds run one after another, so each cell's processes are spread over the run."""
    k = int(wildcards.round)
    return [] if k == 1 else [f"{OUT}/raw/{round_relpath(k - 1)}".format(**wildcards)]


def transfer_records(wildcards):
    return [
        f"{RESULTS}/{wildcards.machine}/raw/transfer/{device}.json"
        for device in config["transfer"]["devices"]
    ]


def roof_records(wildcards):
    return [
        f"{RESULTS}/{wildcards.machine}/raw/roofs/{device}.json"
        for device in config["roofs"]["devices"]
    ]


def figure_files(kind, machine="{machine}"):
    return [f"{RESULTS}/{machine}/figures/{name}.{kind}" for name in FIGURE_NAMES]


def final_targets():
    targets = []
    for machine in MACHINES:
        targets += [f"{RESULTS}/{machine}/{table}.csv" for table in TABLES]
        targets += figure_files("pdf", machine) + figure_files("png", machine)
        targets += [
            f"{RESULTS}/{machine}/report.md",
            f"{RESULTS}/{machine}/report.html",
            f"{RESULTS}/{machine}/claims.tex",
        ]
    return targets


def announce_estimates():
    """Before the first job: how long what is left will take, per machine."""
    from offloadbench.estimate import remaining

    for machine in MACHINES:
        estimate = remaining(config, Path(RESULTS) / machine)
        if estimate.cells:
            print(f"offloadbench: {estimate.line(machine)}", file=sys.stderr)


def source_inputs(sources):
    """What a comparison or rendering waits for: this run's tables, or an unpacked bundle."""
    inputs = []
    for source in sources:
        inputs.append(f"{source.folder}/environment.json")
        if source.measured_here:
            inputs += [f"{source.folder}/{table}.csv" for table in TABLES]
    return inputs


def bench_threads(wildcards):
    """All local cores: no other job runs beside a measurement (the host lock backs this up)."""
    return max(1, workflow.cores or 1)


def as_json(section):
    return json.dumps(section, sort_keys=True)
