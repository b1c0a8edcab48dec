"""Scans and sorts: data-dependent order rather than arithmetic."""

from __future__ import annotations

from . import is_torch, spec_op


def _cumsum(lib, x):
    return lib.cumsum(x, axis=1)


def _sort(lib, x):
    return lib.sort(x).values if is_torch(lib) else lib.sort(x)  # torch also returns the indices


OPS = [
    spec_op("cumsum", _cumsum),
    spec_op("sort", _sort),
]
