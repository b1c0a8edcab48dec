import json
import os

import pytest

from offloadbench.aggregate import load_records
from offloadbench.records import MalformedRecord, load_record, write_json_atomic


def write(path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def test_atomic_write_leaves_only_the_final_file(tmp_path, record_factory):
    target = tmp_path / "raw" / "matmul" / "numpy-cpu-float32-n256-t1.json"
    write_json_atomic(target, record_factory())
    assert os.listdir(target.parent) == [target.name]
    assert load_record(target)["status"] == "ok"
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # readable like any other output


def test_non_finite_numbers_are_stored_as_null(tmp_path, record_factory):
    record = record_factory()
    record["check"]["rel_err"] = float("inf")
    target = tmp_path / "r.json"
    write_json_atomic(target, record)
    assert json.loads(target.read_text())["check"]["rel_err"] is None


def test_truncated_json_is_rejected_by_name(tmp_path):
    target = tmp_path / "matmul" / "numpy-cpu-float32-n256-t1.json"
    target.parent.mkdir()
    target.write_text('{"schema_version": 1, "cell": {')
    with pytest.raises(MalformedRecord, match=r"numpy-cpu-float32-n256-t1.json: not valid JSON"):
        load_record(target)


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda r: r.pop("status"), "'status' is a required property"),
        (lambda r: r.update(status="great"), "at status"),
        (lambda r: r.update(samples_s=[0.1, -1.0]), "at samples_s.1"),
        (lambda r: r.update(samples_s=[]), "status ok but no samples"),
        (lambda r: r["cell"].update(threads="lots"), "at cell.threads"),
    ],
)
def test_schema_violations_name_the_file_and_the_field(tmp_path, record_factory, mutate, words):
    record = record_factory()
    mutate(record)
    target = write(tmp_path / "matmul" / "numpy-cpu-float32-n256-t1.json", record)
    with pytest.raises(MalformedRecord) as error:
        load_record(target)
    assert str(target) in str(error.value) and words in str(error.value)


def test_a_record_under_the_wrong_name_is_rejected(tmp_path, record_factory):
    target = write(tmp_path / "matmul" / "numpy-cpu-float32-n512-t1.json", record_factory(size=256))
    with pytest.raises(MalformedRecord, match="not for this file name"):
        load_records([target])


def test_records_from_other_hardware_are_rejected(tmp_path, record_factory, environment_json):
    record = record_factory()
    record["provenance"]["fingerprint"]["cpu_model"] = "Another CPU"
    target = write(tmp_path / "matmul" / "numpy-cpu-float32-n256-t1.json", record)
    with pytest.raises(MalformedRecord, match="results of two machines are mixed"):
        load_records([target], environment_json)
