"""Three kernels of the kind scientists port from NumPy, each with its FLOP and byte model.

Run them with   snakemake --cores all --configfile config/examples.yaml
Each is written once, with `xp` the array namespace (NumPy, or torch through
array-api-compat), so it runs as numpy, torch, and both compiled.
"""

import math

from offloadbench import kernel


@kernel(
    flops=lambda n: 6.0 * n * n,  # four neighbours added, the centre scaled and subtracted, the step added
    bytes=lambda n, itemsize: 2.0 * n * n * itemsize,  # the field read once, the new one written once
    n_means="grid side (periodic boundaries)",
)
def heat_step(xp, u):
    """One explicit (Jacobi) step of the 2-D heat equation on a periodic grid."""
    neighbours = xp.roll(u, 1, axis=0) + xp.roll(u, -1, axis=0) + xp.roll(u, 1, axis=1) + xp.roll(u, -1, axis=1)
    return u + 0.1 * (neighbours - 4.0 * u)


def _points(n, rng):
    """Two clouds of n points in 3-D, as k-means centres against samples or N-body pairs."""
    return [rng.uniform(-1.0, 1.0, (n, 3)), rng.uniform(-1.0, 1.0, (n, 3))]


@kernel(
    inputs=_points,
    flops=lambda n: 9.0 * n * n,  # per pair: 3 differences, 3 squares, 2 adds, a square root
    bytes=lambda n, itemsize: (6.0 * n + n * n) * itemsize,  # both clouds read, the n×n distances written
    n_means="points in each cloud (3-D)",
)
def pairwise_distances(xp, x, y):
    """Euclidean distance between every point of x and every point of y (n×n)."""
    diff = x[:, None, :] - y[None, :, :]
    return xp.sqrt(xp.sum(diff * diff, axis=-1))


def _normals(n, rng):
    """n×n standard-normal draws of the terminal value."""
    return [rng.standard_normal((n, n))]


@kernel(
    inputs=_normals,
    # per path: an exp of an affine term (4), a subtract and a clip at 0 (2), a sum (1); then a scale
    flops=lambda n: 7.0 * n * n,
    bytes=lambda n, itemsize: n * n * itemsize,  # the draws, read once
    n_means="side of the n×n array of simulated paths (n² paths)",
)
def option_price(xp, z):
    """Monte-Carlo price of a European call under Black-Scholes (S0 = 100, K = 105, r = 3%,
    sigma = 20%, T = 1 year) from n² terminal draws: elementwise-heavy, so fusion matters."""
    spot, strike, rate, sigma, years = 100.0, 105.0, 0.03, 0.2, 1.0
    terminal = spot * xp.exp((rate - 0.5 * sigma * sigma) * years + sigma * (years ** 0.5) * z)
    payoff = xp.clip(terminal - strike, min=0.0)
    return math.exp(-rate * years) * xp.mean(payoff)
