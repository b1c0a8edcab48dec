import numpy as np
from offloadbench.measure.correctness import check_rows, relative_error, tolerance, verdict


def test_tolerances_follow_the_precision():
    n = 1024
    assert tolerance("bfloat16", n) > tolerance("float16", n) > tolerance("float32", n) > tolerance("float64", n)
    assert tolerance("float32", n, tf32=True) > 100 * tolerance("float32", n)
    assert tolerance("float32", 4096) > tolerance("float32", 256)


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, n)) * 2 - 1, rng.random((n, n)) * 2 - 1


def test_float32_matmul_passes_against_the_float64_reference():
    a, b = _inputs(512)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    rows = check_rows(512, 32, np.random.default_rng(0))
    result = (a32 @ b32)[rows]
    reference = a32.astype(np.float64)[rows] @ b32.astype(np.float64)
    assert verdict(relative_error(result, reference), "float32", 512, False, len(rows))["passed"]


def _round_mantissa(x, bits):
    mantissa, exponent = np.frexp(x)
    return np.ldexp(np.round(mantissa * 2**bits) / 2**bits, exponent)


def test_a_tf32_like_result_fails_float32_but_passes_tf32():
    a, b = _inputs(1024, seed=1)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    rows = np.arange(16)
    reference = a32.astype(np.float64)[rows] @ b32.astype(np.float64)
    tf32_like = _round_mantissa(a32.astype(np.float64)[rows], 11) @ _round_mantissa(b32.astype(np.float64), 11)
    assert not verdict(relative_error(tf32_like, reference), "float32", 1024, False, 16)["passed"]
    assert verdict(relative_error(tf32_like, reference), "float32", 1024, True, 16)["passed"]


def test_a_float16_result_fails_the_float32_tolerance():
    a, b = _inputs(256, seed=2)
    rows = np.arange(8)
    reference = a[rows] @ b
    half = (a.astype(np.float16)[rows] @ b.astype(np.float16)).astype(np.float64)
    assert not verdict(relative_error(half, reference), "float32", 256, False, 8)["passed"]


def test_non_finite_results_never_pass():
    assert relative_error(np.array([1.0, np.nan]), np.array([1.0, 1.0])) == np.inf


def test_check_rows_are_a_sorted_sample_or_all_rows():
    rows = check_rows(1000, 32, np.random.default_rng(0))
    assert len(rows) == 32 and np.all(np.diff(rows) > 0)
    assert list(check_rows(10, 32, np.random.default_rng(0))) == list(range(10))
