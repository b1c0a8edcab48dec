import math

import pytest
from offloadbench.analysis.breakeven import break_even


def test_crossing_within_the_grid_is_interpolated_on_log_axes():
    # CI lower bound 0.5 at n=1024, 2.0 at n=4096: log-midpoint of the sizes is 2048.
    result = break_even([256, 1024, 4096, 16384], [0.1, 0.5, 2.0, 8.0])
    assert result.status == "reached"
    assert (result.below, result.above) == (1024, 4096)
    assert result.size == pytest.approx(2048, rel=1e-9)


def test_never_crossing_is_reported_as_not_reached():
    result = break_even([256, 1024, 4096], [0.1, 0.4, 0.9])
    assert result.status == "not reached" and math.isnan(result.size) and result.below == 4096


def test_a_ci_straddling_one_near_the_crossing_moves_the_break_even_up():
    # At n=2048 the point estimate may exceed 1, but the CI's lower end (0.97) does not.
    result = break_even([512, 1024, 2048, 4096], [0.6, 0.8, 0.97, 1.5])
    assert (result.below, result.above) == (2048, 4096)
    assert 2048 < result.size < 4096


def test_faster_everywhere_is_at_or_below_the_smallest_size():
    result = break_even([256, 1024], [1.2, 3.0])
    assert result.status == "from the smallest size" and (result.size, result.above) == (256, 256)


def test_a_dip_below_one_restarts_the_count():
    result = break_even([256, 512, 1024, 2048], [1.5, 0.9, 1.2, 2.0])
    assert (result.below, result.above) == (512, 1024)


def test_order_of_input_does_not_matter():
    assert break_even([4096, 256, 1024], [2.0, 0.1, 0.5]).size == pytest.approx(2048)


def test_missing_ci_counts_as_not_clearly_faster():
    result = break_even([256, 1024], [float("nan"), 2.0])
    assert result.status == "reached" and result.size == 1024
