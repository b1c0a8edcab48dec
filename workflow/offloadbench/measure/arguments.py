"""A call's arguments as real code has them, and what a call does to them.

Scientists' NumPy code takes more than n×n floats: Python scalars, integer and boolean
arrays, arrays of any shape; and about half of it writes its results into its arguments
(`A[1:-1] = ...`, `x += ...`) and returns nothing. This module holds what the measuring
code needs for that, whatever the library:

- `host_value`: an argument as a cell gets it: the cell's dtype applies to floating (and
  complex) arrays and NumPy floating scalars only; integers, booleans and Python numbers
  pass unchanged (a Python float stays a "weak" scalar, which keeps a float32 array float32);
- `fresh`: copies of the arrays of a call, so that a check or a first call never runs on
  arguments an earlier call changed;
- `changed`: which arguments a call changed, against a kept copy;
- `Restorer`: puts back, outside the timed region, what a call changed, so that every
  timed call sees the inputs of the first.

torch is never imported here: a tensor is recognised by its type (libraries/torch.py), and
an array that lives on a device only (CuPy's) by the registry.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import libraries
from ..libraries.torch import is_tensor


def is_array(value) -> bool:
    """An argument a call can change in place: a NumPy array, a tensor, a CuPy array
    (scalars cannot)."""
    return isinstance(value, np.ndarray) or is_tensor(value) or libraries.device_array(value)


def complex_of(dtype: np.dtype) -> np.dtype:
    """The complex dtype whose parts have `dtype`'s precision (complex64 below float64)."""
    return np.dtype(np.complex128) if np.dtype(dtype).itemsize >= 8 else np.dtype(np.complex64)


def host_value(value, float_dtype: np.dtype):
    """An argument in a cell whose floating arrays hold `float_dtype`: floating and complex
    arrays and NumPy floating scalars take that precision; everything else is unchanged."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            return value.astype(float_dtype)
        if value.dtype.kind == "c":
            return value.astype(complex_of(float_dtype))
        return value
    if isinstance(value, np.floating):
        return float_dtype.type(value)
    return value


def float64_value(value):
    """A copy of an argument for the float64 reference: floating arrays (and tensors) as
    float64, complex ones as complex128, other arrays copied, scalars as they are."""
    if is_tensor(value):
        value = host_numpy(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            return value.astype(np.float64)
        if value.dtype.kind == "c":
            return value.astype(np.complex128)
        return value.copy()
    if isinstance(value, np.floating):
        return np.float64(value)
    return value


def host_numpy(value) -> np.ndarray:
    """An array's values on the host as NumPy (a tensor copied off its device; bfloat16 widened
    to float32), for comparing; scalars as 0-d arrays."""
    if is_tensor(value):
        host = value.detach().to("cpu")
        return (host.float() if str(host.dtype) == "torch.bfloat16" else host).numpy()
    if libraries.device_array(value):
        return value.get()
    return np.asarray(value)


def fresh(values: Sequence) -> list:
    """Copies of the arrays among `values` (tensors and CuPy's stay where they are), scalars
    as they are."""
    return [value.clone() if is_tensor(value) else value.copy() if is_array(value) else value for value in values]


def changed(before: Sequence, after: Sequence) -> tuple[int, ...]:
    """The positions of the arrays whose values differ between `before` (a kept copy) and
    `after` (the same arguments after a call); NaN equals NaN, so a kernel that leaves a NaN
    in place changes nothing."""
    found = []
    for index, (old, new) in enumerate(zip(before, after, strict=True)):
        if not is_array(old):
            continue
        old_values, new_values = host_numpy(old), host_numpy(new)
        same = old_values.shape == new_values.shape and np.array_equal(
            old_values, new_values, equal_nan=old_values.dtype.kind in "fc")
        if not same:
            found.append(index)
    return tuple(found)


def array_bytes(values) -> int:
    """Bytes held by the arrays among `values` (tuples and lists looked into; scalars hold none
    worth counting)."""
    if isinstance(values, tuple | list):
        return sum(array_bytes(value) for value in values)
    if isinstance(values, np.ndarray | np.generic):
        return int(np.asarray(values).nbytes)
    if is_tensor(values):
        return int(values.element_size() * values.numel())
    if libraries.device_array(values):
        return int(values.nbytes)
    return 0


class Restorer:
    """Puts back the arguments at `indices` of `targets` from copies taken now, before any
    call changes them: called outside the timed region, before each timed call of a kernel
    that updates its arguments."""

    def __init__(self, targets: Sequence, indices: Sequence[int]):
        self.targets = list(targets)
        self.indices = tuple(indices)
        self.saved = {i: fresh([self.targets[i]])[0] for i in self.indices}

    def __call__(self) -> None:
        for i in self.indices:
            target, saved = self.targets[i], self.saved[i]
            if is_tensor(target):
                target.copy_(saved)
            else:
                target[...] = saved

    def __bool__(self) -> bool:
        return bool(self.indices)

    def original(self, values: Sequence) -> list:
        """`values` as they were when the restorer was made: the saved copies where a call
        changes them, the rest as they are (a call leaves them unchanged)."""
        return [self.saved.get(i, value) for i, value in enumerate(values)]
