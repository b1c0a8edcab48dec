"""The real pipeline, end to end, on a tiny grid in a temporary copy of the repository."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest

from offloadbench import sandbox
from offloadbench.layout import FIGURE_NAMES

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TINY = {
    "machine": "ci-box",
    "grid": {"ops": ["matmul", "compute_then_plot"], "libraries": ["numpy", "torch"], "devices": ["cpu", "cuda", "mps"],
             "dtypes": ["float32"], "sizes": [32, 64], "threads": [1]},
    "measure": {"budget_s": 0.1, "warmup_budget_s": 0.05, "min_sampling_s": 0.01, "timeout_s": 120},
    "transfer": {"sizes": ["4KiB", "1MiB"], "budget_s": 0.1},
    "analysis": {"bootstrap_resamples": 200},
}
pytestmark = pytest.mark.pipeline


def snakemake(workdir: Path, *args, config: dict | None = None, check=True):
    result = sandbox.snakemake(workdir, *args, config=config, timeout=900)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = sandbox.copy_workflow(tmp_path_factory.mktemp("pipeline"))
    dry = snakemake(workdir, "-n", config=TINY)
    snakemake(workdir, config=TINY)
    return {"dir": workdir, "out": workdir / "results" / "ci-box", "dry": dry.stdout + dry.stderr}


def test_dry_run_plans_one_measure_job_per_cell(run):
    assert "measure" in run["dry"]
    line = next(l for l in run["dry"].splitlines() if l.strip().startswith("measure"))
    assert int(line.split()[1]) == 16  # per op: numpy 2 + torch cpu 2 + cuda 2 + mps 2
    assert any(l.strip().startswith("transfer") for l in run["dry"].splitlines())


def test_every_output_exists(run):
    out = run["out"]
    expected = ["environment.json", "timings.csv", "speedups.csv", "thread_scaling.csv", "transfer.csv", "report.md", "report.html"]
    expected += [f"figures/{n}.{k}" for n in FIGURE_NAMES for k in ("pdf", "png")]
    expected += ["raw/transfer/cuda.json", "raw/transfer/mps.json"]
    for name in expected:
        assert (out / name).is_file(), name
    assert len(list((out / "raw" / "matmul").glob("*.json"))) == 8
    assert len(list((out / "raw" / "compute_then_plot").glob("*.json"))) == 8
    # the rendered fields of the cells that ran
    ran = 4 + 2 * sum(expected_status(d) == "ok" for d in ("cuda", "mps"))
    assert len(list((out / "raw" / "compute_then_plot").glob("*.png"))) == ran
    assert not list(out.rglob("*.tmp")), "a temporary file was left behind"


def expected_status(device: str) -> str:
    """GPU cells run where the GPU exists and are skipped elsewhere."""
    import torch

    present = torch.cuda.is_available() if device == "cuda" else torch.backends.mps.is_available()
    return "ok" if present else "skipped"


def test_statuses_and_columns(run):
    timings = pd.read_csv(run["out"] / "timings.csv", dtype={"threads": str})
    for column in ["machine", "op", "library", "device", "dtype", "size", "threads", "status", "reason", "n_samples",
                   "median_s", "q1_s", "q3_s", "ci_low_s", "ci_high_s", "gflops", "rel_err",
                   "h2d_s", "compute_s", "d2h_s", "end_to_end_s", "transfer_fraction"]:
        assert column in timings.columns, column
    for device in ("cuda", "mps"):
        cells = timings[timings["device"] == device]
        assert len(cells) == 4 and set(cells["status"]) == {expected_status(device)}
        if expected_status(device) == "skipped":
            assert cells["reason"].str.contains(f"{device} unavailable").all()
    cpu = timings[timings["device"] == "cpu"]
    assert set(cpu["status"]) == {"ok"} and (cpu["median_s"] > 0).all() and (cpu["n_samples"] >= 6).all()
    speedups = pd.read_csv(run["out"] / "speedups.csv")
    gpu_rows = 4 * sum(expected_status(d) == "ok" for d in ("cuda", "mps"))
    assert len(speedups) == 4 + gpu_rows and (speedups["speedup_ci_low"] <= speedups["speedup_ci_high"]).all()
    assert speedups["break_even"].notna().all()
    plot_cells = timings[(timings["op"] == "compute_then_plot") & (timings["status"] == "ok")]
    assert (plot_cells["finish_s"] > 0).all() and (plot_cells["end_to_end_s"] > plot_cells["median_s"]).all()


def test_the_transfer_sweep_covers_every_point(run):
    transfer = pd.read_csv(run["out"] / "transfer.csv")
    assert len(transfer) == 2 * 2 * 2 * 2  # devices x directions x memory kinds x sizes
    cuda = transfer[transfer["device"] == "cuda"]
    assert set(cuda["status"]) == {expected_status("cuda")}
    if expected_status("cuda") == "ok":
        assert (cuda["gbs"] > 0).all()
    else:
        assert cuda["reason"].str.contains("cuda unavailable").all()


def test_records_carry_their_provenance(run):
    record = json.loads((run["out"] / "raw" / "matmul" / "torch-cpu-float32-n64-t1.json").read_text())
    assert record["threads"]["effective"] == 1
    assert record["settings"]["tf32_matmul"] is False
    assert record["provenance"]["cpu_model"] and record["provenance"]["torch"]
    assert any(pool["library"] for pool in record["threads"]["pools"])
    env = json.loads((run["out"] / "environment.json").read_text())
    for key in ("cpu_model", "logical_cores", "gpus", "cuda_available", "mps_available", "torch_version",
                "numpy_version", "threadpools", "tf32_matmul_default", "hostname", "os", "python", "captured_at"):
        assert key in env, key


def test_figures_are_real_images(run):
    for name in FIGURE_NAMES:
        assert (run["out"] / "figures" / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
        image = mpimg.imread(run["out"] / "figures" / f"{name}.png")
        assert image.ndim == 3 and image.std() > 0.01


def test_report_references_each_figure_and_the_skipped_cells(run):
    text = (run["out"] / "report.md").read_text()
    for name in FIGURE_NAMES:
        assert f"figures/{name}.png" in text
    assert "## Seed claims checked" in text and "## Does offloading pay?" in text
    if expected_status("cuda") == "skipped":
        assert "**No GPU cell ran on this machine**" in text
        assert "**skipped** (4): cuda unavailable" in text
        assert "**This machine has no GPU that PyTorch can use**" in text
    else:
        assert "### Break-even sizes" in text
    html = (run["out"] / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(FIGURE_NAMES)


def test_a_second_run_has_nothing_to_do(run):
    result = snakemake(run["dir"], "-n", config=TINY)
    assert "Nothing to be done" in result.stdout + result.stderr


def test_snakemake_report_builds_with_every_caption(run):
    result = snakemake(run["dir"], "--report", "smk-report.html", config=TINY)
    assert "Report created" in result.stdout + result.stderr
    html = (run["dir"] / "smk-report.html").read_text()
    assert "break-even size" in html and "copy bandwidth" in html.lower()


def test_a_moved_clone_does_not_re_measure(run, tmp_path):
    """Paths of the clone or the interpreter are not rerun triggers: moving must not
    invalidate hours of measurements."""
    moved = tmp_path / "moved"
    shutil.copytree(run["dir"], moved, symlinks=True)  # copy2 keeps modification times
    result = snakemake(moved, "-n", config=TINY)
    assert "Nothing to be done" in result.stdout + result.stderr, result.stdout[-2000:]


def test_a_corrupted_record_is_rejected_by_name(run, tmp_path):
    workdir = sandbox.copy_workflow(tmp_path / "copy")
    shutil.copytree(run["out"], workdir / "results" / "ci-box")
    victim = workdir / "results" / "ci-box" / "raw" / "matmul" / "numpy-cpu-float32-n32-t1.json"
    victim.write_text(victim.read_text()[:200])
    result = snakemake(workdir, "--forcerun", "aggregate", "--allowed-rules", "aggregate", config=TINY, check=False)
    assert result.returncode != 0
    assert "raw/matmul/numpy-cpu-float32-n32-t1.json: not valid JSON" in result.stdout + result.stderr


def test_lint_is_clean():
    result = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Lints for" not in result.stdout + result.stderr, result.stdout + result.stderr


def test_snakefmt_is_clean():
    files = ["Snakefile", *map(str, sorted((ROOT / "workflow" / "rules").glob("*.smk")))]
    result = subprocess.run([str(BIN / "snakefmt"), "--check", *files], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "bad, key",
    [({"grid": {"sizes": [0]}}, "grid.sizes[0]"), ({"measure": {"budget": 1}}, "measure"), ({"grid": {"threads": ["x"]}}, "grid.threads[0]")],
)
def test_an_invalid_config_stops_before_any_job_in_one_line(tmp_path, bad, key):
    workdir = sandbox.copy_workflow(tmp_path / "bad")
    result = snakemake(workdir, config={**TINY, **bad}, check=False)
    assert result.returncode != 0
    errors = [l for l in (result.stdout + result.stderr).splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and f"config key {key}:" in errors[0]
    assert "Traceback" not in result.stderr
    assert not (workdir / "results").exists()
