"""The wheels `make gpu-check` carries to a lent GPU host fit what a call to it can carry: built
from the registry (`make test-bench` runs this; it downloads about 30 MB), for the host's
Python, without what the host has, under 60 MiB."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.bench


def test_the_carried_wheels_fit_a_call_to_the_gpu_host(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu-wheels.py"), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    wheels = list(tmp_path.glob("*.whl"))
    names = {wheel.name.split("-")[0].lower() for wheel in wheels}
    assert "snakemake" in names and "pulp" in names  # what the host lacks, snakemake's solver included
    assert {"inflect", "typeguard"} <= names  # the LaTeX rule's, with what it needs
    assert not names & {"pandas", "matplotlib", "numpy", "torch", "pytest"}  # what the host has stays home
    assert all("cp312" in w.name or "py3" in w.name or "abi3" in w.name for w in wheels)  # the host's Python
    assert sum(w.stat().st_size for w in wheels) <= 60 * 2**20
