"""When a bout may end: the comparisons among its cells (which pairs the tables will judge)
and whether each is precise as the median over the bout's cycles."""

import random

from offloadbench.cells import Cell
from offloadbench.compared import planned_comparisons
from offloadbench.jobs.bout import precise_pairs


def cell(library="numpy", threads="1", mode="eager", device="cpu", twin=False):
    return Cell("fft2", library, device, "float32", 1024, threads, mode, twin)


def test_a_group_compares_each_variant_with_numpy_its_threads_and_its_twin():
    numpy1, numpy_all, torch1, torch_all = cell(), cell(threads="all"), cell("torch"), cell("torch", "all")
    compiled, gpu, twin = cell("torch", mode="compiled"), cell("torch", device="cuda"), cell(twin=True)
    pairs = set(planned_comparisons([numpy1, numpy_all, torch1, torch_all, compiled, gpu, twin]))
    assert pairs == {
        (torch1, numpy1), (torch_all, numpy_all), (compiled, numpy1), (gpu, numpy_all),  # speedups
        (numpy_all, numpy1), (torch_all, torch1),  # thread scaling
        (twin, numpy1),  # the self-comparison
    }


def turns_of(times_by_cycle):
    return {"compute": dict(enumerate(times_by_cycle))}


def test_a_pair_is_precise_once_the_median_ratio_over_cycles_is_within_the_target():
    rng = random.Random(1)
    a, b = cell("torch"), cell()
    drift = [1 + 0.3 * rng.random() for _ in range(12)]  # the machine's speed, common to both turns of a cycle
    steady = {a: turns_of([2e-3 * d for d in drift]), b: turns_of([4e-3 * d for d in drift])}
    assert precise_pairs(steady, [(a, b)], target=0.02)  # drift cancels in each cycle's ratio
    noisy = {a: turns_of([2e-3 * d * (1 + 0.2 * rng.random()) for d in drift]), b: steady[b]}
    assert not precise_pairs(noisy, [(a, b)], target=0.02)
    assert precise_pairs(noisy, [(a, b)], target=0.5)
    few = {a: turns_of([2e-3] * 4), b: turns_of([4e-3] * 4)}  # 4 cycles give no 95% CI of a median
    assert not precise_pairs(few, [(a, b)], target=0.5)


def test_a_region_only_one_side_timed_is_no_pair():
    a, b = cell("torch", device="cuda"), cell(threads="all")
    turns = {a: {"compute": dict(enumerate([1e-3] * 8)), "h2d": dict(enumerate([5e-4] * 8))},
             b: {"compute": dict(enumerate([2e-3] * 8))}}
    assert precise_pairs(turns, [(a, b)], target=0.01)
