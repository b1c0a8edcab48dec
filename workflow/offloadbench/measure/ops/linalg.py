"""Linear algebra: the compute-bound end of the catalogue, and batched small products
(the latency regime).

numpy.linalg factorises float32 in float64 and rounds the result (its `_commonType`), so
numpy's float32 solve and eigh cells time float64 work; torch's stay in float32.
"""

from __future__ import annotations

import math

import numpy as np

from ..correctness import relative_error
from .op import rows_error, spec_op


def _matmul(lib, a, b):
    return a @ b


def _solve(lib, a, b):
    return lib.linalg.solve(a, b)


def _diagonally_dominant(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """A + 2n·I, whose condition number is at most 3 at every n (catalogue.SOLVE_CONDITION_BOUND)."""
    a, b = arrays
    n = a.shape[0]
    a.flat[:: n + 1] += 2.0 * n
    return [a, b]


def _eigh(lib, a):
    values, vectors = lib.linalg.eigh(a)
    return values, vectors


def _symmetric(arrays: list[np.ndarray]) -> list[np.ndarray]:
    (m,) = arrays
    return [(m + m.T) * 0.5]  # stays symmetric when rounded to the cell's dtype


def _eigh_error(inputs: list[np.ndarray], result, rows: np.ndarray) -> float:
    """The worse of the eigenvalues' error and the residual ‖A·v − λ·v‖ / (‖A‖₂·‖v‖) of the
    sampled eigenpairs: eigenvectors are only defined up to sign (and within clusters), so
    they are checked through what they must satisfy, not compared."""
    (a,), (values, vectors) = inputs, result
    reference = np.linalg.eigvalsh(a)
    pairs = np.asarray(vectors, dtype=np.float64)[:, rows]
    if not np.all(np.isfinite(pairs)):
        return math.inf
    residual = a @ pairs - pairs * np.asarray(values, dtype=np.float64)[rows]
    scale = np.max(np.abs(reference)) * np.linalg.norm(pairs)  # ‖A‖₂ = max |λ| for symmetric A
    return max(relative_error(values, reference), float(np.linalg.norm(residual) / scale))


OPS = [
    spec_op("matmul", _matmul, error=rows_error(lambda inputs, rows: inputs[0][rows] @ inputs[1]),
            checks_sampled_rows=True),
    spec_op("solve", _solve, adjust=_diagonally_dominant),
    spec_op("eigh", _eigh, error=_eigh_error, adjust=_symmetric, checks_sampled_rows=True),
    spec_op("batched_matmul", _matmul),
]
