"""The real pipeline, end to end, on the tiny grid of .test/ in a temporary copy of the repository.

Its cuda is the stand-in GPU (OFFLOADBENCH_STANDIN_GPU=1, tests/standin/standin_gpu.py), so every GPU
path runs through the real rounds on any machine, and the suite checks the same statuses on
a GPU machine; mps is skipped off a Mac. `make gpu-check` runs the GPU path on a real GPU.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import STANDIN_GPU, TINY, assert_real_figure, snakemake
from offloadbench import sandbox
from offloadbench.analysis.columns import DECLARED
from offloadbench.layout import FIGURE_NAMES

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# per op and size: numpy, torch on the cpu, cuda and mps, over 2 ops at 2 sizes (heat_step a kernel of
# examples/kernels.py) and 4 at one; heat_step compiled at n = 64, numpy and torch, on the cpu and on
# cuda; and the twins of 2 self-comparisons (analysis.controls)
CELLS = 4 * (2 * 2 + 4) + 4 + 2
pytestmark = [pytest.mark.pipeline, pytest.mark.xdist_group("tiny_run")]  # one worker runs the tiny grid once


@pytest.fixture(scope="module")
def run(tiny_run):
    return tiny_run


def test_the_run_plans_one_round_job_per_round(run):
    stats = run["log"][run["log"].index("Job stats"):].splitlines()
    line = next(l for l in stats if l.strip().startswith("round"))
    assert int(line.split()[1]) == TINY["measure"]["processes"]
    assert any(l.strip().startswith("transfer") for l in stats) and any(l.strip().startswith("roofs") for l in stats)


def test_the_measuring_rules_run_the_python_of_their_environment(run):
    """What --sdm conda or apptainer relies on: jobs call `python` from PATH."""
    modules = [call.split()[1] for call in run["python_calls"] if call.startswith("-m ")]
    assert modules.count("offloadbench.jobs.round") == 2
    assert "offloadbench.jobs.environment" in modules and modules.count("offloadbench.jobs.transfer") == 1
    assert modules.count("offloadbench.jobs.roofs") == 1


def test_every_output_exists(run):
    out = run["out"]
    expected = ["environment.json", "timings.csv", "speedups.csv", "thread_scaling.csv", "decisions.csv", "transfer.csv",
                "report.md", "report.html"]
    expected += [f"figures/{n}.{k}" for n in FIGURE_NAMES for k in ("pdf", "png")]
    expected += ["raw/transfer/cuda.json", "raw/transfer/mps.json", "raw/rounds/round-1.json", "raw/rounds/round-2.json",
                 "raw/rounds/settle.json"]
    expected += ["roofs.csv", "raw/roofs/cpu.json", "raw/roofs/cuda.json", "raw/roofs/mps.json", "claims.tex"]
    expected += [f"tables/{name}.tex" for name in ("timings", "speedups", "transfer", "decisions")]
    for name in expected:
        assert (out / name).is_file(), name
    assert len(list((out / "raw").rglob("p[12].json"))) == CELLS * 2  # the records of the two rounds
    # the rendered fields of the cells that ran, one per process, extra rounds included
    plots = [json.loads(p.read_text()) for p in (out / "raw" / "compute_then_plot").rglob("p*.json")]
    assert len(list((out / "raw" / "compute_then_plot").rglob("*.png"))) == sum(r["status"] == "ok" for r in plots) >= 3 * 2  # numpy's, torch's and the GPU's, in both rounds
    assert not list(out.rglob("*.tmp")), "a temporary file was left behind"
    assert not (out / "raw" / ".partial").exists()


def test_the_roofs_are_measured_where_a_device_is_and_skipped_with_a_reason_elsewhere(run):
    roofs = pd.read_csv(run["out"] / "roofs.csv")
    cpu, cuda, mps = (roofs[roofs["device"] == device] for device in ("cpu", "cuda", "mps"))
    assert set(cpu["status"]) == {"ok"} and set(cpu["kind"]) == {"memory", "compute", "pages"}
    assert (cpu["value"] > 0).all() and (cpu["ci_low"] <= cpu["value"]).all() and (cpu["value"] <= cpu["ci_high"]).all()
    assert (cpu["unit"] == cpu["kind"].map({"memory": "GB/s", "compute": "GFLOP/s", "pages": "ns per fresh page"})).all()
    assert set(cuda["status"]) == {"ok"} and (cuda["value"] > 0).all()  # the stand-in's
    assert set(mps["status"]) == {"skipped"} and mps["reason"].str.len().gt(0).all()


def test_the_written_tables_have_the_declared_columns(run):
    for name, declared in DECLARED.items():
        written = pd.read_csv(run["out"] / f"{name}.csv", nrows=0).columns.tolist()
        assert written == list(declared), name


def test_statuses_and_columns(run):
    timings = pd.read_csv(run["out"] / "timings.csv", dtype={"threads": str})
    for column in ["machine", "op", "library", "device", "dtype", "size", "threads", "status", "reason", "n_samples",
                   "median_s", "q1_s", "q3_s", "ci_low_s", "ci_high_s", "gflops", "rel_err",
                   "h2d_s", "compute_s", "d2h_s", "end_to_end_s", "transfer_fraction", "processes", "ci_scope", "host"]:
        assert column in timings.columns, column
    mps = timings[timings["device"] == "mps"]
    assert len(mps) == 8 and set(mps["status"]) == {"skipped"} and mps["reason"].str.contains("mps unavailable").all()
    cuda = timings[timings["device"] == "cuda"]  # the stand-in GPU: every cell's copies and compute
    assert len(cuda) == 8 + 2 and set(cuda["status"]) == {"ok"}
    assert (cuda[["h2d_s", "compute_s", "d2h_s", "end_to_end_s"]] > 0).all().all()
    assert (cuda["end_to_end_s"] > cuda["compute_s"]).all() and set(cuda["device_name"]) == {
        "offloadbench stand-in GPU (on the CPU)"}
    chained = cuda[cuda["op"].isin(["transcendental", "heat_step"])]  # an elementwise op and the kernel chain
    resident = pd.read_csv(run["out"] / "resident.csv", dtype={"threads": str})
    trips = resident.groupby(["op", "library", "mode", "dtype", "size"])["calls"].apply(list)
    assert len(trips) == len(chained) and all(calls == [1, 16] for calls in trips)  # every chaining cell, each k
    assert set(resident["op"]) == {"transcendental", "heat_step"} and (resident["resident_s"] > 0).all()
    assert (cuda.loc[cuda["op"] == "matmul", "resident_reason"].str.len() > 0).all()  # why matmul has none
    cpu = timings[timings["device"] == "cpu"]
    assert set(cpu["status"]) == {"ok"} and (cpu["median_s"] > 0).all() and (cpu["n_samples"] >= 12).all()
    assert 2 in set(cpu["processes"]) and set(cpu["processes"]) <= set(range(2, 7))  # extra rounds: up to max_processes
    assert set(cpu["ci_scope"]) == {"across processes"}
    speedups = pd.read_csv(run["out"] / "speedups.csv")
    baselines = (timings["library"] == "numpy") & (timings["device"] == "cpu") & (timings["mode"] == "eager")
    assert len(speedups) == (timings["status"] == "ok").sum() - baselines.sum() == 18 + 2
    assert (speedups["speedup_ci_low"] <= speedups["speedup_ci_high"]).all()
    assert speedups["break_even_status"].notna().all()
    plot_cells = timings[(timings["op"] == "compute_then_plot") & (timings["status"] == "ok")]
    assert (plot_cells["finish_s"] > 0).all() and (plot_cells["end_to_end_s"] > plot_cells["median_s"]).all()


def test_compiled_cells_and_the_kernel_run_through_the_pipeline(run):
    timings = pd.read_csv(run["out"] / "timings.csv", dtype={"threads": str})
    compiled = timings[timings["mode"] == "compiled"]
    assert len(compiled) == 4 and set(compiled["op"]) == {"heat_step"} and set(compiled["status"]) == {"ok"}
    assert set(zip(compiled["library"], compiled["device"], strict=True)) == {
        ("numpy", "cpu"), ("torch", "cpu"), ("numpy", "cuda"), ("torch", "cuda")}  # NumPy's kernel compiled for cuda
    assert (compiled["compile_s"] > 0).all() and (compiled["compiler_startup_s"] > 0).all()
    # the first round compiles cold; the later rounds reuse its cache (compile time is never a sample)
    assert compiled["compile_cache_cold"].all() and (compiled["compile_cache_reused"] > 0).all()
    assert (compiled["compile_processes"] - compiled["compile_cache_reused"] == 1).all()
    assert (compiled["graph_breaks"] == 0).all()
    assert set(timings.loc[timings["op"] == "heat_step", "family"]) == {"user kernels"}
    speedups = pd.read_csv(run["out"] / "speedups.csv", dtype={"threads": str})
    assert speedups.loc[speedups["mode"] == "compiled", "amortize_calls"].notna().all()
    record = json.loads((run["out"] / "raw" / "heat_step" / "numpy-cpu-float32-n64-t1-compiled" / "p1.json").read_text())
    assert record["op_info"]["file"] == "examples/kernels.py" and record["compile"]["first_call_s"] > 0
    text = (run["out"] / "report.md").read_text()
    assert "## What compiling costs" in text and "heat_step with numpy compiled" in text
    assert not list(run["scratch"].glob("offloadbench-compile-cache-*")), "a worker's compile cache was left behind"
    assert not (run["out"] / "raw" / ".compile-cache").exists(), "the run's compile cache outlived its last round"


def test_the_self_comparisons_are_measured_and_judged(run):
    controls = pd.read_csv(run["out"] / "controls.csv", dtype={"threads": str})
    assert len(controls) == TINY["analysis"]["controls"] and set(controls["device"]) <= {"cpu", "cuda"}
    assert set(controls["verdict"]) <= {"faster", "slower", "same", "undecided"}
    assert (controls["twin_measure_s"] > 0).all()
    twins = list((run["out"] / "raw").glob("*/*-aa/p1.json"))
    assert len(twins) == len(controls) and json.loads(twins[0].read_text())["cell"]["twin"] is True
    timings = pd.read_csv(run["out"] / "timings.csv")
    assert len(timings) == CELLS - len(controls)  # a twin is no cell of the tables
    assert "self-comparisons (a cell measured again" in (run["out"] / "report.md").read_text()


def test_the_transfer_sweep_covers_every_point(run):
    transfer = pd.read_csv(run["out"] / "transfer.csv")
    assert len(transfer) == 2 * 2 * 2 * 2  # devices x directions x memory kinds x sizes
    cuda, mps = transfer[transfer["device"] == "cuda"], transfer[transfer["device"] == "mps"]
    assert set(cuda["status"]) == {"ok"} and set(mps["status"]) == {"skipped"}
    large = cuda[cuda["bytes"] == 2**20].set_index(["direction", "memory"])["gbs"]
    assert (large.xs("pinned", level="memory") > large.xs("pageable", level="memory")).all()


def test_records_carry_their_process_and_provenance(run):
    records = [json.loads(p.read_text()) for p in (run["out"] / "raw" / "matmul" / "torch-cpu-float32-n64-t1").glob("p*.json")]
    rounds = sorted(r["process"]["round"] for r in records)
    assert rounds[:2] == [1, 2] and all(k > 2 for k in rounds[2:])  # the planned rounds, then any extra ones
    assert all(r["process"]["processes"] == 2 for r in records)  # extra rounds keep the planned count
    assert len({r["process"]["pid"] for r in records}) == len(records)  # independent processes
    record = records[0]
    assert record["threads"]["effective"] == 1 and record["settings"]["tf32_matmul"] is False
    assert record["provenance"]["cpu_model"] and record["provenance"]["torch"] and record["process"]["host"]
    assert any(pool["library"] for pool in record["threads"]["pools"])
    env = json.loads((run["out"] / "environment.json").read_text())
    for key in ("cpu_model", "logical_cores", "gpus", "cuda_available", "mps_available", "torch_version",
                "numpy_version", "threadpools", "tf32_matmul_default", "hostname", "os", "python", "captured_at",
                "devices", "system"):
        assert key in env, key
    assert env["system"]["cores_present"] >= 1


def test_the_method_is_worded_from_the_thresholds_the_run_recorded(run):
    from offloadbench.jobs.bout import method as bout_method
    from offloadbench.measure.settings import Settings

    defaults = {**Settings().method(), **bout_method(4)}
    manifest = json.loads((run["out"] / "raw" / "rounds" / "round-1.json").read_text())
    assert manifest["method"].keys() == defaults.keys()
    assert manifest["method"]["warmup_budget_s"] == TINY["measure"]["warmup_budget_s"]  # the run's, not the default
    assert all(manifest["method"][key] == defaults[key] for key in ("disturbed_cores", "bout_stop_confidence"))
    judging = json.loads((run["out"] / "judging.json").read_text())
    assert judging["method"]["outlier_sigmas"] > 0 and judging["method"]["max_ci_span"] > 1
    method = (run["out"] / "report.md").read_text().split("## Method")[1]
    warmup = manifest["method"]["warmup_rel_tol"]
    assert f"within ±{warmup:.0%} of the best block" in method and "?" not in method.split("## ")[0]


def test_figures_are_real_images(run):
    for name in FIGURE_NAMES:
        assert_real_figure(run["out"] / "figures" / f"{name}.pdf", run["out"] / "figures" / f"{name}.png")


def test_report_references_each_figure_and_the_skipped_cells(run):
    text = (run["out"] / "report.md").read_text()
    for name in FIGURE_NAMES:
        assert f"figures/{name}.png" in text
    assert "## Seed claims checked" in text and "## Does offloading pay?" in text
    assert "**skipped** (8): mps unavailable" in text and "No GPU cell ran" not in text
    assert "cuda is offloadbench's stand-in GPU (OFFLOADBENCH_STANDIN_GPU is set)" in text
    assert "- matmul with torch on cuda (float32): never pays at n = 32 and 64, where cuda computes matmul no faster." in text
    html = (run["out"] / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(FIGURE_NAMES)


def test_the_run_ends_with_the_decision_table_and_where_the_report_is(run):
    """Printed after Snakemake's own closing lines: the answer is the last thing a run says."""
    decisions = pd.read_csv(run["out"] / "decisions.csv", dtype={"threads": str})
    lines = run["stderr"].rstrip("\n").splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("offloadbench: the answer for ci-box"))
    table = lines[start + 1:]
    assert table[-1] == "report: results/ci-box/report.html"
    body = table[:table.index("notes:")] if "notes:" in table else table  # then each row's notes
    rows = [line for line in body if line.split(" ")[0] in set(decisions["op"])]
    assert len(rows) == len(decisions) > 0 and all(len(line) <= 100 for line in table)
    assert set(decisions["device"]) == {"cpu", "cuda"}  # a row per op on the (stand-in) GPU
    assert not any("Elapsed time" in line or "Complete log" in line for line in table)


def narrowest_span(low: str, high: str) -> float:
    """The smallest high/low that two printed, rounded numbers can stand for."""
    half_digit = lambda printed: 0.5 * 10.0 ** -len(printed.partition(".")[2])
    return (float(high) - half_digit(high)) / (float(low) + half_digit(low))


def test_narrowest_span_allows_for_rounding():
    assert narrowest_span("0.061", "0.123") < 2 < narrowest_span("0.061", "0.125")
    assert narrowest_span("10", "30") == pytest.approx(29.5 / 10.5)


def test_the_report_leads_with_the_answer_and_prints_no_number_its_verdicts_reject(run):
    text = (run["out"] / "report.md").read_text()
    lines = text.splitlines()
    first_table = next(i for i, line in enumerate(lines) if line.startswith("|"))
    assert first_table < 40 and "## The answer, per operation" in "\n".join(lines[:first_table])
    assert text.index("## At a glance") < text.index("## Key findings") < text.index("### Machine")
    # wider than max_ci_span (2×) even at the narrowest the printed, rounded bounds allow: a
    # span of 1.9993 prints as 0.061–0.123
    wide = [(lo, hi) for lo, hi in re.findall(r"×\s*\((?:95% CI )?([0-9.]+)[–-]([0-9.]+)\)", text)
            if narrowest_span(lo, hi) > 2]
    assert not wide, wide
    prose = re.sub(r"\|.*", "", text)
    # whole sentences: a clause after a semicolon may repeat with its cell's numbers ("its speedup over NumPy is
    # undecided (its CI spans 4.3×)" for every ratio against one noisy baseline), a sentence may not
    sentences = [x.strip() for x in re.split(r"(?<=[.!?])\s+", prose) if len(x.strip()) >= 40]
    repeated = {x for x in sentences if sentences.count(x) > 2}
    assert not repeated, repeated
    assert not re.search(r"\bnan\b|–-bound", text)


def test_a_second_run_has_nothing_to_do(run):
    result = snakemake(run["dir"], "-n", config=TINY, env=STANDIN_GPU)
    assert "Nothing to be done" in result.stdout + result.stderr


def test_a_grid_past_one_page_plans_its_figures_in_pages(run):
    """Every op of the catalogue × 4 dtypes: the per-op figures become pages of whole
    families, each a file Snakemake plans (and captions), the others stay one file."""
    ops = ["matmul", "solve", "eigh", "batched_matmul", "compute_then_plot", "axpy", "transcendental", "sum_rows",
           "std_rows", "norm", "cumsum", "sort", "fft2", "laplacian"]
    big = {**TINY, "machine": "bigplan", "grid": {**TINY["grid"], "ops": ops,
                                                  "dtypes": ["float16", "bfloat16", "float32", "float64"]}}
    result = snakemake(run["dir"], "-n", config=big)
    planned = set(re.findall(r"figures/([a-z_0-9-]+)\.png", result.stdout))
    assert {"speedup-1", "speedup-2", "heatmap-1", "roofline", "bandwidth"} <= planned
    assert "speedup" not in planned and "speedup-3" not in planned


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
    result = snakemake(moved, "-n", config=TINY, env=STANDIN_GPU)
    assert "Nothing to be done" in result.stdout + result.stderr, result.stdout[-2000:]


def test_a_new_size_measures_only_its_own_cells(run, tmp_path):
    """Growing the grid reruns the rounds, which measure only what is missing."""
    grown = tmp_path / "grown"
    shutil.copytree(run["dir"], grown, symlinks=True)
    # (with no self-comparisons: a grid of other cells chooses other cells to measure twice)
    config = {**TINY, "grid": {**TINY["grid"], "ops": ["matmul"], "sizes": [32, 64, 48]},
              "analysis": {**TINY["analysis"], "controls": 0}}
    snakemake(grown, "--allowed-rules", "round", "environment", "transfer", "aggregate", "--until", "aggregate", config=config,
              env=STANDIN_GPU)
    rounds = [json.loads((grown / "results" / "ci-box" / "raw" / "rounds" / f"round-{k}.json").read_text()) for k in (1, 2)]
    assert [r["measured_now"] for r in rounds] == [4, 4]  # n=48: numpy, torch, cuda, mps


def test_a_corrupted_record_is_rejected_by_name_with_the_way_out(run, tmp_path):
    workdir = sandbox.copy_workflow(tmp_path / "copy")
    shutil.copytree(run["out"], workdir / "results" / "ci-box")
    victim = workdir / "results" / "ci-box" / "raw" / "matmul" / "numpy-cpu-float32-n32-t1" / "p1.json"
    victim.write_text(victim.read_text()[:200])
    result = snakemake(workdir, "--forcerun", "aggregate", "--allowed-rules", "aggregate", config=TINY, check=False,
                       env=STANDIN_GPU)
    assert result.returncode != 0
    lines = [l for l in (result.stdout + result.stderr).splitlines() if "p1.json: not valid JSON" in l]
    assert lines and "numpy-cpu-float32-n32-t1/p1.json" in lines[0]
    manifest = "results/ci-box/raw/rounds/round-1.json"
    assert f"delete it and {manifest}, then run again" in lines[0]
    # The way back takes one step: doing what the line says, the next run measures the
    # missing cell in its round, and nothing else, and its tables are made (the rest of the
    # run, figures and report, is the tiny run's own test).
    victim.unlink()
    (workdir / manifest).unlink()
    again = snakemake(workdir, "--until", "aggregate", config=TINY, check=False, env=STANDIN_GPU)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((workdir / manifest).read_text())["measured_now"] == 1
    assert json.loads(victim.read_text())["status"] == "ok"


def test_a_deleted_record_is_named_with_the_way_to_measure_it_again(run, tmp_path):
    workdir = sandbox.copy_workflow(tmp_path / "copy")
    shutil.copytree(run["out"], workdir / "results" / "ci-box")
    (workdir / "results" / "ci-box" / "raw" / "matmul" / "torch-cpu-float32-n64-t1" / "p2.json").unlink()
    result = snakemake(workdir, "--forcerun", "aggregate", "--allowed-rules", "aggregate", config=TINY, check=False,
                       env=STANDIN_GPU)
    assert result.returncode != 0
    lines = [l for l in (result.stdout + result.stderr).splitlines() if "torch-cpu-float32-n64-t1/p2.json: missing" in l]
    assert lines and "delete results/ci-box/raw/rounds/round-2.json and run again" in lines[0]


def test_lint_is_clean():
    result = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "Lints for" not in result.stdout + result.stderr, result.stdout + result.stderr


def test_snakefmt_is_clean():
    files = ["Snakefile", *map(str, sorted((ROOT / "workflow" / "rules").glob("*.smk")))]
    result = subprocess.run([str(BIN / "snakefmt"), "--check", *files], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_invalid_config_stops_before_any_job_in_one_line(tmp_path):
    # The Snakefile's wiring; what each bad key says is tested in test_config.py.
    workdir = sandbox.copy_workflow(tmp_path / "bad")
    result = snakemake(workdir, config={**TINY, "grid": {"sizes": [0]}}, check=False)
    assert result.returncode != 0
    errors = [l for l in (result.stdout + result.stderr).splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and "config key grid.sizes[0]:" in errors[0]
    assert "Traceback" not in result.stderr
    assert not (workdir / "results").exists()


def test_the_gpu_checks_verdict_passes_on_the_stand_in_run_and_fails_on_a_cuda_reinit(run, tmp_path):
    from offloadbench.report.text.gpu_check import judge

    verdict = judge(run["out"], None, 100.0, 480.0)
    assert verdict.problems == [], verdict.lines
    assert verdict.lines[0].startswith("GPU: offloadbench stand-in GPU (on the CPU) (CUDA 0, PCI 00000000:19:00.0, "
                                       "NVML 0) (the stand-in)")
    assert any("a kernel numpy-compiled on cuda: heat_step" in line for line in verdict.lines)
    broken = tmp_path / "broken"
    shutil.copytree(run["out"], broken, ignore=shutil.ignore_patterns("figures", "*.png"))
    timings = pd.read_csv(broken / "timings.csv", dtype={"threads": str})
    victim = (timings["mode"] == "compiled") & (timings["device"] == "cpu")
    reason = "InternalTorchDynamoError during compile: RuntimeError: Cannot re-initialize CUDA in forked subprocess."
    timings.loc[victim, ["status", "reason"]] = ["error", reason]
    timings.to_csv(broken / "timings.csv", index=False)
    failed = judge(broken, None, 900.0, 480.0)
    assert any(line.startswith("FAIL no forking launcher had CUDA up") and "2 cells met" in line
               for line in failed.lines)
    assert any(line.startswith("FAIL compiled CPU cells ok: 0") for line in failed.lines)
    assert "the check took longer than 8m00s" in failed.problems[-1]


def test_the_gpu_checks_verdict_says_its_versions_and_phases_and_a_rehearsal_adds_a_real_hosts_own(run):
    from offloadbench.report.text.gpu_check import judge

    phases = [("wheels", 10.0), ("tests", 60.0), ("pipeline", 200.0)]
    fits = judge(run["out"], None, 290.0, 1800.0, phases, {"cuda-import": 30.0, "triton-compiles": 90.0})
    assert fits.problems == [], fits.lines
    assert any(line.startswith("versions: Python ") and "snakemake " in line and "torch " in line for line in fits.lines)
    assert "phases: wheels 10 s, tests 1m00s, pipeline 3m20s" in fits.lines
    assert any(line.startswith("ok   on a real host about 6m30s of 8m00s") for line in fits.lines)
    slow = judge(run["out"], None, 500.0, 1800.0, [("pipeline", 400.0)], {"triton-compiles": 90.0})
    assert any(line.startswith("FAIL on a real host about 8m10s") for line in slow.lines)
