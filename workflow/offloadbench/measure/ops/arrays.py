"""The array ops of the catalogue, one family after the other: elementwise, reductions,
scans and sorts, spectral, stencils."""

from __future__ import annotations

from ...catalogue import AXPY_SCALAR
from .op import spec_op

# Elementwise ops: one pass over the data, memory-bound (axpy) or transcendental-bound.


def _axpy(lib, x, y):
    return AXPY_SCALAR * x + y


def _transcendental(lib, x, y):
    return lib.exp(lib.sin(x)) * lib.cos(y)


# Reductions: an n×n array down to one value per row, or to one value.


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


# Scans and sorts: data-dependent order rather than arithmetic.


def _cumsum(lib, x):
    return lib.cumsum(x, axis=1)


def _sort(lib, x):
    result = lib.sort(x)
    return getattr(result, "values", result)  # torch gives the indices too, as (values, indices)


# Spectral: the 2-D real FFT. NumPy ≥ 2 and torch both transform float32 in float32.


def _fft2(lib, x):
    return lib.fft.rfft2(x)


# Stencils: the 5-point Laplacian, the kernel of explicit PDE solvers.


def _laplacian(lib, u):
    return u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]


OPS = [
    spec_op("axpy", _axpy),
    spec_op("transcendental", _transcendental),
    spec_op("sum_rows", _sum_rows),
    spec_op("std_rows", _std_rows),
    spec_op("norm", _norm),
    spec_op("cumsum", _cumsum),
    spec_op("sort", _sort),
    spec_op("fft2", _fft2),
    spec_op("laplacian", _laplacian),
]
