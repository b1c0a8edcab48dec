"""Compute, then plot: a matmul-based field copied to the host and rendered with matplotlib,
the seed's workflow."""

from __future__ import annotations

import io
import math

import numpy as np

from .op import rows_error, spec_op


def field(lib, a, b):
    """Matmul, an elementwise transform, and a row-wise reduction: a 2-D field to plot."""
    n = a.shape[-1]
    c = (a @ b) * (1.0 / math.sqrt(n))
    f = lib.exp(c * c * -0.5)
    return f - f.mean(axis=1, keepdims=True)


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


OPS = [
    spec_op("compute_then_plot", field, error=rows_error(lambda inputs, rows: field(np, inputs[0][rows], inputs[1])),
            finish=render_field_png, checks_sampled_rows=True),
]
