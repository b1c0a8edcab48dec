"""User kernels: read from their source for the config check, imported only by workers, and
measured like the catalogue's ops, with every bad kernel a one-line error that stops nothing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cell_record
from offloadbench import grid
from offloadbench.cells import Cell
from offloadbench.config import ConfigError, kernel_infos, validate
from offloadbench.kernels import load_kernels
from offloadbench.measure.settings import Settings
from offloadbench.records import load_record

ROOT = Path(__file__).resolve().parents[2]
KERNELS = Path(__file__).parents[1] / "kernels"
GOOD, BAD = str(KERNELS / "good.py"), str(KERNELS / "bad.py")
FAST = {"budget_s": 0.02, "warmup_budget_s": 0.01, "min_sampling_s": 0.005, "timeout_s": 120}


def config_with(**grid_keys):
    return validate({"kernels": [GOOD], "grid": {"ops": ["scaled_sum"], "devices": ["cpu"], "sizes": [8],
                                                 "threads": [1], **grid_keys}})


def test_the_source_tells_names_parameters_and_literal_options():
    infos = kernel_infos(config_with())
    assert set(infos) == {"scaled_sum", "plain_numpy"}
    assert infos["scaled_sum"].takes_xp and infos["scaled_sum"].arrays == 2
    plain = infos["plain_numpy"]
    assert not plain.takes_xp and plain.libraries == ("numpy",) and plain.min_size == 2
    assert plain.n_means == "side of the field"


def test_a_kernel_without_xp_runs_as_numpy_and_numpy_compiled_only():
    config = config_with(ops=["plain_numpy", "scaled_sum"], modes=["eager", "compiled"], devices=["cpu", "cuda"])
    cells = grid.expand(config["grid"], kernel_infos(config))
    plain = {(c.library, c.device, c.mode) for c in cells if c.op == "plain_numpy"}
    assert plain == {("numpy", "cpu", "eager"), ("numpy", "cpu", "compiled"), ("numpy", "cuda", "compiled")}
    assert ("torch", "cuda", "compiled") in {(c.library, c.device, c.mode) for c in cells if c.op == "scaled_sum"}


def test_grid_compiled_narrows_the_compiled_mode_and_nothing_else():
    config = config_with(ops=["scaled_sum", "matmul"], modes=["eager", "compiled"], sizes=[8, 16],
                         compiled={"ops": ["scaled_sum"], "sizes": [16]})
    cells = grid.expand(config["grid"], kernel_infos(config))
    compiled = {(c.op, c.size) for c in cells if c.compiled}
    assert compiled == {("scaled_sum", 16)}
    assert {(c.op, c.size) for c in cells if not c.compiled} == {(o, s) for o in ("scaled_sum", "matmul") for s in (8, 16)}
    with pytest.raises(ConfigError, match=r"^config key grid.compiled.ops\[0\]: unknown op 'scaled_sun'.*'scaled_sum'"):
        config_with(modes=["eager", "compiled"], compiled={"ops": ["scaled_sun"]})


def test_compiled_cells_have_their_own_file_names_and_workers():
    cell = Cell("scaled_sum", "numpy", "cuda", "float32", 8, "1", "compiled")
    assert cell.stem == "numpy-cuda-float32-n8-t1-compiled" and Cell.from_key(cell.key) == cell
    assert Cell.from_key("matmul/numpy-cpu-float32-n8-t1").mode == "eager"  # names from before modes
    worker = cell.worker
    assert (worker.library, worker.device, worker.threads, worker.mode) == ("numpy", "cuda", "1", "compiled")
    assert worker.name == "numpy-cuda-t1-compiled" and worker.host_threads == 1
    assert cell.twinned().worker.name == "numpy-cuda-t1-compiled-aa" and cell.twinned().worker != worker


@pytest.mark.parametrize("setup, expected", [
    (lambda tmp: {"kernels": [str(tmp / "missing.py")]}, r"^config key kernels\[0\]: no file '.*missing.py'"),
    (lambda tmp: {"kernels": [_write(tmp / "broken.py", "from offloadbench import kernel\n\n@kernel\ndef f(xp, a)\n"
                                     "    return a\n")]}, r"broken.py:4: syntax error: "),
    (lambda tmp: {"kernels": [_write(tmp / "clash.py", "from offloadbench import kernel\n\n@kernel\n"
                                     "def matmul(xp, a):\n    return a\n")]},
     r"clash.py:4: kernel 'matmul' has the name of an op of the catalogue"),
    (lambda tmp: {"kernels": [GOOD, _write(tmp / "twice.py", "from offloadbench import kernel\n\n@kernel\n"
                                           "def scaled_sum(xp, a):\n    return a\n")]},
     r"twice.py:4: kernel 'scaled_sum' is also defined in .*good.py:7"),
    (lambda tmp: {"kernels": [GOOD], "grid": {"ops": ["scaled_summ"]}},
     r"^config key grid.ops\[0\]: unknown op 'scaled_summ': .*did you mean 'scaled_sum'\?$"),
])
def test_a_bad_kernels_file_is_one_line_before_any_job(tmp_path, setup, expected):
    with pytest.raises(ConfigError) as error:
        validate(setup(tmp_path))
    message = str(error.value)
    assert "\n" not in message
    assert __import__("re").search(expected, message), message


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_the_config_check_reads_kernels_without_importing_them(tmp_path):
    """What the Snakefile does at parse time (validate, the grid, the estimate) never runs the
    kernels file, and never loads torch."""
    mark = tmp_path / "imported"
    code = (
        "import sys, json; from pathlib import Path; from offloadbench.config import validate, kernel_infos;"
        "from offloadbench import grid; from offloadbench.estimate import remaining;"
        f"c = validate({{'kernels': [{str(KERNELS / 'heavy.py')!r}], 'grid': {{'ops': ['heavy', 'matmul']}}}});"
        "cells = grid.expand(c['grid'], kernel_infos(c)); remaining(c, Path('nowhere'));"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'cells': len(cells)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "workflow"), "KERNEL_IMPORT_MARK": str(mark)})
    found = json.loads(out.stdout)
    assert found["cells"] > 0 and not found["torch"]
    assert not mark.exists()


def test_a_kernel_written_once_runs_as_numpy_and_torch_checked_against_float64():
    kernels = load_kernels([GOOD])
    settings = Settings.from_config({**validate({})["measure"], **FAST}, validate({})["compile"])
    for library in ("numpy", "torch"):
        import torch

        record = run_cell_record(Cell("scaled_sum", library, "cpu", "float32", 16, "1"), settings, torch,
                                 kernels=kernels)
        assert record["status"] == "ok", record["reason"]
        assert record["check"]["passed"] and 0 < record["check"]["rel_err"] < record["check"]["tolerance"]
        assert record["model"]["flops"] is None and record["model"]["h2d_bytes"] == 2 * 16 * 16 * 4


def test_every_bad_kernel_is_an_error_cell_with_its_message_and_the_round_goes_on(tmp_path):
    """A round over bad.py: each failing kernel is recorded with what went wrong; `fine` is measured."""
    from offloadbench.machine import fingerprint
    from offloadbench.measure.provenance import cpu_model
    from rounds import start_round

    (tmp_path / "faults").mkdir()
    (tmp_path / "environment.json").write_text(json.dumps({
        "fingerprint": fingerprint(cpu_model(), os.cpu_count()), "devices": {"cpu": None}}))
    settings = {**validate({})["measure"], **FAST}
    names = ["raises", "wrong_shape", "does_nothing", "wrong_update", "wrong_values", "float64_result", "fine"]
    proc = start_round(tmp_path, grid={"ops": names, "libraries": ["numpy"], "devices": ["cpu"],
                                        "dtypes": ["float32"], "sizes": [8], "threads": [1]},
                       settings=settings, kernels=[BAD])
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    records = {n: load_record(tmp_path / "raw" / n / "numpy-cpu-float32-n8-t1" / "p1.json") for n in names}
    reasons = {n: r.reason for n, r in records.items()}
    assert records["fine"].status == "ok" and records["fine"].kernel_sha256
    for name in names[:-2]:
        assert records[name].status == "error" and "\n" not in reasons[name], name
    lines = Path(BAD).read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "gave up" in text)
    assert reasons["raises"] == f"ValueError during warm-up compute: the kernel gave up (at bad.py:{line})"
    assert reasons["wrong_shape"] == ("wrong result: kernel wrong_shape: the result has shape (8, 1), not (8, 8) as in "
                                      "float64 NumPy")
    defined = next(i for i, text in enumerate(lines, 1) if text.startswith("def does_nothing")) - 1
    assert reasons["does_nothing"] == ("kernel does_nothing returned nothing and changed none of its arguments, so "
                                       f"there is nothing to check (at bad.py:{defined})")
    assert reasons["wrong_update"].startswith("wrong result: relative error")
    assert " in argument a exceeds the float32 tolerance" in reasons["wrong_update"]
    assert records["wrong_update"].changes == ("a",)
    assert reasons["wrong_values"].startswith("wrong result: relative error") and "tolerance 1.00e-09" in reasons["wrong_values"]
    # a result of another precision is measured and checked, and its record names the precision
    assert records["float64_result"].status == "ok" and records["float64_result"].returns == ("float64",)
    assert records["fine"].returns == () and records["fine"].changes == ()


def test_a_failed_numpy_baseline_says_why_its_variants_have_no_speedup():
    from conftest import make_processes, tables_of
    from offloadbench.report.text.ops_findings import missing_baseline_lines

    records = make_processes(2, op="gauss_weight", status="error", reason="wrong result: float64")
    records += make_processes(2, op="gauss_weight", library="torch", seed=4)
    tables = tables_of(records, "box")
    assert tables["speedups"].empty
    (line,) = missing_baseline_lines(tables["timings"])
    assert line.startswith("- gauss_weight (float32): its NumPy baseline failed (error: wrong result: float64)")
    assert "no speedup is stated for torch" in line
