"""JAX through the library seam, in one cell's process: eager op by op and jit, float64 in
float64 (x64), every timed block ended on the result being ready, and what JAX cannot run
as written (arguments updated in place, assignments, code that does not trace) skipped
with the reason."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from offloadbench.cells import Cell
from offloadbench.config import validate
from offloadbench.kernels import load_kernels
from offloadbench.measure.cell import run_cell
from offloadbench.measure.settings import Settings

pytest.importorskip("jax", reason="JAX is an extra: pip install -r requirements-jax.txt (make test installs it)")

ROOT = Path(__file__).resolve().parents[2]
FAST = Settings.from_config({**validate({})["measure"], "budget_s": 0.02, "warmup_budget_s": 0.01,
                             "min_sampling_s": 0.005}, validate({})["compile"])

KERNELS = '''
from offloadbench import kernel


@kernel
def smooth(xp, u):
    return 0.5 * u + 0.125 * (xp.roll(u, 1, axis=0) + xp.roll(u, -1, axis=0) + xp.roll(u, 1, axis=1)
                              + xp.roll(u, -1, axis=1))


@kernel
def decay(xp, u):
    u *= 0.5


@kernel
def histogram(xp, u):
    counts = xp.zeros(4)
    for b in range(4):
        counts[b] = xp.sum(u < b / 4)
    return counts


@kernel
def positives(xp, u):
    return u[u > 0]
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernels") / "jax_kernels.py"
    path.write_text(textwrap.dedent(KERNELS))
    return load_kernels([str(path)])


def measure(op, dtype="float32", mode="eager", kernels=None, size=32):
    return run_cell(Cell(op, "jax", "cpu", dtype, size, "1", mode), FAST, None, kernels=kernels)


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_a_jax_cell_is_measured_and_checked_in_its_own_dtype(mode):
    single, double = measure("transcendental", "float32", mode), measure("transcendental", "float64", mode)
    assert single.status == double.status == "ok", (single.reason, double.reason)
    # float64 runs in float64: JAX would run it in float32 without x64, 1e-8 off
    assert double.measured["check"]["rel_err"] < 1e-13 < single.measured["check"]["rel_err"] < 1e-5
    # the call on JAX arrays, and NumPy arrays in and out, which cost a copy each way
    assert set(single.measured["phases"]) == {"compute", "end_to_end"}
    assert single.measured["memory"]["host"]["method"] in ("rss", "not measured")  # XLA allocates outside Python


def test_jit_is_the_compiled_mode_and_its_first_call_is_the_compile():
    outcome = measure("transcendental", mode="compiled")
    compile_phase = outcome.measured["compile"]
    assert compile_phase["mode"] == "jit" and compile_phase["backend"] == "xla"
    assert compile_phase["first_call_s"] > 0 and compile_phase["compiler_version"]
    assert compile_phase["recompiles"] == 0


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_a_kernel_that_updates_its_arguments_is_not_for_jax(kernels, mode):
    outcome = measure("decay", mode=mode, kernels=kernels)
    assert outcome.status == "skipped"
    assert outcome.reason == "not for jax: the kernel updates its argument u in place, and JAX arrays cannot be changed"


def test_code_that_assigns_into_an_array_is_not_for_jax(kernels):
    outcome = measure("histogram", kernels=kernels)
    assert outcome.status == "skipped" and outcome.reason.startswith("not for jax: the code assigns into an array")


def test_code_whose_shapes_depend_on_the_values_runs_eager_but_is_not_for_jax_jit(kernels):
    assert measure("positives", kernels=kernels).status == "ok"
    outcome = measure("positives", mode="compiled", kernels=kernels)
    assert outcome.status == "skipped" and outcome.reason.startswith("not for jax jit: the code does not trace (")


def test_a_kernel_written_against_xp_runs_on_jax_as_written(kernels):
    for mode in ("eager", "compiled"):
        outcome = measure("smooth", "float64", mode, kernels)
        assert outcome.status == "ok" and outcome.measured["check"]["rel_err"] < 1e-13, outcome.reason


def test_one_thread_binds_xlas_runtime_to_one_core_before_it_starts():
    code = textwrap.dedent("""
        import json, os, sys
        sys.path.insert(0, "workflow")
        from offloadbench.libraries import jax as library
        said = library.limit_threads(1)
        import jax
        jax.numpy.ones(4).block_until_ready()
        print(json.dumps({**said, "affinity": len(os.sched_getaffinity(0)),
                          "async": jax.config.read("jax_cpu_enable_async_dispatch")}))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["affinity"] == said["cores"] == 1 and said["async"] is False and not said["async_dispatch"]
    assert "--xla_cpu_multi_thread_eigen=false" in said["xla_flags"]
