"""Elementwise ops: one pass over the data, memory-bound (axpy) or transcendental-bound."""

from __future__ import annotations

from ...catalogue import AXPY_SCALAR
from . import spec_op


def _axpy(lib, x, y):
    return AXPY_SCALAR * x + y


def _transcendental(lib, x, y):
    return lib.exp(lib.sin(x)) * lib.cos(y)


OPS = [
    spec_op("axpy", _axpy),
    spec_op("transcendental", _transcendental),
]
