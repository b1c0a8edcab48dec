"""How long the data must stay on the device: k* = (h2d + d2h) ÷ (NumPy − device compute),
on hand-made intervals and on the real H200 results."""

import math
from pathlib import Path

import pytest
from offloadbench.analysis.round_trip import AFTER, EVERY_CALL, NEVER, calls_per_round_trip, trip_kind
from offloadbench.analysis.tables import read_tables
from offloadbench.stats import Interval

H200 = Path(__file__).parents[1] / "data" / "h200"


def exact(value, spread=0.0):
    return Interval(value, value * (1 - spread), value * (1 + spread), 3)


def test_the_copies_over_the_saving_per_call():
    trip = calls_per_round_trip(exact(78e-6), exact(47e-6), exact(71e-6), exact(23e-6))
    assert trip.calls == pytest.approx(125 / 48) and trip_kind(trip.calls, trip.high) == AFTER
    every = calls_per_round_trip(exact(1e-6), exact(1e-6), exact(1e-3), exact(1e-4))
    assert trip_kind(every.calls, every.high) == EVERY_CALL
    never = calls_per_round_trip(exact(1e-6), exact(1e-6), exact(1e-4), exact(2e-4))
    assert math.isinf(never.calls) and trip_kind(never.calls, never.high) == NEVER


def test_its_interval_joins_the_ends_of_the_copies_and_of_the_saving():
    trip = calls_per_round_trip(exact(80e-6, 0.05), exact(50e-6, 0.05), exact(70e-6, 0.05), exact(20e-6, 0.05))
    assert trip.low < trip.calls < trip.high
    assert trip.low == pytest.approx(130e-6 * 0.95 / (70e-6 * 1.05 - 20e-6 * 0.95))
    assert trip.high == pytest.approx(130e-6 * 1.05 / (70e-6 * 0.95 - 20e-6 * 1.05))
    shaky = calls_per_round_trip(exact(80e-6), exact(50e-6), exact(30e-6, 0.5), exact(20e-6, 0.5))
    assert math.isinf(shaky.high)  # the saving's CI reaches 0: it may never pay


def test_the_h200_needs_about_2_6_calls_at_256_and_one_call_pays_from_1024():
    speedups = read_tables({"speedups": str(H200 / "speedups.csv")})["speedups"]
    matmul = speedups[(speedups["op"] == "matmul") & (speedups["device"] == "cuda")].set_index("size")
    assert matmul.loc[256, "calls_per_round_trip"] == pytest.approx(2.6, abs=0.1)
    kinds = {n: trip_kind(matmul.loc[n, "calls_per_round_trip"], matmul.loc[n, "calls_per_round_trip_ci_high"])
             for n in (256, 1024, 2048, 4096, 10000)}
    assert kinds == {256: AFTER, 1024: EVERY_CALL, 2048: EVERY_CALL, 4096: EVERY_CALL, 10000: EVERY_CALL}
    gpu = speedups[speedups["device"] == "cuda"]
    assert gpu["calls_per_round_trip"].notna().all() and speedups.loc[speedups["device"] == "cpu",
                                                                        "calls_per_round_trip"].isna().all()


def test_a_resident_trip_copies_once_and_chains_its_calls():
    torch = pytest.importorskip("torch")
    from offloadbench.cells import Cell
    from offloadbench.measure.backend import Backend, build_regions, make_host_inputs, resident_trip
    from offloadbench.measure.ops import get_op
    from offloadbench.measure.settings import Settings

    cell = Cell("transcendental", "torch", "cpu", "float32", 32, "1")
    backend = Backend(cell, get_op("transcendental"), Settings(), torch)
    inputs = make_host_inputs(backend.op, cell, 0, torch)
    seen, copies = [], []
    compute, to_device = backend.compute, backend.to_device
    backend.compute = lambda xs: (seen.append(xs[0]), compute(xs))[1]
    backend.to_device = lambda x: (copies.append(1), to_device(x))[1]
    out = resident_trip(backend, inputs, 4)()
    assert len(seen) == 4 and len(copies) == len(inputs)  # the inputs copied in once
    assert all(torch.equal(seen[i + 1], compute([seen[i], *[to_device(x) for x in inputs[1:]]])) for i in range(3))
    assert out.shape == inputs[0].shape
    backend.compute, backend.to_device = compute, to_device
    assert not [name for name in build_regions(backend, inputs) if name.startswith("resident_")]
    assert "no device" in backend.resident_reason  # on the cpu, with its reason


def test_the_resident_table_compares_each_trip_with_the_phases():
    from conftest import group_typed, make_processes
    from offloadbench.analysis.columns import RESIDENT
    from offloadbench.analysis.measured import Analysis
    from offloadbench.analysis.tables import resident_table

    records = make_processes(3, median=1e-4, library="torch", device="cuda", op="transcendental",
                             phases={"h2d": 2e-4, "d2h": 3e-4, "resident_1": 6e-4, "resident_16": 2.2e-3})
    (mc,) = group_typed(records, Analysis(resamples=100))
    table = resident_table([mc], "m")
    assert list(table.columns) == list(RESIDENT) and list(table["calls"]) == [1, 16]
    assert list(table["resident_s"]) == pytest.approx([6e-4, 2.2e-3], rel=0.05)
    assert list(table["predicted_s"]) == pytest.approx([2e-4 + k * 1e-4 + 3e-4 for k in (1, 16)], rel=0.05)
    assert set(table["device"]) == {"cuda"} and set(table["op"]) == {"transcendental"}
