"""Whole outputs written from results already on disk, without measuring and without torch:
a comparison of machines, and a machine's tables, figures and report re-rendered from its
raw records (a bundle from a cluster node, the shipped H200 example), and the example page
of the docs."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..analysis.compare import compare
from ..analysis.measured import Analysis
from ..analysis.sources import Source
from ..analysis.tables import read_tables, with_series_rows, with_thresholds, write_judging, write_table
from ..config import load_foreign_config, validate
from ..csvsafe import write_csv
from ..layout import JUDGING, TABLES, machine_figures
from ..records import load_environment
from ..run_settings import RunSettings
from .figures.compare_figures import COMPARE_FIGURES, draw_comparison_figure
from .figures.draw import draw
from .text.comparison import write_comparison_report
from .text.example import FIGURES as EXAMPLE_FIGURES
from .text.example import page_text
from .text.latex import write_comparison_latex, write_latex
from .text.markdown import Inputs, write_report
from .text.summary import answer_tables


def write_comparison(sources: list[Source], analysis: Analysis, out_dir: str) -> None:
    """Everything under results/compare/<A>-vs-<B>/."""
    out = Path(out_dir)
    comparison = compare(sources, analysis)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    write_csv(comparison.comparison, out / "comparison.csv")
    write_csv(comparison.provenance, out / "provenance_diff.csv")
    for name in COMPARE_FIGURES:
        draw_comparison_figure(name, comparison, str(out / "figures" / f"{name}.pdf"), str(out / "figures" / f"{name}.png"))
    write_comparison_latex(comparison.comparison, out, comparison.labels, comparison.judging)
    write_comparison_report(comparison, str(out / "report.md"), str(out / "report.html"))


def run_settings(source: Source) -> dict:
    """The config a bundle was measured with (its config.yaml), else the defaults."""
    path = source.folder / "config.yaml"
    found = path.exists() or path.is_symlink()  # a link is refused by the reader, not passed over
    return load_foreign_config(path, f"the {source.kind}'s config.yaml") if found else validate({})


def render(source: Source, analysis: Analysis, out_dir: str) -> None:
    """A machine's tables, figures, LaTeX and report, rebuilt from its raw records. Every
    file is read and checked before anything is drawn or written, so a bad one costs a
    second, not a whole rendering."""
    out = Path(out_dir)
    config = run_settings(source)
    written = source.tables(analysis)
    tables = with_series_rows(written)  # each decision with its sizes, losses and states, as read_tables gives
    own = source.judging()  # judging.json: the policy its own tables were judged with, if it has them
    rejudged = "" if own in (None, analysis.judging) else (
        f"Re-judged here under {analysis.judging.describe()}: its own tables were judged under {own.describe()}.")
    inputs = Inputs(source.label, source.environment(), tables, RunSettings.from_config(config).measure,
                    config["analysis"], with_thresholds(analysis.judging),
                    source.rounds(), source.settle(), rejudged)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        write_table(name, written[name], out / f"{name}.csv")
    write_judging(analysis.judging, str(out / JUDGING))
    for name in machine_figures(tables):
        draw(name, tables, source.label, str(out / "figures" / f"{name}.pdf"), str(out / "figures" / f"{name}.png"),
             analysis.judging)
    write_latex(tables, out, source.label, analysis.judging)
    write_report(inputs, str(out / "report.md"), str(out / "report.html"))


EXAMPLE_TABLES = ("timings", "speedups", "transfer", "memory", "roofs")  # what its figures draw


def write_example(folder: Path, out: Path) -> list[Path]:
    """The example page of a results folder, with its figures (PNG), into `out`; returns the
    files written (`make example`: docs/example/ from tests/data/h200)."""
    label = folder.resolve().name
    answer, judging = answer_tables(folder, label)  # decisions and controls, read once for all
    tables = {**read_tables({name: str(folder / f"{name}.csv") for name in EXAMPLE_TABLES}), **answer}
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="offloadbench-example-") as tmp:
        for name in EXAMPLE_FIGURES:
            png = out / f"{name}.png"
            draw(name, tables, label, str(Path(tmp) / f"{name}.pdf"), str(png), judging)
            written.append(png)
    page = out / "README.md"
    page.write_text(page_text(answer, judging, load_environment(folder / "environment.json"), label))
    return [page, *written]
