import matplotlib.pyplot as plt
import pytest
from conftest import assert_real_figure, assert_shows_its_data
from offloadbench.analysis.tables import read_tables
from offloadbench.layout import FIGURE_NAMES
from offloadbench.report.figures.draw import FIGURES, draw
from offloadbench.verdicts import Judging


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_each_figure_is_drawn_from_gpu_tables(tmp_path, gpu_tables, name):
    pdf, png = tmp_path / f"{name}.pdf", tmp_path / f"{name}.png"
    draw(name, gpu_tables, "gpubox", str(pdf), str(png), Judging())
    assert_real_figure(pdf, png)


@pytest.mark.parametrize("name", [n for n in FIGURE_NAMES if n != "heatmap"])  # the heatmap: test_ops_figures
def test_each_figure_shows_its_data_within_its_axes(gpu_tables, name):
    fig = FIGURES[name](gpu_tables, "gpubox", Judging())
    try:
        assert_shows_its_data(fig)
    finally:
        plt.close(fig)


def test_the_data_check_finds_marks_outside_the_axes(gpu_tables):
    fig = FIGURES["speedup"](gpu_tables, "gpubox", Judging())
    ax = next(ax for ax in fig.axes if ax.get_lines())
    low = min(ax.get_ylim())
    ax.set_ylim(low, low * 1.0001)  # a range that cuts off every mark above it
    with pytest.raises(AssertionError, match="beyond"):
        assert_shows_its_data(fig)
    plt.close(fig)


def test_pngs_are_300_dpi(tmp_path, gpu_tables):
    from PIL import Image

    png = tmp_path / "speedup.png"
    draw("speedup", gpu_tables, "gpubox", str(tmp_path / "speedup.pdf"), str(png), Judging())
    dpi = Image.open(png).info.get("dpi")
    assert dpi and round(dpi[0]) == 300


def test_transfer_overhead_without_gpu_cells_says_so(tmp_path, gpu_tables):
    cpu_only = {k: v[v["device"] == "cpu"] if "device" in v else v for k, v in gpu_tables.items()}
    fig = FIGURES["transfer_overhead"](cpu_only, "laptop", Judging())
    assert any("No GPU cell was measured on laptop" in t.get_text() for t in fig.texts)
    assert len(fig.axes) == 0  # a message, no empty panel


def test_copy_cost_notes_share_one_place_under_the_figure(gpu_tables):
    speedups = gpu_tables["speedups"].assign(shares_cores=True, flagged=False)  # numpy baselines on every core
    fig = FIGURES["copy_cost"]({**gpu_tables, "speedups": speedups}, "gpubox", Judging())
    lowest = min(ax.get_position().y0 for ax in fig.axes)
    notes = [t.get_text() for t in fig.texts if t.get_position()[1] < lowest and "break-even" in t.get_text()]
    assert len(notes) == 1 and "hollow" not in notes[0]


def test_speedup_figure_has_a_line_at_one_and_log_size_axis(gpu_tables):
    fig = FIGURES["speedup"](gpu_tables, "gpubox", Judging())
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())
    labels = [t.get_text() for t in fig.texts]
    assert any("speedup over NumPy" in t for t in labels) and any(t.startswith("size n") for t in labels)


def test_tables_round_trip_through_csv(tmp_path, gpu_tables):
    for name, table in gpu_tables.items():
        table.to_csv(tmp_path / f"{name}.csv", index=False)
    tables = read_tables({name: str(tmp_path / f"{name}.csv") for name in gpu_tables})
    assert tables["timings"]["threads"].tolist() == gpu_tables["timings"]["threads"].tolist()
    assert tables["speedups"]["break_even_status"].tolist() == gpu_tables["speedups"]["break_even_status"].tolist()


@pytest.mark.parametrize("lo, hi", [(0.75, 1.2), (0.3, 30), (0.95, 1.05), (1e-3, 1e4)])
def test_log_ticks_label_every_range(lo, hi):
    from offloadbench.report.figures.style import log_ticks

    ticks = log_ticks(lo, hi)
    assert len(ticks) >= 2 and all(lo <= t <= hi for t in ticks)


@pytest.mark.parametrize("cpu_only", [True, False])
def test_the_memory_axis_reads_in_bytes_at_several_ticks(gpu_tables, cpu_only):
    """A range within one factor of 1024 (a CPU grid of two sizes) still gets several labelled
    ticks, and so does a GPU panel whose device memory line stretches the axis."""
    tables = {k: v[v["device"] == "cpu"] if cpu_only and "device" in v else v for k, v in gpu_tables.items()}
    fig = FIGURES["memory"](tables, "gpubox", Judging())
    fig.canvas.draw()
    for ax in fig.axes:
        lo, hi = ax.get_ylim()
        labels = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True)
                  if lo <= v <= hi and t.get_text()]
        assert len(labels) >= 3, labels
        assert all(label.split()[-1] in ("B", "KiB", "MiB", "GiB", "TiB") for label in labels), labels
