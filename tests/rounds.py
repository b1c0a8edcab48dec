"""The round job run for real, as Snakemake runs it, in a folder of its own: the settings and
grid of the round tests, faults a test injects into its workers (TEST_FAULTS), and the calls
that start a round and wait for it. Shared by the tests of rounds, hostile kernels, user
kernels and the stand-in GPU."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from offloadbench.config import validate
from offloadbench.jobs.lock import LOCK_ENV
from offloadbench.machine import fingerprint
from offloadbench.measure.provenance import cpu_model
from offloadbench.run_settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {**validate({})["measure"], "target_rel_ci": 0.05, "budget_s": 0.05, "warmup_budget_s": 0.02,
            "min_sampling_s": 0.01, "timeout_s": 30, "check_rows": 8}
GRID = {"ops": ["matmul"], "libraries": ["numpy"], "devices": ["cpu"], "dtypes": ["float32"], "sizes": [16, 24, 32], "threads": [1]}
SITECUSTOMIZE = '''
import os, signal, time
faults = dict(item.split("=") for item in os.environ.get("TEST_FAULTS", "").split(";") if item)
if faults:
    from offloadbench.measure import cell as _cell
    _original = _cell.CellRun.turn
    def turn(self, *args, **kwargs):
        action = faults.get(self.cell.key)
        if action == "hang":
            time.sleep(600)
        if action in ("SIGSEGV", "SIGKILL"):
            os.kill(os.getpid(), getattr(signal, action))
        if action == "exit":
            os._exit(3)
        return _original(self, *args, **kwargs)
    _cell.CellRun.turn = turn
if faults.get("forks") == "no":  # cells measured in the worker itself, as on a GPU
    from offloadbench.jobs import worker as _worker
    _worker.forks_cells = lambda device: False
if faults.get("worker") == "hang":  # a worker that starts slower than the cell time limit
    from offloadbench.jobs import worker as _worker
    _start = _worker.Worker.start
    def start(self):
        time.sleep(600)
        return _start(self)
    _worker.Worker.start = start
'''


def make_box(folder: Path) -> Path:
    """A machine folder with an environment.json of this host, and a private lock."""
    (folder / "faults").mkdir()
    (folder / "faults" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {"fingerprint": fingerprint(cpu_model(), os.cpu_count()),
           "devices": {"cpu": None, "cuda": "cuda unavailable: none here", "mps": "mps unavailable: none here"}}
    (folder / "environment.json").write_text(json.dumps(env))
    return folder


def settings_file(folder: Path, measure: dict | None = None, compile_section: dict | None = None) -> Path:
    """The run's settings file of these measure and compile sections (the round tests' by
    default), as the settings rule writes it: one file per content, so rounds side by side
    with other settings never share one."""
    run = RunSettings.from_sections(measure or SETTINGS, compile_section or validate({})["compile"])
    digest = hashlib.sha256(json.dumps(run.as_json(), sort_keys=True).encode()).hexdigest()[:12]
    path = folder / f"settings-{digest}.json"
    if not path.exists():
        run.write(path)
    return path


def start_round(box, round_index=1, grid=GRID, settings=None, faults="", raw=None, lock=None, kernels=(), cwd=None):
    path = os.pathsep.join(filter(None, [str(box / "faults"), str(ROOT / "workflow"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "TEST_FAULTS": faults,
           LOCK_ENV: str(lock or box / "test.lock")}
    cmd = [sys.executable, "-m", "offloadbench.jobs.round", "--round", str(round_index), "--processes", "2",
           "--machine", "box", "--grid", json.dumps(grid), "--settings", str(settings_file(box, settings)),
           "--environment", str(box / "environment.json"), "--raw", str(raw or box / "raw"),
           "--kernels", json.dumps(list(kernels))]
    return subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=cwd)


def run_round(box, **kwargs):
    proc = start_round(box, **kwargs)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err
