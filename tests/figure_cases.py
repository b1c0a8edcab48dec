"""The three grids every figure must fit a page for (tests/report/test_figure_layout.py), built as
the aggregate builds tables: from synthetic records through the real analysis.

- default: the default config's grid (config/config.yaml) on a CPU-only laptop;
- catalogue: every op of the catalogue and three user kernels × 2 dtypes × 4 sizes, on the
  cpu (one thread and all) and on cuda, eager and compiled;
- compare: three machines (a GPU node, a laptop, an older GPU node) over uneven sizes.

`python tests/figure_cases.py` prints the size of every figure of every case.
"""

from __future__ import annotations

import copy
import functools
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import group_typed, make_processes, make_transfer_record, tables_of
from offloadbench.analysis.compare import MachineComparison, compare_pair
from offloadbench.analysis.measured import Analysis
from offloadbench.catalogue import SPECS
from offloadbench.records import Environment
from offloadbench.verdicts import Judging

NODE = {"memory_bytes": 512 * 2**30, "gpus": [{"name": "Test GPU", "total_memory_bytes": 80 * 2**30}]}
RESAMPLES = 60  # CIs need not be precise here: only where the text and marks land
CPU = {"memory": 20e9, "float32": 400e9, "float64": 200e9, "call_s": 3e-6}
GPU = {"memory": 3000e9, "float32": 50e12, "float64": 25e12, "copy": 20e9, "call_s": 15e-6}
KERNELS = {  # name: (flops(n), bytes(n, itemsize)) as examples/kernels.py declares them
    "heat_step": (lambda n: 6.0 * n * n, lambda n, i: 2.0 * n * n * i),
    "pairwise_distances": (lambda n: 9.0 * n * n, lambda n, i: (6.0 * n + n * n) * i),
    "option_price": (lambda n: 7.0 * n * n, lambda n, i: n * n * i),
}


def _model(op: str, size: int, dtype: str) -> dict:
    itemsize = 8 if dtype == "float64" else 4
    if op in KERNELS:
        flops, traffic = KERNELS[op]
        return {"flops": flops(size), "traffic_bytes": traffic(size, itemsize), "itemsize": itemsize,
                "h2d_bytes": size * size * itemsize, "d2h_bytes": size * size * itemsize}
    spec = SPECS[op]
    return {"flops": spec.flops(size), "traffic_bytes": spec.traffic(size, itemsize), "itemsize": itemsize,
            "h2d_bytes": spec.input_bytes(size, itemsize), "d2h_bytes": spec.output_bytes(size, itemsize)}


def _cells(op: str, dtype: str, size: int, library: str, device: str, threads: str, mode: str, seed: int,
           processes: int) -> list[dict]:
    """Records of one cell whose time follows a roofline model, with an op- and variant-
    dependent efficiency so that speedups spread over both sides of 1."""
    model = _model(op, size, dtype)
    rng = np.random.default_rng(seed)
    efficiency = float(rng.uniform(0.05, 0.9))
    roofs = CPU if device == "cpu" else GPU
    peak = roofs.get(dtype, roofs["float32"])  # half precisions: as float32 here
    median = max(model["flops"] / peak, model["traffic_bytes"] / roofs["memory"]) / efficiency
    median = median * (4 if threads == "1" else 1) + roofs["call_s"]
    if mode == "compiled":
        median *= float(rng.uniform(0.3, 1.4))
    phases = {"end_to_end": median * 1.02} if library == "torch" else None
    if device != "cpu":
        h2d, d2h = (model[k] / GPU["copy"] + GPU["call_s"] for k in ("h2d_bytes", "d2h_bytes"))
        phases = {"h2d": h2d, "compute": median, "d2h": d2h, "end_to_end": h2d + median + d2h}
    records = make_processes(processes, process_spread=0.03, seed=seed, op=op, library=library, device=device,
                             dtype=dtype, size=size, threads=threads, median=median, phases=phases, n=8)
    out = max(model["d2h_bytes"], size * model["itemsize"])
    for record in records:
        record["model"] = model
        record["cell"]["mode"] = mode
        record["memory"] = {"host": {"peak_bytes": int(out * (1.0 if library == "numpy" else 1.3)), "method": "x"}}
        if device != "cpu":
            record["memory"]["device"] = {"peak_bytes": int(out * 1.6), "method": "x"}
        if op in KERNELS:
            record["op_info"] = {"kind": "kernel", "family": "user kernels", "file": "examples/kernels.py"}
        if mode == "compiled":
            record["compile"] = {"first_call_s": 0.8, "graphs": 1, "graph_breaks": 0, "fallback": "",
                                 "backend": "inductor", "mode": "default", "cache": {"cold": True, "hits": 0}}
    return records


def grid_records(ops, dtypes, sizes, devices, compiled_ops=(), processes: int = 2, one_thread: bool = True
                 ) -> list[dict]:
    """numpy and torch on the cpu at 1 thread (where asked) and all, torch on each GPU device;
    the compiled ops also as numpy and torch compiled on one thread and on the GPU."""
    variants = [("numpy", "cpu", "all", "eager"), ("torch", "cpu", "all", "eager")]
    variants += [("numpy", "cpu", "1", "eager"), ("torch", "cpu", "1", "eager")] if one_thread else []
    variants += [("torch", d, "all", "eager") for d in devices if d != "cpu"]
    compiled = [("numpy", "cpu", "1", "compiled"), ("torch", "cpu", "1", "compiled")]
    compiled += [("torch", d, "all", "compiled") for d in devices if d != "cpu"]
    records, seed = [], 0
    for op in ops:
        for dtype in dtypes:
            for size in sizes:
                for library, device, threads, mode in variants + (compiled if op in compiled_ops else []):
                    if library == "numpy" and dtype == "bfloat16":  # torch only
                        continue
                    seed += 1
                    records += _cells(op, dtype, size, library, device, threads, mode, seed, processes)
    return records


def _roofs(devices) -> pd.DataFrame:
    rows = []
    for device in devices:
        spec = CPU if device == "cpu" else GPU
        for kind, dtype, value, unit in [("memory", "float64", spec["memory"] / 1e9, "GB/s"),
                                         *(("compute", d, spec[d] / 1e9, "GFLOP/s") for d in ("float32", "float64"))]:
            rows.append({"machine": "box", "device": device, "device_name": "Test GPU" if device != "cpu" else "cpu",
                         "library": "torch", "kind": kind, "dtype": dtype, "size": 4096, "status": "ok", "reason": "",
                         "n_samples": 20, "value": value, "ci_low": value * 0.99, "ci_high": value * 1.01,
                         "unit": unit})
    return pd.DataFrame(rows)


def _skipped_gpu(ops, dtypes, sizes) -> list[dict]:
    """The GPU cells of a laptop: skipped, with the reason, as the worker records them."""
    from conftest import make_record

    return [make_record(op=op, library="torch", device=device, dtype=dtype, size=size, threads="all",
                        status="skipped", reason=f"no {device} device on this machine")
            for op in ops for dtype in dtypes for size in sizes for device in ("cuda", "mps")]


@functools.cache
def default_tables() -> dict[str, pd.DataFrame]:
    """The default config's grid on this kind of laptop: no GPU, so its cells are skipped."""
    ops, sizes = ["matmul", "transcendental", "sum_rows", "fft2", "heat_step"], [256, 1024, 2048]
    records = grid_records(ops, ["float32"], sizes, ["cpu"], compiled_ops=("transcendental", "heat_step"), processes=3)
    records += _skipped_gpu(ops, ["float32"], sizes)
    transfer = [make_transfer_record(device=d, status="skipped", reason=f"no {d} device on this machine")
                for d in ("cuda", "mps")]
    return {**tables_of(records, "vm", transfer, resamples=RESAMPLES, environment={"memory_bytes": 24 * 2**30}),
            "roofs": _roofs(["cpu"])}


@functools.cache
def catalogue_tables() -> dict[str, pd.DataFrame]:
    """The whole catalogue and three user kernels, × 2 dtypes × 4 sizes, on cpu and cuda."""
    ops = [*SPECS, *KERNELS]
    records = grid_records(ops, ["float32", "float64"], [256, 1024, 4096, 10000], ["cpu", "cuda"],
                           compiled_ops=("transcendental", "heat_step", "option_price"))
    return {**tables_of(records, "bignode", [make_transfer_record()], resamples=RESAMPLES, environment=NODE),
            "roofs": _roofs(["cpu", "cuda"])}


@functools.cache
def pages_tables() -> dict[str, pd.DataFrame]:
    """A grid past one page: the catalogue and the kernels × 4 dtypes, drawn in pages."""
    records = grid_records([*SPECS, *KERNELS], ["float16", "bfloat16", "float32", "float64"], [256, 4096],
                           ["cpu", "cuda"], one_thread=False, processes=2)
    return {**tables_of(records, "bignode", [make_transfer_record()], resamples=RESAMPLES, environment=NODE),
            "roofs": _roofs(["cpu", "cuda"])}


@functools.cache
def _machine(label: str) -> tuple:
    ops, sizes = ["matmul", "fft2", "heat_step"], [256, 1024, 2048, 4096, 10000]
    records = grid_records(ops, ["float32"], sizes, ["cpu", "cuda"], compiled_ops=("heat_step",))
    scale = {"gpunode": 1.0, "laptop": 3.0, "oldgpu": 1.7}[label]
    rng = np.random.default_rng(len(label))
    mine = []
    for record in records:
        if label == "laptop" and record["cell"]["device"] != "cpu":
            continue
        record = copy.deepcopy(record)
        factor = scale * float(np.exp(rng.normal(0, 0.05)))
        record["samples_s"] = [s * factor for s in record["samples_s"]]
        for phase in record["phases"].values():
            phase["samples_s"] = [s * factor for s in phase["samples_s"]]
        mine.append(record)
    # the laptop's sweep was skipped, with the long reasons a CPU-only torch gives
    transfer = [make_transfer_record(device=d, status="skipped", reason=reason) for d, reason in (
        ("cuda", "cuda unavailable: this torch build has no CUDA support (torch 2.13.0+cpu)"),
        ("mps", "mps unavailable: macOS with Apple silicon is needed, and this is Linux x86_64"))] \
        if label == "laptop" else [make_transfer_record(link_gbs=63.0 / scale)]
    cells = group_typed(mine, Analysis(resamples=RESAMPLES), label)
    return cells, tables_of(mine, label, transfer, resamples=RESAMPLES)


@functools.cache
def comparison() -> MachineComparison:
    """Three machines, the GPU node as the reference."""
    labels = ["gpunode", "laptop", "oldgpu"]
    reference = _machine(labels[0])
    parts = [compare_pair(reference[0], _machine(other)[0], (labels[0], other), Judging(),
                          (reference[1]["speedups"], _machine(other)[1]["speedups"])) for other in labels[1:]]
    return MachineComparison(labels, pd.concat(parts, ignore_index=True), pd.DataFrame(),
                      {label: _machine(label)[1] for label in labels}, {label: Environment.from_json({}) for label in labels}, [], Judging())


CASES = ("default", "catalogue", "compare", "pages")
LIMITS = {"default": (7.5, 6.0), "catalogue": (7.5, 9.5), "compare": (7.5, 9.5), "pages": (7.5, 9.5)}  # in


def figures_of(case: str):
    """(name, make) for every figure a case draws; make() returns a matplotlib Figure."""
    if case == "compare":
        from offloadbench.report.figures.compare_figures import COMPARE_FIGURES

        return [(name, functools.partial(draw, comparison())) for name, draw in COMPARE_FIGURES.items()]
    from offloadbench.layout import machine_figures, split_figure_name
    from offloadbench.report.figures.draw import FIGURES, page_of

    tables = {"default": default_tables, "catalogue": catalogue_tables, "pages": pages_tables}[case]()
    machine = "vm" if case == "default" else "bignode"

    def make(name):
        shown, label = page_of(name, tables, machine)
        return FIGURES[split_figure_name(name)[0]](shown, label, Judging())

    return [(name, functools.partial(make, name)) for name in machine_figures(tables)]


def saved_size_in(fig) -> tuple[float, float]:
    """The size the figure is saved at, in inches: its own size, as nothing saves a tight box."""
    width, height = fig.get_size_inches()
    return float(width), float(height)


def drawn_texts(fig) -> list:
    """Every text the renderer draws: visible, not empty, and for tick labels only those of
    ticks within the axis's view."""
    from matplotlib.text import Text

    fig.canvas.draw()
    texts = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        texts.append(text)
    ticks = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - 1e-9 * abs(hi - lo) <= tick.get_loc() <= hi + 1e-9 * abs(hi - lo):
                    ticks.update({id(tick.label1), id(tick.label2)})
    return [t for t in texts if id(t) not in ticks]


def layout_problems(fig, width_limit: float, height_limit: float, tolerance_px: float = 0.5,
                    gap_pt: float = 1.0) -> list[str]:
    """What keeps a figure from a page: a size over the limits, text smaller than 7 pt, text
    outside the figure, and texts that overlap or come closer than `gap_pt` side by side
    (labels that touch read as one: "102410000"), each named."""
    problems = []
    width, height = saved_size_in(fig)
    if width > width_limit + 1e-6 or height > height_limit + 1e-6:
        problems.append(f"size {width:.2f} × {height:.2f} in, over {width_limit} × {height_limit} in")
    renderer = fig.canvas.get_renderer()
    texts = drawn_texts(fig)
    boxes = [t.get_window_extent(renderer) for t in texts]
    frame = fig.bbox
    for text, box in zip(texts, boxes, strict=True):
        name = repr(text.get_text()[:40])
        if text.get_fontsize() < 7 - 1e-6:
            problems.append(f"{name} is {text.get_fontsize():.1f} pt, under 7 pt")
        if (box.x0 < frame.x0 - tolerance_px or box.y0 < frame.y0 - tolerance_px
                or box.x1 > frame.x1 + tolerance_px or box.y1 > frame.y1 + tolerance_px):
            problems.append(f"{name} lies outside the figure")
    gap = gap_pt * fig.dpi / 72
    for i in range(len(texts)):
        a = boxes[i]
        for j in range(i + 1, len(texts)):
            b = boxes[j]
            overlap_x = min(a.x1, b.x1) - max(a.x0, b.x0)
            overlap_y = min(a.y1, b.y1) - max(a.y0, b.y0)
            # on one line, a gap narrower than `gap` is as bad as an overlap
            if overlap_y > tolerance_px and overlap_x > (tolerance_px if overlap_y <= 0.5 * min(a.height, b.height)
                                                         else -gap):
                problems.append(f"{texts[i].get_text()[:30]!r} overlaps {texts[j].get_text()[:30]!r}")
    return problems


def main(save_to: str | None = None, only: str | None = None) -> None:
    """Print every figure's size and layout problems; with a folder, save each as a PNG."""
    import matplotlib.pyplot as plt
    from offloadbench.report.figures.style import theme

    theme()
    for case in CASES:
        if only and case != only:
            continue
        for name, make in figures_of(case):
            fig = make()
            if save_to:
                Path(save_to, case).mkdir(parents=True, exist_ok=True)
                fig.savefig(Path(save_to, case, f"{name}.png"), dpi=150)
            width, height = saved_size_in(fig)
            limit = LIMITS[case]
            problems = layout_problems(fig, *limit)
            print(f"{case:10} {name:18} {width:5.2f} × {height:5.2f} in  (limit {limit[0]} × {limit[1]}): "
                  + ("fits" if not problems else f"{len(problems)} problems: " + "; ".join(problems[:6])))
            plt.close(fig)


if __name__ == "__main__":
    main(*sys.argv[1:3])
