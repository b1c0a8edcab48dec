"""Compiled cells on the CPU, at tiny sizes: torch.compile of the NumPy and of the torch code,
the compile phase apart from the samples, graph breaks counted, and the skip without a C++
compiler. Each compile costs about half a second here once Inductor has started (its first
start in this process costs several), so the cells are few."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cell_record, tables_of
from offloadbench.cells import Cell
from offloadbench.config import validate
from offloadbench.kernels import load_kernels
from offloadbench.measure.settings import Settings
from offloadbench.verdicts import Judging

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
KERNELS = Path(__file__).parents[1] / "kernels"
SETTINGS = Settings.from_config({**validate({})["measure"], "budget_s": 0.02, "warmup_budget_s": 0.01,
                                 "min_sampling_s": 0.005}, validate({})["compile"])


@pytest.fixture(scope="module")
def kernels():
    return load_kernels([str(KERNELS / "good.py"), str(KERNELS / "breaks.py")])


def measured(cell: Cell, kernels=None) -> dict:
    record = run_cell_record(cell, SETTINGS, torch, kernels=kernels)
    assert record["status"] == "ok", record["reason"]
    return record


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_a_compiled_cell_has_its_compile_phase_apart_from_the_samples(library):
    record = measured(Cell("transcendental", library, "cpu", "float32", 16, "1", "compiled"))
    phase = record["compile"]
    assert phase["graphs"] >= 1 and phase["graph_breaks"] == 0 and phase["fallback"] == ""
    assert phase["backend"] == "inductor" and phase["torch_version"] == torch.__version__
    assert phase["cache"]["cold"] is True and phase["recompiles"] == 0
    # a sample holding the compile would last at least as long as it
    assert phase["first_call_s"] > max(record["samples_s"])
    assert record["check"]["passed"]


def test_a_kernel_written_once_runs_compiled_and_is_checked_against_float64(kernels):
    for library in ("numpy", "torch"):
        record = measured(Cell("scaled_sum", library, "cpu", "float32", 16, "1", "compiled"), kernels)
        assert record["check"]["passed"] and record["compile"]["graphs"] >= 1


def test_a_graph_break_is_counted_flagged_and_kept_out_of_the_headline(kernels):
    record = measured(Cell("talkative", "numpy", "cpu", "float32", 16, "1", "compiled"), kernels)
    phase = record["compile"]
    assert phase["graph_breaks"] >= 1 and "print" in phase["first_break"]
    assert phase["fallback"].startswith(f"{phase['graph_breaks']} graph break(s): part of the function runs uncompiled")

    from conftest import make_processes

    # the same cell in the tables: flagged, and not the largest speedup however fast
    base = make_processes(2, op="talkative", median=1e-3)
    fast = make_processes(2, op="talkative", median=1e-5, seed=3)
    for r in fast:
        r["cell"]["mode"] = "compiled"
        r["compile"] = {**phase, "first_call_s": 0.5}
    slower = make_processes(2, op="talkative", library="torch", median=2e-3, seed=5)
    tables = tables_of(base + fast + slower, "box")
    speedups = tables["speedups"]
    assert speedups.loc[speedups["mode"] == "compiled", "compile_fallback"].str.contains("graph break").all()
    from offloadbench.report.text.findings import speedup_findings

    lines = speedup_findings(speedups, Judging())
    assert not any("100" in line for line in lines[:1]) and "left out" in lines[-1]


def test_numpy_code_wrapped_for_tensors_takes_and_returns_tensors():
    """The device-resident form numpy compiled takes on a GPU (the device seam's wrap_numpy),
    here with CPU tensors; the stand-in's tests take it, and the end-to-end form, on cuda."""
    from offloadbench.measure import compiled, devices

    def code(x, y):
        return np.exp(np.sin(x)) * np.cos(y)

    x, y = np.linspace(-1, 1, 64, dtype=np.float32), np.linspace(1, -1, 64, dtype=np.float32)
    cpu = devices.get("cpu", torch)
    resident = cpu.compiled(compiled.compile_function(cpu.wrap_numpy(code), torch, SETTINGS))
    out = resident(torch.from_numpy(x), torch.from_numpy(y))
    assert isinstance(out, torch.Tensor) and np.allclose(out.numpy(), code(x, y), rtol=1e-6)


def test_without_a_cpp_compiler_compiled_cells_are_skipped_with_the_reason():
    code = ("import json, torch; from offloadbench.cells import Cell; from offloadbench.config import validate;"
            "from offloadbench.measure.cell import run_cell; from offloadbench.measure.settings import Settings;"
            "o = run_cell(Cell('axpy', 'numpy', 'cpu', 'float32', 8, '1', 'compiled'),"
            " Settings.from_config(validate({})['measure'], validate({})['compile']), torch);"
            "print(json.dumps([o.status, o.reason]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow"), "CXX": "/nonexistent/c++"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=300)
    status, reason = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert status == "skipped" and reason.startswith("no C++ compiler: Inductor compiles to C++ on the CPU")
