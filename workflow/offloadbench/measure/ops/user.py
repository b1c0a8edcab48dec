"""User kernels as ops: the function, run through NumPy or torch (array-api-compat), its
inputs, models and check.

A kernel is checked against the same function run by NumPy on the float64 inputs: the
result must have the reference's shape, the cell's precision (a float32 cell that returns
float64 computed in the wrong type) and an error within the kernel's tolerance, by default
the dtype-aware one of the catalogue with sums of length n.
"""

from __future__ import annotations

import math

import numpy as np

from ...catalogue import kernel_spec
from ...kernels import Kernel
from ..correctness import WrongResult, relative_error
from . import Op, spec_inputs


def array_namespace(lib):
    """`xp` of a kernel: NumPy itself, or torch through array-api-compat."""
    if lib.__name__ == "torch":
        import array_api_compat.torch as xp

        return xp
    return lib


def _expected_dtype(reference, precision: np.dtype) -> np.dtype:
    """The dtype a result should have in a cell of `precision`, from the float64 reference's."""
    kind = np.asarray(reference).dtype.kind
    if kind == "f":
        return precision
    if kind == "c":
        return np.result_type(precision, np.complex64)
    return np.asarray(reference).dtype


def kernel_error(k: Kernel, compute):
    def error(inputs: list[np.ndarray], result, rows, precision: np.dtype) -> float:
        reference = compute(np, *inputs)
        if isinstance(reference, tuple) != isinstance(result, tuple):
            raise WrongResult(f"kernel {k.name} returns {type(result).__name__}, but {type(reference).__name__} "
                              "in float64 NumPy")
        pairs = zip(result, reference, strict=True) if isinstance(result, tuple) else [(result, reference)]
        worst = 0.0
        for got, want in pairs:
            got, want = np.asarray(got), np.asarray(want)
            if got.shape != want.shape:
                raise WrongResult(f"kernel {k.name} returns shape {got.shape}, not {want.shape} as in float64 NumPy")
            expected = _expected_dtype(want, precision)
            if got.dtype.kind != expected.kind or (expected.kind in "fc" and got.dtype != expected):
                raise WrongResult(f"kernel {k.name} returns {got.dtype}, not {expected}: it computes in another type "
                                  "than the cell's (a float64 array or constant inside?)")
            value = relative_error(got, want) if got.dtype.kind in "fc" else float(np.any(got != want))
            worst = max(worst, value if math.isfinite(value) else math.inf)
        return worst

    return error


def kernel_op(k: Kernel) -> Op:
    if k.takes_xp:
        def compute(lib, *inputs):
            return k.fn(array_namespace(lib), *inputs)
    else:
        def compute(lib, *inputs):
            return k.fn(*inputs)

    spec = kernel_spec(k.name, k.arrays, flops=k.flops, traffic=k.bytes, n_means=k.n_means, summary=k.summary,
                       min_size=k.min_size, default_inputs=k.inputs is None)
    make = spec_inputs(spec) if k.inputs is None else (lambda rng, n: list(k.inputs(n, rng)))
    return Op(spec=spec, make_inputs=make, compute=compute, error=kernel_error(k, compute), kernel=k)
