"""The wheels `make gpu-check` carries to a lent GPU host, which has no network: what the check
needs there and the host lacks, for the host's Python.

A lent host has Python 3.12 with numpy, pandas, matplotlib, seaborn, torch (and triton),
nvidia-ml-py, JAX, CuPy, and pytest with its plugins (xdist, cov, timeout, benchmark, mock) and
hypothesis; so also what those need (HOST_HAS). It lacks snakemake. A call to it carries at
most 64 MiB of files, so the folder is held under LIMIT_MIB: this prints each wheel's size and
the total, and fails above it. The check runs with the host's own versions of what it has (its
verdict prints them); pytest is the host's, its plugins kept from loading (tools/gpu-check.sh).

    python tools/gpu-wheels.py                  # .whl/ for Python 3.12
    python tools/gpu-wheels.py --python 3.13 --out elsewhere
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_MIB = 60
# What the lent host has (the device tool's page), and what those packages need.
HOST_HAS = frozenset({
    "numpy", "pandas", "matplotlib", "seaborn", "torch", "triton", "nvidia-ml-py", "jax", "jaxlib", "cupy",
    "scipy",  # JAX's
    "pytest", "pytest-xdist", "pytest-cov", "pytest-timeout", "pytest-benchmark", "pytest-mock", "hypothesis",
    # pandas, matplotlib
    "python-dateutil", "six", "pytz", "tzdata", "contourpy", "cycler", "fonttools", "kiwisolver", "pillow",
    "pyparsing", "packaging",
    # torch
    "filelock", "typing-extensions", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "fsspec", "setuptools",
    # pytest, hypothesis
    "iniconfig", "pluggy", "pygments", "attrs", "sortedcontainers",
})
# The project's own runtime pins the check imports beside snakemake (requirements.txt).
PINS = ("threadpoolctl", "psutil", "pyyaml", "jsonschema", "markdown", "array-api-compat")
# ... and those whose own dependencies the host lacks too (inflect: typeguard, more-itertools)
PINS_WITH_DEPENDENCIES = ("inflect",)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")


def pinned(name: str, path: Path = ROOT / "requirements.txt") -> str:
    """`name==version` as requirements.txt pins it."""
    for line in path.read_text().splitlines():
        if re.match(rf"^{re.escape(name)}==", line, re.IGNORECASE):
            return line.strip()
    raise SystemExit(f"error: {name} is not pinned in {path.name}")


def project(wheel: Path) -> str:
    """A wheel's project name, normalised ("PyYAML-6.0.3-..." -> "pyyaml")."""
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def download(out: Path, python: str) -> None:
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    common = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp", *platforms, "-d", str(out),
              "--quiet", "--disable-pip-version-check"]
    # snakemake needs connection_pool, which PyPI has as a source package only: built here, pure Python
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
                    "-w", str(out), "connection_pool==0.0.3"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "download", *common, "--find-links", str(out), pinned("snakemake")],
                   check=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *common, *map(pinned, PINS)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "download", *common, *map(pinned, PINS_WITH_DEPENDENCIES)],
                   check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="3.12", help="the host's Python version")
    parser.add_argument("--out", default=str(ROOT / ".whl"), help="the folder of wheels (made afresh)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    download(out, args.python)
    for wheel in out.glob("*.whl"):
        if project(wheel) in HOST_HAS:
            wheel.unlink()
    wheels = sorted(out.glob("*.whl"), key=lambda w: -w.stat().st_size)
    total = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels for Python {args.python} in {out}, {total / 2**20:.1f} MiB; the largest: "
          + ", ".join(f"{w.name.split('-')[0]} {w.stat().st_size / 2**20:.1f} MiB" for w in wheels[:5]))
    if total > LIMIT_MIB * 2**20:
        print(f"error: the wheels come to {total / 2**20:.1f} MiB, more than the {LIMIT_MIB} MiB a call to the GPU "
              "host can carry beside the project", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
