"""Every figure fits a page in three grids: the default config's, the whole catalogue with user
kernels on cpu and cuda, and a comparison of three machines (tests/figure_cases.py). For each
figure: no two texts overlap, no text lies outside the figure or under 7 pt, and the size stays
within the page limits. This is what keeps the figures paper-ready as the catalogue grows."""

import matplotlib.pyplot as plt
import pytest
from figure_cases import CASES, LIMITS, figures_of, layout_problems, pages_tables, saved_size_in
from offloadbench.layout import BY_FAMILY, COMPARE_FIGURE_NAMES, FIGURE_NAMES, figure_parts, machine_figures
from offloadbench.report.figures.style import theme

PAGES = [f"{name}-{page}" if name in BY_FAMILY else name for name in FIGURE_NAMES for page in
         ((1, 2, 3) if name in BY_FAMILY else (None,))]


def _cases():
    names = {"compare": COMPARE_FIGURE_NAMES, "pages": PAGES}
    for case in CASES:
        for name in names.get(case, FIGURE_NAMES):
            yield case, name


@pytest.mark.parametrize(("case", "name"), list(_cases()))
def test_figure_fits_a_page_without_overlapping_text(case, name):
    theme()
    make = dict(figures_of(case))[name]
    fig = make()
    try:
        problems = layout_problems(fig, *LIMITS[case])
        width, height = saved_size_in(fig)
        print(f"{case} {name}: {width:.2f} × {height:.2f} in")
        assert not problems, f"{case} {name}: " + "; ".join(problems)
    finally:
        plt.close(fig)


def test_the_checker_sees_overlap_and_text_outside():
    theme()
    fig = plt.figure(figsize=(3, 2))
    fig.text(0.1, 0.5, "one label")
    fig.text(0.12, 0.5, "another label")
    fig.text(0.95, 0.5, "runs off the edge")
    fig.text(0.1, 0.1, "tiny", fontsize=5)
    problems = layout_problems(fig, 2.5, 2.5)
    plt.close(fig)
    assert any("overlaps" in p for p in problems)
    assert any("outside the figure" in p for p in problems)
    assert any("under 7 pt" in p for p in problems)
    assert any(p.startswith("size 3.00 × 2.00 in") for p in problems)


def test_a_grid_past_one_page_is_drawn_in_pages_of_whole_families():
    tables = pages_tables()
    assert machine_figures(tables) == PAGES
    parts = figure_parts(tables["timings"]["op"], tables["timings"]["dtype"])
    shown = [op for ops in parts.values() for op in ops]
    assert sorted(shown) == sorted(set(tables["timings"]["op"])) and len(shown) == len(set(shown))
    assert all(len(ops) * 4 <= 36 for ops in parts.values())
    assert parts["1"][:4] == ["matmul", "solve", "eigh", "batched_matmul"]  # a family is never split here


def test_each_transfer_panel_has_one_bar_per_size_and_phase():
    """Compiled and eager GPU cells of one op get panels of their own, never bars side by side
    that read as more sizes."""
    from figure_cases import catalogue_tables
    from offloadbench.report.figures.figures import transfer_overhead_figure

    theme()
    tables = catalogue_tables()
    fig = transfer_overhead_figure(tables["timings"], "bignode")
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    phases = 3  # copy in, compute, copy out; compute_then_plot adds the plotting
    for ax in fig.axes:
        bars = len(ax.patches)
        assert bars in (4 * phases, 4 * (phases + 1)), (ax.get_title(loc="left"), bars)
    assert any("compiled" in t for t in titles)
    plt.close(fig)
