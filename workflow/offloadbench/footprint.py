"""What one call must hold in memory as n grows: its inputs, and the extra bytes the call
allocates (results and temporaries), each fitted to what was measured.

A catalogue op knows its input shapes, so its inputs are exact; its extra bytes are a
multiple of its outputs (catalogue.call_bytes). A kernel of the user's may take anything
(three 3-D fields of (n+4)×(n+4)×8, a matrix and four vectors, n×3 points, scalars), so
both parts are fitted as polynomials in n with non-negative coefficients on the powers
real arrays have (a scalar, a vector, a matrix or a field of fixed depth, a cube): the
fewest powers that fit every measured point within FIT_TOLERANCE. A matrix and four vectors
are then 4n² + 16n bytes, which a single power (n^1.7 through two small sizes) would get
wrong by a factor of three at n = 75,000. Where one size was measured, the fit takes the
shape it is given (the inputs' polynomial for the extra bytes, or a power of n) through
that point. The largest n that fits a memory is then found by bisection.

Pure Python: the Snakefile's estimate, the workers' out-of-memory check and the analysis
all use it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

POWERS = (0, 1, 2, 3)  # scalars, vectors, matrices (or fields of fixed depth), cubes
FIT_TOLERANCE = 0.02  # the fewest powers that fit every point within 2% win
LARGEST_N = 2**40  # the search stops here: n×3 points of a few bytes each fit a host up to n ≈ 10⁹


@dataclass(frozen=True)
class Polynomial:
    """bytes(n) = Σ coefficient · n^power, every coefficient ≥ 0."""

    terms: tuple[tuple[int, float], ...]

    def __call__(self, n: float) -> float:
        return sum(c * float(n) ** p for p, c in self.terms)

    @property
    def degree(self) -> int:
        """The highest power with a coefficient above 0: how the bytes grow at large n."""
        return max((p for p, c in self.terms if c > 0), default=0)

    def through(self, n: float, value: float) -> Polynomial:
        """The same shape scaled to pass through (n, value)."""
        at = self(n)
        return Polynomial(tuple((p, c * value / at) for p, c in self.terms)) if at > 0 else self


def power(exponent: int) -> Polynomial:
    return Polynomial(((exponent, 1.0),))


def _usable(points: Iterable[tuple[float, float]]) -> dict[float, float]:
    """The largest reading at each size, of the readings that are positive, finite numbers."""
    found: dict[float, float] = {}
    for n, value in points:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            continue
        if n >= 1:
            found[float(n)] = max(found.get(float(n), 0.0), float(value))
    return found


def _solve(matrix: list[list[float]], right: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting (a system of at most four unknowns)."""
    size = len(right)
    rows = [[*row, value] for row, value in zip(matrix, right, strict=True)]
    for column in range(size):
        pivot = max(range(column, size), key=lambda r: abs(rows[r][column]))
        if abs(rows[pivot][column]) < 1e-300:
            return None
        rows[column], rows[pivot] = rows[pivot], rows[column]
        for r in range(column + 1, size):
            factor = rows[r][column] / rows[column][column]
            rows[r] = [a - factor * b for a, b in zip(rows[r], rows[column], strict=True)]
    solution = [0.0] * size
    for r in range(size - 1, -1, -1):
        solution[r] = (rows[r][size] - sum(rows[r][k] * solution[k] for k in range(r + 1, size))) / rows[r][r]
    return solution


def _least_squares(found: dict[float, float], powers: tuple[int, ...]) -> Polynomial | None:
    """The coefficients on `powers` that minimise the relative errors' squares (None where
    one would be negative): n scaled by the largest size, so that n³ stays well conditioned."""
    scale = max(found)
    rows = [[(n / scale) ** p / value for p in powers] for n, value in found.items()]
    normal = [[sum(r[i] * r[j] for r in rows) for j in range(len(powers))] for i in range(len(powers))]
    solution = _solve(normal, [sum(r[i] for r in rows) for i in range(len(powers))])
    if solution is None or any(c < 0 for c in solution):
        return None
    return Polynomial(tuple((p, c / scale**p) for p, c in zip(powers, solution, strict=True)))


def _worst(polynomial: Polynomial, found: dict[float, float]) -> float:
    return max(abs(polynomial(n) / value - 1) for n, value in found.items())


def fit(points: Iterable[tuple[float, float]], like: Polynomial | None = None) -> Polynomial | None:
    """The polynomial with the fewest powers of POWERS that fits every point within
    FIT_TOLERANCE (else the closest non-negative one), where two sizes or more were
    measured; where one was, `like` through it. None where nothing positive was measured or
    one size has no shape to follow."""
    found = _usable(points)
    if not found:
        return None
    if len(found) == 1:
        return like.through(*next(iter(found.items()))) if like is not None else None
    fits = [fitted for count in range(1, min(len(found), len(POWERS)) + 1)
            for powers in itertools.combinations(POWERS, count)
            if (fitted := _least_squares(found, powers)) is not None]
    close = [f for f in fits if _worst(f, found) <= FIT_TOLERANCE]
    if close:
        fewest = min(len(f.terms) for f in close)
        return min((f for f in close if len(f.terms) == fewest), key=lambda f: _worst(f, found))
    return min(fits, key=lambda f: _worst(f, found), default=None)


@dataclass(frozen=True)
class Footprint:
    """A call's memory: its inputs and the extra bytes its call allocates, each a function of n."""

    inputs: Callable[[float], float]
    extra: Callable[[float], float]

    def bytes(self, n: float) -> float:
        return self.inputs(n) + self.extra(n)

    def largest(self, room: float) -> float:
        """The largest n whose call fits `room` bytes (NaN where none does, or where the room
        is not known)."""
        if not (math.isfinite(room) and room > 0) or self.bytes(1) > room:
            return math.nan
        low, high = 1, LARGEST_N
        if self.bytes(high) <= room:
            return high
        while high - low > 1:  # bytes grows with n
            middle = (low + high) // 2
            low, high = (middle, high) if self.bytes(middle) <= room else (low, middle)
        return low
