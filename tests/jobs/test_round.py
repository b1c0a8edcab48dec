"""The round job: workers, supervision, failures turned into records, resumption, the lock."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from offloadbench.records import load_record, read_json
from rounds import GRID, ROOT, SETTINGS, make_box, run_round, start_round


@pytest.fixture
def box(tmp_path):
    return make_box(tmp_path)


def record(box, stem, round_index=1):
    return load_record(box / "raw" / "matmul" / stem / f"p{round_index}.json")


def test_a_round_measures_every_cell_in_fresh_processes(box):
    code, err = run_round(box, grid={**GRID, "libraries": ["numpy", "torch"], "devices": ["cpu", "cuda"]})
    assert code == 0, err
    for stem in ("numpy-cpu-float32-n16-t1", "torch-cpu-float32-n32-t1"):
        r = record(box, stem)
        assert r.ok and r.round == 1 and r.threads_effective == 1
        assert r.import_s > 0 and r.host
    skipped = record(box, "torch-cuda-float32-n16-t1")
    assert skipped.status == "skipped" and skipped.reason == "cuda unavailable: none here"
    manifest = read_json(box / "raw" / "rounds" / "round-1.json")
    assert set(manifest["workers"]) == {"numpy-cpu-t1", "torch-cpu-t1"}  # no process for the absent GPU
    assert manifest["statuses"] == {"ok": 6, "skipped": 3} and manifest["system_before"]["cores_present"]
    assert not (box / "raw" / ".partial").exists()


def test_the_cells_of_a_group_take_turns_in_one_bout_and_their_samples_pair_by_cycle(box):
    code, err = run_round(box, grid={**GRID, "libraries": ["numpy", "torch"], "sizes": [24]})
    assert code == 0, err
    numpy, torch = record(box, "numpy-cpu-float32-n24-t1"), record(box, "torch-cpu-float32-n24-t1")
    assert numpy.bout.id == torch.bout.id and numpy.bout.group == "matmul-float32-n24"
    assert numpy.bout.workers == ("numpy-cpu-t1", "torch-cpu-t1") and numpy.bout.cycles >= SETTINGS["min_cycles"]
    cycles = [turn.cycle for turn in numpy.turns]
    assert cycles == list(range(numpy.bout.cycles)) == [turn.cycle for turn in torch.turns]
    # each cycle's first turn is each cell's equally often; the other's turn comes right before or after
    firsts = [turn.position for turn in numpy.turns].count(0)
    assert abs(firsts - numpy.bout.cycles / 2) <= 1
    assert {turn.after for turn in numpy.turns[1:]} <= {"numpy-cpu-t1", "torch-cpu-t1"}
    compute = numpy.samples("compute")
    assert compute.cycles is not None and set(compute.cycles) == set(cycles) and len(compute.cycles) == len(compute.seconds)
    assert compute.faults_per_call is not None and all(f is not None and f >= 0 for f in compute.faults_per_call)
    bouts = read_json(box / "raw" / "rounds" / "round-1.json")["bouts"]
    assert [b["group"] for b in bouts] == ["matmul-float32-n24"] and bouts[0]["cells"] == 2


def test_a_hanging_cell_becomes_a_timeout_and_a_fresh_worker_takes_the_rest(box):
    code, _ = run_round(box, settings={**SETTINGS, "timeout_s": 3}, faults="matmul/numpy-cpu-float32-n16-t1=hang")
    assert code == 0
    hung = record(box, "numpy-cpu-float32-n16-t1")
    assert hung.status == "timeout" and hung.reason.startswith("exceeded the cell time limit of 3 s during")
    assert record(box, "numpy-cpu-float32-n24-t1").ok
    processes = read_json(box / "raw" / "rounds" / "round-1.json")["workers"]["numpy-cpu-t1"]["processes"]
    assert len(processes) == 2


@pytest.mark.parametrize("sig, status, words", [("SIGSEGV", "error", "SIGSEGV"), ("SIGKILL", "error", "killed by SIGKILL"),
                                              ("exit", "error", "exited with status 3")])
def test_a_dying_worker_still_leaves_a_record_and_the_round_goes_on(box, sig, status, words):
    code, err = run_round(box, faults=f"matmul/numpy-cpu-float32-n24-t1={sig}")
    assert code == 0
    dead = record(box, "numpy-cpu-float32-n24-t1")
    assert dead.status == status and words in dead.reason
    assert record(box, "numpy-cpu-float32-n32-t1").ok
    failure_lines = [line for line in err.splitlines() if "n=24" in line]
    assert len(failure_lines) == 1 and status in failure_lines[0]
    # the cell's own process died; its worker lived on and forked the next cell's
    processes = read_json(box / "raw" / "rounds" / "round-1.json")["workers"]["numpy-cpu-t1"]["processes"]
    assert len(processes) == 1


def test_each_cell_runs_in_a_fresh_process_forked_from_its_worker(box):
    code, err = run_round(box)
    assert code == 0, err
    manifest = read_json(box / "raw" / "rounds" / "round-1.json")
    (worker,) = manifest["workers"]["numpy-cpu-t1"]["processes"]
    records = [record(box, f"numpy-cpu-float32-n{n}-t1") for n in (16, 24, 32)]
    pids = {read_json(r.source)["process"]["pid"] for r in records}
    assert len(pids) == 3 and worker["pid"] not in pids and worker["forks_cells"] is True
    assert all(read_json(r.source)["own_process"] for r in records)
    # the round says where its time went, and its parts add up to its wall time
    split = manifest["split_s"]
    assert {"start", "inputs", "warm-up", "sampling", "check", "record", "other"} <= set(split)
    assert split["sampling"] > 0 and sum(split.values()) == pytest.approx(manifest["took_s"], rel=0.01)
    assert manifest["bouts"][0]["pairs"] == {} and manifest["bouts"][0]["process_s"] > 0


def test_the_check_and_the_peak_memory_are_measured_once_per_run(box):
    assert run_round(box)[0] == 0
    assert run_round(box, round_index=2)[0] == 0
    first, second = record(box, "numpy-cpu-float32-n24-t1"), record(box, "numpy-cpu-float32-n24-t1", 2)
    assert second.ok and len(second.samples("compute").seconds) >= 6
    one, two = read_json(first.source), read_json(second.source)
    assert "from_round" not in one["check"] and two["check"] == {**one["check"], "from_round": 1}
    assert two["memory"] == one["memory"] and two["model"] == one["model"]
    assert two["conversion"] == one["conversion"]


def test_a_cell_that_failed_its_check_is_not_measured_again(box):
    kernels = [str(ROOT / "tests" / "kernels" / "bad.py")]
    grid = {**GRID, "ops": ["wrong_values", "fine"], "sizes": [8]}
    assert run_round(box, grid=grid, kernels=kernels)[0] == 0
    assert run_round(box, grid=grid, kernels=kernels, round_index=2)[0] == 0
    raw = box / "raw" / "wrong_values" / "numpy-cpu-float32-n8-t1"
    first, second = load_record(raw / "p1.json"), load_record(raw / "p2.json")
    assert first.status == "error" and first.reason.startswith("wrong result: relative error")
    assert second.status == "error" and second.reason == f"{first.reason} (round 1, not measured again)"
    assert not second.samples("compute").seconds
    assert load_record(box / "raw" / "fine" / "numpy-cpu-float32-n8-t1" / "p2.json").ok
    assert read_json(box / "raw" / "rounds" / "round-2.json")["measured_now"] == 1


def test_another_machines_label_is_refused_in_one_line_without_records(box):
    env = read_json(box / "environment.json")
    env["fingerprint"]["cpu_model"] = "Some Other CPU"
    (box / "environment.json").write_text(json.dumps(env))
    code, err = run_round(box)
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "choose a new `machine:` label" in lines[0] and "Traceback" not in err
    assert not (box / "raw" / "matmul").exists()


def test_an_interrupted_round_resumes_with_only_the_missing_cells(box):
    proc = start_round(box, settings={**SETTINGS, "timeout_s": 60}, faults="matmul/numpy-cpu-float32-n32-t1=hang")
    partial = box / "raw" / ".partial" / "p1" / "matmul"
    deadline = time.monotonic() + 120
    while len(list(partial.rglob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # as when Snakemake or SLURM stops the job
    proc.wait()
    done_first = sorted(p.name for p in partial.iterdir())
    assert done_first == ["numpy-cpu-float32-n16-t1.json", "numpy-cpu-float32-n24-t1.json"]
    code, err = run_round(box)
    assert code == 0, err
    assert read_json(box / "raw" / "rounds" / "round-1.json")["measured_now"] == 1
    assert {record(box, s).status for s in ("numpy-cpu-float32-n16-t1", "numpy-cpu-float32-n24-t1",
                                            "numpy-cpu-float32-n32-t1")} == {"ok"}


def test_a_rerun_measures_nothing_unless_the_settings_changed(box):
    assert run_round(box)[0] == 0
    first = record(box, "numpy-cpu-float32-n16-t1").started_at
    assert run_round(box)[0] == 0
    assert read_json(box / "raw" / "rounds" / "round-1.json")["measured_now"] == 0
    assert record(box, "numpy-cpu-float32-n16-t1").started_at == first
    assert run_round(box, settings={**SETTINGS, "min_samples": 7})[0] == 0
    assert read_json(box / "raw" / "rounds" / "round-1.json")["measured_now"] == 3


def test_measurement_jobs_never_overlap(box):
    """Two rounds started together (two machine folders, one host): the second waits."""
    lock = box / "shared.lock"
    procs = [start_round(box, raw=box / name, lock=lock) for name in ("raw-a", "raw-b")]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    spans = []
    for name in ("raw-a", "raw-b"):
        records = [load_record(p) for p in (box / name / "matmul").rglob("p1.json")]
        spans.append((min(r.started_at for r in records), max(r.finished_at for r in records)))
    (_, a_end), (b_start, _) = sorted(spans)
    assert a_end <= b_start, "the two rounds measured at the same time"
    assert max(read_json(box / name / "rounds" / "round-1.json")["lock_wait_s"] for name in ("raw-a", "raw-b")) > 0


# Three 4 MiB arrays freed together: under glibc's adaptive thresholds the heap's top is
# trimmed after every call, so the next one maps its pages afresh.
FRESH_PAGES = """
import resource, numpy as np
def call():
    a = np.ones(2**19); b = a * 2.0; c = a + b; return float(c[0])
for _ in range(3): call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10): call()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the thresholds are glibc's")
def test_the_steady_allocator_keeps_a_calls_temporaries_on_the_heap():
    from offloadbench.measure.allocator import ADAPTIVE, STEADY, allocator_env

    def fresh_pages(mode):
        env = {**os.environ, **allocator_env(mode)}
        return float(subprocess.run([sys.executable, "-c", FRESH_PAGES], env=env, capture_output=True, text=True,
                                    check=True).stdout)

    assert allocator_env(ADAPTIVE) == {}
    assert fresh_pages(ADAPTIVE) > 1000 and fresh_pages(STEADY) < 10  # 3 × 1,024 pages per call, or none
