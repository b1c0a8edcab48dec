"""Stencils: the 5-point Laplacian, the kernel of explicit PDE solvers."""

from __future__ import annotations

from . import spec_op


def _laplacian(lib, u):
    return u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]


OPS = [
    spec_op("laplacian", _laplacian),
]
