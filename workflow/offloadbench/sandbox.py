"""A disposable copy of the workflow, for end-to-end tests and the benchmarks of the method."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def copy_workflow(dest: Path, root: Path = ROOT) -> Path:
    """Copy what a run needs (Snakefile, config, workflow, the example kernels, environment.yml) into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "environment.yml"):
        shutil.copy(root / name, dest / name)
    for folder in ("config", "workflow", ".test", "examples"):
        shutil.copytree(root / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    return dest


def interpreter_path(extra: str | None = None) -> str:
    """PATH with this interpreter's folder first, as an activated environment has it: the
    rules run `python` from PATH."""
    parts = [extra] if extra else []
    return os.pathsep.join([*parts, str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def snakemake(workdir: Path, *args: str, config: dict | None = None, timeout: float = 1800,
              env: dict | None = None, cores: str | None = "1") -> subprocess.CompletedProcess:
    """Run this interpreter's snakemake in `workdir`, with `config` written to test.yaml;
    `cores=None` leaves the cores to a profile (on a cluster, --cores caps every job)."""
    # Targets and flags first: --configfile takes every word after it as a file.
    cmd = [sys.executable, "-m", "snakemake", *(["--cores", cores] if cores else []), *args]
    if config is not None:
        (workdir / "test.yaml").write_text(yaml.safe_dump(config))
        cmd += ["--configfile", "test.yaml"]
    environment = {**os.environ, "PATH": interpreter_path(), **(env or {})}
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout,
                          env=environment, check=False)
