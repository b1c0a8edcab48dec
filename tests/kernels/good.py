"""Kernels of the tests: written once with `xp`, and one without."""

from offloadbench import kernel


@kernel
def scaled_sum(xp, a, b):
    return 0.5 * a + xp.sin(b)


@kernel(n_means="side of the field", min_size=2)
def plain_numpy(a):
    """Takes NumPy arrays, no xp: numpy and numpy compiled only."""
    import numpy as np

    return np.cumsum(a, axis=1)
