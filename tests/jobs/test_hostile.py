"""A user's kernel harms only its own cell: each harm of tests/kernels/hostile.py through the
real round job, with the catalogue's sum_rows measured after it by the same worker. Each
kernel's cell must end as an error (or a timeout) with one line saying why, every other
cell must be measured and recorded where it belongs with its true thread count, nothing
may print a traceback, and a rerun completes."""

import json
from pathlib import Path

import pytest
from offloadbench.kernels import KernelError, read_kernel_file, read_kernel_files
from offloadbench.records import load_record, read_json
from offloadbench.records.store import MalformedRecord, load_judging
from rounds import SETTINGS, make_box, run_round

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = str(ROOT / "tests" / "kernels" / "hostile.py")
GRID = {"libraries": ["numpy"], "devices": ["cpu"], "dtypes": ["float32"], "sizes": [64], "threads": [1]}
# kernel -> (status, words its reason holds)
HARMS = {
    "h_chdir": ("error", "changed the process: the working directory"),
    "h_fds": ("error", "its kernel wrote to the measuring channel"),
    "h_stdin": ("error", "the command channel"),
    "h_forge": ("error", "its kernel wrote to the measuring channel"),
    "h_pools": ("error", "pool's threads: 1 → 2"),
    "h_seterr": ("error", "NumPy's error state"),
    "h_environ": ("error", "OMP_NUM_THREADS: 1 → 8"),
    "h_thread": ("error", "1 thread left running"),
    "h_exit": ("error", "the kernel called sys.exit(0)"),
    "h_interrupt": ("error", "the kernel raised KeyboardInterrupt"),
    "h_parent": ("error", "killed by SIGKILL"),
    "h_none": ("error", "kernel h_none returned nothing and changed none of its arguments, so there is nothing to check (at hostile.py:"),
}
# the catalogue op comes after every kernel, in the same worker (its groups sort by name)
OPS = [*HARMS, "h_print", "sum_rows"]


def stem(library="numpy"):
    return f"{library}-cpu-float32-n64-t1"


@pytest.fixture(scope="module")
def hostile_round(tmp_path_factory):
    box = make_box(tmp_path_factory.mktemp("hostile"))
    # a relative results folder, as a run has: a kernel's os.chdir must not move a record
    code, err = run_round(box, grid={**GRID, "ops": OPS}, kernels=[HOSTILE], raw="raw", cwd=box,
                          settings={**SETTINGS, "timeout_s": 60})
    return box, code, err


def test_the_round_goes_on_past_every_harm_without_a_traceback(hostile_round):
    box, code, err = hostile_round
    assert code == 0, err[-3000:]
    assert "Traceback" not in err
    manifest = read_json(box / "raw" / "rounds" / "round-1.json")
    assert manifest["statuses"] == {"error": len(HARMS), "ok": 2}


@pytest.mark.parametrize("op", list(HARMS))
def test_a_harmful_kernel_ends_its_own_cell_in_one_line(hostile_round, op):
    box, _, err = hostile_round
    status, words = HARMS[op]
    record = load_record(box / "raw" / op / stem() / "p1.json")
    assert record.status == status and words in record.reason, record.reason
    said = [line for line in err.splitlines() if f"cell {op} " in line and status in line]
    assert len(said) == 1 and words in said[0]


def test_the_catalogue_op_after_them_is_measured_as_labelled(hostile_round):
    box, _, _ = hostile_round
    record = load_record(box / "raw" / "sum_rows" / stem() / "p1.json")
    assert record.ok and record.threads_effective == 1
    assert read_json(record.source)["process_state"]["changed"] == []
    assert not Path("/raw/sum_rows").exists()  # nothing followed the kernel that moved to /


def test_a_kernel_that_prints_a_lot_is_capped_in_the_log(hostile_round):
    box, _, err = hostile_round
    assert load_record(box / "raw" / "h_print" / stem() / "p1.json").ok
    assert "bytes of the output of cell h_print" in err and "dropped" in err
    assert err.count("x" * 1000) > 0 and len(err) < 200 * 1024 + 20_000  # the first and last 64 KiB, and lines


def test_a_rerun_after_the_harms_completes_without_measuring_again(hostile_round):
    box, _, _ = hostile_round
    code, err = run_round(box, grid={**GRID, "ops": OPS}, kernels=[HOSTILE], raw="raw", cwd=box,
                          settings={**SETTINGS, "timeout_s": 60})
    assert code == 0 and "Traceback" not in err and "cells in" not in err


def test_a_kernel_that_changes_torchs_threads_is_named_and_torchs_next_cell_keeps_one(tmp_path):
    box = make_box(tmp_path)
    code, err = run_round(box, grid={**GRID, "libraries": ["torch"], "ops": ["h_torch_threads", "sum_rows"]},
                          kernels=[HOSTILE])
    assert code == 0 and "Traceback" not in err, err[-3000:]
    harmed = load_record(box / "raw" / "h_torch_threads" / stem("torch") / "p1.json")
    assert harmed.status == "error" and "torch's thread count: 1 → 2" in harmed.reason
    after = load_record(box / "raw" / "sum_rows" / stem("torch") / "p1.json")
    assert after.ok and after.threads_effective == 1


def test_a_worker_that_measures_its_cells_itself_restores_the_state_and_is_replaced_after_a_thread(tmp_path):
    """As a GPU worker does (no fork per cell): what a kernel changed is put back before the
    next cell, and a thread it left running sends the next cells to a fresh worker."""
    box = make_box(tmp_path)
    ops = ["h_chdir", "h_environ", "h_pools", "h_print", "h_seterr", "h_thread", "sum_rows"]
    code, err = run_round(box, grid={**GRID, "ops": ops}, kernels=[HOSTILE], raw="raw", cwd=box, faults="forks=no",
                          settings={**SETTINGS, "timeout_s": 60})
    assert code == 0 and "Traceback" not in err, err[-3000:]
    for op in ("h_chdir", "h_environ", "h_pools", "h_seterr", "h_thread"):
        record = load_record(box / "raw" / op / stem() / "p1.json")
        assert record.status == "error" and HARMS[op][1] in record.reason, record.reason
    after = load_record(box / "raw" / "sum_rows" / stem() / "p1.json")
    assert after.ok and after.threads_effective == 1
    assert read_json(after.source)["process_state"]["changed"] == []
    manifest = read_json(box / "raw" / "rounds" / "round-1.json")
    assert manifest["workers"]["numpy-cpu-t1"]["processes"][0]["forks_cells"] is False
    assert len(manifest["workers"]["numpy-cpu-t1"]["processes"]) == 2  # replaced after h_thread only
    assert "bytes of the output of cell h_print" in err and len(err) < 200 * 1024 + 20_000


SLOW = '''
import time
from offloadbench import kernel

@kernel
def h_slow(xp, a):
    time.sleep(0.4)
    return a * 2
'''


def test_the_time_limit_is_the_cells_over_all_its_commands(tmp_path):
    box = make_box(tmp_path)
    (tmp_path / "slow.py").write_text(SLOW)
    settings = {**SETTINGS, "timeout_s": 2.5, "budget_s": 10.0, "min_cycles": 8}
    code, err = run_round(box, grid={**GRID, "ops": ["h_slow", "sum_rows"]}, kernels=[str(tmp_path / "slow.py")],
                          settings=settings)
    assert code == 0 and "Traceback" not in err, err[-3000:]
    slow = load_record(box / "raw" / "h_slow" / stem() / "p1.json")
    assert slow.status == "timeout" and "exceeded the cell time limit of 2.5 s" in slow.reason
    assert load_record(box / "raw" / "sum_rows" / stem() / "p1.json").ok


def test_a_worker_that_does_not_start_in_time_leaves_timeout_records(tmp_path):
    box = make_box(tmp_path)
    code, err = run_round(box, grid={**GRID, "ops": ["sum_rows"], "sizes": [32, 64]},
                          settings={**SETTINGS, "timeout_s": 2}, faults="worker=hang")
    assert code == 0 and "Traceback" not in err, err[-3000:]
    for size in (32, 64):
        record = load_record(box / "raw" / "sum_rows" / f"numpy-cpu-float32-n{size}-t1" / "p1.json")
        assert record.status == "timeout" and "did not start within the cell time limit of 2 s" in record.reason


@pytest.mark.parametrize("name", ["roofs", "rounds", "transfer", "figures", "tables", "logs", "raw"])
def test_a_kernel_named_like_a_results_folder_is_refused_in_one_line(tmp_path, name):
    path = tmp_path / "k.py"
    path.write_text(f"from offloadbench import kernel\n\n@kernel\ndef {name}(xp, a):\n    return a\n")
    with pytest.raises(KernelError, match=f"kernel '{name}' has the name of a results folder") as error:
        read_kernel_files([str(path)])
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("source", [b"x = " + b"(" * 200_000 + b")" * 200_000, b"x = 1\0\n",
                                    b"def f(:\n"])
def test_a_kernels_file_python_cannot_parse_is_one_line_naming_it(tmp_path, source):
    path = tmp_path / "k.py"
    path.write_bytes(source)
    with pytest.raises(KernelError) as error:
        read_kernel_file(str(path), "config key kernels[0]")
    assert str(path) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("policy, words", [({"min_effect": True, "confidence": 0.95}, "min_effect"),
                                           ({"min_effect": 0.05, "confidence": True}, "confidence"),
                                           ({"min_effect": 0.05, "confidence": 0.999999999999}, "confidence"),
                                           ({"min_effect": 0.05, "confidence": 0.95, "method": {"x": "1"}}, "method"),
                                           ({"min_effect": 0.05, "confidence": 0.95, "method": [1]}, "method")])
def test_a_judging_policy_of_booleans_or_unprintable_levels_is_refused(tmp_path, policy, words):
    path = tmp_path / "judging.json"
    path.write_text(json.dumps(policy))
    with pytest.raises(MalformedRecord, match=words):
        load_judging(path)
    path.write_text(json.dumps({"min_effect": 0.05, "confidence": 0.999}))
    assert load_judging(path).level == "99.9%"


@pytest.mark.parametrize("with_pidfd", [True, False])
def test_a_cells_output_is_drained_to_its_exit_code_with_or_without_pidfd_open(monkeypatch, with_pidfd):
    # Some Pythons (conda's, standalone builds) lack os.pidfd_open: the pipe alone then ends it.
    import os

    from offloadbench.jobs.output import CappedOutput

    if not with_pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    read_end, write_end = os.pipe()
    sink_read, sink_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the cell's process: a line of output, then exit 3
        os.close(read_end)
        os.write(write_end, b"a line of output\n")
        os._exit(3)
    os.close(write_end)
    assert CappedOutput("cell", sink=sink_write).drain(read_end, pid) == 3
    os.close(sink_write)
    assert os.read(sink_read, 1024) == b"a line of output\n"
    os.close(sink_read)
