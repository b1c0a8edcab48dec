"""map_text: every text cell changed in one pass, numbers and missing values as they were."""

from __future__ import annotations

import numpy as np
import pandas as pd
from offloadbench.textcells import map_text


def test_only_text_cells_change_and_the_input_stays_as_it_was():
    frame = pd.DataFrame({"op": ["matmul", "=fft2", None], "size": [256, 1024, 2048],
                          "ratio": [1.5, np.nan, 0.5], "flag": ["", "hot", np.nan]})
    before = frame.copy()
    out = map_text(frame, str.upper)
    assert out["op"].tolist()[:2] == ["MATMUL", "=FFT2"] and pd.isna(out["op"].iloc[2])
    assert out["flag"].tolist()[:2] == ["", "HOT"] and pd.isna(out["flag"].iloc[2])
    assert out["size"].tolist() == [256, 1024, 2048] and out["size"].dtype == frame["size"].dtype
    assert out["ratio"].iloc[0] == 1.5 and np.isnan(out["ratio"].iloc[1])
    assert list(out.columns) == ["op", "size", "ratio", "flag"]  # names change only when asked
    pd.testing.assert_frame_equal(frame, before)


def test_column_names_change_when_asked_and_repeated_names_keep_their_places():
    frame = pd.DataFrame([["a", 1, "b"]], columns=["x", "n", "x"])
    out = map_text(frame, lambda text: text + "!", names=True)
    assert list(out.columns) == ["x!", "n!", "x!"]
    assert out.iloc[0].tolist() == ["a!", 1, "b!"]


def test_a_frame_without_rows_or_text_comes_back_as_a_copy():
    assert map_text(None, str.upper) is None
    empty = pd.DataFrame({"op": pd.Series([], dtype=object)})
    assert map_text(empty, str.upper).empty
    numbers = pd.DataFrame({"n": [1, 2]})
    out = map_text(numbers, str.upper)
    pd.testing.assert_frame_equal(out, numbers)
    assert out is not numbers
