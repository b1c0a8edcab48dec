import json
import os

import pytest
from offloadbench.analysis.measured import load_cells
from offloadbench.cells import Cell
from offloadbench.records import (
    ROOFS_SCHEMA,
    SCHEMA_VERSION,
    TRANSFER_SCHEMA,
    Environment,
    MalformedRecord,
    cell_record,
    load_record,
    settings_differ,
    validate_record,
    write_json_atomic,
)

V2_PATH = "matmul/numpy-cpu-float32-n256-t1/p1.json"


def write(path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def test_atomic_write_leaves_only_the_final_file(tmp_path, record_factory):
    target = tmp_path / "raw" / V2_PATH
    write_json_atomic(target, record_factory())
    assert os.listdir(target.parent) == [target.name]
    assert load_record(target).status == "ok"
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # readable like any other output


def test_non_finite_numbers_are_stored_as_null(tmp_path, record_factory):
    record = record_factory()
    record["check"]["rel_err"] = float("inf")
    target = tmp_path / "r.json"
    write_json_atomic(target, record)
    assert json.loads(target.read_text())["check"]["rel_err"] is None


def test_truncated_json_is_rejected_by_name_with_the_way_out(tmp_path):
    target = tmp_path / V2_PATH
    target.parent.mkdir(parents=True)
    target.write_text('{"schema_version": 2, "cell": {')
    with pytest.raises(MalformedRecord, match=r"p1.json: not valid JSON .*delete it and run again"):
        load_record(target)


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda r: r.pop("status"), "'status' is a required property"),
        (lambda r: r.update(status="great"), "at status"),
        (lambda r: r.update(samples_s=[0.1, -1.0]), "at samples_s.1"),
        (lambda r: r.update(samples_s=[]), "at samples_s: [] should be non-empty"),
        (lambda r: r["cell"].update(threads="lots"), "at cell.threads"),
        (lambda r: r.pop("process"), "'process' is a required property"),
    ],
)
def test_schema_violations_name_the_file_and_the_field(tmp_path, record_factory, mutate, words):
    record = record_factory()
    mutate(record)
    target = write(tmp_path / V2_PATH, record)
    with pytest.raises(MalformedRecord) as error:
        load_record(target)
    assert str(target) in str(error.value) and words in str(error.value)


def test_a_record_under_the_wrong_name_is_rejected(tmp_path, record_factory):
    target = write(tmp_path / "matmul" / "numpy-cpu-float32-n512-t1" / "p1.json", record_factory(size=256))
    with pytest.raises(MalformedRecord, match="not for this file name"):
        load_cells([target])
    target = write(tmp_path / "matmul" / "numpy-cpu-float32-n256-t1" / "p2.json", record_factory(size=256))
    with pytest.raises(MalformedRecord, match="not for this file name"):
        load_cells([target])


def test_records_from_other_hardware_are_rejected(tmp_path, record_factory, environment_json):
    record = record_factory()
    record["provenance"]["fingerprint"]["cpu_model"] = "Another CPU"
    target = write(tmp_path / V2_PATH, record)
    with pytest.raises(MalformedRecord, match="results of two machines are mixed"):
        load_cells([target], Environment.from_json(environment_json))


def test_a_single_process_record_of_the_first_format_is_read_as_process_1_of_1(tmp_path, record_factory):
    record = record_factory()
    record["schema_version"] = 1
    record.pop("process")
    target = write(tmp_path / "matmul" / "numpy-cpu-float32-n256-t1.json", record)
    (cell,) = load_cells([target])
    assert cell.records[0].round == 1 and cell.records[0].processes == 1


def test_a_record_of_the_second_format_reads_under_this_versions_names(tmp_path, record_factory):
    record = record_factory(round=2, rounds=3)
    record["schema_version"] = 2
    record["process"]["rounds"] = record["process"].pop("processes")
    record["settings"] = {"seed": 4, "budget_s": 1.0}
    target = write(tmp_path / "matmul" / "numpy-cpu-float32-n256-t1" / "p2.json", record)
    read = load_record(target)
    assert (read.round, read.processes) == (2, 3)
    assert dict(read.settings) == {"random_state": 4, "budget_s": 1.0}


def test_an_unknown_record_format_is_refused_in_one_line_naming_the_file(tmp_path, record_factory):
    record = record_factory()
    record["schema_version"] = 7
    target = write(tmp_path / V2_PATH, record)
    with pytest.raises(MalformedRecord) as error:
        load_record(target)
    message = str(error.value)
    assert str(target) in message and "version 7" in message and "\n" not in message


def test_the_builder_refuses_a_record_that_breaks_the_schema():
    cell = Cell("matmul", "numpy", "cpu", "float32", 64, "1")
    good = {"status": "ok", "reason": "", "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:01+00:00",
            "provenance": {"hostname": "h", "cpu_model": "c"}, "settings": {}, "measured": {"samples_s": [1e-3]}}
    record = cell_record(cell, "m", {"round": 1, "processes": 1}, **good)
    assert record["schema_version"] == SCHEMA_VERSION and record["cell"]["size"] == 64
    with pytest.raises(ValueError, match="breaks the record schema"):
        cell_record(cell, "m", {"round": 0, "processes": 1}, **good)
    with pytest.raises(ValueError, match=r"at samples_s: \[\] should be non-empty"):
        cell_record(cell, "m", {"round": 1, "processes": 1}, **{**good, "measured": {}})


def test_only_settings_that_change_a_measurement_make_a_record_stale():
    recorded = {"budget_s": 1.0, "processes": 3, "timeout_s": 600, "random_state": 0}
    assert settings_differ(recorded, {"budget_s": 1.0, "processes": 5, "timeout_s": 60, "random_state": 0}) == []
    assert settings_differ(recorded, {"budget_s": 2.0, "processes": 3, "random_state": 1}) == ["budget_s",
                                                                                                "random_state"]


@pytest.mark.parametrize("schema, point", [
    (TRANSFER_SCHEMA, {"direction": "h2d", "memory": "pageable", "bytes": 4096, "status": "ok", "reason": ""}),
    (ROOFS_SCHEMA, {"library": "numpy", "kind": "memory", "dtype": "float64", "status": "ok", "reason": ""}),
])
def test_a_device_record_point_that_is_ok_needs_samples(schema, point):
    kind = "transfer" if schema == TRANSFER_SCHEMA else "roofs"
    record = {"schema_version": 2, "kind": kind, "machine": "m", "device": "cuda", "points": [point],
              "provenance": {"hostname": "h", "cpu_model": "c"}, "started_at": "t", "finished_at": "t"}
    with pytest.raises(MalformedRecord, match="cuda: malformed record at points.0: 'samples_s' is a required property"):
        validate_record(record, "cuda", schema)
    validate_record({**record, "points": [{**point, "samples_s": [1e-3]}]}, "cuda", schema)
    validate_record({**record, "points": [{**point, "status": "skipped", "reason": "no GPU"}]}, "cuda", schema)


@pytest.mark.parametrize("words, kind, region, size, own", [
    ("end_to_end: drift: second half 9.0% faster than the first", "drift", "end_to_end", 0.09, False),
    ("drift: second half 12.0% slower than the first", "drift", "compute", 0.12, True),
    ("CPU clock changed +12% during sampling (cpu0)", "cpu_clock", "", 0.12, True),
    ("disturbed: other processes used 0.90 cores while it sampled", "disturbed", "", 0.0, False),
    ("h2d: CI not reached (±3.1% > ±2.0%, stopped on budget)", "not_converged", "h2d", 0.031, False),
    ("bimodal samples (two modes 50% apart, 30/50 in the faster)", "bimodal", "compute", 0.5, True),
])
def test_a_flag_kept_as_words_by_an_older_record_is_read_as_a_typed_flag(words, kind, region, size, own):
    from offloadbench.records.types import Flag

    flag = Flag.from_json(words)
    assert (flag.kind, flag.region, flag.size, flag.own_fault, flag.text) == (kind, region, pytest.approx(size), own,
                                                                               words)
