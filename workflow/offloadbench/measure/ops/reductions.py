"""Reductions: an n×n array down to one value per row, or to one value."""

from __future__ import annotations

from . import spec_op


def _sum_rows(lib, x):
    return x.sum(axis=1)


def _std_rows(lib, x):
    # The population std in both: numpy's default is ddof=0, torch's correction=1, and both
    # (numpy ≥ 2) take the array API's `correction`.
    return lib.std(x, axis=1, correction=0)


def _norm(lib, x):
    # The libraries' own norms, as users call them, accumulate float32 with errors growing
    # faster than √(n²): torch's fails the check from n ≈ 8192, and numpy's float16 norm
    # overflows (a float16 dot product) from n ≈ 443. Those cells are recorded as wrong.
    # numpy returns a numpy scalar, torch a 0-d tensor: a 1-element array in both.
    return lib.linalg.norm(x).reshape(1)


OPS = [
    spec_op("sum_rows", _sum_rows),
    spec_op("std_rows", _std_rows),
    spec_op("norm", _norm),
]
