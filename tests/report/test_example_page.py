"""The example page (docs/example/) is what `make example` writes from the shipped H200
results: its text exactly, its figures by what they show (the pixels, within what a
renderer's rounding moves), never by bytes, which a PNG's metadata changes."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.image import imread
from offloadbench.report.publish import write_example
from offloadbench.report.text.example import FIGURES

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "example"
H200 = ROOT / "tests" / "data" / "h200"


def differs(a: Path, b: Path) -> str:
    """Why two pictures show different things, or "" where they show the same: the same size,
    and under 0.2% of pixels differing by more than a tenth of the range."""
    x, y = imread(a), imread(b)
    if x.shape != y.shape:
        return f"sizes {x.shape} and {y.shape}"
    changed = float((np.abs(x.astype(float) - y.astype(float)).max(axis=-1) > 0.1).mean())
    return f"{changed:.2%} of pixels differ" if changed > 0.002 else ""


def test_the_committed_example_page_is_what_make_example_writes(tmp_path):
    write_example(H200, tmp_path / "example")
    page = (tmp_path / "example" / "README.md").read_text()
    assert page == (COMMITTED / "README.md").read_text(), "docs/example/README.md is stale: run make example"
    for name in FIGURES:
        assert not differs(tmp_path / "example" / f"{name}.png", COMMITTED / f"{name}.png"), \
            f"docs/example/{name}.png is stale: run make example"
    assert "use torch" in page and "](heatmap.png)" in page and "](copy_cost.png)" in page


def test_a_figure_that_shows_other_numbers_is_told_apart(tmp_path):
    folder = tmp_path / "h200"
    shutil.copytree(H200, folder)
    speedups = pd.read_csv(folder / "speedups.csv", dtype=str, keep_default_na=False)
    cuda = speedups["device"] == "cuda"
    for column in ("end_to_end_speedup", "end_to_end_speedup_ci_low", "end_to_end_speedup_ci_high"):
        speedups.loc[cuda, column] = (speedups.loc[cuda, column].astype(float) / 3).astype(str)
    speedups.to_csv(folder / "speedups.csv", index=False)
    write_example(folder, tmp_path / "out")
    assert differs(tmp_path / "out" / "heatmap.png", COMMITTED / "heatmap.png")
    assert differs(tmp_path / "out" / "copy_cost.png", COMMITTED / "copy_cost.png")
