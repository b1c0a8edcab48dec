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


# --- on a GPU: the stand-in's cuda (XLA's CPU) in `make test`, a real GPU in `make gpu-check` ----


def test_float64_cells_of_jax_get_workers_of_their_own():
    """x64 is a setting of the whole process: a worker that measures several cells (a GPU's)
    never mixes float32 and float64 cells of JAX; other libraries keep one worker."""
    single, double = (Cell("axpy", "jax", "cuda", dtype, 64, "1").worker for dtype in ("float32", "float64"))
    assert single != double and double.setting == "x64" and single.setting == ""
    assert double.name == "jax-cuda-t1-x64" and single.name == "jax-cuda-t1"
    assert Cell("axpy", "jax", "cpu", "float64", 64, "1", "compiled").worker.name == "jax-cpu-t1-compiled-x64"
    torch_cells = {Cell("axpy", "torch", "cuda", dtype, 64, "1").worker for dtype in ("float32", "float64")}
    assert len(torch_cells) == 1


def test_every_wait_of_a_jax_cell_covers_the_copies_and_calls_since_the_last(monkeypatch):
    """JAX returns before a copy or a call is done: a timed block waits for every array it
    placed (h2d) and for its last result (compute: the device runs its calls in order), and
    keeps no earlier result alive."""
    import weakref

    from offloadbench.measure.backend import make_host_inputs
    from offloadbench.measure.cell import make_backend
    from offloadbench.measure.ops import get_op

    cell, op = Cell("transcendental", "jax", "cpu", "float32", 16, "1"), get_op("transcendental")
    backend = make_backend(cell, op, FAST, None)
    waited = []
    monkeypatch.setattr(backend.jax, "block_until_ready", lambda values: waited.append(list(values) if isinstance(values, list) else values) or values)
    placed = [backend.to_device(x) for x in make_host_inputs(op, cell, 0)]
    backend.sync()
    first = weakref.ref(backend.compute(placed))
    last = backend.compute(placed)
    backend.sync()
    backend.sync()  # nothing new: nothing to wait for
    arrays = [x for x in placed if isinstance(x, backend.jax.Array)]
    assert len(waited) == 2 and [id(x) for x in waited[0]] == [id(x) for x in arrays] and waited[1] is last
    assert first() is None  # the block held only its last result


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_a_jax_cell_on_cuda_is_measured_with_its_copies_and_checked(mode):
    from conftest import run_cell_record
    from offloadbench.measure import devices
    from offloadbench.measure.system import standin_requested

    torch = devices.import_torch()
    record = run_cell_record(Cell("axpy", "jax", "cuda", "float32", 256, "1", mode), FAST, torch)
    assert record["status"] == "ok", record["reason"]
    assert record["check"]["passed"] and record["check"]["rel_err"] < 1e-5
    assert {"h2d", "compute", "d2h", "end_to_end", "resident_1"} <= set(record["phases"])
    assert record["device"]["name"]  # the GPU, named through the seam
    peak = record["memory"]["device"]
    if standin_requested():  # XLA's CPU keeps no memory statistics: said, not guessed
        assert peak["peak_bytes"] is None and "cannot be reset" in peak["reason"]
    else:  # XLA's allocator on the GPU; below an earlier peak of this process it is said so
        assert peak["method"].startswith("XLA's allocator") or "cannot be reset" in peak["reason"]
    if mode == "compiled":
        assert record["compile"]["backend"] == "xla" and record["compile"]["first_call_s"] > 0


@pytest.mark.standin
def test_a_round_measures_jax_on_cuda_in_float32_and_float64_workers_of_their_own(tmp_path):
    from offloadbench.records import load_record
    from rounds import SETTINGS as ROUND_SETTINGS
    from rounds import run_round
    from test_standin import standin_box

    box = standin_box(tmp_path)
    grid = {"ops": ["axpy"], "libraries": ["numpy", "jax"], "devices": ["cpu", "cuda"],
            "dtypes": ["float32", "float64"], "sizes": [16], "threads": [1]}
    code, err = run_round(box, grid=grid, settings={**ROUND_SETTINGS, "timeout_s": 120})
    assert code == 0, err[-3000:]
    for dtype in ("float32", "float64"):
        record = load_record(box / "raw" / "axpy" / f"jax-cuda-{dtype}-n16-t1" / "p1.json")
        assert record.ok, record.reason
        # a float64 cell run in float32 would be 1e-8 off, past float64's tolerance
        assert record.check.passed, record.check
    workers = json.loads((box / "raw" / "rounds" / "round-1.json").read_text())["workers"]
    assert {"jax-cuda-t1", "jax-cuda-t1-x64", "jax-cpu-t1", "jax-cpu-t1-x64"} <= set(workers)


def test_jax_on_a_gpu_without_a_cuda_jaxlib_is_unavailable_with_the_way_to_one():
    """This host's jaxlib has no CUDA: a JAX cell on cuda cannot place its arrays, and says how
    to get a jaxlib that can (in a process of its own: the platform is the whole process's)."""
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, "workflow")
        from offloadbench.cells import Cell
        from offloadbench.measure.backend import Unavailable
        from offloadbench.measure.cell import make_backend
        from offloadbench.measure.ops import get_op
        from offloadbench.measure.settings import Settings
        try:
            make_backend(Cell("axpy", "jax", "cuda", "float32", 16, "1"), get_op("axpy"), Settings(), None)
        except Unavailable as missing:
            print(missing)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    said = done.stdout.strip().splitlines()[-1]
    assert said.startswith("cuda unavailable to jax 0.10.2: ") and 'pip install "jax[cuda13]==0.10.2"' in said, said
