"""Real NumPy code as written, in one cell's process: kernels that update their arguments are
checked on untouched inputs and timed from the inputs of the first call; scalars, integer
and boolean arrays pass as given; a result of another precision is measured and named."""

import textwrap

import numpy as np
import pytest
from offloadbench.cells import Cell
from offloadbench.config import validate
from offloadbench.kernels import load_kernels
from offloadbench.measure import arguments
from offloadbench.measure.cell import run_cell
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import Region

FAST = Settings.from_config({**validate({})["measure"], "budget_s": 0.02, "warmup_budget_s": 0.01,
                             "min_sampling_s": 0.005}, validate({})["compile"])

KERNELS = '''
import numpy as np
from offloadbench import kernel


@kernel(inputs=lambda n, rng: [rng.uniform(-1, 1, (n, n)), 3])
def grow(xp, A, times):
    """Multiplies A by 1000 on every call: without its inputs put back, A reaches inf."""
    for _ in range(times):
        A *= 10.0


@kernel(inputs=lambda n, rng: [rng.uniform(0, 1, (n, n)), 8])
def binned(xp, data, bins):
    out = xp.zeros(bins, dtype=xp.float64)
    for b in range(bins):
        out[b] = xp.sum(xp.astype(data[(data >= b / bins) & (data < (b + 1) / bins)], xp.float64))
    return out


@kernel(inputs=lambda n, rng: [rng.uniform(-1, 1, n), rng.integers(0, n, 3 * n), True, 2])
def gather(xp, x, index, flip, k):
    y = x[index] * k
    return -y if flip else y


@kernel
def numpy_updates_only(xp, a):
    b = a if isinstance(a, np.ndarray) else xp.asarray(a, copy=True)
    b += 1.0


@kernel
def silent(xp, a):
    a.sum()
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernels") / "real.py"
    path.write_text(textwrap.dedent(KERNELS))
    return load_kernels([str(path)])


def measure(kernels, op, library="numpy", size=16):
    torch = pytest.importorskip("torch") if library == "torch" else None
    return run_cell(Cell(op, library, "cpu", "float32", size, "1"), FAST, torch, kernels=kernels)


def test_the_cells_dtype_applies_to_floating_arrays_only():
    float32 = np.dtype("float32")
    assert arguments.host_value(np.ones(3), float32).dtype == float32
    assert arguments.host_value(np.ones(3, dtype=np.complex128), float32).dtype == np.complex64
    assert arguments.host_value(np.arange(3), float32).dtype == np.int64
    assert arguments.host_value(np.ones(3, dtype=bool), float32).dtype == bool
    assert type(arguments.host_value(np.float64(2.5), float32)) is np.float32
    assert arguments.host_value(2.5, float32) == 2.5 and type(arguments.host_value(2.5, float32)) is float


def test_a_kernel_that_updates_its_arguments_is_checked_on_untouched_inputs(kernels):
    """The bug this guards: every earlier call multiplied the same arrays, so the float64
    reference started from inputs already many calls on and never matched."""
    for library in ("numpy", "torch"):
        outcome = measure(kernels, "grow", library)
        assert outcome.status == "ok", outcome.reason
        check, timing = outcome.measured["check"], outcome.measured["timing"]
        assert check["passed"] and check["changes"] == ["A"] and check["reference_changes"] == ["A"]
        assert timing == {"changes": ["A"], "per_call": True, "restore_s": timing["restore_s"]}
        assert timing["restore_s"] > 0 and outcome.measured["stopping"]["n_samples"] >= 6


def test_each_timed_call_starts_from_the_first_inputs_put_back_outside_the_clock():
    ticks = {"now": 0}
    state = np.zeros(1)
    saved = arguments.Restorer([state], [0])

    def call():
        assert state[0] == 0  # the inputs of the first call, every time
        state[0] += 1
        ticks["now"] += 1_000  # 1 µs of work

    def restore():
        saved()
        ticks["now"] += 1_000_000  # 1 ms to put back: never on the clock

    region = Region("compute", call, clock=lambda: ticks["now"], restore=restore)
    assert region.per_call and region.time_block(5) == pytest.approx(1e-6)
    assert state[0] == 1
    assert not Region("compute", call).per_call


def test_a_float64_accumulator_is_measured_and_named(kernels):
    outcome = measure(kernels, "binned", "torch")
    assert outcome.status == "ok", outcome.reason
    assert outcome.measured["check"]["returns"] == ["float64"] and not outcome.measured["timing"]["per_call"]


def test_scalars_booleans_and_integer_arrays_pass_as_given(kernels):
    for library in ("numpy", "torch"):
        outcome = measure(kernels, "gather", library)
        assert outcome.status == "ok", outcome.reason
        # x as float32 and the int64 index as it was drawn; the flag and the int hold no bytes
        assert outcome.measured["model"]["h2d_bytes"] == 16 * 4 + 48 * 8
        assert outcome.measured["model"]["inputs_degree"] == 1


def test_a_variant_that_leaves_an_argument_numpy_updates_is_wrong_naming_it(kernels):
    assert measure(kernels, "numpy_updates_only", "numpy").status == "ok"
    wrong = measure(kernels, "numpy_updates_only", "torch")
    assert wrong.status == "error"
    assert wrong.reason.startswith("wrong result: relative error") and "in argument a exceeds" in wrong.reason


def test_a_kernel_that_returns_nothing_and_changes_nothing_says_so(kernels):
    outcome = measure(kernels, "silent")
    assert outcome.status == "error"
    assert outcome.reason.startswith("kernel silent returned nothing and changed none of its arguments")


def test_what_a_call_changes_is_found_against_a_kept_copy():
    before = [np.array([1.0, np.nan]), np.array([1, 2]), 3.0]
    after = [np.array([1.0, np.nan]), np.array([1, 5]), 4.0]
    assert arguments.changed(before, after) == (1,)  # NaN stays NaN; a scalar changes nothing in place
