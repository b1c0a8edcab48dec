"""Every grid a user can write gets its report: generated grid shapes (tests/shapes.py),
their results folders built synthetically, run through the aggregate, the report, LaTeX,
the terminal summary, the figures, `render` and `compare`, in process.

Each must finish without an exception (a refusal is one line); the report names every op
of the grid, and every figure is drawn or replaced by its one-line message. The cases are
derandomized (a fixed seed, no database), so a failure reproduces.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source
from offloadbench.analysis.tables import read_tables, write_tables
from offloadbench.config import validate
from offloadbench.errors import UserError
from offloadbench.layout import JUDGING, TABLES, machine_figures
from offloadbench.report.figures import compare_figures, style
from offloadbench.report.figures import draw as figure_drawing
from offloadbench.report.figures.draw import draw
from offloadbench.report.publish import render, write_comparison
from offloadbench.report.text.latex import write_latex
from offloadbench.report.text.markdown import load_inputs, write_report
from offloadbench.report.text.summary import summarize
from offloadbench.verdicts import Judging
from rounds import settings_file
from shapes import Shape, shapes, write_results

# a policy other than the default, so that a label that ignores it shows
ANALYSIS = Analysis(resamples=100, judging=Judging(min_effect=0.1, confidence=0.9))
SETTINGS = validate({}, read_kernels=False)


def generated(examples: int):
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def aggregate(folder: Path, label: str) -> dict:
    """What the aggregate rule does, then the tables read back as the later rules read them."""
    source = Source(label, folder)
    outputs = {name: str(folder / f"{name}.csv") for name in TABLES}
    write_tables(source.record_paths(), source.device_records("transfer"), source.device_records("roofs"),
                 str(folder / "environment.json"), label, ANALYSIS, outputs, str(folder / JUDGING))
    return read_tables(outputs)


def report(folder: Path, label: str, tables: dict) -> str:
    paths = SimpleNamespace(**{name: str(folder / f"{name}.csv") for name in TABLES},
                            environment=str(folder / "environment.json"), judging=str(folder / JUDGING), rounds=[],
                            settings=str(settings_file(folder)))
    write_report(load_inputs(paths, label, SETTINGS["analysis"]), str(folder / "report.md"), str(folder / "report.html"))
    return (folder / "report.md").read_text()


def assert_names_every_op(text: str, shape: Shape) -> None:
    for op in shape.ops:
        assert f"### {op}" in text, f"the report has no section of {op}"


@generated(40)
@given(shapes())
def test_every_shape_is_aggregated_reported_typeset_and_summarized(shape):
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_results(shape, Path(tmp) / shape.label)
        tables = aggregate(folder, shape.label)
        text = report(folder, shape.label, tables)
        assert_names_every_op(text, shape)
        written = write_latex(tables, folder, shape.label, ANALYSIS.judging)
        assert (folder / "claims.tex").read_text().startswith("%")
        for document in [text, *(path.read_text() for path in written.values())]:
            assert not re.search(r"95\\?%[ ~]*(CI|conf)", document)  # every interval is labelled at the run's level
        lines = summarize(folder)
        assert lines[0].startswith("offloadbench: the answer for")


def png_only(make, pdf_path: str, png_path: str) -> None:
    """save_figure without the PDF (its font subsetting costs more than the drawing) and at
    a low resolution: what is tested here is that every figure is laid out and drawn."""
    style.theme()
    figure = make()
    figure.savefig(png_path, dpi=30)
    plt.close(figure)


@generated(5)
@given(shapes())
def test_every_figure_of_a_shape_is_drawn_or_says_why_not(shape):
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(figure_drawing, "save_figure", png_only)
        folder = write_results(shape, Path(tmp) / shape.label)
        tables = aggregate(folder, shape.label)
        for name in machine_figures(tables):
            png = folder / f"{name}.png"
            draw(name, tables, shape.label, str(folder / f"{name}.pdf"), str(png), ANALYSIS.judging)
            assert png.stat().st_size > 0, name


@generated(3)
@given(shapes(label="first"), shapes(label="second"), st.booleans())
def test_two_machines_of_different_shapes_compare_and_render(first, second, as_bundle_config):
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        for module in (figure_drawing, compare_figures):
            patch.setattr(module, "save_figure", png_only)
        sources = [Source(shape.label, write_results(shape, Path(tmp) / shape.label)) for shape in (first, second)]
        if as_bundle_config:  # a bundle carries the config it was measured with
            (sources[1].folder / "config.yaml").write_text(json.dumps({"grid": {"ops": ["matmul"]}}))
        try:
            write_comparison(sources, ANALYSIS, str(Path(tmp) / "compare"))
            assert (Path(tmp) / "compare" / "report.md").is_file()
        except UserError as error:  # two machines with no cell in common: one line says so
            assert "nothing to compare" in str(error) and "\n" not in str(error)
        render(sources[1], ANALYSIS, str(Path(tmp) / "rendered"))
        assert_names_every_op((Path(tmp) / "rendered" / "report.md").read_text(), second)


@pytest.mark.parametrize("failing", [("matmul",), ("matmul", "kplain")])
def test_an_op_whose_every_cell_failed_gets_a_report_that_says_so(tmp_path, failing):
    """The shape a user hit: a kernel that always raises beside one without models."""
    shape = Shape("held", ("kplain", "matmul", "sum_rows"), ("numpy", "torch"), ("cpu",), (64,), ("1",),
                  ("eager", "compiled"), processes=1, controls=0, failing_ops=failing)
    folder = write_results(shape, tmp_path / "held")
    text = report(folder, "held", aggregate(folder, "held"))
    assert_names_every_op(text, shape)
    assert "No cell of matmul finished ok (4 error: RuntimeError during check" in text
    if "kplain" not in failing:
        assert "kplain gives no FLOP and byte model, so it has no place on the roofline" in text
