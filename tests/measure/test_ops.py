"""The op catalogue: every op agrees with its float64 reference in numpy and torch, its FLOP
and byte models match hand counts and the arrays it really makes, a wrong torch result is
an error rather than a speedup, and sizes too small for an op are refused."""

import dataclasses

import numpy as np
import pytest
import torch  # a pinned requirement: missing, it must fail the suite, not skip it
from offloadbench.catalogue import SPECS
from offloadbench.cells import Cell
from offloadbench.config import ConfigError, validate
from offloadbench.measure import cell as measure_cell
from offloadbench.measure.ops import _registry, get_op
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import StopRule, WarmupRule

FAST = Settings(stop=StopRule(budget_s=0.05, min_samples=6), warmup=WarmupRule(budget_s=0.02))
OPS = sorted(_registry())


def run(op, library, dtype, n):
    return measure_cell.run_cell(Cell(op, library, "cpu", dtype, n, "1"), FAST, torch)


@pytest.fixture
def without_rendering(monkeypatch):
    """The ops without their host finish: the maths is what is checked here, and rendering
    (tests/measure/test_measure.py) would take most of this file's time."""
    monkeypatch.setattr(measure_cell, "get_op", lambda name, kernels=None: dataclasses.replace(get_op(name), finish=None))


@pytest.mark.usefixtures("without_rendering")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_op_agrees_with_its_float64_reference(op, library, dtype):
    for n in sorted({SPECS[op].min_size, 8, 33}):
        outcome = run(op, library, dtype, n)
        assert outcome.status == "ok", f"n={n}: {outcome.reason}"
        assert outcome.measured["check"]["passed"]


# torch has no CPU fft or linalg (lu, eigh) in half precision, nor numpy's linalg in float16
UNSUPPORTED_IN_HALF = {("eigh", "numpy", "float16"), ("solve", "numpy", "float16"), ("eigh", "torch", "float16"),
                       ("eigh", "torch", "bfloat16"), ("solve", "torch", "float16"), ("solve", "torch", "bfloat16"),
                       ("fft2", "torch", "float16"), ("fft2", "torch", "bfloat16")}


@pytest.mark.usefixtures("without_rendering")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("library, dtype", [("numpy", "float16"), ("torch", "float16"), ("torch", "bfloat16")])
def test_half_precision_is_right_or_unsupported_never_wrong(op, library, dtype):
    outcome = run(op, library, dtype, 33)
    if (op, library, dtype) in UNSUPPORTED_IN_HALF:  # an error with the library's message, not a wrong result
        assert outcome.status == "error" and not outcome.reason.startswith("wrong result"), outcome.reason
    else:
        assert outcome.status == "ok", outcome.reason


HAND_COUNTS = {  # op: (n, FLOP, bytes of float32 traffic), counted by hand
    "matmul": (10, 2 * 10**3, 3 * 100 * 4),
    "compute_then_plot": (10, 2 * 10**3 + 6 * 100, 3 * 100 * 4),
    "axpy": (10, 2 * 100, 3 * 100 * 4),  # multiply, add; read x, y, write the result
    "transcendental": (10, 4 * 100, 3 * 100 * 4),  # sin, exp, cos, multiply
    "sum_rows": (10, 10 * 9, (100 + 10) * 4),
    # per row: 9 adds, a division; 10 subtractions, 10 squares, 9 adds, a division, a root
    "std_rows": (10, 10 * (9 + 1 + 10 + 10 + 9 + 1 + 1), (100 + 10) * 4),
    "norm": (10, 100 + 99 + 1, (100 + 1) * 4),  # squares, adds, a root; the result is a scalar
    "cumsum": (10, 10 * 9, 2 * 100 * 4),
    "sort": (4, 16 * 4, 2 * 16 * 4),  # 16 values, log2(16) = 4
    "fft2": (4, 2.5 * 16 * 4, (16 + 4 * 3 * 2) * 4),  # N = 16; a 4×3 complex result
    "solve": (3, 2 / 3 * 27 + 2 * 9, (9 + 3 + 3) * 4),  # read A and b, write x
    "eigh": (10, 9 * 1000, (100 + 10 + 100) * 4),  # read A, write the values and vectors
    "batched_matmul": (10, 10 * 2 * 32**3, 3 * 10 * 32 * 32 * 4),
    "laplacian": (10, 8 * 8 * 5, (100 + 8 * 8) * 4),  # an 8×8 interior
}


def test_every_op_has_a_hand_count():
    assert sorted(HAND_COUNTS) == sorted(SPECS)


@pytest.mark.parametrize("op", sorted(HAND_COUNTS))
def test_flop_and_byte_models_match_hand_counts(op):
    n, flops, traffic = HAND_COUNTS[op]
    assert SPECS[op].flops(n) == pytest.approx(flops)
    assert SPECS[op].traffic(n, 4) == pytest.approx(traffic)


def spoil_torch(compute, spoil):
    """`compute`, with its torch result spoilt: a stand-in for a broken or lower-precision path."""

    def wrong(lib, *inputs):
        result = compute(lib, *inputs)
        return spoil(result) if lib is not np else result

    return wrong


SPOILT = {
    "axpy": lambda r: r * (1 + 1e-4),
    "sort": lambda r: r.to(torch.bfloat16).to(r.dtype),  # sorted right, in a lower precision
    "eigh": lambda r: (r[0], r[1].roll(1, dims=1)),  # right values, vectors paired with the wrong ones
}


@pytest.mark.parametrize("op", sorted(SPOILT))
def test_a_wrong_torch_result_is_an_error_not_a_speedup(monkeypatch, op):
    spoilt = dataclasses.replace(get_op(op), compute=spoil_torch(get_op(op).compute, SPOILT[op]))
    monkeypatch.setattr(measure_cell, "get_op", lambda name, kernels=None: spoilt if name == op else get_op(name))
    assert run(op, "numpy", "float32", 33).status == "ok"
    outcome = run(op, "torch", "float32", 33)
    assert outcome.status == "error"
    assert outcome.reason.startswith("wrong result"), outcome.reason
    assert "samples_s" not in outcome.measured


MIN_SIZES = {"std_rows": 2, "fft2": 2, "eigh": 2, "laplacian": 3}  # every other op: 1


@pytest.mark.parametrize("op", sorted(SPECS))
def test_every_min_size_is_enforced_by_the_config(op):
    least = MIN_SIZES.get(op, 1)
    assert SPECS[op].min_size == least
    validate({"grid": {"ops": [op], "sizes": [least]}})
    if least > 1:
        with pytest.raises(ConfigError) as error:
            validate({"grid": {"ops": [op], "sizes": [least - 1]}})
        message = str(error.value)
        assert f"op {op} needs n ≥ {least}" in message and "\n" not in message


def arrays(result):
    return list(result) if isinstance(result, tuple) else [result]


@pytest.mark.parametrize("op", OPS)
def test_spec_shapes_and_bytes_match_what_the_op_makes(op):
    spec, implementation, n = SPECS[op], get_op(op), 5  # odd: rfft2 keeps n // 2 + 1 columns
    inputs = [a.astype(np.float32) for a in implementation.make_inputs(np.random.default_rng(0), n)]
    assert [a.shape for a in inputs] == spec.input_shapes(n)
    assert sum(a.nbytes for a in inputs) == spec.input_bytes(n, 4)
    outputs = arrays(implementation.compute(np, *inputs))
    assert [a.shape for a in outputs] == spec.output_shapes(n)
    assert sum(a.nbytes for a in outputs) == spec.output_bytes(n, 4)
    tensors = arrays(implementation.compute(torch, *[torch.from_numpy(a) for a in inputs]))
    assert [tuple(t.shape) for t in tensors] == spec.output_shapes(n)
    assert [t.dtype for t in tensors] == [torch.from_numpy(a).dtype for a in outputs]
