"""The correctness check: a result against a float64 reference, with a dtype-aware tolerance.

A fast wrong answer is a failure, not a speedup: a cell whose error exceeds the tolerance
gets status `error`. Ops compare sampled rows where a full reference would cost more than
the op itself (matmul: O(rows * n^2) instead of O(n^3)).
"""

from __future__ import annotations

import math

import numpy as np

# Unit roundoff (half the machine epsilon) of each storage format.
UNIT_ROUNDOFF = {
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
    "float32": 2.0**-24,
    "float64": 2.0**-53,
}
# TF32 keeps float32 storage but multiplies with a 10-bit mantissa.
TF32_UNIT_ROUNDOFF = 2.0**-11
SAFETY_FACTOR = 8.0


class WrongResult(Exception):
    """A result that cannot be compared with its reference (another shape or type)."""


def tolerance(dtype: str, error_growth: float, tf32: bool = False) -> float:
    """Relative (Frobenius) error allowed for sums of `error_growth` rounded terms.

    Random-sign rounding errors grow like sqrt(k); the factor 8 leaves room for blocked
    summation orders without letting a lower-precision path (e.g. TF32 in float32) pass.
    """
    u = UNIT_ROUNDOFF[dtype]
    if tf32 and dtype == "float32":
        u = TF32_UNIT_ROUNDOFF
    return SAFETY_FACTOR * u * math.sqrt(max(1.0, error_growth)) + 2 * u


def check_rows(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of the output rows to check (all rows when n is small)."""
    if n <= count:
        return np.arange(n)
    return np.sort(rng.choice(n, size=count, replace=False))


def relative_error(result, reference) -> float:
    """Frobenius-norm error of a result against its float64 reference (inf if not finite)."""
    result = np.asarray(result)
    result = result.astype(np.complex128 if np.iscomplexobj(result) else np.float64)
    reference = np.asarray(reference)
    if not np.all(np.isfinite(result)):
        return math.inf
    scale = np.linalg.norm(reference)
    diff = np.linalg.norm(result - reference)
    return float(diff / scale) if scale > 0 else float(diff)


def verdict(rel_err: float, dtype: str, error_growth: float, tf32: bool, rows: int | None,
            own_tolerance: float | None = None) -> dict:
    """The check's record; `rows` is the count of sampled rows, None when all were compared;
    `own_tolerance` a user kernel's own, in place of the dtype-aware one."""
    tol = own_tolerance if own_tolerance is not None else tolerance(dtype, error_growth, tf32)
    return {
        "rel_err": rel_err,
        "tolerance": tol,
        "passed": bool(rel_err <= tol),
        "rows_checked": "all" if rows is None else int(rows),
        "reference": "float64 NumPy on the host, from the same (rounded) inputs",
    }
