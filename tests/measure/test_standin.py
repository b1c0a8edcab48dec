"""The stand-in GPU fails where CUDA fails, and the cuda paths of the measuring code hold
through it: run by `make test` with OFFLOADBENCH_STANDIN_GPU=1 (skipped without it)."""

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import standin_gpu as standin
from conftest import recorded_timing, run_cell_record, synced_at_both_ends
from offloadbench.cells import Cell
from offloadbench.kernels import load_kernels
from offloadbench.measure import devices, system
from offloadbench.measure.backend import build_regions, make_host_inputs
from offloadbench.measure.cell import make_backend
from offloadbench.measure.ops import get_op
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import Region, StopRule, WarmupRule

pytestmark = pytest.mark.standin
ROOT = Path(__file__).resolve().parents[2]
KERNELS = str(ROOT / "examples" / "kernels.py")
SETTINGS = Settings(stop=StopRule(budget_s=0.2, min_samples=6), warmup=WarmupRule(budget_s=0.1))


@pytest.fixture(scope="module")
def torch():
    return devices.import_torch()


@pytest.fixture
def cuda(torch):
    return devices.get("cuda", torch)


def in_a_fresh_process(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Python code in a process of its own, with the stand-in on (and `env` on top)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": f"{ROOT / 'workflow'}:{ROOT / 'tests' / 'standin'}", system.STANDIN_ENV: "1",
                               **(env or {})})


# --- it fails where CUDA fails -------------------------------------------------------------


def test_a_child_forked_after_cuda_was_used_cannot_use_it_and_one_forked_before_can(cuda, torch):
    read, write = os.pipe()

    def child_tries() -> str:
        pid = os.fork()
        if pid == 0:
            try:
                cuda.to_device(torch.ones(4))
                message = "ok"
            except RuntimeError as error:
                message = str(error)
            os.write(write, message.encode()[:500] + b"\n")
            os._exit(0)
        os.waitpid(pid, 0)
        return os.read(read, 1000).decode().strip()

    state = standin.state()
    initialised = state.initialized
    state.initialized = False  # as a process that has not touched CUDA yet
    try:
        assert child_tries() == "ok"
        torch.cuda.get_rng_state()  # what Dynamo reads where a GPU is available: it initialises CUDA
        assert torch.cuda.is_initialized()
        assert child_tries().startswith("Cannot re-initialize CUDA in forked subprocess")
    finally:
        state.initialized = initialised or state.initialized
        os.close(read)
        os.close(write)


def test_numpy_refuses_a_device_tensor_as_it_refuses_a_cuda_one(cuda, torch):
    on_device = cuda.to_device(torch.ones(8, 8))
    for attempt in (lambda: np.roll(on_device, 1, axis=0), lambda: np.asarray(on_device), on_device.numpy):
        with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
            attempt()
    assert np.roll(cuda.to_host(on_device).numpy(), 1, axis=0).sum() == 64  # after the copy back, it can


def test_an_op_mixing_host_and_device_tensors_fails(cuda, torch):
    on_device = cuda.to_device(torch.ones(8))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        on_device + torch.ones(8)
    assert float((on_device * torch.tensor(2.0)).sum()) == 16  # a 0-dim host tensor is a number to CUDA


def test_code_that_makes_arrays_on_the_data_s_device_gets_them_on_the_gpu(cuda, torch):
    import array_api_compat.torch as xp

    on_device = cuda.to_device(torch.linspace(-1, 1, 16))
    clipped = cuda.run(lambda x: xp.clip(x, min=0.0) + xp.zeros(x.shape, device=x.device), on_device)
    assert clipped.device.type == "cuda" and float(cuda.to_host(clipped).min()) == 0.0


def test_a_timed_region_without_a_sync_at_its_end_is_caught_and_reads_too_fast(cuda, torch):
    pinned, on_device = cuda.host_buffer(2**26, pinned=True), cuda.device_buffer(2**26)  # 64 MiB
    copy = Region("h2d", lambda: cuda.copy(on_device, pinned, non_blocking=True), cuda.synchronize)
    assert synced_at_both_ends(recorded_timing(copy))
    unsynced = dataclasses.replace(copy, sync=lambda: None)
    assert not synced_at_both_ends(recorded_timing(unsynced))
    cuda.synchronize()
    assert unsynced.time_block(1) < copy.time_block(1) / 5  # only the launch: the copy itself is still queued
    cuda.synchronize()


def test_a_host_buffer_read_before_the_sync_holds_what_was_there(cuda, torch):
    on_device = cuda.to_device(torch.full((1024,), 7.0))
    host = cuda.pin(torch.zeros(1024))
    cuda.copy(host, on_device, non_blocking=True)
    assert float(host.sum()) == 0.0  # the copy is queued, not done
    cuda.synchronize()
    assert float(host.sum()) == 7.0 * 1024


def test_copies_take_time_per_byte_pinned_faster_than_pageable(cuda, torch):
    from offloadbench.measure.transfer import measure_copy

    stop = StopRule(budget_s=0.2, min_samples=3)
    small = measure_copy(torch, 2**20, "h2d", pinned=False, stop=stop)
    pageable = measure_copy(torch, 2**25, "h2d", pinned=False, stop=stop)
    pinned = measure_copy(torch, 2**25, "h2d", pinned=True, stop=stop)
    assert pageable["median_s"] > 10 * small["median_s"]
    assert pinned["median_s"] < pageable["median_s"] and pinned["gbs"] > pageable["gbs"]


def test_device_memory_is_counted_and_runs_out_past_its_size(cuda, torch):
    cuda.synchronize()
    before = cuda.reset_peak()
    kept = cuda.device_buffer(2**24)
    cuda.run(lambda x: x * 2, kept)  # a temporary of 16 MiB, freed at once
    assert cuda.peak_since(before) == 2 * 2**24 and torch.cuda.memory_allocated() == before + 2**24
    del kept
    assert torch.cuda.memory_allocated() == before
    with pytest.raises(torch.OutOfMemoryError, match="CUDA out of memory"):
        cuda.device_buffer(cuda.free_bytes() + 1)


def test_allowed_tf32_costs_a_matmul_precision_as_on_a_gpu(cuda, torch):
    a, b = (torch.rand(256, 256, dtype=torch.float64) for _ in range(2))
    exact = a @ b
    errors = {}
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            result = cuda.to_host(cuda.run(lambda x, y: x @ y, cuda.to_device(a.float()), cuda.to_device(b.float())))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        errors[tf32] = float((result.double() - exact).abs().max() / exact.abs().max())
    assert errors[True] > 20 * errors[False] and errors[True] < 1e-2


def test_cuda_visible_devices_hides_it_and_dynamos_probe_initialises_it():
    hidden = in_a_fresh_process("from offloadbench.measure import devices; t = devices.import_torch(); "
                                "print(t.cuda.is_available(), devices.unavailable_reason('cuda', t))",
                                {"CUDA_VISIBLE_DEVICES": ""})
    assert hidden.stdout.startswith("False cuda unavailable: no CUDA device is visible"), hidden.stderr
    probed = in_a_fresh_process("from offloadbench.measure import devices; t = devices.import_torch(); "
                                "print(t.cuda.is_initialized()); t.compile(lambda x: x + 1)(t.ones(2)); "
                                "print(t.cuda.is_initialized())")
    assert probed.stdout.split() == ["False", "True"], probed.stderr[-2000:]


# --- every cuda path of a cell, through it ----------------------------------------------------


CELLS = [
    Cell("matmul", "torch", "cuda", "float32", 64, "1"),
    Cell("transcendental", "torch", "cuda", "float32", 64, "1"),  # resident trips
    Cell("compute_then_plot", "torch", "cuda", "float32", 64, "1"),  # a host finish
    Cell("axpy", "cupy", "cuda", "float32", 64, "1"),  # CuPy's backend, through the stand-in's CuPy
    Cell("compute_then_plot", "cupy", "cuda", "float32", 64, "1"),
]


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"{c.library}-{c.op}")
def test_every_timed_region_of_a_gpu_cell_is_sync_calls_sync(cell, torch):
    op = get_op(cell.op)
    backend = make_backend(cell, op, SETTINGS, torch)
    regions = build_regions(backend, make_host_inputs(op, cell, 0, torch))
    assert {"h2d", "compute", "d2h", "end_to_end"} <= set(regions)
    for name, region in regions.items():
        log = recorded_timing(region)
        if name == "finish":  # host work on the host result: nothing on the device to wait for
            assert log == [("clock",), ("clock",)], log
            continue
        assert synced_at_both_ends(log), (name, log)
        assert any(entry[0] in ("call", "copy") for entry in log), (name, log)


def test_numpy_compiled_on_cuda_runs_a_kernel_that_numpy_runs_on_host_arrays(torch):
    """Defect: the kernel's first eager call got device tensors with xp = NumPy (np.roll of a
    CUDA tensor raises TypeError), so every numpy-compiled kernel cell on a GPU was an error."""
    kernels = load_kernels([KERNELS])
    record = run_cell_record(Cell("heat_step", "numpy", "cuda", "float32", 32, "1", "compiled"), SETTINGS, torch,
                             kernels=kernels)
    assert record["status"] == "ok", record["reason"]
    assert {"h2d", "compute", "d2h", "end_to_end", "resident_1"} <= set(record["phases"])
    assert record["compile"]["graphs"] >= 1 and record["check"]["passed"]


def test_the_cells_gpu_is_read_by_nvmls_index_not_cudas():
    """Defect: clocks were read from NVML's GPU 0 whatever CUDA_VISIBLE_DEVICES (or SLURM's
    --gres) made CUDA's device 0; NVML's list holds every GPU in PCI order."""
    code = ("import json; from offloadbench.measure import devices; t = devices.import_torch(); "
            "d = devices.get('cuda', t); (d.to_device(t.ones(4096)) * 2).sum(); d.synchronize(); "  # under load
            "print(json.dumps({**d.describe(), 'clocks': d.clocks()}))")
    done = in_a_fresh_process(code, {system.STANDIN_ENV: "2", "CUDA_VISIBLE_DEVICES": "1"})
    found = json.loads(done.stdout)
    assert found["cuda_index"] == 0 and found["nvml_index"] == 1 and found["pci_bus_id"] == "00000000:3b:00.0"
    assert found["clocks"]["sm_mhz"] == standin.SM_MHZ[1]


def test_a_gpu_worker_starts_its_devices_compiler_whatever_the_cpus_does(torch, monkeypatch):
    """Defect: one `suppress` around both warm-ups skipped the GPU's when the CPU's failed. A
    GPU worker's cells never compile for the CPU: it starts its device's compiler alone."""
    from offloadbench.measure import compiled

    real, calls = compiled.compile_function, []

    def compile_function(fn, torch_, settings, device=None):
        calls.append(fn)
        return real(fn, torch_, settings, device)

    monkeypatch.setattr(compiled, "compile_function", compile_function)
    with standin.recording() as log:
        compiled.warm_compiler(torch, SETTINGS, "cuda")
    assert len(calls) == 1 and ("call", "compiled") in log  # the device's compile, and no other


def test_a_gpu_whose_compiler_cannot_build_code_is_gated_with_the_reason(torch, monkeypatch):
    """Defect: cuda's gate was has_triton() alone, so a Triton that cannot build gave error cells."""
    from offloadbench.measure import compiled, provenance

    cuda = devices.get("cuda", torch)
    assert compiled.probe_device(cuda, torch) is None

    def broken(fn):
        def run(*args):
            raise RuntimeError("triton: failed to build the kernel")
        return run

    monkeypatch.setattr(type(cuda), "compiled", lambda self, fn: broken(fn))
    reasons = provenance.compile_availability(torch, {"cpu": None, "cuda": None, "mps": "absent"}, {"cuda"})
    assert reasons["cuda"].startswith("torch.compile cannot build code for cuda here: triton: failed to build")
    assert reasons["mps"] == "absent"


# --- through the real round job -----------------------------------------------------------


def standin_box(folder: Path) -> Path:
    """A machine folder whose environment.json has the stand-in's cuda (test_round's box)."""
    from rounds import make_box

    box = make_box(folder)
    environment = json.loads((box / "environment.json").read_text())
    environment["devices"] = {"cpu": None, "cuda": None, "mps": "mps unavailable: none here"}
    environment["compile_devices"] = {"cpu": None, "cuda": None, "mps": "mps unavailable: none here"}
    (box / "environment.json").write_text(json.dumps(environment))
    return box


def test_compiled_cpu_cells_forked_from_the_compiler_launcher_run_where_a_gpu_is_visible(tmp_path):
    """Defect: the compiler launcher was forked from the torch launcher with the GPUs
    visible, and its compiler's start (Dynamo reads the CUDA random state where a GPU is
    available) initialised CUDA there, so every compiled CPU cell forked from it failed with
    "Cannot re-initialize CUDA in forked subprocess"."""
    from offloadbench.records import load_record, read_json
    from rounds import SETTINGS, run_round

    box = standin_box(tmp_path)
    grid = {"ops": ["axpy"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
            "sizes": [16], "threads": [1], "modes": ["compiled"]}
    code, err = run_round(box, grid=grid, settings={**SETTINGS, "timeout_s": 120})
    assert code == 0, err[-3000:]
    for library in ("numpy", "torch"):
        record = load_record(box / "raw" / "axpy" / f"{library}-cpu-float32-n16-t1-compiled" / "p1.json")
        assert record.ok, record.reason
    launchers = {entry["imports"]: entry for entry in read_json(box / "raw" / "rounds" / "round-1.json")["launchers"]}
    assert launchers["compiler"]["gpus_hidden"] and launchers["compiler"]["refused"] == []


LAUNCHER_WITH_CUDA_UP = """
import sys
import standin_gpu as standin
from offloadbench.measure import devices, system
_import = devices.import_torch
def import_torch():  # the torch launcher brings CUDA up, as a compiler's start did where a GPU was visible
    torch = _import()
    if sys.argv[1:3] == ["--imports", "torch"]:
        standin.state().visible = [0]
        torch.cuda.get_rng_state()
    return torch
devices.import_torch = import_torch
"""


def test_a_launcher_with_cuda_up_refuses_to_fork_and_its_cells_say_why(tmp_path):
    """The guard behind the fix: a launcher that finds CUDA initialised in itself forks no
    broken child; each of its cells is an error that says so, and the round goes on."""
    from offloadbench.records import load_record
    from rounds import run_round

    box = standin_box(tmp_path)
    (box / "faults" / "sitecustomize.py").write_text(LAUNCHER_WITH_CUDA_UP)
    grid = {"ops": ["sum_rows"], "libraries": ["numpy", "torch"], "devices": ["cpu"], "dtypes": ["float32"],
            "sizes": [16], "threads": [1]}
    code, err = run_round(box, grid=grid)
    assert code == 0 and "Traceback" not in err, err[-3000:]
    refused = load_record(box / "raw" / "sum_rows" / "torch-cpu-float32-n16-t1" / "p1.json")
    assert refused.status == "error" and "the launcher has CUDA initialised and cannot fork" in refused.reason
    assert load_record(box / "raw" / "sum_rows" / "numpy-cpu-float32-n16-t1" / "p1.json").ok


SLOW_GPU_KERNEL = '''
import os, time
from offloadbench import kernel

@kernel
def h_slow_gpu(xp, a):
    open(os.environ["SLOW_MARK"], "a").close()
    time.sleep(0.3)
    return a * 2
'''


def test_ctrl_c_during_a_gpu_cell_leaves_no_record_so_a_rerun_measures_it(tmp_path):
    """Defect: a GPU worker measures its cells itself and had no SIGINT handler, so Ctrl-C
    became the cell's error ("the kernel raised KeyboardInterrupt"), kept in raw/.partial/,
    which a rerun takes as done."""
    import signal

    from rounds import SETTINGS, start_round

    box = standin_box(tmp_path)
    kernels = tmp_path / "slow.py"
    kernels.write_text(SLOW_GPU_KERNEL)
    mark = tmp_path / "started"
    os.environ["SLOW_MARK"] = str(mark)
    try:
        proc = start_round(box, grid={"ops": ["h_slow_gpu"], "libraries": ["torch"], "devices": ["cuda"],
                                      "dtypes": ["float32"], "sizes": [16], "threads": [1]},
                           settings={**SETTINGS, "timeout_s": 120}, kernels=[str(kernels)])
        deadline = time.monotonic() + 120
        while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists(), proc.communicate()[1][-3000:]
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        proc.communicate(timeout=60)
    finally:
        os.environ.pop("SLOW_MARK", None)
    partial = list((box / "raw").glob(".partial/**/*.json"))
    assert partial == [], [p.read_text()[:300] for p in partial]


# --- what a real GPU host does that the measuring code must meet -----------------------------


def test_its_clock_idles_when_no_process_gave_it_work_and_runs_fast_under_load(cuda, torch, tmp_path, monkeypatch):
    monkeypatch.setattr(standin.state(), "busy_file", str(tmp_path / "busy"))
    x = cuda.to_device(torch.ones(4096))
    (x * 2).sum()
    cuda.synchronize()
    assert cuda.clocks()["sm_mhz"] == standin.SM_MHZ[0]
    time.sleep(2 * standin.IDLE_AFTER_S)
    assert cuda.clocks()["sm_mhz"] == standin.IDLE_SM_MHZ


def _gpu_cell_run(torch, op="transcendental", settings=SETTINGS):
    from offloadbench.measure.cell import CellRun

    return CellRun(Cell(op, "torch", "cuda", "float32", 64, "1"), settings, torch)


def test_a_gpu_that_idles_between_turns_is_not_flagged_for_its_clock(torch, tmp_path, monkeypatch):
    """Between turns the GPU waits for the other workers and its clock drops to a fifth; read
    at the first turn and at the finish, it looked like a clock change in most cuda cells."""
    monkeypatch.setattr(standin.state(), "busy_file", str(tmp_path / "busy"))
    run = _gpu_cell_run(torch)
    assert run.prepare()
    for _ in range(3):
        time.sleep(3 * standin.IDLE_AFTER_S)  # the other workers' turns
        run.turn()
    time.sleep(3 * standin.IDLE_AFTER_S)
    flags = run.finish().measured["diagnostics"]["flags"]
    assert not [f for f in flags if f["kind"] == "gpu_clock"], flags
    readings = run.outcome.measured["diagnostics"]["gpu_clocks"]["under_load"]
    assert readings and {r["sm_mhz"] for r in readings} == {standin.SM_MHZ[0]}


def test_a_gpu_clock_that_drops_during_the_sampling_is_flagged(torch, tmp_path, monkeypatch):
    monkeypatch.setattr(standin.state(), "busy_file", str(tmp_path / "busy"))
    run = _gpu_cell_run(torch)
    assert run.prepare()
    run.turn()
    monkeypatch.setattr(standin.state(), "clock_scale", 0.7)  # throttled: 1980 MHz down to 1386 under load
    run.turn()
    flags = run.finish().measured["diagnostics"]["flags"]
    assert [f["kind"] for f in flags if f["kind"] == "gpu_clock"] == ["gpu_clock"]


def test_a_copy_regions_pre_roll_is_bounded_though_pageable_copies_never_settle(torch):
    from offloadbench.measure import timing

    run = _gpu_cell_run(torch)
    assert run.prepare()
    for _ in range(4):
        run.turn()
    for state in run.states:
        if state.region.name in timing.COPY_REGIONS:
            block = state.warmup.calls_per_sample * max(state.samples)
            assert max(state.preroll_s) <= timing.COPY_PREROLL_MAX_S + block + 0.005, state.preroll_s
    run.finish()


def test_a_cuda_graph_mode_keeps_what_it_copies_back_from_being_overwritten(torch):
    """Under reduce-overhead each call of the compiled code overwrites the last one's outputs,
    as CUDA graphs do: the copy-back region must read a result of its own."""
    settings = dataclasses.replace(SETTINGS, compile_mode="reduce-overhead")
    record = run_cell_record(Cell("heat_step", "torch", "cuda", "float32", 64, "1", "compiled"), settings, torch,
                             kernels=load_kernels([KERNELS]))
    assert record["status"] == "ok", record["reason"]
    assert {"d2h", "resident_1", "resident_16"} <= set(record["phases"])


def test_the_stand_in_reads_an_overwritten_cuda_graph_output_as_cuda_does(cuda, torch):
    compiled = cuda.compiled(torch.compile(lambda a: a * 2.0 + 1.0, backend="aot_eager"), graphs=True)
    x = cuda.to_device(torch.ones(8))
    first = compiled(x)
    first.sum()  # read before the next call: fine
    compiled(x)
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        first.sum()


def test_a_compile_where_inductor_would_start_a_pool_of_processes_is_refused():
    """A GPU host has Triton, where Inductor compiles with a pool of one process per core: the
    stand-in refuses to compile there; every process that imports torch through the seam
    compiles in itself."""
    compile_on_cuda = ("devices.get('cuda', torch).compiled(torch.compile(lambda a: a + 1))\n"
                       "print('compiled')")
    pooled = in_a_fresh_process("import os; os.environ.pop('TORCHINDUCTOR_COMPILE_THREADS', None)\n"
                                "import torch\n"
                                "torch._inductor.config.compile_threads = 4\n"
                                "from offloadbench.measure import devices\n"
                                "devices.import_torch()\n" + compile_on_cuda)
    assert pooled.returncode != 0 and "would start a pool of 4 compile processes" in pooled.stderr
    seam = in_a_fresh_process("import os; os.environ.pop('TORCHINDUCTOR_COMPILE_THREADS', None)\n"
                              "from offloadbench.measure import devices\n"
                              "torch = devices.import_torch()\n" + compile_on_cuda)
    assert seam.returncode == 0 and seam.stdout.strip() == "compiled", seam.stderr
