"""Measuring on a cluster: each node type (a machine label under `cluster:` in the config)
gets its own partition, cores, GPUs and results folder, and every job that measures
runs alone on a whole node of it.

Read at parse time by the Snakefile, on the submit host and again in each job, so it is
pure Python; the one outside fact it asks for is the nodes' CPU count, from `sinfo`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from .errors import UserError

EXCLUSIVE = "--exclusive"
MEASURE_MARGIN = 3.0  # a round's SLURM time limit: this many times its estimate, plus 10 minutes


class ClusterError(UserError):
    """A cluster setting that cannot work; the message names the config key."""


@dataclass(frozen=True)
class NodeType:
    label: str
    partition: str | None
    account: str | None
    cores: int
    gpus: int
    gpu_model: str | None
    mem_mb: int

    @property
    def gres(self) -> str | None:
        """The GPU request of every job that measures on this node type (None: no GPU)."""
        if not self.gpus:
            return None
        return f"gpu:{self.gpu_model}:{self.gpus}" if self.gpu_model else f"gpu:{self.gpus}"


def sinfo_cpus(partition: str | None) -> list[int] | None:
    """CPU counts of a partition's nodes (the default partition's with None), or None
    where sinfo cannot tell."""
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P %c"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    counts = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        name, cpus = parts
        if (partition is None and name.endswith("*")) or name.rstrip("*") == partition:
            try:
                counts.append(int(cpus.rstrip("+")))
            except ValueError:
                continue
    return counts or None


def node_types(cluster: dict) -> dict[str, NodeType]:
    """The node types of the config's `cluster:` section, with their cores checked against
    what SLURM reports: a job asking for more CPUs than any node has would pend forever."""
    types = {}
    for label, spec in cluster.items():
        partition = spec.get("partition")
        where = f"config key cluster.{label}"
        available = sinfo_cpus(partition)
        cores = spec.get("cores")
        if cores is None:
            if not available:
                raise ClusterError(
                    f"{where}.cores: sinfo cannot tell the CPU count of partition {partition or '(default)'}; "
                    "set it (the cores of one node)"
                )
            cores = min(available)
        elif available and cores > max(available):
            raise ClusterError(
                f"{where}.cores: {cores} cores, but the nodes of partition {partition or '(default)'} have at most "
                f"{max(available)}; a job asking for more would wait forever"
            )
        types[label] = NodeType(label, partition, spec.get("account"), int(cores), int(spec["gpus"]),
                                spec.get("gpu_model"), int(spec["mem_mb"]))  # defaults: the config schema
    return types


def round_minutes(estimate_s: float) -> int:
    """A round's SLURM time limit in minutes, from its duration estimate."""
    return int(MEASURE_MARGIN * estimate_s / 60) + 10
