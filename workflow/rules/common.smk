# Config validation, the grid of cells, the machine labels and the target lists.
import functools
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
from offloadbench.bundles import (
    UNBOUNDED_SAMPLES,
    BundleError,
    content_digest,
    resolve_sources,
)
from offloadbench.cluster import EXCLUSIVE, ClusterError, node_types, round_minutes
from offloadbench.config import (
    ConfigError,
    inherited_lists,
    kernel_infos,
    measured_grid,
    resolve_machine,
    validate,
)
from offloadbench.machine import LABEL_PATTERN
from offloadbench.layout import (
    COMPARE_FIGURE_NAMES,
    FIGURE_NAMES,
    SETTLE_RELPATH,
    figure_names,
    JUDGING,
    SETTINGS,
    LATEX_TABLES,
    TABLES,
    round_relpath,
)
from offloadbench.report.captions import caption_of

_notes = []
try:
    _validated = validate(
        config,
        inherited=inherited_lists(config, workflow.config_settings.overwrite_config),
        notes=_notes,
    )
except ConfigError as error:
    sys.exit(f"error: {error}")
for _note in _notes:
    print(f"note: {_note}", file=sys.stderr)
config.clear()
config.update(_validated)

RESULTS = config["results_dir"]
try:
    NODE_TYPES = node_types(config["cluster"])
except ClusterError as error:
    sys.exit(f"error: {error}")
MACHINES = list(NODE_TYPES) or [resolve_machine(config)]
OUT = f"{RESULTS}/{{machine}}"
KERNELS = kernel_infos(
    config
)  # read from their source: the kernels are never imported here
GRID = measured_grid(config)  # with the self-comparisons' twins (analysis.controls)
CELLS = grid.expand(GRID, KERNELS)
ROUNDS = list(range(1, config["measure"]["processes"] + 1))
if not CELLS:
    sys.exit(
        "error: config key grid: no possible cell (e.g. numpy only runs on the cpu)"
    )
try:
    COMPARED = resolve_sources(
        [MACHINES[0] if e == "auto" else e for e in config["compare"]]
        or (MACHINES if len(NODE_TYPES) >= 2 else []),
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
    machine=LABEL_PATTERN,
    round=r"\d+",
    figure="(?:" + "|".join(FIGURE_NAMES) + r")(?:-\d+)?",
    source=LABEL_PATTERN,


# Each round's own record. The cells' records are not declared outputs: thousands of them
# per round would make Snakemake's DAG quadratic in the grid; the aggregate reads them
# from the grid and names any that is missing.
ROUND_MANIFESTS = [f"{OUT}/raw/{round_relpath(k)}" for k in ROUNDS]
SETTLE_RECORD = f"{OUT}/raw/{SETTLE_RELPATH}"
ROOF_RECORDS = [
    f"{OUT}/raw/roofs/{device}.json" for device in config["roofs"]["devices"]
]
TRANSFER_RECORDS = [
    f"{OUT}/raw/transfer/{device}.json" for device in config["transfer"]["devices"]
]


def earlier_measurements(wildcards):
    """Measuring jobs form one chain per machine (environment, roofs, copies, round 1,
    round 2, ...): each cell's processes are spread over the run, and on a cluster the
    chain runs as one job on one node, never two measurements side by side."""
    k = int(wildcards.round)
    before = [ROUND_MANIFESTS[k - 2]] if k > 1 else ROOF_RECORDS + TRANSFER_RECORDS
    return [path.format(**wildcards) for path in before]


# One file per figure, or pages of op families where the grid outgrows a page (layout.py).
FIGURES = figure_names([cell.op for cell in CELLS], [cell.dtype for cell in CELLS])


def figure_files(kind, machine="{machine}"):
    return [f"{RESULTS}/{machine}/figures/{name}.{kind}" for name in FIGURES]


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
        targets += [f"{RESULTS}/{machine}/tables/{name}.tex" for name in LATEX_TABLES]
    if len(NODE_TYPES) >= 2:  # several node types: the run ends with their comparison
        targets.append(f"{COMPARISON}/report.html")
    return targets


def announce_compiled():
    """Before the first job: which ops are compiled. grid.compiled may come from
    config/config.yaml, which a config file extends rather than replaces."""
    if "compiled" not in config["grid"]["modes"]:
        return
    ops = sorted({c.op for c in CELLS if c.compiled})
    if ops:
        print(
            f"offloadbench: compiled: {', '.join(ops)} (grid.compiled)", file=sys.stderr
        )
    else:
        print(
            "warning: config key grid.compiled: it leaves no compiled cell in this grid (its lists may "
            "come from config/config.yaml; set them in your config file, or null for all)",
            file=sys.stderr,
        )


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
    """Every core of the node that measures: no other job runs beside a measurement (whole
    nodes on a cluster; the host lock locally)."""
    node = NODE_TYPES.get(wildcards.machine)
    return node.cores if node else max(1, workflow.cores or 1)


def node_resource(attribute):
    """A SLURM resource of a measuring job, per machine label; locally none, or 0 for
    numbers (Snakemake wants a number there)."""

    def resource(wildcards):
        node = NODE_TYPES.get(wildcards.machine)
        if node:
            return getattr(node, attribute)
        return 0 if attribute == "mem_mb" else None

    return resource


def measuring_extra(wildcards):
    return EXCLUSIVE if wildcards.machine in NODE_TYPES else None


# Every measuring job gets a whole node of its machine label's type on a cluster.
MEASURING_RESOURCES = dict(
    slurm_partition=node_resource("partition"),
    slurm_account=node_resource("account"),
    gres=node_resource("gres"),
    slurm_extra=measuring_extra,
    mem_mb=node_resource("mem_mb"),
)


def round_runtime(wildcards):
    """A round's time limit in minutes, from the duration estimate of one round."""
    return _round_minutes(wildcards.machine)


def settle_runtime(wildcards):
    """The extra rounds' time limit in minutes: their budget, a share of the planned rounds',
    with a round's worth of slack (the last round may run past the budget)."""
    share = config["measure"]["extra_time_fraction"]
    return int(_round_minutes(wildcards.machine) * (share * len(ROUNDS) + 1)) + 10


@functools.cache
def _round_minutes(machine):
    from offloadbench.estimate import estimate_run, measured_inputs, roofs_for

    node = NODE_TYPES.get(machine)
    available = {"cpu": True, "cuda": bool(node and node.gpus)}
    folder = Path(RESULTS) / machine
    estimate = estimate_run(
        config, roofs_for(folder), {1: CELLS}, available, inputs=measured_inputs(folder)
    )
    return round_minutes(estimate.measure_s)


RUN_STARTED = []


def guard_executor():
    """Before any job: on a cluster, `machine: auto` would name each result folder after
    whichever compute node ran the job."""
    import time

    RUN_STARTED.append(time.time())
    executor = workflow.executor_plugin.name if workflow.executor_plugin else "local"
    if (
        executor not in ("local", "dryrun")
        and not NODE_TYPES
        and config["machine"] == "auto"
    ):
        print(
            "error: config key machine: `auto` would be each compute node's host name; set "
            "--config machine=<label>, or list node types under `cluster:` (see README, Running on SLURM)",
            file=sys.stderr,
        )
        sys.exit(1)


def echo_failures():
    """On a cluster a job's one-line refusal stays in its log on the node: say it here."""
    executor = workflow.executor_plugin.name if workflow.executor_plugin else "local"
    if executor in ("local", "dryrun"):
        return
    since = RUN_STARTED[0] if RUN_STARTED else 0.0
    for log in sorted(Path(RESULTS).glob("*/logs/**/*.log")):
        if log.stat().st_mtime < since:
            continue
        lines = log.read_text(errors="replace").splitlines()
        for line in lines:
            if line.startswith("error: "):
                print(f"{log}: {line}", file=sys.stderr)


def print_answers():
    """After a successful run of the default target: each machine's decision table and
    where its report is, printed once Snakemake has written its own closing lines (atexit),
    so the answer is what the run ends with."""
    import atexit

    targets = set(workflow.dag_settings.targets or ())
    if targets - {"all"}:
        return

    def show():
        from offloadbench.errors import UserError
        from offloadbench.report.text.summary import summarize

        for machine in MACHINES:
            folder = Path(RESULTS) / machine
            if not (folder / "decisions.csv").is_file():
                continue
            try:
                print("\n" + "\n".join(summarize(folder)), file=sys.stderr)
            except UserError as error:
                print(
                    f"warning: no decision table for {machine}: {error}",
                    file=sys.stderr,
                )
            # The run's files are written: never end it in a traceback.
            except Exception as error:
                print(
                    f"warning: could not print the decision table of {folder}: "
                    f"{type(error).__name__}: {error}; `make summary FROM={folder}` retries it",
                    file=sys.stderr,
                )

    atexit.register(show)


def as_json(section):
    return json.dumps(section, sort_keys=True)
