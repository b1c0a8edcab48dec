import subprocess

import pytest
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.tables import transfer_table
from offloadbench.measure import transfer
from offloadbench.measure.timing import StopRule
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

    link = transfer.pcie_link(run=fake_smi)
    assert link["kind"] == "PCIe gen 5 x16" and link["current"] == "gen 1 x16"
    assert link["gbs"] == pytest.approx(63.0, rel=0.01)


def test_missing_nvidia_smi_gives_no_link():
    def no_smi(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    assert transfer.pcie_link(run=no_smi) is None
    assert transfer.link_rate(25, "cuda") == {"kind": "configured", "gbs": 25.0, "source": "config transfer.link_gbs"}


def test_sweep_without_a_gpu_skips_every_point_with_a_reason():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU exists here")
    points = transfer.sweep(torch, "cuda", [4096, 2**20], ["pageable", "pinned"], StopRule(budget_s=0.1))
    assert len(points) == 2 * 2 * 2
    assert {p["status"] for p in points} == {"skipped"}
    assert all(p["reason"].startswith("cuda unavailable") for p in points)
    table = transfer_table([{"device": "cuda", "device_name": None, "link": None, "points": points}], "m", Analysis(resamples=100))
    assert set(table["status"]) == {"skipped"} and table["gbs"].isna().all()


def test_pinned_memory_is_cuda_only():
    torch = pytest.importorskip("torch")
    if torch.backends.mps.is_available():
        reason = transfer.unavailable("mps", "pinned", torch)
        assert "CUDA feature" in reason
    else:
        assert transfer.unavailable("mps", "pinned", torch).startswith("mps unavailable")
