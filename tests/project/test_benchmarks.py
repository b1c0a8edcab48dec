"""Smoke tests of the benchmarks: they run on a tiny setting and print their tables.
`make test-bench` runs them (CI does, after `make test`); their full runs (`make
bench-fidelity`, `make bench-paired`, ...) stay out of CI."""

from pathlib import Path

import pytest
from conftest import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.bench


def test_fidelity_smoke(capsys):
    assert load_benchmark("fidelity").main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "| matmul" not in out  # rows are named by cell stem
    assert "numpy-cpu-float32-n64-t1" in out and "torch-cpu-float32-n64-t1" in out
    assert out.strip().splitlines()[-1].startswith("worst ratio ours/reference: ")
    assert "precision per second" in out


@pytest.mark.pipeline
def test_overhead_smoke(capsys):
    assert load_benchmark("overhead").main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "| round-1 | " in out and "| round-2 | " in out and "| all 2 | " in out
    header = next(line for line in out.splitlines() if line.startswith("| round | wall |"))
    for part in ("start", "inputs", "warm-up", "sampling", "check", "record", "other"):
        assert f"| {part} |" in header, part
    assert "sampling: " in out and "of the rounds' wall time" in out
    assert "snakemake -n on " in out
    numpy_row = next(line for line in out.splitlines() if "| matmul/numpy-cpu-float32-n64-t1 |" in line)
    assert numpy_row.rstrip(" |").endswith("none"), "a numpy cell loaded a heavy module"
    torch_row = next(line for line in out.splitlines() if "torch-cpu-float32-n64-t1" in line)
    assert "torch" in torch_row and "pandas" not in torch_row and "snakemake" not in torch_row


@pytest.mark.pipeline
def test_alone_smoke(capsys):
    assert load_benchmark("alone").main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "| sum_rows/numpy-cpu-float32-n128-t1 | " in out and "| sum_rows/torch-cpu-float32-n128-t1 | " in out
    row = next(line for line in out.splitlines() if line.startswith("| sum_rows n = 128 |"))
    assert row.count("(") == 2  # the pipeline's CI and the alone one
    assert out.strip().splitlines()[-1].startswith("speedups neither inside the pipeline's CI nor within 10% of it: ")


@pytest.mark.pipeline
def test_reproducibility_smoke_beside_a_busy_loop(capsys):
    """One smoke run serves both views: the tables of a reproducibility check, and the
    second run disturbed by an on/off busy loop (the benchmark's DISTURB=1)."""
    assert load_benchmark("reproducibility").main(["--smoke", "--disturb"]) == 0
    out = capsys.readouterr().out
    assert "| matmul/numpy-cpu-float32-n64-t1 |" in out and "wall time: run 1 " in out
    assert "levels: between-process variance dominates in" in out
    assert out.strip().splitlines()[-1].startswith("inside: ") and "contradictions: " in out
    assert "beside a one-core busy loop" in out and "decided: " in out and "self-comparisons, " in out
    assert "medians moved by more than 25%: " in out


@pytest.mark.pipeline
def test_pyperf_reference_smoke(capsys):
    assert load_benchmark("pyperf_reference").main(["--smoke"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| matmul n=64 |"))
    assert "processes" in row and "values" in row
    ratio = float(row.rstrip(" |").split("|")[-1])
    assert 0.5 < ratio < 2.0, row  # the two harnesses time the same call
    assert out.strip().splitlines()[-1].startswith("seconds: ours ")


@pytest.mark.pipeline
def test_paired_smoke(capsys):
    assert load_benchmark("paired").main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "| matmul, n = 64, torch / numpy |" in out and "| seconds measuring |" in out
    # each method analysed as it was measured: alone, paired by round; in bouts, paired in time
    assert "separate: paired by round" in out and "bouts: paired in time" in out


def test_restore_smoke(capsys):
    assert load_benchmark("restore").main(["--smoke"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| sum_rows/numpy-cpu-float32-n64-t1 |"))
    assert row.count("µs") == 2 and "(" in row
    assert out.strip().splitlines()[-1].startswith("cells where timing each call alone is neither inside")
