"""A lent GPU host has pytest plugins of its own (xdist, cov, timeout, benchmark, mock). Where
plugins load by themselves, one that does not fit the pytest the check runs stops collection
before any GPU test runs; `make gpu-check` keeps them from loading (tools/gpu-check.sh)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def foreign_plugin(folder: Path) -> Path:
    """An installed package that registers a pytest plugin which fails to import."""
    info = folder / "foreign_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (folder / "foreign_plugin.py").write_text('raise ImportError("a plugin built for another pytest")\n')
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: foreign-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nforeign = foreign_plugin\n")
    return folder


def collect(tmp_path: Path, autoload: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(foreign_plugin(tmp_path / "site"))}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_hosts_plugin_that_does_not_fit_stops_pytest_where_plugins_autoload(tmp_path):
    done = collect(tmp_path, autoload=True)
    assert done.returncode != 0 and "a plugin built for another pytest" in done.stdout + done.stderr


def test_the_gpu_check_keeps_the_hosts_plugins_from_loading(tmp_path):
    done = collect(tmp_path, autoload=False)
    assert done.returncode == 0, done.stdout + done.stderr
    script = (ROOT / "tools" / "gpu-check.sh").read_text()
    exported = [line for line in script.splitlines() if line.startswith("export ")]
    assert any("PYTEST_DISABLE_PLUGIN_AUTOLOAD=1" in line for line in exported)
    assert any("TORCHINDUCTOR_COMPILE_THREADS=1" in line for line in exported)
