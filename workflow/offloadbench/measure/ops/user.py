"""User kernels as ops: the function, run through NumPy or torch (array-api-compat), its
inputs, models and check.

A kernel is checked against the same function run by NumPy on float64 copies of the
inputs the variant started from. What it gives back is its result and the arguments it
changed (measure/arguments.py): every part must have the reference's shape and kind
(floating, integer, boolean), and the error of the worst part must be within the kernel's
tolerance, by default the dtype-aware one of the catalogue with sums of length n. A result
of another precision than the cell's (a float64 accumulator in a float32 cell) is checked
like any other and named in the check's record (`returns`), so that the report says so.
"""

from __future__ import annotations

import math

import numpy as np

from ... import libraries
from ...catalogue import kernel_spec
from ...kernels import Kernel
from .. import arguments
from ..correctness import WrongResult, relative_error
from .op import Op, spec_inputs


def _parts(value) -> tuple:
    """A call's returned value as its parts: () for None, a tuple's items, else the value."""
    return () if value is None else value if isinstance(value, tuple) else (value,)


def _kind(array: np.ndarray) -> str:
    """floating (real or complex), integer or boolean: what must match the reference."""
    return {"f": "floating", "c": "floating", "b": "boolean"}.get(array.dtype.kind, "integer")


def _compare(got, want, name: str, precision: np.dtype, returns: set[str]) -> float:
    """The relative error of one part against its reference (exact equality for integers and
    booleans); a floating part of another precision than the cell's goes into `returns`."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise WrongResult(f"{name} has shape {got.shape}, not {want.shape} as in float64 NumPy")
    if _kind(got) != _kind(want):
        raise WrongResult(f"{name} is {got.dtype}, {_kind(got)} where float64 NumPy gives {_kind(want)} values")
    if got.dtype.kind in "fc":
        expected = precision if got.dtype.kind == "f" else arguments.complex_of(precision)
        if got.dtype != expected:
            returns.add(str(got.dtype))
        value = relative_error(got, want)
    else:
        value = float(np.any(got != want))
    return value if math.isfinite(value) else math.inf


def kernel_check(k: Kernel, compute):
    """The check of a kernel's result: `check(original, result, changes, precision)` with
    the inputs the variant's call started from, what it gave back (its result, then the
    arguments of `changes` it changed, as NumPy), and the cell's floating dtype."""

    def name(index: int) -> str:
        return f"argument {k.parameter(index)}"

    def check(original: list, result, changes: tuple[int, ...], precision: np.dtype) -> dict:
        reference_inputs = [arguments.float64_value(x) for x in original]
        reference = _parts(compute(np, *reference_inputs))
        # one float64 copy at a time, so that the check holds no second copy of every input
        reference_changes = tuple(i for i, x in enumerate(original) if arguments.is_array(x)
                                  and arguments.changed([arguments.float64_value(x)], [reference_inputs[i]]))
        returned = _parts(result)[:len(_parts(result)) - len(changes)] if changes else _parts(result)
        updated = dict(zip(changes, _parts(result)[len(returned):], strict=True))
        if len(returned) != len(reference):
            raise WrongResult(f"kernel {k.name} returns {len(returned)} value{'s' if len(returned) != 1 else ''}, "
                              f"but {len(reference)} in float64 NumPy")
        returns: set[str] = set()
        errors = {}
        for i, (got, want) in enumerate(zip(returned, reference, strict=True)):
            part = "the result" if len(returned) == 1 else f"result {i + 1}"
            errors[part] = _compare(got, want, f"kernel {k.name}: {part}", precision, returns)
        for index in sorted({*changes, *reference_changes}):
            # an argument a variant left unchanged holds what it started from
            got = updated[index] if index in updated else arguments.host_numpy(original[index])
            errors[name(index)] = _compare(got, reference_inputs[index], f"kernel {k.name}: {name(index)}",
                                           precision, returns)
        worst = max(errors, key=errors.get, default="")
        return {"rel_err": errors.get(worst, 0.0), "worst": worst, "returns": sorted(returns),
                "changes": [k.parameter(i) for i in changes],
                "reference_changes": [k.parameter(i) for i in reference_changes]}

    return check


def kernel_op(k: Kernel) -> Op:
    if k.takes_xp:
        def compute(lib, *inputs):
            return k.fn(libraries.kernel_namespace(lib), *inputs)
    else:
        def compute(lib, *inputs):
            return k.fn(*inputs)

    spec = kernel_spec(k.name, k.arrays, flops=k.flops, traffic=k.bytes, n_means=k.n_means, summary=k.summary,
                       min_size=k.min_size, default_inputs=k.inputs is None)
    make = spec_inputs(spec) if k.inputs is None else (lambda rng, n: list(k.inputs(n, rng)))
    return Op(spec=spec, make_inputs=make, compute=compute, error=kernel_check(k, compute), kernel=k)
