"""The measurement job's supervisor: every way a child can end leaves the right record."""

import faulthandler
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from offloadbench import job
from offloadbench.config import validate
from offloadbench.records import load_record

SETTINGS = {**validate({})["measure"], "target_rel_ci": 0.05, "budget_s": 0.2, "warmup_budget_s": 0.1,
            "min_sampling_s": 0.01, "timeout_s": 30, "check_rows": 8}

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the supervisor forks (POSIX only)")


def args(tmp_path, cell="numpy-cpu-float32-n32-t1", **overrides):
    settings = {**SETTINGS, **overrides}
    return ["--op", "matmul", "--cell", cell, "--machine", "m", "--settings", json.dumps(settings),
            "--out", str(tmp_path / "raw" / f"{cell}.json")]


@pytest.fixture(autouse=True)
def private_lock(tmp_path, monkeypatch):
    monkeypatch.setenv(job.LOCK_ENV, str(tmp_path / "test.lock"))


def test_a_real_cell_writes_an_ok_record(tmp_path):
    assert job.run(args(tmp_path)) == 0
    record = load_record(tmp_path / "raw" / "numpy-cpu-float32-n32-t1.json")
    assert record["status"] == "ok"
    assert record["threads"]["effective"] == 1
    assert record["import_s"] > 0 and record["lock_wait_s"] >= 0


def test_a_hanging_cell_is_killed_and_recorded_as_timeout(tmp_path, monkeypatch):
    def hang(a, cell, settings, extra, report):
        report("sampling")
        time.sleep(60)

    monkeypatch.setattr(job, "measure_in_child", hang)
    start = time.monotonic()
    assert job.run(args(tmp_path, timeout_s=0.5)) == 0
    assert time.monotonic() - start < 10
    record = load_record(tmp_path / "raw" / "numpy-cpu-float32-n32-t1.json")
    assert record["status"] == "timeout"
    assert record["reason"] == "exceeded the cell time limit of 0.5 s during sampling"


@pytest.mark.parametrize("sig, status, words", [(signal.SIGSEGV, "error", "SIGSEGV"), (signal.SIGKILL, "oom", "out-of-memory")])
def test_a_dying_child_still_leaves_a_record(tmp_path, monkeypatch, sig, status, words):
    def die(a, cell, settings, extra, report):
        faulthandler.disable()  # pytest's crash dump would only add noise
        report("compute")
        os.kill(os.getpid(), sig)

    monkeypatch.setattr(job, "measure_in_child", die)
    assert job.run(args(tmp_path)) == 0
    record = load_record(tmp_path / "raw" / "numpy-cpu-float32-n32-t1.json")
    assert record["status"] == status
    assert words in record["reason"] and "during compute" in record["reason"]


def test_a_foreign_machine_is_refused_without_writing(tmp_path, capfd):
    env = tmp_path / "environment.json"
    env.write_text(json.dumps({"fingerprint": {"cpu_model": "Some Other CPU", "logical_cores": 999}}))
    code = job.run(args(tmp_path) + ["--environment", str(env)])
    assert code == job.EXIT_REFUSED
    assert not (tmp_path / "raw" / "numpy-cpu-float32-n32-t1.json").exists()
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "choose a new `machine:` label" in err[0]


def test_bad_cell_names_are_refused_in_one_line(tmp_path, capsys):
    assert job.run(args(tmp_path, cell="numpy-cpu-float32-nBIG-t1")) == job.EXIT_REFUSED
    assert "not a cell name" in capsys.readouterr().err


def test_measurement_jobs_never_overlap(tmp_path):
    """Two jobs started together: the second waits for the host lock."""
    env = {**os.environ, "PYTHONPATH": "workflow"}
    script = "workflow/scripts/measure_cell.py"
    env[job.LOCK_ENV] = str(tmp_path / "overlap.lock")
    procs = [
        subprocess.Popen([sys.executable, script, *args(tmp_path, cell=f"numpy-cpu-float32-n{n}-t1")], env=env)
        for n in (32, 48)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    records = [load_record(tmp_path / "raw" / f"numpy-cpu-float32-n{n}-t1.json") for n in (32, 48)]
    spans = sorted((r["started_at"], r["finished_at"]) for r in records)
    assert spans[0][1] <= spans[1][0], "the two measurements overlapped"
    assert max(r["lock_wait_s"] for r in records) > 0


def test_a_bug_in_the_child_is_an_error_record_with_its_traceback_in_the_log(tmp_path, monkeypatch, capfd):
    def bug(a, cell, settings, extra, report):
        raise KeyError("a missing setting")

    monkeypatch.setattr(job, "measure_in_child", bug)
    assert job.run(args(tmp_path)) == 0
    record = load_record(tmp_path / "raw" / "numpy-cpu-float32-n32-t1.json")
    assert record["status"] == "error" and "exited with status 1" in record["reason"]
    err = capfd.readouterr().err
    assert "Traceback" in err and "a missing setting" in err


def test_the_lock_is_one_per_host_whatever_tmpdir_a_job_gets(monkeypatch, tmp_path):
    import tempfile
    from pathlib import Path

    monkeypatch.delenv(job.LOCK_ENV, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert job.lock_path() == Path("/tmp") / job.LOCK_NAME


def test_with_a_log_the_user_sees_one_line_and_the_log_keeps_the_details(tmp_path, monkeypatch, capfd):
    def bug(a, cell, settings, extra, report):
        raise KeyError("a missing setting")

    monkeypatch.setattr(job, "measure_in_child", bug)
    log = tmp_path / "cell.log"
    assert job.run(args(tmp_path) + ["--log", str(log)]) == 0
    terminal = capfd.readouterr().err.strip().splitlines()
    assert terminal == ["cell matmul numpy/cpu float32 n=32 t=1: error: the measuring process exited with status 1 (during starting)"]
    details = log.read_text()
    assert "Traceback" in details and "a missing setting" in details and terminal[0] in details
