"""The four figures of a comparison of machines render as real images in every shape a
comparison takes: B without a GPU, A without a GPU, and three machines."""

import copy
import functools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import (
    assert_real_figure,
    assert_real_image,
    assert_shows_its_data,
    gpu_machine_records,
    group_typed,
    make_transfer_record,
    tables_of,
)
from matplotlib.colors import to_rgb
from offloadbench.analysis.breakeven import NOT_REACHED
from offloadbench.analysis.compare import COMPARISON_COLUMNS, MachineComparison, compare_pair
from offloadbench.analysis.measured import Analysis
from offloadbench.records import Environment
from offloadbench.report.captions import COMPARE_CAPTIONS
from offloadbench.report.figures.compare_figures import (
    COMPARE_FIGURES,
    draw_comparison_figure,
)
from offloadbench.report.figures.style import colours_of, theme
from offloadbench.verdicts import Judging

RESAMPLES = 100


def _noisy(samples: list[float], factor: float, rng) -> list[float]:
    return [s * factor * float(np.exp(rng.normal(0, 0.02))) for s in samples]


def rescaled(records: list[dict], factors: dict, keep=lambda record: True, seed: int = 0,
             unstable: tuple = ()) -> list[dict]:
    """Records of another machine: each phase's samples times its factor, with fresh noise
    so that the two machines' CIs differ; cells named in `unstable` are flagged."""
    rng = np.random.default_rng(seed)
    out = []
    for record in records:
        if not keep(record):
            continue
        record = copy.deepcopy(record)
        cell = record["cell"]
        factor = factors.get(cell["device"], 1.0)
        record["samples_s"] = _noisy(record["samples_s"], factor, rng)
        for name, phase in record["phases"].items():
            phase["samples_s"] = _noisy(phase["samples_s"], factors.get(f"{cell['device']}:{name}", factor), rng)
        if (cell["library"], cell["device"], cell["size"]) in unstable:
            record["diagnostics"] = {"unstable": True, "flags": ["two modes"]}
        out.append(record)
    return out


def with_second_op(records: list[dict]) -> list[dict]:
    """The same cells again under a second op, a little faster but with dearer copies, so
    that figures facet by op and its break-even lies within the grid."""
    # All cores and the GPU only: every bootstrap CI costs time, and these cells suffice.
    other = rescaled(records, {"cpu": 0.6, "cuda": 0.7, "cuda:end_to_end": 2.1}, seed=99,
                     keep=lambda r: r["cell"]["threads"] == "all" or r["cell"]["device"] != "cpu")
    for record in other:
        record["cell"]["op"] = "sort"
    return records + other


def scaled_transfer(link_gbs: float, slower: float) -> dict:
    record = make_transfer_record(link_gbs=link_gbs)
    record["link"]["kind"] = "PCIe gen 3 x16"
    for point in record["points"]:
        point["samples_s"] = [s * slower for s in point["samples_s"]]
    return record


def with_compiled(records: list[dict]) -> list[dict]:
    """numpy compiled beside the eager cells, on the cpu (all threads) and on cuda: the mode is
    part of a cell's identity in every comparison figure."""
    extra = []
    for r in records:
        cell = r["cell"]
        if cell["op"] == "matmul" and ((cell["library"], cell["threads"]) == ("numpy", "all") or cell["device"] == "cuda"):
            twin = copy.deepcopy(r)
            twin["cell"].update(library="numpy", mode="compiled")
            twin["compile"] = {"first_call_s": 0.5, "graphs": 1, "graph_breaks": 0, "fallback": "", "backend": "inductor",
                               "mode": "default", "torch_version": "2.13.0", "cache": {"cold": True, "hits": 0}}
            extra.append(twin)
    return records + extra


@functools.cache
def machines() -> dict:
    """Records and copy sweeps of three machines: a GPU node, a cpu-only laptop and a
    slower GPU node whose copies are dear enough that offloading never pays."""
    gpu = with_compiled(with_second_op(gpu_machine_records()))
    laptop = rescaled(gpu, {"cpu": 3.0}, keep=lambda r: r["cell"]["device"] == "cpu", seed=1,
                      unstable={("torch", "cpu", 1024)})
    old = rescaled(gpu, {"cpu": 1.5, "cuda": 2.0, "cuda:end_to_end": 30.0, "cuda:h2d": 20.0}, seed=2)
    return {
        "gpubox": (gpu, [make_transfer_record()]),
        "laptop": (laptop, []),
        "oldgpu": (old, [scaled_transfer(16.0, 4.0)]),
    }


@functools.cache
def measured(label: str) -> tuple:
    """A machine's cells and tables, built once for every comparison it takes part in."""
    records, transfer = machines()[label]
    cells = group_typed(records, Analysis(resamples=RESAMPLES), label)
    return cells, tables_of(records, label, transfer, resamples=RESAMPLES)


def build_comparison(labels: list[str]) -> MachineComparison:
    reference, *others = labels
    parts = [
        compare_pair(measured(reference)[0], measured(other)[0], (reference, other), Judging(),
                     (measured(reference)[1]["speedups"], measured(other)[1]["speedups"]))
        for other in others
    ]
    return MachineComparison(labels, pd.concat(parts, ignore_index=True), pd.DataFrame(),
                      {label: measured(label)[1] for label in labels}, {label: Environment.from_json({}) for label in labels}, [], Judging())


SHAPES = {
    "b-without-gpu": ["gpubox", "laptop"],
    "a-without-gpu": ["laptop", "gpubox"],
    "three-machines": ["gpubox", "laptop", "oldgpu"],
}


@functools.cache
def comparison_of(shape: str) -> MachineComparison:
    return build_comparison(SHAPES[shape])


@pytest.mark.parametrize("name", COMPARE_FIGURES)
def test_each_figure_is_saved_as_pdf_and_png(tmp_path, name):
    pdf, png = tmp_path / f"{name}.pdf", tmp_path / f"{name}.png"
    draw_comparison_figure(name, comparison_of("three-machines"), str(pdf), str(png))
    assert_real_figure(pdf, png)


@pytest.mark.parametrize("shape", ["b-without-gpu", "a-without-gpu"])
@pytest.mark.parametrize("name", COMPARE_FIGURES)
def test_each_figure_renders_with_two_machines(tmp_path, shape, name):
    # PNG only: embedding the fonts in a PDF costs a second a figure and is tested above.
    theme()
    fig = COMPARE_FIGURES[name](comparison_of(shape))
    assert_shows_its_data(fig)
    fig.savefig(tmp_path / "figure.png", dpi=200)
    plt.close(fig)
    assert_real_image(tmp_path / "figure.png")


def test_registry_and_captions_agree():
    assert list(COMPARE_FIGURES) == ["speedups", "ratio", "break_even", "bandwidth"]
    assert set(COMPARE_CAPTIONS) == set(COMPARE_FIGURES)
    assert all(caption.endswith(".") for caption in COMPARE_CAPTIONS.values())


def test_the_synthetic_machines_cover_what_the_figures_show():
    three = comparison_of("three-machines")
    verdicts = {*three.comparison["verdict"], *comparison_of("a-without-gpu").comparison["verdict"]}
    assert verdicts >= {"faster", "slower", "undecided"}
    assert (three.tables["oldgpu"]["speedups"]["break_even_status"] == NOT_REACHED).any()
    assert three.tables["laptop"]["speedups"]["device"].eq("cpu").all()


def test_each_machine_keeps_its_colour_across_figures():
    colours = colours_of(["gpubox", "laptop", "oldgpu"])
    assert len(set(colours.values())) == 3
    assert colours_of(["gpubox", "laptop"])["laptop"] == colours["laptop"]
    for name in ("break_even", "bandwidth"):
        fig = COMPARE_FIGURES[name](comparison_of("three-machines"))
        legend = fig.legends[0]
        seen = {text.get_text().split(":")[0]: to_rgb(handle.get_color())
                for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True)
                if text.get_text().split(":")[0] in colours}
        assert seen == {label: to_rgb(colour) for label, colour in colours.items()}, name
        plt.close(fig)


def _texts(fig) -> str:
    artists = [*fig.texts, *(t for ax in fig.axes for t in [*ax.texts, ax.yaxis.label, ax.xaxis.label])]
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]:
        artists += legend.get_texts()
    return "\n".join(a.get_text() for a in artists)


def test_ratio_axis_says_which_way_is_faster():
    fig = COMPARE_FIGURES["ratio"](comparison_of("three-machines"))
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    assert "below 1: B faster" in _texts(fig)
    assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())
    plt.close(fig)


def test_machines_without_a_gpu_are_named_in_the_break_even_figure():
    fig = COMPARE_FIGURES["break_even"](comparison_of("a-without-gpu"))
    assert "laptop: no GPU series" in _texts(fig)
    plt.close(fig)


def test_no_gpu_anywhere_is_said_in_one_panel():
    cpu_only = copy.copy(comparison_of("b-without-gpu"))
    cpu_only.tables = {label: {name: table[table["device"] == "cpu"] for name, table in tables.items()
                               if name != "transfer"} | {"transfer": tables["transfer"].iloc[0:0]}
                       for label, tables in cpu_only.tables.items()}
    for name, says in (("break_even", "Neither gpubox nor laptop has a GPU series"),
                       ("bandwidth", "No host↔device copy was measured on gpubox, laptop")):
        fig = COMPARE_FIGURES[name](cpu_only)
        assert len(fig.axes) == 0 and says in _texts(fig)
        plt.close(fig)


def test_an_empty_comparison_says_so():
    empty = copy.copy(comparison_of("b-without-gpu"))
    empty.comparison = pd.DataFrame(columns=COMPARISON_COLUMNS)
    fig = COMPARE_FIGURES["ratio"](empty)
    assert len(fig.axes) == 0 and "No cell" in _texts(fig)
    plt.close(fig)
