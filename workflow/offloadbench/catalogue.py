"""The operations offloadbench measures, as models: what n means, which sizes make sense,
the shapes that cross the host-device link, and the FLOP and byte counts.

Pure Python (no numpy): the config, the grid, the duration estimate and the analysis all
read it, and the measuring code pairs each spec with its NumPy and PyTorch code
(`measure/ops/`). Byte counts are the least memory traffic the maths needs (each input
read once, each output written once); FLOP counts follow the usual conventions, with one
operation per transcendental call and per comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

BATCH_MATRIX_SIDE = 32  # batched_matmul multiplies n pairs of 32×32 matrices


def _square(n: int) -> tuple[int, ...]:
    return (n, n)


def _elements(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


@dataclass(frozen=True)
class OpSpec:
    name: str
    family: str  # for grouping in the report: "linear algebra", "elementwise", ...
    summary: str  # the maths, one line
    n_means: str  # what the size n is for this op
    input_shapes: Callable[[int], list[tuple[int, ...]]]
    output_shapes: Callable[[int], list[tuple[int, ...]]]
    flops: Callable[[int], float]
    traffic: Callable[[int, int], float]  # bytes the maths must move, given n and the itemsize
    error_growth: Callable[[int], float]  # length of the sums behind one output (sets the tolerance)
    min_size: int = 1
    complex_output: bool = False
    finish: str | None = None  # host work after the result is back (plotting)

    def input_bytes(self, n: int, itemsize: int) -> int:
        return sum(_elements(s) for s in self.input_shapes(n)) * itemsize

    def output_bytes(self, n: int, itemsize: int) -> int:
        scale = 2 if self.complex_output else 1
        return sum(_elements(s) for s in self.output_shapes(n)) * itemsize * scale

    def intensity(self, n: int, itemsize: int) -> float:
        """Arithmetic intensity: FLOP per byte of memory traffic."""
        return self.flops(n) / self.traffic(n, itemsize)

    def too_small(self, n: int) -> str | None:
        if n < self.min_size:
            return f"op {self.name} needs n ≥ {self.min_size} (n is its {self.n_means})"
        return None


def _log2(value: float) -> float:
    return math.log2(max(2.0, value))


SPECS: dict[str, OpSpec] = {
    spec.name: spec
    for spec in (
        OpSpec(
            name="matmul",
            family="linear algebra",
            summary="C = A @ B, square matrices",
            n_means="matrix side",
            input_shapes=lambda n: [_square(n), _square(n)],
            output_shapes=lambda n: [_square(n)],
            flops=lambda n: 2.0 * n**3,
            traffic=lambda n, s: 3.0 * n * n * s,
            error_growth=lambda n: n,
        ),
        OpSpec(
            name="compute_then_plot",
            family="workflow",
            summary=(
                "F = exp(-(A @ B / √n)² / 2) minus its row means, copied to the host and "
                "rendered to a PNG with matplotlib"
            ),
            n_means="matrix and field side",
            input_shapes=lambda n: [_square(n), _square(n)],
            output_shapes=lambda n: [_square(n)],
            flops=lambda n: 2.0 * n**3 + 6.0 * n**2,
            traffic=lambda n, s: 3.0 * n * n * s,
            error_growth=lambda n: n,
            finish="plot",
        ),
    )
}


def get_spec(name: str) -> OpSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {', '.join(sorted(SPECS))}") from None
