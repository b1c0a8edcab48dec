"""The duration estimate: monotone in size, by hand count from the measured roofs, honest about
what is left."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from offloadbench import grid
from offloadbench.catalogue import SPECS
from offloadbench.cells import Cell
from offloadbench.config import validate
from offloadbench.estimate import (
    FALLBACK,
    call_seconds,
    cell_seconds,
    estimate_run,
    remaining,
    roofs_from_records,
)
from offloadbench.layout import record_relpath
from offloadbench.run_settings import RunSettings

ROOT = Path(__file__).resolve().parents[2]
CONFIG = validate({"grid": {"ops": ["matmul"], "devices": ["cpu", "cuda"], "dtypes": ["float32"], "sizes": [256, 1024],
                            "threads": [1]}, "analysis": {"controls": 0}})
MEASURE = RunSettings.from_config(CONFIG).measure


@pytest.mark.parametrize("op", sorted(SPECS))
def test_the_estimate_grows_with_size(op):
    sizes = [64, 256, 1024, 4096]
    for device, library in (("cpu", "numpy"), ("cuda", "torch")):
        times = [cell_seconds(Cell(op, library, device, "float32", n, "1"), MEASURE, FALLBACK) for n in sizes]
        assert times == sorted(times) and times[0] < times[-1], (op, device, times)


def roofs_document(points: list[dict]) -> dict:
    """A roofs record of the cpu as the roofs job writes it, around `points`."""
    for point in points:
        point.setdefault("reason", "")
    return {"schema_version": 2, "kind": "roofs", "machine": "box", "device": "cpu", "device_name": "cpu",
            "points": points, "provenance": {"hostname": "box", "cpu_model": "Test CPU"},
            "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:01+00:00"}


def test_a_matmul_call_is_predicted_from_the_measured_roofs_by_hand_count(tmp_path):
    """Roof records as the roofs job writes them, then the prediction of one matmul call. How
    close predictions come to real runs is measured by each run's report, not asserted here."""
    n, peak, bandwidth = 384, 80.0, 12.0  # GFLOP/s and GB/s the roofs record
    points = [
        {"library": "numpy", "kind": "compute", "dtype": "float32", "status": "ok", "flops": 2.0 * 512**3,
         "samples_s": [2.0 * 512**3 / (peak * 1e9)] * 5},
        {"library": "torch", "kind": "compute", "dtype": "float32", "status": "ok", "flops": 2.0 * 512**3,
         "samples_s": [2.0 * 512**3 / (peak / 2 * 1e9)] * 5},  # the slower library is not the roof
        {"library": "numpy", "kind": "memory", "dtype": "float64", "status": "ok", "bytes": 3 * 2**24,
         "samples_s": [3 * 2**24 / (bandwidth * 1e9)] * 5},
        {"library": "torch", "kind": "compute", "dtype": "float64", "status": "skipped", "reason": "absent"},
    ]
    (tmp_path / "cpu.json").write_text(json.dumps(roofs_document(points)))
    roofs = roofs_from_records([tmp_path / "cpu.json"], cores=2)
    assert roofs.source.startswith("the roofs measured") and roofs.cpu_gbs == pytest.approx(bandwidth)
    assert roofs.cpu_gflops == {"float32": pytest.approx(peak)}
    one_thread = call_seconds(Cell("matmul", "numpy", "cpu", "float32", n, "1"), roofs)["compute"]
    # half the cores, 90% of the matmul peak, plus a call's fixed cost
    assert one_thread == pytest.approx(2.0 * n**3 / (peak / 2 * 0.9 * 1e9) + 2e-6)
    every_core = call_seconds(Cell("matmul", "numpy", "cpu", "float32", n, "all"), roofs)["compute"]
    assert every_core == pytest.approx(2.0 * n**3 / (peak * 0.9 * 1e9) + 2e-6)
    assert roofs_from_records([tmp_path / "cpu.json"], cores=2) == roofs
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "cpu.json").write_text(json.dumps(roofs_document(points[3:])))
    assert roofs_from_records([tmp_path / "none" / "cpu.json"], cores=2) is None


def test_cells_of_absent_devices_cost_nothing_and_rounds_add_up():
    with_gpu = estimate_run(CONFIG, FALLBACK, available={"cpu": True, "cuda": True})
    without = estimate_run(CONFIG, FALLBACK, available={"cpu": True})
    assert with_gpu.measure_s > without.measure_s > 0
    # a cell of an absent device starts no process: only the cpu's 4 cells of each round count
    assert without.rounds == with_gpu.rounds == CONFIG["measure"]["processes"]
    assert with_gpu.cells == 3 * 6 and without.cells == 3 * 4


def test_the_self_comparisons_are_cells_of_the_run_and_cost_a_few_percent():
    config = {**CONFIG, "analysis": {**CONFIG["analysis"], "controls": 2}}
    twice = estimate_run(config, FALLBACK, available={"cpu": True, "cuda": True})
    once = estimate_run(CONFIG, FALLBACK, available={"cpu": True, "cuda": True})
    assert twice.cells == once.cells + 2 * config["measure"]["processes"]
    assert once.measure_s < twice.measure_s


def test_only_the_records_still_missing_are_left(tmp_path):
    folder = tmp_path / "box"
    (folder).mkdir()
    (folder / "environment.json").write_text(json.dumps({"devices": {"cpu": None, "cuda": "absent", "mps": "absent"},
                                                         "usable_cores": 2}))
    full = remaining(CONFIG, folder)
    done = Cell("matmul", "numpy", "cpu", "float32", 1024, "1")
    for k in (1, 2, 3):
        path = folder / "raw" / record_relpath(done, k)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    left = remaining(CONFIG, folder)
    assert left.cells == full.cells - 3 and left.measure_s < full.measure_s
    for k in (1, 2, 3):  # a round with nothing left to measure is no round of the estimate
        for cell in grid.expand(CONFIG["grid"]):
            path = folder / "raw" / record_relpath(cell, k)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}")
    assert remaining(CONFIG, folder).rounds == 0
    assert "fallback" in left.source


def test_the_command_line_prints_the_estimate():
    out = subprocess.run([sys.executable, "-m", "offloadbench.estimate", "--configfile", str(ROOT / "config" / "config.yaml")],
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(ROOT / "workflow")}).stdout
    assert out.startswith("config: about ") and "cell-processes in" in out and "per round" in out


def test_compiled_cells_count_their_compiles_and_their_workers_the_compiler_start():
    from offloadbench import libraries
    from offloadbench.estimate import COMPILE_S, COMPILER_STARTUP_S, workers_seconds

    eager = Cell("transcendental", "numpy", "cpu", "float32", 256, "1")
    compiled = Cell("transcendental", "numpy", "cpu", "float32", 256, "1", "compiled")
    measure = MEASURE
    assert cell_seconds(compiled, measure, FALLBACK) == pytest.approx(cell_seconds(eager, measure, FALLBACK)
                                                                      + COMPILE_S["cpu"])
    # a compiled numpy worker imports torch and starts the compiler
    extra = workers_seconds([eager, compiled]) - workers_seconds([eager])
    assert extra == pytest.approx(libraries.get("torch").import_s + COMPILER_STARTUP_S["cpu"] + 0.5 + 0.1)


def test_a_user_kernel_without_models_is_estimated_as_memory_bound(tmp_path):
    kernels = tmp_path / "k.py"
    kernels.write_text("from offloadbench import kernel\n\n@kernel\ndef twice(xp, a, b):\n    return a + b\n")
    config = validate({"kernels": [str(kernels)], "grid": {"ops": ["twice"], "devices": ["cpu"], "sizes": [512, 2048],
                                                          "threads": [1], "dtypes": ["float32"]}})
    small, large = (estimate_run({**config, "grid": {**config["grid"], "sizes": [n]}}, FALLBACK) for n in (512, 2048))
    assert large.measure_s > small.measure_s > 0 and large.cells == small.cells


def test_cells_the_host_has_too_little_memory_for_are_left_out_and_extra_rounds_counted():
    config = validate({"grid": {"ops": ["matmul"], "libraries": ["numpy"], "devices": ["cpu"], "dtypes": ["float32"],
                                "sizes": [1024, 60000], "threads": ["1"]}, "analysis": {"controls": 0}})
    roomy = estimate_run(config, FALLBACK, memory_bytes=2**40)  # 60000² needs ~120 GiB with its float64 copies
    small = estimate_run({**config, "grid": {**config["grid"], "sizes": [1024]}}, FALLBACK)
    tight = estimate_run(config, FALLBACK, memory_bytes=32 * 2**30)
    assert roomy.refused == 0 and roomy.measure_s > 100 * small.measure_s
    assert tight.measure_s == pytest.approx(small.measure_s, rel=0.01)
    assert tight.refused == 1 and "1 cell left out, which need more memory" in tight.line("m")
    assert tight.cells == roomy.cells - config["measure"]["processes"]  # the refused cell starts no process
    assert tight.extra_s == pytest.approx(0.5 * tight.measure_s) and "extra rounds" in tight.line("m")
    none = estimate_run({**config, "measure": {**config["measure"], "max_processes": 3}}, FALLBACK)
    assert none.extra_s == 0


@pytest.mark.parametrize("slower", [0.6, 0.8, 1.0, 1.3, 1.6])
@pytest.mark.parametrize("seed", range(5))
def test_the_progress_line_stays_near_the_rounds_true_remaining_time(slower, seed):
    """A simulated round on a simulated clock: workers' start, then 144 cells whose true
    seconds are the estimate's times `slower`, each with its own noise, then the round's
    close. Every line printed
    (one per 20 s, at a cell's end) is within 3× of the true time left before a tenth of the
    round is done, and within 2× after."""
    from offloadbench.estimate import ROUND_CLOSE_S, remaining_s

    rng = random.Random(seed)
    workers_est, workers_true = 8.0, 8.0 * slower * rng.uniform(0.7, 1.4)
    estimated = [rng.lognormvariate(-1.5, 1.0) for _ in range(144)]
    true = [e * slower * rng.lognormvariate(0.0, 0.3) for e in estimated]
    close_true = rng.uniform(1.5, 3.0)
    total_est = workers_est + sum(estimated) + ROUND_CLOSE_S
    total_true = workers_true + sum(true) + close_true
    now, done_est, last, printed = workers_true, 0.0, 0.0, 0
    for e, t in zip(estimated[:-1], true[:-1]):
        now += t
        done_est += e
        if now - last < 20.0:
            continue
        last, printed = now, printed + 1
        said, truth = remaining_s(now, workers_est + done_est, total_est), total_true - now
        bound = 2.0 if (workers_est + done_est) / total_est >= 0.1 else 3.0
        assert truth / bound <= said <= truth * bound, (now, said, truth)
    assert printed >= 1


def test_a_kernel_that_makes_its_own_inputs_is_counted_as_a_run_measured_them(tmp_path):
    """Its inputs' sizes only running it tells: the estimate leaves its memory to the worker
    until a run measured them, then counts them (memory.csv) as they grow."""
    from offloadbench.config import kernel_infos, measured_grid
    from offloadbench.estimate import measured_inputs

    kernels = tmp_path / "fields.py"
    kernels.write_text("from offloadbench import kernel\n\n\n"
                       "@kernel(inputs=lambda n, rng: [rng.random((n, n, 64))])\n"
                       "def deep(xp, u):\n    return u * 2\n")
    config = validate({"kernels": [str(kernels)], "grid": {"ops": ["deep"], "devices": ["cpu"], "sizes": [256, 8192],
                                                          "threads": [1], "dtypes": ["float32"]}})
    assert estimate_run(config, FALLBACK, memory_bytes=64 * 2**30).refused == 0  # nothing measured: its worker decides
    (tmp_path / "memory.csv").write_text("machine,op,variant,device,dtype,largest_measured,inputs_bytes,inputs_degree\n"
                                         f"m,deep,numpy,cpu,float32,256,{256 * 256 * 64 * 4},2\n")
    inputs = measured_inputs(tmp_path)
    assert inputs["deep"](8192) == pytest.approx(8192 * 8192 * 64)
    # 8192² × 64 float32 is 16 GiB of inputs (and 32 GiB as drawn in float64): more than 64 GiB × 0.8 with its copies
    large = sum(c.size == 8192 for c in grid.expand(measured_grid(config), kernel_infos(config)))
    assert estimate_run(config, FALLBACK, memory_bytes=64 * 2**30, inputs=inputs).refused == large > 0
