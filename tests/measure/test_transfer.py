import math
import subprocess

import pytest
import torch  # a pinned requirement: missing, it must fail the suite, not skip it
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.tables import roofs_table, transfer_table
from offloadbench.measure import system, transfer
from offloadbench.measure.timing import StopRule
from offloadbench.records import DeviceRecord
from offloadbench.units import bandwidth_gbs, parse_size


@pytest.mark.parametrize("text, nbytes", [(4096, 4096), ("4KiB", 4096), ("64 KiB", 65536), ("1.5GB", 1_500_000_000), ("2GiB", 2**31), ("512B", 512)])
def test_sizes_parse(text, nbytes):
    assert parse_size(text) == nbytes


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="not a size"):
        parse_size("4 parsecs")


def test_bandwidth_is_bytes_over_the_median_time(gpu_tables, record_factory):
    assert bandwidth_gbs(2**30, 0.05) == pytest.approx(2**30 / 0.05 / 1e9)
    table = gpu_tables["transfer"]
    row = table[(table.memory == "pinned") & (table.direction == "h2d") & (table.bytes == 2**28)].iloc[0]
    assert row.gbs == pytest.approx(row.bytes / row.median_s / 1e9)
    assert row.gbs_ci_low <= row.gbs <= row.gbs_ci_high
    assert row.link_fraction == pytest.approx(row.gbs / 63.0)


def test_pcie_link_rate_is_generation_times_width():
    def fake_smi(*args, **kwargs):
        return subprocess.CompletedProcess(args, 0, stdout="5, 16, 1, 16\n", stderr="")

    link = system.pcie_link(run=fake_smi)
    assert link["kind"] == "PCIe gen 5 x16" and link["current"] == "gen 1 x16"
    assert link["gbs"] == pytest.approx(63.0, rel=0.01)


def test_missing_nvidia_smi_gives_no_link():
    def no_smi(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    assert system.pcie_link(run=no_smi) is None
    assert transfer.link_rate(25, "cuda") == {"kind": "configured", "gbs": 25.0, "source": "config transfer.link_gbs"}


def test_sweep_without_a_gpu_skips_every_point_with_a_reason():
    if torch.cuda.is_available():
        pytest.skip("a GPU exists here")
    points = transfer.sweep(torch, "cuda", [4096, 2**20], ["pageable", "pinned"], StopRule(budget_s=0.1))
    assert len(points) == 2 * 2 * 2
    assert {p["status"] for p in points} == {"skipped"}
    assert all(p["reason"].startswith("cuda unavailable") for p in points)
    record = DeviceRecord.from_json({"device": "cuda", "device_name": None, "link": None, "points": points})
    table = transfer_table([record], "m", Analysis(resamples=100))
    assert set(table["status"]) == {"skipped"} and table["gbs"].isna().all()


def test_pinned_memory_is_cuda_only(monkeypatch):
    assert transfer.unavailable("mps", "pinned", torch).startswith("mps unavailable") or torch.backends.mps.is_available()
    monkeypatch.setattr(transfer.devices, "unavailable_reason", lambda device, torch: None)  # as if both GPUs were here
    assert "CUDA feature" in transfer.unavailable("mps", "pinned", torch)
    assert transfer.unavailable("mps", "pageable", torch) is None
    assert transfer.unavailable("cuda", "pinned", torch) is None


def test_roofs_are_work_over_the_median_time_with_the_ci_ends_swapped():
    calls = [0.010, 0.011, 0.009, 0.010, 0.012, 0.010, 0.0105]
    record = {"device": "cpu", "device_name": "cpu", "points": [
        {"library": "numpy", "kind": "memory", "dtype": "float64", "size": 2**20, "status": "ok", "reason": "",
         "bytes": 3 * 2**23, "samples_s": calls},
        {"library": "torch", "kind": "compute", "dtype": "float32", "size": 512, "status": "ok", "reason": "",
         "flops": 2 * 512**3, "samples_s": calls},
        {"library": "torch", "kind": "compute", "dtype": "float16", "size": 512, "status": "skipped",
         "reason": "no roof in half precision on a CPU"},
    ]}
    table = roofs_table([DeviceRecord.from_json(record)], "m", Analysis(resamples=200)).set_index(["kind", "dtype"])
    memory, compute = table.loc[("memory", "float64")], table.loc[("compute", "float32")]
    assert memory.value == pytest.approx(3 * 2**23 / 0.010 / 1e9) and memory.unit == "GB/s"
    assert compute.value == pytest.approx(2 * 512**3 / 0.010 / 1e9) and compute.unit == "GFLOP/s"
    for row in (memory, compute):
        assert row.ci_low < row.value < row.ci_high and row.n_samples == len(calls)
    skipped = table.loc[("compute", "float16")]
    assert skipped.status == "skipped" and math.isnan(skipped.value) and skipped.n_samples == 0
