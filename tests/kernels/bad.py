"""Kernels that fail in a cell, each in its own way; `fine` is there to finish."""

import numpy as np
from offloadbench import kernel


@kernel
def raises(xp, a):
    raise ValueError("the kernel gave up")


@kernel
def wrong_shape(xp, a):
    return a if a.dtype == np.float64 else a[:, :1]  # right only in the float64 reference


@kernel
def float64_result(xp, a):
    """Not a failure: a result of another precision is measured, checked and named."""
    return a.astype(np.float64) * 2


@kernel
def does_nothing(xp, a):
    a.sum()  # returns nothing and changes none of its arguments: nothing to check


@kernel
def wrong_update(xp, a):
    a += 1e-3 if a.dtype != np.float64 else 0.0  # updates its argument, right only in the float64 reference


@kernel(tolerance=1e-9)
def wrong_values(xp, a):
    return a + 1e-3


@kernel
def fine(xp, a):
    return a * 2

