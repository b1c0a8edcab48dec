"""The duration estimate: monotone in size, the right order of magnitude here, honest about
what is left."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
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

ROOT = Path(__file__).resolve().parents[1]
CONFIG = validate({"grid": {"ops": ["matmul"], "devices": ["cpu", "cuda"], "dtypes": ["float32"], "sizes": [256, 1024],
                            "threads": [1]}})


@pytest.mark.parametrize("op", sorted(SPECS))
def test_the_estimate_grows_with_size(op):
    sizes = [64, 256, 1024, 4096]
    for device, library in (("cpu", "numpy"), ("cuda", "torch")):
        times = [cell_seconds(Cell(op, library, device, "float32", n, "1"), CONFIG["measure"], FALLBACK) for n in sizes]
        assert times == sorted(times) and times[0] < times[-1], (op, device, times)


def test_a_matmul_call_is_predicted_within_the_right_order_of_magnitude_here(tmp_path):
    """Roofs measured on this machine, then a measured matmul against its prediction."""
    from offloadbench.measure.cell import Settings, run_cell
    from offloadbench.measure.roofs import RoofSizes, calibrate
    from offloadbench.measure.timing import StopRule, WarmupRule

    points = calibrate("cpu", ["numpy"], ["float32"], RoofSizes(16 * 2**20, 512), budget_s=0.2)
    (tmp_path / "cpu.json").write_text(json.dumps({"device": "cpu", "points": points}))
    roofs = roofs_from_records([tmp_path / "cpu.json"], cores=1)
    assert roofs is not None and roofs.source.startswith("the roofs measured")
    cell = Cell("matmul", "numpy", "cpu", "float32", 384, "1")
    predicted = call_seconds(cell, replace(roofs, cpu_cores=1))["compute"]
    settings = Settings(stop=StopRule(budget_s=0.3), warmup=WarmupRule(budget_s=0.1))
    measured = float(np.median(run_cell(cell, settings).measured["samples_s"]))
    assert 0.2 < predicted / measured < 5, (predicted, measured)


def test_cells_of_absent_devices_cost_nothing_and_rounds_add_up():
    with_gpu = estimate_run(CONFIG, FALLBACK, available={"cpu": True, "cuda": True})
    without = estimate_run(CONFIG, FALLBACK, available={"cpu": True})
    assert with_gpu.measure_s > without.measure_s > 0
    assert without.rounds == CONFIG["measure"]["processes"] and without.cells == 3 * 6


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
    assert "fallback" in left.source


def test_the_command_line_prints_the_estimate():
    out = subprocess.run([sys.executable, "-m", "offloadbench.estimate", "--configfile", str(ROOT / "config" / "config.yaml")],
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(ROOT / "workflow")}).stdout
    assert out.startswith("config: about ") and "cell-processes in" in out and "per round" in out
