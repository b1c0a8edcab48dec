"""Does the problem fit? Peak memory of one call measured in workers (untimed), the model
calibrated by it, the largest size that fits, and the out-of-memory check that uses it."""

import math

import pandas as pd
import pytest
from offloadbench.analysis.memory_fit import memory_table, spec_for
from offloadbench.catalogue import (
    SPECS,
    call_bytes,
    footprint,
    measured_scale,
    output_unit_bytes,
    working_set_bytes,
)
from offloadbench.cells import Cell
from offloadbench.config import validate
from offloadbench.measure import memory
from offloadbench.measure.cell import run_cell
from offloadbench.measure.settings import Settings
from offloadbench.records import Environment

QUICK = Settings.from_config({**validate({})["measure"], "target_rel_ci": 0.5, "min_samples": 6, "min_sampling_s": 0.0,
                              "max_samples": 20, "budget_s": 0.02, "warmup_budget_s": 0.02, "min_sample_s": 0.0005,
                              "check_rows": 8}, validate({})["compile"])


def peak(library, op, size):
    torch = pytest.importorskip("torch") if library == "torch" else None
    outcome = run_cell(Cell(op, library, "cpu", "float32", size, "1"), QUICK, torch)
    assert outcome.status == "ok", outcome.reason
    return outcome.measured["memory"]["host"]


@pytest.mark.parametrize("library, method", [("numpy", "tracemalloc"), ("torch", "torch profiler")])
def test_a_matmul_of_1024_allocates_its_4_mib_output_and_not_much_more(library, method):
    host = peak(library, "matmul", 1024)
    assert host["method"] == method
    assert 4 * 2**20 <= host["peak_bytes"] <= 64 * 2**20
    assert host["rss_hwm_bytes"] is None or host["rss_hwm_bytes"] >= 0


@pytest.mark.parametrize("library, op", [("numpy", "transcendental"), ("torch", "transcendental"),
                                         ("numpy", "matmul")])
def test_the_model_fitted_on_two_sizes_predicts_a_third_within_a_quarter(library, op):
    """The largest size that fits rests on this: fit on 256 and 512, measure 1024."""
    spec = SPECS[op]
    scale = measured_scale([(n, peak(library, op, n)["peak_bytes"]) for n in (256, 512)], spec, 4)
    predicted = scale * output_unit_bytes(spec, 1024, 4)
    measured = peak(library, op, 1024)["peak_bytes"]
    assert measured == pytest.approx(predicted, rel=0.25), (predicted, measured)


def scaled(spec, scale: float):
    """A catalogue op's footprint with `scale` outputs of results and temporaries measured."""
    return footprint(spec, 4, [(1024, scale * output_unit_bytes(spec, 1024, 4))])


def test_the_largest_size_that_fits_inverts_the_calibrated_call():
    spec = SPECS["matmul"]
    n = scaled(spec, 1.0).largest(0.9 * 16 * 2**30)
    assert call_bytes(spec, n, 4, 1.0) <= 0.9 * 16 * 2**30 < call_bytes(spec, n + 1, 4, 1.0)
    assert n > footprint(spec, 4).largest(0.9 * 16 * 2**30)  # the model's 3 outputs need more than 1 measured
    assert math.isnan(scaled(spec, 1.0).largest(0))


def test_the_out_of_memory_check_uses_the_measured_scale(monkeypatch):
    """A host with just room for a matmul's inputs and one output: the model (three outputs)
    refuses the cell, the measurement (one output) lets it run."""
    cell = Cell("matmul", "numpy", "cpu", "float32", 2048, "1")
    spec = SPECS["matmul"]
    room = (working_set_bytes(spec, 2048, 4, scaled(spec, 1.0)) + working_set_bytes(spec, 2048, 4)) / 2
    monkeypatch.setattr(memory, "available_host_memory", lambda: room / QUICK.memory_headroom)
    refused = run_cell(cell, QUICK, None)
    assert refused.status == "oom" and "(modelled)" in refused.reason
    calibrated = run_cell(cell, QUICK, None,
                          memory_scale={"host": [[1024, float(output_unit_bytes(spec, 1024, 4))]]})
    assert calibrated.status == "ok"


def test_the_memory_table_fits_each_series_and_says_how_far_the_model_was():
    rows = []
    for n in (256, 512, 1024):
        for library, scale in (("numpy", 1.0), ("torch", 2.0)):
            out = output_unit_bytes(SPECS["matmul"], n, 4)
            rows.append({"op": "matmul", "variant": library, "library": library, "mode": "eager", "device": "cpu",
                         "dtype": "float32", "size": n, "status": "ok", "peak_host_bytes": scale * out,
                         "peak_device_bytes": math.nan})
    environment = Environment.from_json({"memory_bytes": 64 * 2**30})
    table = memory_table(pd.DataFrame(rows), environment, "box").set_index("variant")
    assert table.loc["numpy", "scale"] == pytest.approx(1.0) and table.loc["torch", "scale"] == pytest.approx(2.0)
    assert table.loc["numpy", "model_error"] == pytest.approx(2.0)  # the model's 3 outputs against 1 measured
    assert table.loc["numpy", "largest_size"] > table.loc["torch", "largest_size"] > 0
    assert table.loc["numpy", "largest_size"] == scaled(spec_for("matmul"), 1.0).largest(0.9 * 64 * 2**30)


def _fit_line(environment: dict | None, **override) -> str:
    from offloadbench.report.text.fit import fit_lines

    out = output_unit_bytes(SPECS["matmul"], 256, 4)
    rows = [{"op": "matmul", "variant": "numpy", "library": "numpy", "mode": "eager", "device": "cpu",
             "dtype": "float32", "size": 256, "status": "ok", "peak_host_bytes": float(out),
             "peak_device_bytes": math.nan}]
    environment = Environment.from_json(environment) if environment is not None else None
    table = memory_table(pd.DataFrame(rows), environment, "box").assign(**override)
    (line,) = fit_lines(table)
    return line


def test_a_fit_says_the_size_that_fits():
    assert "fits up to n ≈ " in _fit_line({"memory_bytes": 64 * 2**30})


def test_no_fit_where_the_memory_was_not_recorded_says_so():
    line = _fit_line(None)
    assert line.endswith("its fit is unknown: the device's memory was not recorded.")


def test_no_fit_where_not_even_one_fits_says_so_with_the_memory():
    line = _fit_line({"memory_bytes": 8})  # 8 bytes: not even a 1×1 matmul's inputs and outputs
    assert line.endswith("not even n = 1 fits in its 8 B, with 10% kept free."), line
    assert "not recorded" not in line


def test_no_fit_without_a_scale_says_no_peak_gave_one():
    line = _fit_line({"memory_bytes": 64 * 2**30}, scale=math.nan, largest_size=math.nan)
    assert line.endswith("its fit is unknown: no measured peak gave a scale to fit the model to."), line


def test_the_fresh_pages_a_call_maps_are_said_with_what_they_cost():
    from offloadbench.report.text.fit import pages_lines

    cell = {"op": "heat_step", "device": "cpu", "dtype": "float32", "threads": "1", "mode": "eager", "status": "ok"}
    timings = pd.DataFrame([
        {**cell, "library": "numpy", "size": 2048, "faults_per_call": 1008.0, "median_s": 12e-3},
        {**cell, "library": "torch", "size": 2048, "faults_per_call": 4064.0, "median_s": 18.3e-3},
        {**cell, "library": "torch", "size": 256, "faults_per_call": 40.0, "median_s": 1e-4},  # not the largest size
        {**cell, "op": "matmul", "library": "numpy", "size": 2048, "faults_per_call": 2.0, "median_s": 1e-2},
    ])
    intro, _, line = pages_lines(timings, page_s=0.25e-6)
    assert "One fresh page costs 250 ns here" in intro
    assert line == ("- heat_step (float32) at n = 2048: fresh pages per call: numpy 1,008 (3.94 MiB, about 252 µs of "
                    "its 12 ms); torch 4,064 (15.9 MiB, about 1.02 ms of its 18.3 ms).")  # matmul maps too few for a line
    assert "costs" not in pages_lines(timings, page_s=math.nan)[0]  # no pages roof measured: counts only
    older = pages_lines(timings.assign(faults_per_call=math.nan), page_s=math.nan)
    assert older == ["- No fresh pages were counted in these records (they are older than page counts)."]


def test_the_fresh_pages_say_which_allocator_state_the_run_used():
    from offloadbench.report.text.fit import pages_lines

    cell = {"op": "heat_step", "device": "cpu", "dtype": "float32", "threads": "1", "mode": "eager", "status": "ok",
            "library": "torch", "size": 2048, "faults_per_call": 4064.0, "median_s": 18.3e-3}
    intro = {used: pages_lines(pd.DataFrame([{**cell, "allocator": used}]), page_s=math.nan)[0]
             for used in ("steady", "adaptive", "")}
    assert "This run held glibc's thresholds (`measure.allocator: steady`)" in intro["steady"]
    assert "This run left glibc its own thresholds (`measure.allocator: adaptive`)" in intro["adaptive"]
    assert "do not all say which" in intro[""] and "steady" in intro[""] and "adaptive" in intro[""]
    mixed = pd.DataFrame([{**cell, "allocator": "steady"}, {**cell, "allocator": "adaptive", "library": "numpy"}])
    assert "do not all say which" in pages_lines(mixed, page_s=math.nan)[0]
    assert "do not all say which" in pages_lines(pd.DataFrame([cell]), page_s=math.nan)[0]  # no column: older tables


STENCIL = '''
from offloadbench import kernel


@kernel(inputs=lambda n, rng: [rng.uniform(-1, 1, (n + 4, n + 4, 8)) for _ in range(3)])
def stencil(xp, u, v, w):
    return u + v * w
'''


def test_a_kernels_own_inputs_are_counted_before_they_are_drawn(tmp_path, monkeypatch):
    """Three (n+4)×(n+4)×8 fields at n = 4096 hold 1.6 GB in float32: a host with 1 GiB
    available refuses the cell from the inputs' bytes at small sizes, without drawing them."""
    from offloadbench.kernels import load_kernels

    (tmp_path / "stencil.py").write_text(STENCIL)
    kernels = load_kernels([str(tmp_path / "stencil.py")])
    monkeypatch.setattr(memory, "available_host_memory", lambda: 2**30)
    refused = run_cell(Cell("stencil", "numpy", "cpu", "float32", 4096, "1"), QUICK, None, kernels=kernels)
    assert refused.status == "oom" and "(modelled)" in refused.reason, refused.reason
    assert run_cell(Cell("stencil", "numpy", "cpu", "float32", 64, "1"), QUICK, None, kernels=kernels).status == "ok"


def test_a_kernels_memory_is_fitted_to_the_shapes_it_was_given():
    """Inputs of 3·(n+4)²·8 floats and a result of (n+4)²·8: the fit finds the largest n that
    fits, where one n×n array per argument (the old model) put it twice too far."""
    def inputs(n):
        return 3 * (n + 4) ** 2 * 8 * 4

    def extra(n):
        return (n + 4) ** 2 * 8 * 4

    rows = [{"op": "stencil", "variant": "numpy", "library": "numpy", "mode": "eager", "device": "cpu",
             "dtype": "float32", "size": n, "status": "ok", "peak_host_bytes": float(extra(n)),
             "peak_device_bytes": math.nan, "inputs_bytes": float(inputs(n)), "result_bytes": float(extra(n)),
             "inputs_degree": 2} for n in (256, 1024)]
    environment = Environment.from_json({"memory_bytes": 24 * 2**30})
    row = memory_table(pd.DataFrame(rows), environment, "box").iloc[0]
    room = 0.9 * 24 * 2**30
    truth = max(n for n in range(1, 40_000) if inputs(n) + extra(n) <= room)
    assert row["largest_size"] == pytest.approx(truth, rel=0.01)
    assert row["inputs_degree"] == 2 and row["extra_degree"] == 2 and not row["peak_doubted"]
    one_size = memory_table(pd.DataFrame(rows[1:]), environment, "box").iloc[0]  # the shape from inputs_degree
    assert one_size["largest_size"] == pytest.approx(truth, rel=0.02)


def test_a_peak_below_what_the_call_returns_is_not_believed():
    row = {"op": "k", "variant": "torch compiled", "library": "torch", "mode": "compiled", "device": "cpu",
           "dtype": "float32", "size": 1024, "status": "ok", "peak_host_bytes": 0.0, "peak_device_bytes": math.nan,
           "inputs_bytes": 4.0 * 2**20, "result_bytes": 4.0 * 2**20, "inputs_degree": 2}
    table = memory_table(pd.DataFrame([row]), Environment.from_json({"memory_bytes": 2**34}), "box")
    assert table.iloc[0]["peak_doubted"] and table.iloc[0]["peak_bytes"] == 4.0 * 2**20
