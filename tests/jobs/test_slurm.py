"""The SLURM profile against a real (local, one-node) SLURM cluster: `make test-slurm`
brings one up as root. Two node types in one command, each measured as one SLURM job on
a whole node, then compared; and the guard against `machine: auto` on a cluster."""

import functools
import shutil
import subprocess
import time

import pandas as pd
import pytest
import yaml
from offloadbench import sandbox

pytestmark = pytest.mark.slurm
PROFILE = "workflow/profiles/slurm"


@functools.cache  # sinfo waits seconds for a controller that is not there: ask once per process
def cluster_up() -> str | None:
    if shutil.which("sbatch") is None:
        return "no sbatch on PATH (make test-slurm brings up a local cluster)"
    probe = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, check=False)
    if probe.returncode != 0 or not {"idle", "mix", "alloc"} & set(probe.stdout.split()):
        return f"no SLURM cluster answers: {(probe.stderr or probe.stdout).strip()[:200]}"
    return None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    reason = cluster_up()
    if reason:
        pytest.skip(reason)
    return sandbox.copy_workflow(tmp_path_factory.mktemp("slurm"))


def tiny(**extra) -> dict:
    config = yaml.safe_load((sandbox.ROOT / ".test" / "config.yaml").read_text())
    config["grid"] = {**config["grid"], "ops": ["matmul"], "devices": ["cpu", "cuda"], "threads": [1, "all"], "modes": ["eager"]}
    config["roofs"] = {**config["roofs"], "devices": ["cpu"]}
    config["transfer"] = {**config["transfer"], "devices": ["cuda"]}
    return {**config, **extra}


def gpus_granted(job_id: str) -> bool:
    """Whether SLURM gave the job a GPU (a finished job stays in the controller for minutes)."""
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return "gres/gpu" in shown or "gpu:" in shown


def test_two_node_types_in_one_command(workdir):
    # node-b asks for a GPU: `make test-slurm` gives the node a stand-in one (SLURM_FAKE_GPUS=1)
    config = tiny(cluster={"node-a": {"partition": "debug"}, "node-b": {"partition": "other", "gpus": 1}})
    start = time.monotonic()
    result = sandbox.snakemake(workdir, "--workflow-profile", PROFILE, config=config, timeout=1500, cores=None)
    took = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-4000:]
    print(f"two node types under SLURM: {took:.0f} s")
    for label, partition in (("node-a", "debug"), ("node-b", "other")):
        out = workdir / "results" / label
        timings = pd.read_csv(out / "timings.csv", dtype={"threads": str, "slurm_job_id": str})
        cpu = timings[timings["device"] == "cpu"]
        assert set(cpu["status"]) == {"ok"} and set(timings[timings["device"] == "cuda"]["status"]) == {"skipped"}
        assert set(cpu["host"]) == {"node1"}, "measured on the compute node, not the submit host"
        assert cpu["slurm_job_id"].str.fullmatch(r"\d+").all()
        assert len(set(cpu["slurm_job_id"])) == 1, "a node type's measuring jobs share one SLURM job"
        assert gpus_granted(cpu["slurm_job_id"].iloc[0]) == (label == "node-b"), "a GPU only where the type has one"
        everything = timings[(timings["threads"] == "all") & (timings["device"] == "cpu")]
        cores = int(subprocess.run(["sinfo", "-h", "-p", partition, "-o", "%c"], capture_output=True, text=True,
                                   check=True).stdout.split()[0].rstrip("+"))
        assert set(everything["threads_effective"]) == {cores}, "all threads: every core of the node"
        assert (out / "report.html").stat().st_size > 10_000
    comparison = workdir / "results" / "compare" / "node-a-vs-node-b"
    assert (comparison / "report.html").exists()
    assert "record the same hardware" in (comparison / "report.md").read_text()


def test_machine_auto_is_refused_before_any_job(workdir):
    result = sandbox.snakemake(workdir, "--workflow-profile", PROFILE, config=tiny(machine="auto"), timeout=300,
                               cores=None)
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error: ")]
    assert errors == [errors[0]] and "config key machine: `auto`" in errors[0]
    assert not (workdir / "results" / "auto").exists()
    assert "Submitted" not in result.stdout + result.stderr


def test_cores_beyond_the_nodes_are_refused_in_one_line(workdir):
    config = tiny(cluster={"huge": {"partition": "debug", "cores": 4096}})
    result = sandbox.snakemake(workdir, "--workflow-profile", PROFILE, "-n", config=config, timeout=300, cores=None)
    assert result.returncode != 0
    assert "error: config key cluster.huge.cores: 4096 cores, but the nodes of partition debug have at most" in result.stderr
