"""A kernel right in NumPy and wrong in torch: every variant but NumPy fails its check, so its
row of the answer must say why it has no answer."""

import numpy as np
from offloadbench import kernel


@kernel
def wrong_off_numpy(xp, a):
    return a * 2 + (0.0 if isinstance(a, np.ndarray) else 1e-3)
