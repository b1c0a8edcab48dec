"""The roofline figure, the speedup heatmap and the per-op sentences, from synthetic tables of
several ops whose timings follow a simple roofline model of a 16-core CPU and a GPU."""

import math

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import assert_shows_its_data, make_processes, tables_of
from matplotlib.collections import PathCollection
from offloadbench.analysis.breakeven import NOT_REACHED
from offloadbench.analysis.roofline import attainable, bounds, device_roofs
from offloadbench.catalogue import get_spec
from offloadbench.report.figures.draw import FIGURES
from offloadbench.report.figures.heatmap import (
    CMAP,
    COLOURBAR_LABEL,
    heatmap_figure,
    speedup_norm,
)
from offloadbench.report.figures.roofline import NO_ROOFS_NOTE, roofline_figure
from offloadbench.report.figures.style import theme
from offloadbench.report.text.findings import break_even_lines
from offloadbench.report.text.markdown import op_speedups_table
from offloadbench.report.text.ops_findings import bound_lines, bound_notes, payoff_lines
from offloadbench.verdicts import Judging

SIZES = (128, 512, 2048)
CPU = {"memory": 20e9, "float32": 1000e9, "float64": 500e9, "call_s": 2e-6}
GPU = {"memory": 3000e9, "float32": 50e12, "float64": 25e12, "copy": 10e9, "call_s": 20e-6}
# Fraction of the roof each op reaches (fft2 and sort run far below it), and how long torch
# on the cpu takes relative to NumPy.
NUMPY_EFFICIENCY = {"matmul": 0.8, "axpy": 0.85, "fft2": 0.03, "sort": 0.04}
GPU_EFFICIENCY = {"matmul": 0.6, "axpy": 0.8, "fft2": 0.3, "sort": 0.05}
TORCH_CPU = {"matmul": 1.0, "axpy": 1.25, "fft2": 0.5, "sort": 1.0}


def _model(op: str, size: int, dtype: str) -> dict:
    spec, itemsize = get_spec(op), 8 if dtype == "float64" else 4
    return {"flops": spec.flops(size), "traffic_bytes": spec.traffic(size, itemsize), "itemsize": itemsize,
            "h2d_bytes": spec.input_bytes(size, itemsize), "d2h_bytes": spec.output_bytes(size, itemsize)}


def _roof_time(model: dict, memory: float, compute: float, efficiency: float = 1.0) -> float:
    return max(model["flops"] / compute, model["traffic_bytes"] / memory) / efficiency


def _cell(op, size, dtype="float32", library="numpy", device="cpu", threads="all", seed=0, **extra) -> list[dict]:
    model = _model(op, size, dtype)
    if device == "cpu":
        median = _roof_time(model, CPU["memory"], CPU[dtype], NUMPY_EFFICIENCY[op]) + CPU["call_s"]
        median *= (TORCH_CPU[op] if library == "torch" else 1.0) * (8 if threads == "1" else 1)
        phases = {"end_to_end": median} if library == "torch" else None
    else:
        median = _roof_time(model, GPU["memory"], GPU[dtype], GPU_EFFICIENCY[op]) + GPU["call_s"]
        h2d = model["h2d_bytes"] / GPU["copy"] + GPU["call_s"]
        d2h = model["d2h_bytes"] / GPU["copy"] + GPU["call_s"]
        phases = {"h2d": h2d, "compute": median, "d2h": d2h, "end_to_end": h2d + median + d2h}
    records = make_processes(2, seed=seed, op=op, library=library, device=device, dtype=dtype, size=size,
                             threads=threads, median=median, phases=phases, n=20, **extra)
    for record in records:
        record["model"] = model
    return records


def ops_records(gpu: bool = True) -> list[dict]:
    """matmul, axpy, fft2, sort at three sizes (matmul also in float64 and on one thread)."""
    records, seed = [], 0
    cells = [(op, size, "float32") for op in ("matmul", "axpy", "fft2", "sort") for size in SIZES]
    cells += [("matmul", size, "float64") for size in SIZES]
    for op, size, dtype in cells:
        weak = op == "sort" and size == SIZES[-1]
        for library, device in (("numpy", "cpu"), ("torch", "cpu"), ("torch", "cuda")):
            if device == "cuda" and not gpu:
                continue
            seed += 1
            records += _cell(op, size, dtype, library, device, seed=seed, shares_cores=weak and device == "cpu")
    for size in SIZES:
        for library in ("numpy", "torch"):
            seed += 1
            records += _cell("matmul", size, "float32", library, threads="1", seed=seed)
    return records


def roofs_frame(devices=("cpu", "cuda")) -> pd.DataFrame:
    """A roofs table as `roofs_table` writes it: numpy and torch on the cpu, torch on cuda."""
    rows = []
    for device in devices:
        spec = CPU if device == "cpu" else GPU
        libraries = ("numpy", "torch") if device == "cpu" else ("torch",)
        for k, library in enumerate(libraries):
            scale = 0.9 if k == 0 and len(libraries) > 1 else 1.0  # torch is the best on each device
            points = [("memory", "float64", spec["memory"] / 1e9, "GB/s")]
            points += [("compute", d, spec[d] / 1e9, "GFLOP/s") for d in ("float32", "float64")]
            for kind, dtype, value, unit in points:
                rows.append({"machine": "box", "device": device, "device_name": "Test GPU" if device != "cpu" else "cpu",
                             "library": library, "kind": kind, "dtype": dtype, "size": 4096, "status": "ok",
                             "reason": "", "n_samples": 20, "value": value * scale, "ci_low": value * scale * 0.99,
                             "ci_high": value * scale * 1.01, "unit": unit})
    rows.append({**rows[-1], "dtype": "float16", "status": "skipped", "reason": "not measured", "value": math.nan})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def gpu_ops():
    theme()
    return {**tables_of(ops_records(gpu=True), "gpubox", resamples=200), "roofs": roofs_frame()}


@pytest.fixture(scope="module")
def cpu_ops():
    return {**tables_of(ops_records(gpu=False), "laptop", resamples=200), "roofs": roofs_frame(("cpu",))}


def save_and_check(fig, tmp_path, name: str, pdf: bool = False) -> None:
    """Save as the report does (a PDF only where asked: embedding its fonts takes seconds)."""
    png = tmp_path / f"{name}.png"
    if pdf:
        fig.savefig(tmp_path / f"{name}.pdf")
        assert (tmp_path / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
        assert (tmp_path / f"{name}.pdf").stat().st_size > 2000
    fig.savefig(png, dpi=150)  # figures are drawn at print size, a small grid's a few inches across
    plt.close(fig)
    image = mpimg.imread(png)
    assert image.ndim == 3 and min(image.shape[:2]) > 300
    assert image.std() > 0.01


def texts_of(fig) -> list[str]:
    """Every line of text in the figure (a label block of several lines counts line by line)."""
    return [line for t in fig.findobj(plt.Text) for line in t.get_text().split("\n")]


# --- roofs and bounds ---------------------------------------------------------------------


def test_device_roofs_take_the_best_library_per_device_and_dtype():
    best = device_roofs(roofs_frame())
    assert set(best["library"]) == {"torch"}
    memory = best[best["kind"] == "memory"].set_index("device")["value"]
    assert memory["cpu"] == pytest.approx(20) and memory["cuda"] == pytest.approx(3000)
    assert len(best[(best["device"] == "cuda") & (best["kind"] == "compute")]) == 2  # the skipped float16 is left out


def test_attainable_is_the_lower_of_the_two_roofs():
    assert attainable(0.1, 20.0, 1000.0) == pytest.approx(2.0)
    assert attainable(500.0, 20.0, 1000.0) == pytest.approx(1000.0)


def test_bounds_classify_memory_and_compute_bound_cells():
    timings = pd.DataFrame([
        {"op": "axpy", "device": "cpu", "dtype": "float32", "size": 4096, "status": "ok", "intensity": 1 / 6, "gflops": 2.5},
        {"op": "matmul", "device": "cpu", "dtype": "float32", "size": 4096, "status": "ok", "intensity": 341.0, "gflops": 800.0},
        {"op": "matmul", "device": "cpu", "dtype": "float16", "size": 4096, "status": "ok", "intensity": 683.0, "gflops": 50.0},
        {"op": "matmul", "device": "mps", "dtype": "float32", "size": 4096, "status": "ok", "intensity": 341.0, "gflops": 900.0},
        {"op": "matmul", "device": "cpu", "dtype": "float32", "size": 8192, "status": "oom", "intensity": 683.0, "gflops": math.nan},
    ])
    placed = bounds(timings, roofs_frame(("cpu",)))
    assert len(placed) == 4  # only ok cells
    axpy, matmul, half, mps = (placed.iloc[i] for i in range(4))
    assert axpy["bound"] == "memory" and matmul["bound"] == "compute"
    assert axpy["ridge"] == pytest.approx(1000 / 20)
    assert axpy["attainable_gflops"] == pytest.approx(20 / 6) and axpy["roof_fraction"] == pytest.approx(2.5 / (20 / 6))
    assert matmul["attainable_gflops"] == pytest.approx(1000) and matmul["roof_fraction"] == pytest.approx(0.8)
    for row in (half, mps):  # no float16 roof on the cpu, no roofs at all on mps
        assert pd.isna(row["bound"]) and math.isnan(row["roof_fraction"])


def test_bounds_without_a_roofs_table_are_empty_not_an_error():
    timings = pd.DataFrame([{"op": "axpy", "device": "cpu", "dtype": "float32", "size": 64, "status": "ok",
                             "intensity": 0.2, "gflops": 1.0}])
    for roofs in (None, pd.DataFrame(), roofs_frame().iloc[0:0]):
        placed = bounds(timings, roofs)
        assert len(placed) == 1 and placed["bound"].isna().all() and placed["roof_fraction"].isna().all()


# --- the roofline figure ------------------------------------------------------------------


def test_roofline_has_a_panel_per_device_with_labelled_roofs(tmp_path, gpu_ops):
    fig = FIGURES["roofline"](gpu_ops, "gpubox", Judging())
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(" ")[0].rstrip(",") for ax in panels] == ["cpu", "cuda"]
    assert "all" in panels[0].get_title()
    for ax in panels:
        assert ax.get_xscale() == ax.get_yscale() == "log"
        assert any("FLOP/byte" in t.get_text() for t in fig.texts)  # one label under the panels
    assert any("GFLOP/s" in t.get_text() for t in fig.texts)
    texts = texts_of(fig)
    assert "float32 peak 1,000 GFLOP/s" in texts and "float64 peak 500 GFLOP/s" in texts
    assert "memory 20 GB/s" in texts and "memory 3,000 GB/s" in texts
    assert any("hollow marker" in t for t in texts)  # the weak sort cell
    assert_shows_its_data(fig)
    save_and_check(fig, tmp_path, "roofline", pdf=True)


def test_roofline_of_a_machine_without_gpu_has_one_panel(tmp_path, cpu_ops):
    fig = roofline_figure(cpu_ops["timings"], cpu_ops["roofs"], "laptop")
    assert len([ax for ax in fig.axes if ax.get_title()]) == 1
    assert_shows_its_data(fig)
    save_and_check(fig, tmp_path, "roofline-cpu")


def test_roofline_without_roofs_draws_the_points_and_says_so(tmp_path, gpu_ops):
    older = {name: table for name, table in gpu_ops.items() if name != "roofs"}
    fig = FIGURES["roofline"](older, "gpubox", Judging())
    assert NO_ROOFS_NOTE in texts_of(fig)
    panel = next(ax for ax in fig.axes if ax.get_title())
    points = [c for c in panel.collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in points) == 2 * 4 * 3 + 2 * 3  # every cpu cell, float64 matmul too
    save_and_check(fig, tmp_path, "roofline-no-roofs")


def test_roofline_with_no_ok_cell_says_why(gpu_ops):
    failed = gpu_ops["timings"].assign(status="error")
    fig = roofline_figure(failed, gpu_ops["roofs"], "gpubox")
    assert len(fig.axes) == 0 and any("No cell on gpubox" in t for t in texts_of(fig))
    plt.close(fig)


# --- the heatmap --------------------------------------------------------------------------


def test_heatmap_norm_puts_one_at_the_centre_of_the_palette():
    for values in ([0.1, 1.0, 30.0], [0.9, 1.1], [1.0], [0.004, 2.0]):
        norm = speedup_norm(values)
        assert norm(1.0) == pytest.approx(0.5)
        assert np.allclose(CMAP(norm(1.0)), CMAP(0.5))
        assert norm.vmin * norm.vmax == pytest.approx(1.0)
    assert speedup_norm([0.1, 30.0]).vmax == 32 and speedup_norm([0.004, 2.0]).vmin == 1 / 64  # capped at 64×


def test_heatmap_of_cpu_and_cuda(tmp_path, gpu_ops):
    fig = FIGURES["heatmap"](gpu_ops, "gpubox", Judging())
    texts = texts_of(fig)
    assert "cpu: on the cpu, all = 4 threads, vs numpy" in texts  # what a row of panels compares, once
    assert "cuda (Test GPU): copies counted, vs numpy on all cores" in texts
    assert {ax.get_title(loc="left") for ax in fig.axes} >= {"float32", "float64"}
    assert "cuda · float64: not measured" not in texts  # cuda has float64 matmul cells
    assert any(t.endswith("×") and not t.startswith("≈") for t in texts)
    assert COLOURBAR_LABEL in texts
    rows = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert rows == ["matmul", "axpy", "sort", "fft2"]  # catalogue families, not alphabetical
    save_and_check(fig, tmp_path, "heatmap", pdf=True)


def test_heatmap_of_a_cpu_only_machine_falls_back_to_the_most_threads(tmp_path, cpu_ops):
    speedups = cpu_ops["speedups"]
    assert set(speedups["device"]) == {"cpu"} and set(speedups["threads"]) == {"1", "all"}
    no_all = speedups.assign(threads=speedups["threads"].replace("all", "2"))  # a grid of 1 and 2 threads
    fig = heatmap_figure(no_all, "laptop")
    titles = [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]
    assert titles == ["float32", "float64"] and "cpu: on the cpu, 2 threads, vs numpy" in texts_of(fig)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["matmul", "axpy", "sort", "fft2"]
    save_and_check(fig, tmp_path, "heatmap-cpu")


def test_heatmap_marks_undecided_and_same_cells_and_shows_no_number_for_undecided(gpu_ops):
    speedups = gpu_ops["speedups"].copy()
    numbers = len([t for t in texts_of(heatmap_figure(speedups, "gpubox")) if t.endswith("×")])
    speedups.loc[speedups.index[0], "end_to_end_verdict"] = "undecided"
    speedups.loc[speedups.index[1], "end_to_end_verdict"] = "same"
    fig = heatmap_figure(speedups, "gpubox")
    texts = texts_of(fig)
    assert "?" in texts and any(t.startswith("=") for t in texts)
    assert len([t for t in texts if t.endswith("×") and not t.startswith("1/")]) <= numbers  # one number fewer
    assert any(p.get_hatch() for ax in fig.axes for p in ax.patches)
    plt.close(fig)


def test_heatmap_of_no_speedups_says_why(gpu_ops):
    fig = FIGURES["heatmap"]({"speedups": gpu_ops["speedups"].iloc[0:0]}, "laptop", Judging())
    assert len(fig.axes) == 0 and any("No PyTorch cell on laptop" in t for t in texts_of(fig))
    plt.close(fig)


# --- sentences ----------------------------------------------------------------------------


def line_for(lines: list[str], start: str) -> str:
    found = [line for line in lines if line.startswith(start)]
    assert len(found) == 1, (start, lines)
    return found[0]


def test_payoff_sentences_say_only_what_the_ops_table_cannot(gpu_ops):
    """The break-even size between two measured sizes is a sentence; a series that pays at
    every size, at none, or on the cpu is its row of the op's table, not a sentence too."""
    lines = payoff_lines(gpu_ops["speedups"], Judging())
    inside = line_for(lines, "- matmul on cuda (float32)")
    assert "pays from n ≈" in inside and "(between 512 and 2048)" in inside and "at n = 2048 it is" in inside
    assert "95% CI" in inside
    assert not [line for line in lines if line.startswith(("- axpy on cuda", "- fft2 on cuda"))]  # never, always
    assert not [line for line in lines if "on the cpu" in line]
    speedups = gpu_ops["speedups"]
    axpy = speedups[(speedups["op"] == "axpy") & (speedups["device"] == "cuda")]
    assert set(axpy["end_to_end_verdict"]) == {"slower"}  # what the table shows in the sentence's place
    table = op_speedups_table(speedups[speedups["op"] == "fft2"], Judging())
    assert table.count("faster") >= len(speedups.loc[speedups["op"] == "fft2", "size"].unique())


def test_a_gpu_series_that_pays_but_not_at_the_largest_size_is_said(gpu_ops):
    speedups = gpu_ops["speedups"]
    fft2 = speedups[(speedups["op"] == "fft2") & (speedups["device"] == "cuda")].sort_values("size")
    largest = fft2.index[-1]
    turned = speedups.copy()
    turned.loc[largest, "end_to_end_verdict"] = "slower"
    turned.loc[largest, "break_even_status"] = NOT_REACHED
    (line,) = [line for line in payoff_lines(turned, Judging()) if line.startswith("- fft2 on cuda")]
    assert f"but not at the largest size, n = {int(fft2['size'].iloc[-1])}" in line


def test_ops_that_pay_alike_on_a_gpu_share_one_sentence_and_a_table_of_their_numbers(gpu_ops):
    """fft2 and sort both pay at every size on cuda: one sentence names both, a table gives
    each its numbers; an op alone in its verdict keeps its own sentence."""
    lines = break_even_lines(gpu_ops["speedups"], Judging())
    shared = line_for(lines, "- On cuda (float32), with the copies counted, offloading pays at every size measured")
    assert "for fft2 and sort" in shared and "(95% CI)" in shared
    table = lines[lines.index(shared) + 2].splitlines()
    assert table[0] == "| op | n | end to end | with the data on the device |"
    assert [row.split(" | ")[0] for row in table[2:]] == ["| fft2", "| sort"]
    assert sum("pays at every size measured" in line for line in lines) == 1
    axpy = line_for(lines, "- axpy, float32 on cuda:")
    assert "does not pay at any size measured (up to n = 2048)" in axpy and "with the data already on the device" in axpy
    assert lines[-1] != ""


def test_payoff_sentences_of_empty_speedups():
    assert "no payoff can be stated" in payoff_lines(pd.DataFrame(), Judging())[0]


def test_bound_sentences(gpu_ops):
    lines = bound_lines(gpu_ops["timings"], gpu_ops["roofs"])
    matmul = line_for(lines, "- matmul on the cpu (float32, n = 2048, all = 4 threads)")
    assert "compute-bound (intensity 341 FLOP/B, ridge 50 FLOP/B)" in matmul
    assert "numpy 80% and torch 80% of the float32 roof (1,000 GFLOP/s)" in matmul
    axpy = line_for(lines, "- axpy on cuda (float32, n = 2048)")
    assert "memory-bound (intensity 0.17 FLOP/B" in axpy and "of the memory roof (3,000 GB/s)" in axpy
    assert bound_lines(gpu_ops["timings"], None) == bound_lines(gpu_ops["timings"], pd.DataFrame()) == []
    assert "were not measured" in bound_notes(gpu_ops["timings"], None)[0]


def test_bound_sentences_name_a_device_without_roofs_once(gpu_ops):
    lines = bound_lines(gpu_ops["timings"], roofs_frame(("cpu",)))
    notes = bound_notes(gpu_ops["timings"], roofs_frame(("cpu",)))
    assert notes == ["- No roofs were measured on cuda, so its cells are not placed against one."]
    assert lines and not any("on cuda" in line for line in lines)


def test_ops_without_a_model_are_left_out_of_the_bounds_and_said_once(gpu_ops):
    timings = gpu_ops["timings"].copy()
    timings.loc[timings["op"] == "axpy", ["gflops", "intensity"]] = float("nan")
    lines = bound_lines(timings, gpu_ops["roofs"])
    assert lines and not any("axpy" in line or "nan" in line or "–-bound" in line for line in lines)
    assert sum("axpy gives no FLOP and byte model" in note for note in bound_notes(timings, gpu_ops["roofs"])) == 1
