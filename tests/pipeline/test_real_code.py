"""Real NumPy code as written, through the real pipeline: the kernels of examples/real_code.py
(in-place updates, scalars, integer, 1-D, n×3 and 3-D arrays, Python loops, a float64
accumulator, several results), eager and compiled, numpy, torch and JAX on the cpu, numpy and
torch on the stand-in GPU, and CuPy there through the stand-in's own (eager); and a kernel right
in NumPy only, whose row must say why it has no answer.
Every kernel asked for is in the answer: in the terminal, the report and LaTeX."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import STANDIN_GPU, snakemake

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / ".test" / "real-code.yaml").read_text())
KERNELS = CONFIG["grid"]["ops"]
RIGHT = [op for op in KERNELS if op != "wrong_off_numpy"]
IN_PLACE = {"diffuse_3d": "u, scratch", "seidel_rows": "grid", "rank2_update": "A, y",
            "reflect_particles": "pos, vel", "leapfrog": "pos, vel"}
pytestmark = [pytest.mark.pipeline, pytest.mark.xdist_group("real_code")]  # one worker runs it once


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from offloadbench import sandbox

    workdir = sandbox.copy_workflow(tmp_path_factory.mktemp("real-code"))
    done = snakemake(workdir, config=CONFIG, env=STANDIN_GPU)
    out = workdir / "results" / "real-code"
    return {"dir": workdir, "out": out, "log": done.stdout + done.stderr,
            "timings": pd.read_csv(out / "timings.csv"), "decisions": pd.read_csv(out / "decisions.csv")}


def test_every_correct_kernel_runs_in_every_variant_and_none_is_called_wrong(run):
    timings = run["timings"]
    mine = timings[timings["op"].isin(RIGHT)]
    variants = {(op, device): set(rows["variant"]) for (op, device), rows in mine.groupby(["op", "device"])}
    for op in RIGHT:
        assert variants[(op, "cpu")] == {"numpy", "torch", "numpy compiled", "torch compiled", "jax", "jax compiled"}
        assert variants[(op, "cuda")] == {"cupy", "torch", "numpy compiled", "torch compiled", "jax", "jax compiled"}, op
    cannot = mine["reason"].astype(str).str.startswith("not for jax")  # test_what_jax_cannot_run_…
    failed = mine[(mine["status"] != "ok") & ~cannot]
    assert failed.empty, failed[["op", "variant", "device", "status", "reason"]].to_string()


def test_what_jax_cannot_run_as_written_is_skipped_with_the_reason_in_its_row(run):
    jax = run["timings"][(run["timings"]["library"] == "jax") & run["timings"]["op"].isin(RIGHT)]
    status = {(op, mode): (status, str(reason)) for op, mode, status, reason
              in zip(jax["op"], jax["mode"], jax["status"], jax["reason"], strict=True)}
    on_each = jax.groupby(["op", "mode"])[["status", "reason"]].nunique()
    assert (on_each <= 1).all().all(), on_each  # the same on the CPU and on the (stand-in) GPU
    for op, changed in IN_PLACE.items():  # JAX arrays cannot be changed
        for mode in ("eager", "compiled"):
            which = f"arguments {changed}" if "," in changed else f"argument {changed}"
            said = f"not for jax: the kernel updates its {which} in place, and JAX arrays cannot be changed"
            assert status[(op, mode)] == ("skipped", said)
    assert status[("radial_profile", "eager")][1].startswith("not for jax: the code assigns into an array")
    assert status[("moving_average", "eager")][0] == "ok"  # a slice by a computed bound: eager only
    assert status[("moving_average", "compiled")][1].startswith("not for jax jit: the code does not trace")
    for op in ("sparse_matvec", "row_moments", "count_above"):
        assert status[(op, "eager")][0] == status[(op, "compiled")][0] == "ok", op
    decisions = run["decisions"].set_index(["op", "device"])
    assert decisions.loc[("leapfrog", "cpu"), "not_for"].startswith("not for jax: the kernel updates")
    answer = run["log"].split("the answer for real-code")[1]
    assert "moving_average cpu 1t: not for jax jit: the code does not trace" in answer


def test_the_arguments_a_call_updates_are_its_outputs_and_each_call_starts_from_the_first_inputs(run):
    measured = run["timings"][run["timings"]["status"] == "ok"]  # not JAX's cells: not for JAX
    timings = measured.set_index(["op", "variant", "device"])
    for op, changed in IN_PLACE.items():
        rows = timings.loc[op]
        assert set(rows["changes"]) == {changed}, op
        assert rows["timed_per_call"].all() and (rows["restore_s"] > 0).all(), op
    untouched = timings[~timings.index.get_level_values("op").isin(IN_PLACE)]
    assert not untouched["timed_per_call"].any() and untouched["changes"].isna().all()
    # on a GPU the updated arguments come back with the results, and a time loop keeps them there
    resident = pd.read_csv(run["out"] / "resident.csv")
    assert {"diffuse_3d", "leapfrog"} <= set(resident["op"])


def test_compiled_numpy_that_does_not_write_back_on_a_gpu_is_copied_around_instead(run):
    record = json.loads((run["out"] / "raw" / "diffuse_3d" / "numpy-cuda-float32-n16-t1-compiled" / "p1.json")
                        .read_text())
    form = record["compile"]["end_to_end_form"]
    assert form.startswith("host arrays copied around the device-resident code") and "u, scratch" in form
    assert record["status"] == "ok" and record["check"]["changes"] == ["u", "scratch"]


def test_a_float64_accumulator_is_measured_checked_and_named(run):
    rows = run["timings"][(run["timings"]["op"] == "radial_profile") & (run["timings"]["library"] != "jax")]
    assert (rows["status"] == "ok").all() and set(rows["returns"]) == {"float64"}
    report = (run["out"] / "report.md").read_text()
    assert "radial_profile returns float64 in float32 cells" in report


def test_scalars_integer_arrays_and_any_shape_are_taken_as_given(run):
    timings = run["timings"].set_index(["op", "variant", "device"])
    # sparse_matvec: values (n×8 float32), columns (n×8 int64, unchanged by the cell's dtype), x (n), a scale
    assert timings.loc[("sparse_matvec", "numpy", "cpu"), "inputs_bytes"] == 16 * 8 * 4 + 16 * 8 * 8 + 16 * 4
    # diffuse_3d: two n×n×16 float32 fields, a float and an int
    assert timings.loc[("diffuse_3d", "numpy", "cpu"), "inputs_bytes"] == 2 * 16 * 16 * 16 * 4
    memory = pd.read_csv(run["out"] / "memory.csv").set_index(["op", "variant", "device"])
    assert memory.loc[("diffuse_3d", "numpy", "cpu"), "inputs_degree"] == 2
    assert memory.loc[("sparse_matvec", "numpy", "cpu"), "inputs_degree"] == 1


def test_every_kernel_asked_for_is_in_the_answer_with_why_where_it_has_none(run):
    decisions = run["decisions"]
    assert {(op, device) for op, device in zip(decisions["op"], decisions["device"], strict=True)} == {
        (op, device) for op in KERNELS for device in ("cpu", "cuda")}
    wrong = decisions[decisions["op"] == "wrong_off_numpy"]
    assert set(wrong["decision"]) == {"none"} and set(wrong["no_answer"]) == {"check_failed"}
    assert (wrong["no_answer_rel_err"] > wrong["no_answer_tolerance"]).all()
    said = "no answer: every other variant failed the check against float64 (cupy, jax, torch: relative error"
    assert said in " ".join(run["log"].split())  # the terminal wraps its lines
    assert said in (run["out"] / "report.md").read_text()
    latex = (run["out"] / "tables" / "decisions.tex").read_text()
    assert "wrong\\_off\\_numpy" in latex and "no answer: wrong results" in latex
    for op in KERNELS:
        assert op in run["log"].split("the answer for real-code")[1], op
