"""Machines compared: verdicts from known ratios, provenance differences, bad input in one
line, bundles that travel, and the shipped H200 example."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import FINGERPRINT, assert_real_figure, make_processes, own_lock
from offloadbench.analysis.compare import MIN_SPREAD_CELLS, between_runs, compare, spreads_between_runs
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source, SourceError
from offloadbench.bundles import BundleError, make_bundle, resolve_sources, unpack
from offloadbench.layout import TABLES
from offloadbench.verdicts import UNSTABLE, Judging

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "h200"
FAST = Analysis(resamples=300)


def write_machine(folder: Path, medians: dict[int, float], spread=0.0, env=None, label=None, seed=0):
    """A results folder: numpy matmul cells at the given sizes, 3 processes each."""
    environment = {"machine": label or folder.name, "fingerprint": dict(FINGERPRINT), "cpu_model": "Test CPU",
                   "logical_cores": 4, "torch_version": "2.13.0", **(env or {})}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "environment.json").write_text(json.dumps(environment))
    for i, (size, median) in enumerate(sorted(medians.items())):
        for record in make_processes(3, process_spread=spread, seed=seed + i, size=size, median=median):
            path = folder / "raw" / "matmul" / f"numpy-cpu-float32-n{size}-t1" / f"p{record['process']['round']}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            record["provenance"]["fingerprint"] = environment["fingerprint"]
            path.write_text(json.dumps(record))
    return Source(folder.name, folder)


@pytest.mark.parametrize(
    "lo, hi, ratio, expected",
    [(0.30, 0.34, 0.32, "faster"), (2.9, 3.1, 3.0, "slower"), (0.98, 1.03, 1.0, "same"),
     (0.90, 1.12, 1.0, "undecided"), (0.97, 0.99, 0.98, "same"), (0.93, 0.99, 0.96, "undecided"),
     (float("nan"), 1.0, 1.0, "undecided")],
)
def test_verdicts_use_the_ci_and_the_minimum_effect(lo, hi, ratio, expected):
    assert Judging(0.05).judged(lo, hi, ratio, time_ratio=True)[0] == expected


def test_known_ratios_get_their_verdicts(tmp_path):
    a = write_machine(tmp_path / "laptop", {64: 1e-3, 128: 1e-3, 256: 1e-3, 512: 1e-3})
    b = write_machine(tmp_path / "server", {64: 0.25e-3, 128: 3e-3, 256: 1.001e-3, 512: 1.06e-3}, seed=50,
                      env={"cpu_model": "Server CPU", "logical_cores": 64,
                           "fingerprint": {**FINGERPRINT, "cpu_model": "Server CPU", "logical_cores": 64}})
    result = compare([a, b], FAST)
    table = result.comparison.set_index("size")
    assert table.loc[64, "verdict"] == "faster" and table.loc[64, "ratio"] == pytest.approx(0.25, rel=0.03)
    assert table.loc[128, "verdict"] == "slower" and table.loc[128, "ratio"] == pytest.approx(3.0, rel=0.03)
    assert table.loc[256, "verdict"] == "same"
    assert table.loc[512, "verdict"] == "slower"  # 6%: beyond the minimum effect, and the CI excludes it
    assert set(result.provenance["field"]) == {"CPU", "logical cores"}
    assert result.same_hardware == []


def test_two_cpus_of_one_model_name_list_what_decides_their_answers_first(tmp_path):
    """Two 2-core VMs both say "AMD EPYC": their stepping, their AVX-512 and the SIMD code
    NumPy and torch dispatch to there are what can turn an answer around."""
    from offloadbench.report.text.comparison import provenance_section

    cpu = {"vendor": "AuthenticAMD", "family": 25, "model": 1, "stepping": 1,
           "vector_extensions": ["avx", "avx2", "fma"]}
    one = {"cpu": cpu, "numpy_dispatch": {"targets": ["X86_V3", "baseline(X86_V2)"], "loops": {"sin float32": "X86_V3"}},
           "torch_cpu_capability": "AVX2", "python": "3.11.7"}
    other = {"cpu": {**cpu, "model": 17, "vector_extensions": ["avx", "avx2", "fma", "avx512f"]},
             "numpy_dispatch": {"targets": ["X86_V4", "baseline(X86_V2)"], "loops": {"sin float32": "X86_V4"}},
             "torch_cpu_capability": "AVX512", "python": "3.12.1"}
    a = write_machine(tmp_path / "vm-a", {64: 1e-3}, env=one)
    b = write_machine(tmp_path / "vm-b", {64: 0.5e-3}, env=other, seed=3)
    result = compare([a, b], FAST)
    fields = list(result.provenance["field"])
    assert fields == ["CPU vendor, family, model, stepping", "CPU vector extensions", "NumPy's SIMD targets",
                      "NumPy's float32 loops", "torch's CPU capability", "Python"]
    row = result.provenance.set_index("field").loc["CPU vector extensions"]
    assert row["vm-a"] == "avx, avx2, fma" and row["vm-b"] == "avx, avx2, fma, avx512f"
    text = "\n".join(provenance_section(result))
    assert "The first 5 rows are the hardware that decides which instructions the same code runs" in text
    assert "decides" not in text.split("\n\n", 2)[-1].splitlines()[0]  # the marker is no column of the table


def test_an_unstable_side_is_undecided(tmp_path):
    a = write_machine(tmp_path / "a", {64: 1e-3})
    b = write_machine(tmp_path / "b", {64: 2e-3}, seed=9)
    victim = next((tmp_path / "b" / "raw").rglob("p1.json"))
    record = json.loads(victim.read_text())
    record["diagnostics"]["flags"] = ["bimodal samples (two modes 40% apart, 12/30 in the faster)"]
    victim.write_text(json.dumps(record))
    row = compare([a, b], FAST).comparison.iloc[0]
    assert row["verdict"] == "undecided" and row["verdict_undecided"] == UNSTABLE
    assert row["flagged_b"] and not row["flagged_a"]


def test_two_labels_of_one_machine_are_said_to_be_one(tmp_path):
    a = write_machine(tmp_path / "run-1", {64: 1e-3, 128: 2e-3})
    b = write_machine(tmp_path / "run-2", {64: 1.01e-3, 128: 2e-3}, seed=3)
    result = compare([a, b], FAST)
    assert result.same_hardware == [("run-1", "run-2")]
    assert result.comparison["b_inside_a_ci"].dtype == bool


def test_no_cell_in_common_is_one_clear_line(tmp_path):
    a = write_machine(tmp_path / "a", {64: 1e-3})
    b = write_machine(tmp_path / "b", {128: 1e-3})
    with pytest.raises(SourceError, match=r"^a and b have no measured cell in common .*nothing to compare$"):
        compare([a, b], FAST)


def test_sources_are_resolved_or_refused_in_one_line(tmp_path):
    write_machine(tmp_path / "results" / "laptop", {64: 1e-3})
    specs = resolve_sources(["laptop", str(H200)], str(tmp_path / "results"), ["laptop"], "compare")
    assert [(s.label, s.measured_here) for s in specs] == [("laptop", True), ("h200", False)]
    with pytest.raises(BundleError, match=r"^config key compare\[1\]: 'nowhere' is neither"):
        resolve_sources(["laptop", "nowhere"], str(tmp_path / "results"), ["laptop"], "compare")
    with pytest.raises(BundleError, match="the label 'h200' is given twice"):
        resolve_sources([str(H200), str(H200) + "/"], str(tmp_path / "results"), [], "compare")
    with pytest.raises(BundleError, match=r"no bundle 'gone.tar.gz'"):
        resolve_sources(["gone.tar.gz"], str(tmp_path / "results"), [], "render")


def test_a_bundle_round_trip_gives_the_same_tables(tmp_path):
    source = write_machine(tmp_path / "results" / "node7", {64: 1e-3, 256: 5e-3})
    bundle = tmp_path / "carried" / "node7.tar.gz"
    make_bundle(source.folder, bundle, "node7", "machine: node7\n")
    unpacked = unpack(bundle, tmp_path / "elsewhere" / "node7")
    assert (unpacked / "config.yaml").read_text() == "machine: node7\n"
    before, after = source.tables(FAST), Source("node7", unpacked).tables(FAST)
    pd.testing.assert_frame_equal(before["timings"], after["timings"])


def test_a_bad_or_foreign_bundle_is_refused_and_nothing_is_left_half_written(tmp_path):
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(BundleError, match="not a readable bundle"):
        unpack(tmp_path / "junk.tar.gz", tmp_path / "out" / "junk")
    assert not (tmp_path / "out" / "junk").exists()
    old = write_machine(tmp_path / "old", {64: 1e-3})
    for path in (tmp_path / "old" / "raw").rglob("p*.json"):
        record = json.loads(path.read_text())
        record["schema_version"] = 0
        path.write_text(json.dumps(record))
    with pytest.raises(SourceError, match="record format version 0 is not one this version reads"):
        old.tables(FAST)


def test_the_committed_h200_tables_are_regenerated_from_its_raw_records(tmp_path):
    from offloadbench.analysis.tables import read_tables

    tables = Source("h200", H200).tables(Analysis())
    for name in TABLES:
        tables[name].to_csv(tmp_path / f"{name}.csv", index=False)
    fresh = read_tables({name: str(tmp_path / f"{name}.csv") for name in TABLES})
    committed = read_tables({name: str(H200 / f"{name}.csv") for name in TABLES})
    for name in TABLES:
        pd.testing.assert_frame_equal(fresh[name], committed[name], check_dtype=False, rtol=1e-9, obj=name)
    assert len(committed["timings"]) == 24 and len(committed["speedups"]) == 16 and len(committed["transfer"]) == 16


def test_rerendering_a_bundle_never_imports_torch(tmp_path):
    """A bundle from a cluster node re-rendered where torch cannot even be imported."""
    poison = tmp_path / "poison" / "torch"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('torch must not load while re-rendering')\n")
    bundle = tmp_path / "h200.tar.gz"
    make_bundle(H200, bundle, "h200", "machine: h200\n")
    code = (
        "import sys; from pathlib import Path\n"
        "from offloadbench.bundles import unpack\n"
        "from offloadbench.analysis.measured import Analysis\n"
        "from offloadbench.analysis.sources import Source\n"
        "from offloadbench.report.publish import render\n"
        f"folder = unpack(Path({str(bundle)!r}), Path({str(tmp_path / 'h200')!r}))\n"
        f"render(Source('h200', folder), Analysis(resamples=200), {str(tmp_path / 'out')!r})\n"
        "assert 'torch' not in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{poison.parent}:{ROOT / 'workflow'}"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=600)
    assert (tmp_path / "out" / "report.html").stat().st_size > 10_000
    assert "H200" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.pipeline
def test_a_small_local_run_compared_with_the_h200_through_snakemake(tmp_path):
    """What `make compare` does after `make run`: this machine against the shipped H200."""
    import yaml
    from offloadbench import sandbox

    workdir = sandbox.copy_workflow(tmp_path / "wf")
    config = yaml.safe_load((ROOT / ".test" / "config.yaml").read_text())
    config["grid"] = {**config["grid"], "ops": ["matmul"], "devices": ["cpu"], "sizes": [256], "threads": ["all"]}
    config["roofs"] = {**config["roofs"], "devices": ["cpu"]}
    config["transfer"] = {"devices": []}
    config["compare"] = ["auto", str(H200)]
    result = sandbox.snakemake(workdir, "compare", config=config, env={"CUDA_VISIBLE_DEVICES": "", **own_lock(workdir)},
                               timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    (out,) = (workdir / "results" / "compare").iterdir()
    assert out.name.endswith("-vs-h200")
    table = pd.read_csv(out / "comparison.csv", dtype={"threads": str})
    assert set(table["op"]) == {"matmul"} and len(table) == 2  # numpy and torch at n = 256, all threads
    assert set(table["verdict"]) <= {"faster", "slower", "same", "undecided"}
    text = (out / "report.md").read_text()
    assert "## Break-even sizes side by side" in text and "NVIDIA H200" in text and "## What differs in provenance" in text
    for name in ("speedups", "ratio", "break_even", "bandwidth"):
        assert_real_figure(out / "figures" / f"{name}.pdf", out / "figures" / f"{name}.png")
    assert "\\newcommand" in (out / "claims.tex").read_text()


def test_two_runs_of_one_machine_call_no_cell_faster_or_slower_for_a_state_of_the_machine(tmp_path):
    """The second run 7% faster throughout, and one op 15% slower in it: a state each run was in,
    which no interval within a run sees. Compared as two machines, each cell would be called
    faster or slower; as two runs of the same hardware, the spread between them is in every CI."""
    sizes = (64, 128, 256, 512, 1024, 2048)
    first = write_machine(tmp_path / "monday", {n: 1e-3 * n / 64 for n in sizes})
    shifted = {n: 1e-3 * n / 64 * (0.93 if n != 2048 else 1.15) for n in sizes}
    second = write_machine(tmp_path / "tuesday", shifted, seed=50)
    result = compare([first, second], FAST)
    assert result.same_hardware == [("monday", "tuesday")]
    table = result.comparison
    assert not table["verdict"].isin(["faster", "slower"]).any(), table[["size", "ratio", "verdict"]]
    assert table["between_runs"].iloc[0] == pytest.approx(0.0726 * 1.4826, rel=0.05)
    other = write_machine(tmp_path / "other", shifted, seed=50, env={
        "cpu_model": "Other CPU", "fingerprint": {**FINGERPRINT, "cpu_model": "Other CPU"}})
    across = compare([first, other], FAST).comparison  # different hardware: the difference is the machines'
    assert across["verdict"].isin(["faster", "slower"]).all() and (across["between_runs"] == 0).all()


def test_each_group_of_cells_carries_its_own_spread_between_runs():
    """Seen on our 2-core VM: two runs' torch cells on every core differed by 10%, NumPy's on
    one thread by 6%; one spread for all called a torch cell 1.19x slower. A group too small
    for a spread of its own takes that of all cells."""
    import numpy as np

    rng = np.random.default_rng(0)
    quiet = [{"library": "numpy", "threads": "1", "mode": "eager", "ratio": r}
             for r in np.exp(rng.normal(0.0, 0.03, 20))]
    noisy = [{"library": "torch", "threads": "all", "mode": "eager", "ratio": r}
             for r in np.exp(rng.normal(0.0, 0.15, 20))]
    few = [{"library": "torch", "threads": "1", "mode": "compiled", "ratio": r}
           for r in (1.0, 1.5, 0.7)][:MIN_SPREAD_CELLS - 1]
    frame = pd.DataFrame(quiet + noisy + few)
    spread = spreads_between_runs(frame)
    assert spread[:20].nunique() == 1 and spread[20:40].nunique() == 1
    assert spread.iloc[0] == pytest.approx(between_runs(np.log(frame["ratio"][:20])))
    assert spread.iloc[20] > 3 * spread.iloc[0]
    assert (spread[40:] == between_runs(np.log(frame["ratio"]))).all()
