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
from dataclasses import dataclass, replace

from .footprint import Footprint, fit, power

BATCH_MATRIX_SIDE = 32  # batched_matmul multiplies n pairs of 32×32 matrices
AXPY_SCALAR = 1.5  # not a power of two, so a·x rounds
# solve's matrix is A = 2n·I + E, E uniform in [-1, 1): ‖E‖₂ ≤ ‖E‖_F ≤ n puts every singular
# value of A in [n, 3n] (Weyl), so κ₂(A) ≤ 3 at every n
SOLVE_CONDITION_BOUND = 3


def _square(n: int) -> tuple[int, ...]:
    return (n, n)


def _batch(n: int) -> tuple[int, ...]:
    return (n, BATCH_MATRIX_SIDE, BATCH_MATRIX_SIDE)


def _interior(n: int) -> tuple[int, ...]:
    return (max(0, n - 2), max(0, n - 2))


@dataclass(frozen=True)
class OpSpec:
    name: str
    family: str  # for grouping in the report: "linear algebra", "elementwise", ...
    summary: str  # the maths, one line
    n_means: str  # what the size n is for this op
    input_shapes: Callable[[int], list[tuple[int, ...]]]
    output_shapes: Callable[[int], list[tuple[int, ...]]]
    flops: Callable[[int], float] | None  # None: no model (a user kernel without one)
    traffic: Callable[[int, int], float] | None  # bytes the maths must move, given n and the itemsize
    error_growth: Callable[[int], float]  # length of the sums behind one output (sets the tolerance)
    min_size: int = 1
    complex_output: bool = False
    finish: str | None = None  # host work after the result is back (plotting)

    def input_bytes(self, n: int, itemsize: int) -> int:
        return sum(map(math.prod, self.input_shapes(n))) * itemsize

    def output_bytes(self, n: int, itemsize: int) -> int:
        scale = 2 if self.complex_output else 1
        return sum(map(math.prod, self.output_shapes(n))) * itemsize * scale

    def too_small(self, n: int) -> str | None:
        if n < self.min_size:
            return f"op {self.name} needs n ≥ {self.min_size} (n is its {self.n_means})"
        return None


def _log2(value: float) -> float:
    return math.log2(max(2.0, value))


def _op(**fields) -> OpSpec:
    """A catalogue op, whose least traffic is each input read once and each output written once."""
    spec = OpSpec(traffic=None, **fields)
    return replace(spec, traffic=lambda n, s: spec.input_bytes(n, s) + spec.output_bytes(n, s))


SPECS: dict[str, OpSpec] = {
    spec.name: spec
    for spec in (
        _op(
            name="matmul",
            family="linear algebra",
            summary="C = A @ B, square matrices",
            n_means="matrix side",
            input_shapes=lambda n: [_square(n), _square(n)],
            output_shapes=lambda n: [_square(n)],
            flops=lambda n: 2.0 * n**3,
            error_growth=lambda n: n,
        ),
        _op(
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
            error_growth=lambda n: n,
            finish="plot",
        ),
        _op(
            name="axpy",
            family="elementwise",
            summary=f"a·x + y with the scalar a = {AXPY_SCALAR}, memory-bound",
            n_means="field side",
            input_shapes=lambda n: [_square(n), _square(n)],
            output_shapes=lambda n: [_square(n)],
            flops=lambda n: 2.0 * n * n,
            error_growth=lambda n: 1,  # two roundings per element, no sum
        ),
        _op(
            name="transcendental",
            family="elementwise",
            summary="exp(sin(x))·cos(y), elementwise",
            n_means="field side",
            input_shapes=lambda n: [_square(n), _square(n)],
            output_shapes=lambda n: [_square(n)],
            flops=lambda n: 4.0 * n * n,  # sin, exp, cos, multiply
            # four roundings in a chain (sin's error passes through exp with a factor
            # |sin x| ≤ 1; cos y ≥ cos 1 never cancels), and vectorised libm may be off by an ulp
            error_growth=lambda n: 4,
        ),
        _op(
            name="sum_rows",
            family="reduction",
            summary="row sums of an n×n array",
            n_means="matrix side: n rows of n values",
            input_shapes=lambda n: [_square(n)],
            output_shapes=lambda n: [(n,)],
            flops=lambda n: float(n * (n - 1)),
            error_growth=lambda n: n,
        ),
        _op(
            name="std_rows",
            family="reduction",
            summary="population standard deviation (ddof 0) of each row of an n×n array",
            n_means="matrix side: n rows of n values, and one value has no spread",
            input_shapes=lambda n: [_square(n)],
            output_shapes=lambda n: [(n,)],
            # per row: n - 1 adds and a division (the mean); n subtractions, n squares, n - 1
            # adds, a division and a square root
            flops=lambda n: 4.0 * n * n + n,
            error_growth=lambda n: n,
            min_size=2,
        ),
        _op(
            name="norm",
            family="reduction",
            summary="Frobenius norm of an n×n array, √(Σ x²), a scalar",
            n_means="matrix side",
            input_shapes=lambda n: [_square(n)],
            output_shapes=lambda n: [(1,)],
            flops=lambda n: 2.0 * n * n,  # n² squares, n² - 1 adds, a square root
            error_growth=lambda n: n * n,  # one sum over every element
        ),
        _op(
            name="cumsum",
            family="scan and sort",
            summary="cumulative sums along each row of an n×n array",
            n_means="matrix side: n rows of n values",
            input_shapes=lambda n: [_square(n)],
            output_shapes=lambda n: [_square(n)],
            flops=lambda n: float(n * (n - 1)),
            error_growth=lambda n: n,  # the last value of a row sums all n
        ),
        _op(
            name="sort",
            family="scan and sort",
            summary="ascending sort of n² values (a flat array)",
            n_means="side of the n×n field whose n² values are sorted as one flat array",
            input_shapes=lambda n: [(n * n,)],
            output_shapes=lambda n: [(n * n,)],
            flops=lambda n: n * n * _log2(n * n),  # one per comparison, N·log2 N of them
            error_growth=lambda n: 1,  # no arithmetic: the values only move
        ),
        _op(
            name="fft2",
            family="spectral",
            summary="2-D real FFT (rfft2) of an n×n real field, complex n×(n/2+1) result",
            n_means="field side; below 2 there is no frequency but 0",
            input_shapes=lambda n: [_square(n)],
            output_shapes=lambda n: [(n, n // 2 + 1)],
            flops=lambda n: 2.5 * n * n * _log2(n * n),  # real FFT ≈ 2.5·N·log2 N, N = n²
            # each output passes log2 N butterfly stages of a few roundings each (twiddle
            # product, add); 4 per stage leaves room for Bluestein at prime sizes (measured
            # at most 0.15 of the tolerance for n ≤ 4096, both libraries, float32 and float64)
            error_growth=lambda n: 4.0 * _log2(n * n),
            min_size=2,
            complex_output=True,
        ),
        _op(
            name="solve",
            family="linear algebra",
            summary=(
                f"x = A⁻¹b for A = uniform[-1, 1) + 2n·I, diagonally dominant with "
                f"κ₂(A) ≤ {SOLVE_CONDITION_BOUND}"
            ),
            n_means="matrix side",
            input_shapes=lambda n: [_square(n), (n,)],
            output_shapes=lambda n: [(n,)],
            flops=lambda n: 2.0 / 3.0 * n**3 + 2.0 * n * n,  # LU, then two triangular solves
            # forward error ≲ κ·(backward error), and κ² under the square root; LU of a
            # diagonally dominant matrix needs no pivoting and at most doubles entries
            error_growth=lambda n: SOLVE_CONDITION_BOUND**2 * n,
        ),
        _op(
            name="eigh",
            family="linear algebra",
            # eigh rather than svd: symmetric eigenproblems (covariance/PCA, Hamiltonians) are
            # the common scientific case, and its result is checkable through the eigenvalues
            # and the residuals, despite the sign ambiguity of the eigenvectors
            summary="eigenvalues and eigenvectors of a symmetric n×n matrix",
            n_means="matrix side; a 1×1 matrix is its own eigenvalue",
            input_shapes=lambda n: [_square(n)],
            output_shapes=lambda n: [(n,), _square(n)],
            flops=lambda n: 9.0 * n**3,  # symmetric QR with vectors (Golub & Van Loan)
            # eigenvalues have condition number 1 (Weyl); the backward error of the
            # tridiagonal reduction and its Householder sums sets the rest
            error_growth=lambda n: n,
            min_size=2,
        ),
        _op(
            name="batched_matmul",
            family="linear algebra",
            summary=(
                f"n independent products of {BATCH_MATRIX_SIDE}×{BATCH_MATRIX_SIDE} matrices, "
                "the latency regime"
            ),
            n_means=f"batch count ({BATCH_MATRIX_SIDE}×{BATCH_MATRIX_SIDE} matrices per operand)",
            input_shapes=lambda n: [_batch(n), _batch(n)],
            output_shapes=lambda n: [_batch(n)],
            flops=lambda n: 2.0 * n * BATCH_MATRIX_SIDE**3,
            error_growth=lambda n: BATCH_MATRIX_SIDE,
        ),
        _op(
            name="laplacian",
            family="stencil",
            summary="5-point Laplacian of an n×n grid on its (n−2)×(n−2) interior",
            n_means="grid side; the stencil needs a neighbour on each side, so below 3 no interior is left",
            input_shapes=lambda n: [_square(n)],
            output_shapes=lambda n: [_interior(n)],
            flops=lambda n: 5.0 * math.prod(_interior(n)),  # three adds, a multiply, a subtract
            error_growth=lambda n: 5,  # five terms
            min_size=3,
        ),
    )
}


def kernel_spec(name: str, arrays: int, *, flops=None, traffic=None, n_means: str = "", summary: str = "",
                min_size: int = 1, default_inputs: bool = True, outputs: int = 0) -> OpSpec:
    """The spec of a user kernel: n×n array arguments unless it makes its own inputs, sums of
    length n behind its tolerance, and its models where it has them (None where not);
    `outputs` n×n results where a guess is wanted (the estimate; workers measure them)."""
    return OpSpec(
        name=name, family=KERNEL_FAMILY, summary=summary or f"the user kernel {name}", n_means=n_means,
        input_shapes=(lambda n: [(n, n)] * arrays) if default_inputs else (lambda n: []),
        output_shapes=lambda n: [(n, n)] * outputs, flops=flops, traffic=traffic, error_growth=lambda n: n, min_size=min_size,
    )


KERNEL_FAMILY = "user kernels"  # the family every user kernel is shown under


def family_of(op: str) -> str:
    spec = SPECS.get(op)
    return spec.family if spec else KERNEL_FAMILY


def op_order(ops) -> list[str]:
    """Ops grouped by catalogue family, in catalogue order; user kernels go last."""
    families = list(dict.fromkeys(spec.family for spec in SPECS.values()))
    place = {op: (families.index(spec.family), i) for i, (op, spec) in enumerate(SPECS.items())}
    return sorted(set(ops), key=lambda op: (*place.get(op, (len(families), 0)), op))


def get_spec(name: str) -> OpSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {', '.join(sorted(SPECS))}") from None


FINISH_PEAK_COPIES = 10  # imshow peaks near 8 float64 copies of the field (measured at 8192²)
MEMORY_HEADROOM = 0.8  # a cell may use this share of the host memory that is available


TEMPORARIES = 3  # results and temporaries of one call, in outputs: the model's guess where none was measured


def output_unit_bytes(spec: OpSpec, n: int, itemsize: int) -> int:
    """What the temporaries of a call are counted in: its outputs, or one n×n array where
    the spec names none (a user kernel, whose results only the workers see)."""
    return spec.output_bytes(n, itemsize) or n * n * itemsize


def measured_scale(points, spec: OpSpec, itemsize: int) -> float | None:
    """Results and temporaries of a call in outputs, from measured peaks ((n, extra bytes)
    of one call): the largest over the sizes, so the calibrated model errs on the safe side."""
    scales = [peak / output_unit_bytes(spec, n, itemsize) for n, peak in points
              if isinstance(peak, (int, float)) and not isinstance(peak, bool) and math.isfinite(peak) and peak >= 0]
    return max(scales) if scales else None


def call_bytes(spec: OpSpec, n: int, itemsize: int, scale: float | None = None) -> float:
    """Bytes one call of a catalogue op holds: its inputs, and its results and temporaries,
    `scale` outputs of them as measured (memory_fit), else TEMPORARIES."""
    temporaries = TEMPORARIES if scale is None else max(1.0, scale)
    return spec.input_bytes(n, itemsize) + temporaries * output_unit_bytes(spec, n, itemsize)


def shapes_known(spec: OpSpec) -> bool:
    """Whether the spec knows its input shapes: every catalogue op, and a kernel whose
    arguments are the default n×n arrays (one that makes its own inputs does not)."""
    return bool(spec.input_shapes(max(2, spec.min_size)))


def footprint(spec: OpSpec, itemsize: int, peaks=(), inputs=(), inputs_degree: int | None = None,
              ) -> Footprint | None:
    """What one call holds as n grows (footprint.py), from what was measured: `peaks`, the
    extra bytes of a call at each size ((n, bytes)); `inputs`, a kernel's input bytes at
    each size, and `inputs_degree` the power they grow with where one size was measured. A
    catalogue op's extra bytes are its outputs times the measured scale (TEMPORARIES where
    nothing was measured); a kernel's are fitted to its peaks, growing like its inputs where
    one size was measured, and taken as one more copy of its inputs where none was. None
    where a kernel's inputs are not known (it makes its own, and none were measured)."""
    if shapes_known(spec):
        shape = fit([(n, spec.input_bytes(n, itemsize)) for n in (8, 16, 32, 64)])

        def take_inputs(n):
            return spec.input_bytes(int(n), itemsize)
    else:
        shape = take_inputs = fit(inputs, power(inputs_degree) if inputs_degree is not None else None)
        if take_inputs is None:
            return None
    if spec.family != KERNEL_FAMILY:
        scale = measured_scale(peaks, spec, itemsize)
        return Footprint(take_inputs, lambda n: (TEMPORARIES if scale is None else max(1.0, scale))
                         * output_unit_bytes(spec, int(n), itemsize))
    return Footprint(take_inputs, fit(peaks, shape) or take_inputs)


def working_set_bytes(spec: OpSpec, n: int, itemsize: int, found: Footprint | None = None) -> int:
    """Peak bytes one measurement holds: the inputs drawn in float64, the call's footprint
    (`found`, else the model's), for a kernel its arguments once more (the copies its check
    runs on, or those a call changes, kept to put back), and for ops that plot,
    matplotlib's float64 working copies of the field. The worker refuses a cell beyond the
    headroom before measuring; the estimate leaves it out."""
    found = found or footprint(spec, itemsize)
    inputs = found.inputs(n)
    rendering = FINISH_PEAK_COPIES * spec.output_bytes(n, 8) if spec.finish else 0
    copies = inputs if spec.family == KERNEL_FAMILY else 0
    return int(inputs * 8 / itemsize + found.bytes(n) + copies + rendering)
