"""The per-device jobs (roofs, copy sweep) write one valid record per device, and say what they skipped."""

import json

import pytest
from offloadbench.jobs import roofs, transfer
from offloadbench.jobs.lock import LOCK_ENV
from offloadbench.measure.threads import thread_env
from offloadbench.records import ROOFS_SCHEMA, TRANSFER_SCHEMA, read_json, validate_record

ABSENT = "no CUDA device is visible"


@pytest.fixture
def no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_ENV, str(tmp_path / "lock"))
    for key in thread_env(1):  # the jobs set the thread counts in os.environ; undone after the test
        monkeypatch.delenv(key, raising=False)
    environment = tmp_path / "environment.json"
    environment.write_text(json.dumps({"devices": {"cuda": ABSENT}}))
    return environment


@pytest.mark.parametrize(
    "job, kind, schema, settings, extra",
    [
        (transfer, "transfer", TRANSFER_SCHEMA,
         {"sizes": ["4KiB", "1MiB"], "memory": ["pageable", "pinned"], "target_rel_ci": 0.02, "budget_s": 0.1}, []),
        (roofs, "roofs", ROOFS_SCHEMA,
         {"cpu_triad_size": "1MiB", "cpu_matmul_n": 64, "gpu_triad_size": "1MiB", "gpu_matmul_n": 64,
          "budget_s": 0.1},
         ["--grid", json.dumps({"libraries": ["numpy", "torch"], "dtypes": ["float32"]})]),
    ],
)
def test_an_absent_gpu_gives_a_valid_record_of_skipped_points(job, kind, schema, settings, extra, no_gpu, tmp_path,
                                                            capsys):
    out = tmp_path / "raw" / kind
    status = job.main(["--devices", "cuda", "--machine", "laptop", "--settings", json.dumps(settings),
                       "--environment", str(no_gpu), "--out-dir", str(out), *extra])
    assert status == 0
    record = validate_record(read_json(out / "cuda.json"), "cuda", schema)
    assert record["kind"] == kind and record["machine"] == "laptop" and record["device"] == "cuda"
    assert record["device_name"] is None and record["settings"] == settings
    assert record["points"] and {p["status"] for p in record["points"]} == {"skipped"}
    assert {p["reason"] for p in record["points"]} == {ABSENT}
    assert record["finished_at"] >= record["started_at"] and record["lock_wait_s"] >= 0
    assert capsys.readouterr().err.strip() == f"{kind} cuda: skipped: {ABSENT}"
