"""The operations a cell can measure, written once for numpy and torch.

An op gives: random inputs, the computation (the same code runs on numpy arrays and torch
tensors, `lib` being the module), an optional host-side finish (plotting), the FLOP and
byte model, and a float64 reference for a sample of output rows, so that the check stays
cheap at sizes where a full float64 reference would cost more than the benchmark.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


FINISH_PEAK_COPIES = 10  # imshow peaks near 8 float64 copies of the field (measured at 8192²)


@dataclass(frozen=True)
class Op:
    name: str
    summary: str
    n_inputs: int
    compute: Callable  # compute(lib, *inputs) -> result (same library and device)
    reference_rows: Callable  # reference_rows(inputs as float64 ndarrays, rows) -> ndarray
    flops: Callable[[int], float]
    finish: Callable[[np.ndarray], object] | None = None  # host work on the result

    def input_shape(self, n: int) -> tuple[int, int]:
        return (n, n)

    def result_bytes(self, n: int, itemsize: int) -> int:
        return n * n * itemsize

    def input_bytes(self, n: int, itemsize: int) -> int:
        return self.n_inputs * n * n * itemsize

    def working_set_bytes(self, n: int, itemsize: int) -> int:
        """Peak bytes one measurement holds: float64 generation, inputs, results, reference,
        and, for ops that plot, matplotlib's float64 working copies of the field."""
        square = n * n
        generation = 8 * square  # random numbers are drawn in float64, then cast
        temporaries = 3 * square * itemsize  # result plus elementwise temporaries
        rendering = FINISH_PEAK_COPIES * 8 * square if self.finish else 0
        return generation + self.input_bytes(n, itemsize) + temporaries + rendering

    def inner_dimension(self, n: int) -> int:
        """Length of the sums behind each output element, which sets the rounding error."""
        return n


def _matmul(lib, a, b):
    return a @ b


def _matmul_reference(inputs, rows):
    a, b = inputs
    return a[rows] @ b


def _field(lib, a, b):
    """Matmul, an elementwise transform, and a row-wise reduction: a 2-D field to plot."""
    n = a.shape[-1]
    c = (a @ b) * (1.0 / math.sqrt(n))
    f = lib.exp(c * c * -0.5)
    return f - f.mean(axis=1, keepdims=True)


def _field_reference(inputs, rows):
    a, b = inputs
    return _field(np, a[rows], b)


def render_field_png(values: np.ndarray, dpi: int = 100) -> bytes:
    """Render a 2-D field as an analysis script would: imshow, colour bar, PNG."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    fig = Figure(figsize=(4, 3.2), dpi=dpi)
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="viridis", interpolation="antialiased")
    fig.colorbar(image, ax=ax, label="anomaly")
    ax.set_title(f"field {values.shape[0]}×{values.shape[1]}")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    # The figure holds the field in reference cycles; with the garbage collector off while
    # sampling, each render would leak a copy of it. Drop the data explicitly.
    image.set_data(np.zeros((1, 1)))
    fig.clear()
    return buffer.getvalue()


OPS: dict[str, Op] = {
    "matmul": Op(
        name="matmul",
        summary="C = A @ B for square n×n matrices",
        n_inputs=2,
        compute=_matmul,
        reference_rows=_matmul_reference,
        flops=lambda n: 2.0 * n**3,
    ),
    "compute_then_plot": Op(
        name="compute_then_plot",
        summary=(
            "F = exp(-(A @ B / sqrt n)^2 / 2) minus its row means, copied to the host "
            "and rendered to a PNG with matplotlib"
        ),
        n_inputs=2,
        compute=_field,
        reference_rows=_field_reference,
        flops=lambda n: 2.0 * n**3 + 6.0 * n**2,
        finish=render_field_png,
    ),
}


def get_op(name: str) -> Op:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None
