"""environment.yml and the pip requirements must name the same packages and versions."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONDA_TO_PIP = {"pytorch": "torch", "snakemake-minimal": "snakemake", "matplotlib-base": "matplotlib"}
CONDA_ONLY = {"python", "pip"}


def pip_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            pins.update(pip_pins(path.parent / line[3:].strip()))
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        assert match, f"{path.name}: '{line}' is not pinned with =="
        pins[match.group(1).lower()] = match.group(2)
    return pins


def conda_pins(path: Path) -> dict[str, str]:
    env = yaml.safe_load(path.read_text())
    pins = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep.get("pip", []):
                if line.startswith("-"):
                    continue
                name, version = line.split("==")
                pins[name.lower()] = version
            continue
        name, _, version = dep.partition("=")
        name = CONDA_TO_PIP.get(name.lower(), name.lower())
        if name in CONDA_ONLY:
            continue
        assert version, f"{path.name}: {dep} has no version"
        pins[name] = version
    return pins


def extra_files() -> list[tuple[Path, Path]]:
    """(pip requirements, conda environment) of each extra library (libraries/): JAX's, CuPy's."""
    from offloadbench import libraries

    named = sorted({libraries.get(name).requirements for name in libraries.NAMES} - {""})
    return [(ROOT / name, ROOT / name.replace("requirements-", "environment-").replace(".txt", ".yml"))
            for name in named]


def runs_on_the_cpu(requirements: Path) -> bool:
    """Whether the extra's library runs here, so that the tests measure it for real (JAX);
    a GPU-only one (CuPy) is tested through the stand-in GPU's own."""
    from offloadbench import libraries

    return any(libraries.get(name).requirements == requirements.name and libraries.get(name).runs_on("cpu")
               for name in libraries.NAMES)


def test_conda_and_pip_agree():
    extras = {name for requirements, _ in extra_files() for name in pip_pins(requirements)}
    development = {name: version for name, version in pip_pins(ROOT / "requirements-dev.txt").items()
                   if name not in extras}
    assert conda_pins(ROOT / "environment.yml") == development  # the conda files have no extras


@pytest.mark.parametrize("files", extra_files(), ids=lambda files: files[0].name)
def test_each_extra_pins_the_same_versions_for_pip_and_conda_and_the_tests_have_it(files):
    requirements, environment = files
    assert environment.is_file(), f"{requirements.name} has no {environment.name}"
    assert conda_pins(environment) == pip_pins(requirements)
    development = pip_pins(ROOT / "requirements-dev.txt")
    tested = {name: development.get(name) for name in pip_pins(requirements)}
    assert tested == (pip_pins(requirements) if runs_on_the_cpu(requirements) else dict.fromkeys(tested))
    assert not set(pip_pins(requirements)) & set(conda_pins(ROOT / "environment.yml"))


@pytest.mark.parametrize("rule_env", sorted((ROOT / "workflow" / "envs").glob("*.yaml")), ids=lambda p: p.name)
def test_each_rule_environment_agrees_with_the_development_environment(rule_env):
    mine, everything = conda_pins(rule_env), conda_pins(ROOT / "environment.yml")
    assert mine, f"{rule_env.name} pins nothing"
    assert {name: everything.get(name) for name in mine} == mine


def test_the_measure_environment_has_what_the_measuring_code_imports():
    pins = conda_pins(ROOT / "workflow" / "envs" / "measure.yaml")
    assert {"numpy", "torch", "threadpoolctl", "nvidia-ml-py"} <= set(pins)
    assert "pandas" not in pins and "seaborn" not in pins


def test_torch_is_pinned_for_a_fast_cpu_install():
    assert pip_pins(ROOT / "requirements.txt")["torch"] == "2.13.0"


def test_python_version_matches_snakemake_9():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    major, minor = map(int, python.split("=")[1].split(".")[:2])
    assert (major, minor) >= (3, 11)


def test_the_pinned_pytest_and_xdist_keep_a_group_on_one_worker(tmp_path):
    """make test runs the tiny pipeline once, in the worker that runs every test of its
    group; pytest 9.2 with xdist 3.8 spread a group over the workers, and each ran it."""
    import subprocess
    import sys

    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_grouped.py").write_text(
        "import os, pytest\npytestmark = pytest.mark.xdist_group('one')\n" + "".join(
            f"def test_{k}():\n    open('seen', 'a').write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
            for k in range(4)))
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-q", "test_grouped.py"], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    workers = (tmp_path / "seen").read_text().split()
    assert len(workers) == 4 and len(set(workers)) == 1, workers
