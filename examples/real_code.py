"""Kernels written the way scientific NumPy code is: they update their arguments in place and
return nothing, take scalars, integer and boolean arrays, 1-D, n×3 and 3-D arrays, loop in
Python, accumulate in float64 and return several results.

Each is plain NumPy with `np.` written `xp.` and `xp` added as the first parameter. Run them
with   make run CONFIG=config/real-code.yaml   (about 6 minutes on a 2-core laptop).

What offloadbench does with each (docs/kernels.md):
- the arguments a call changes are found on its first call and become its outputs: checked
  against float64 NumPy, and copied back from a GPU like results;
- every timed call starts from the inputs of the first, put back outside the clock;
- a result of another precision (a float64 accumulator in a float32 cell) is measured,
  checked and named in the answer.
"""

from offloadbench import kernel

# --- time-stepped stencils that update their fields in place ---------------------------------


def _fields_3d(n, rng):
    """A 3-D temperature field of n×n×16 points and its scratch copy, a diffusion number and a step count."""
    u = rng.uniform(-1.0, 1.0, (n, n, 16))
    return [u, u.copy(), 0.1, 4]


@kernel(
    inputs=_fields_3d,
    flops=lambda n: 4 * 9.0 * (n - 2) * (n - 2) * 14,  # per step and interior point: 6 adds, a subtract, 2 multiplies
    bytes=lambda n, itemsize: 4 * 2.0 * n * n * 16 * itemsize,  # per step: the field read, the scratch written
    n_means="side of the n×n×16 field",
    min_size=3,
)
def diffuse_3d(xp, u, scratch, alpha, steps):
    """Explicit diffusion on a 3-D field: `steps` Jacobi sweeps of the 7-point stencil, in place."""
    for _ in range(steps):
        c = u[1:-1, 1:-1, 1:-1]
        scratch[1:-1, 1:-1, 1:-1] = c + alpha * (
            u[2:, 1:-1, 1:-1] + u[:-2, 1:-1, 1:-1] + u[1:-1, 2:, 1:-1] + u[1:-1, :-2, 1:-1]
            + u[1:-1, 1:-1, 2:] + u[1:-1, 1:-1, :-2] - 6.0 * c)
        u[1:-1, 1:-1, 1:-1] = scratch[1:-1, 1:-1, 1:-1]


def _seidel_inputs(n, rng):
    return [rng.uniform(-1.0, 1.0, (n, n)), 3]


@kernel(inputs=_seidel_inputs, n_means="grid side", min_size=3)
def seidel_rows(xp, grid, sweeps):
    """Row-by-row smoothing that reads rows it already updated (a Gauss-Seidel sweep over rows),
    a Python loop over n rows: the pattern that stays slow on any library."""
    for _ in range(sweeps):
        for i in range(1, grid.shape[0] - 1):
            grid[i, 1:-1] = 0.25 * (grid[i - 1, 1:-1] + grid[i + 1, 1:-1] + grid[i, :-2] + grid[i, 2:])


# --- BLAS-2 updates with += -----------------------------------------------------------------


def _rank2_inputs(n, rng):
    vector = lambda: rng.uniform(-1.0, 1.0, n)  # noqa: E731 - four draws of one shape
    return [rng.uniform(-1.0, 1.0, (n, n)), vector(), vector(), vector(), vector(), 0.5]


@kernel(
    inputs=_rank2_inputs,
    flops=lambda n: 6.0 * n * n,  # two outer products added (4n²), a matrix-vector product (2n²)
    bytes=lambda n, itemsize: 3.0 * n * n * itemsize,  # A read and written, then read again
    tolerance={"float32": 1e-5, "float64": 1e-12},  # A's update is exact; y sums n products
    n_means="matrix side",
)
def rank2_update(xp, A, x, y, u, v, alpha):
    """A symmetric rank-2 update of A, then y += A x: two in-place updates of its arguments."""
    A += alpha * (xp.outer(u, v) + xp.outer(v, u))
    y += A @ x


# --- boolean-mask updates -------------------------------------------------------------------


def _particles(n, rng):
    """n particles in 3-D, some outside the unit box, their velocities, and the box side."""
    return [rng.uniform(-0.2, 1.2, (n, 3)), rng.uniform(-1.0, 1.0, (n, 3)), 1.0]


@kernel(inputs=_particles, n_means="particles (n×3 positions and velocities)")
def reflect_particles(xp, pos, vel, box):
    """Particles that left the box [0, box]³ reflected back in, their velocities turned: the
    boolean-mask updates of a particle code."""
    low = pos < 0.0
    pos[low] = -pos[low]
    vel[low] = -vel[low]
    high = pos > box
    pos[high] = 2.0 * box - pos[high]
    vel[high] = -vel[high]


# --- binning with a Python loop and a float64 accumulator -----------------------------------


def _rings(n, rng):
    """The distance of each pixel of an n×n detector from its centre, in [0, 1), its intensity, and the bins."""
    y, x = (rng.uniform(-0.7, 0.7, (n, n)) for _ in range(2))
    return [(x * x + y * y) ** 0.5, rng.uniform(0.0, 1.0, (n, n)), 16]


@kernel(inputs=_rings, n_means="detector side (n×n pixels)")
def radial_profile(xp, radius, intensity, bins):
    """Mean intensity in each of `bins` rings around the centre, summed in float64 whatever the
    data's precision (an azimuthal integration): a float32 cell returns float64, on purpose."""
    profile = xp.zeros(bins, dtype=xp.float64, device=radius.device)
    for b in range(bins):
        ring = (radius >= b / bins) & (radius < (b + 1) / bins)
        profile[b] = xp.sum(xp.astype(intensity[ring], xp.float64)) / max(1, int(xp.sum(ring)))
    return profile


# --- scalars and integer arrays -------------------------------------------------------------


def _ell_matrix(n, rng):
    """A sparse n×n matrix in ELL form (8 non-zeros a row: values and their column indices, an
    integer array), a vector, and a scale."""
    return [rng.uniform(-1.0, 1.0, (n, 8)), rng.integers(0, n, (n, 8)), rng.uniform(-1.0, 1.0, n), 2.0]


@kernel(
    inputs=_ell_matrix,
    flops=lambda n: 17.0 * n,  # 8 products and 8 adds a row, then the scale
    bytes=lambda n, itemsize: n * 8 * (itemsize + 8) + 2.0 * n * itemsize,  # values and indices, x and y
    n_means="rows of the sparse matrix (8 non-zeros each)",
)
def sparse_matvec(xp, values, columns, x, scale):
    """y = scale · A x for a sparse A in ELL form: a gather through an integer index array."""
    return scale * xp.sum(values * x[columns], axis=1)


# --- several outputs, and a result beside arguments changed ---------------------------------


@kernel(n_means="rows of n values")
def row_moments(xp, samples):
    """Mean, standard deviation, minimum and maximum of each row: four results."""
    return xp.mean(samples, axis=1), xp.std(samples, axis=1), xp.min(samples, axis=1), xp.max(samples, axis=1)


def _oscillators(n, rng):
    """n×3 positions and velocities of springs pulling to the origin, a time step and a step count."""
    return [rng.uniform(-1.0, 1.0, (n, 3)), rng.uniform(-1.0, 1.0, (n, 3)), 0.01, 8]


@kernel(inputs=_oscillators, n_means="oscillators (n×3 positions and velocities)")
def leapfrog(xp, pos, vel, dt, steps):
    """`steps` leapfrog steps of harmonic oscillators, positions and velocities updated in place;
    returns the energy after them: a result beside the arguments it changes."""
    for _ in range(steps):
        vel -= 0.5 * dt * pos
        pos += dt * vel
        vel -= 0.5 * dt * pos
    return 0.5 * xp.sum(vel * vel + pos * pos)


def _series(n, rng):
    """A 1-D signal of n² samples and a window length."""
    return [rng.uniform(-1.0, 1.0, n * n), 9]


@kernel(inputs=_series, n_means="side of n×n: the signal has n² samples", min_size=4)
def moving_average(xp, signal, window):
    """The mean over a sliding window, from a cumulative sum: a 1-D array and an integer in, a
    shorter 1-D array out."""
    total = xp.cumulative_sum(signal, include_initial=True)
    return (total[window:] - total[:-window]) / window


@kernel(n_means="field side")
def count_above(xp, field):
    """How many values of a field exceed one half, and where: an integer and a boolean result."""
    above = field > 0.5
    return xp.sum(above), above
