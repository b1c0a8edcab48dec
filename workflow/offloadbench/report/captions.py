"""Figure captions and axis wording: one text per figure, for the report and for `snakemake --report`."""

from collections.abc import Iterable

from ..catalogue import SPECS
from ..layout import split_figure_name
from ..verdicts import Judging


def size_label(ops: Iterable[str], prefix: str = "size n") -> str:
    """The size axis's label: n is a side for most ops, and the label names the ops where it is not."""
    others = sorted({op for op in ops if op in SPECS and "side" not in SPECS[op].n_means})
    exceptions = "".join(f"; {op}: {SPECS[op].n_means.split(' (')[0]}" for op in others)
    return f"{prefix} (side of the n×n operands{exceptions})"

CAPTIONS = {
    "speedup": (
        "Device-resident speedup over NumPy on the CPU of PyTorch (and JAX), and of compiled code where the grid "
        "has it (baseline: NumPy eager at the same "
        "thread count; GPU cells against NumPy on all cores; JAX on the CPU on JAX arrays, without the copies "
        "from and to NumPy that its end-to-end time and the decisions count). Bands: {ci} of the ratio, across "
        "processes where the cells were measured in several; dashed line: no difference."
    ),
    "copy_cost": (
        "GPU speedup over NumPy with the data already on the device (solid) and with the "
        "host-device copies counted (dashed); the gap is what the copies cost. Dotted line: "
        "break-even size."
    ),
    "transfer_overhead": (
        "Share of the time of each device cell spent copying inputs to the device, computing, "
        "copying the result back (and plotting, for compute-then-plot)."
    ),
    "bandwidth": (
        "Host-device copy bandwidth against copy size, per direction and host memory kind, with "
        "the {ci}; dotted line: the link's theoretical rate."
    ),
    "throughput": (
        "Achieved throughput (FLOP model ÷ time) with the {ci} as error bars."
    ),
    "memory": (
        "Peak extra memory of one call against size, measured in an untimed call after the sampling: on the "
        "CPU the host memory a call with NumPy arrays in and out allocates, on a GPU the device memory of the "
        "device-resident call; dotted lines: each device's memory."
    ),
    "round_trip": (
        "Calls per round trip k* of each GPU cell against size, with its interval: how many calls the data must "
        "stay on the device for one copy in and out to pay, (h2d + d2h) ÷ (NumPy's time − the device's compute "
        "time); below 1, a copy on every call pays."
    ),
    "roofline": (
        "Roofline of each device: achieved throughput of every op and size against its arithmetic "
        "intensity (FLOP per byte of the least memory traffic the maths needs), under the measured "
        "memory roof (slope) and compute roof per dtype (horizontal). Points near a roof are limited "
        "by it; points far below it leave the device idle. CPU cells use all threads; larger markers "
        "are larger sizes; hollow markers are weak cells."
    ),
    "heatmap": (
        "End-to-end speedup over NumPy of every op (rows, grouped by family; one row per variant, such "
        "as numpy compiled, where the grid has several) and size (columns). GPU panels count the "
        "host-device copies and compare with NumPy on all cores; the CPU panel compares at the same "
        "(largest) thread count. Red: faster than NumPy, "
        "blue: slower, on a log colour scale centred at 1×; cells marked = are the same as NumPy within "
        "the minimum effect, hatched cells marked ? are undecided (their {ci} cannot tell yet, or spans more "
        "than 2×) and show no number. n is each op's own size (the matrix or field "
        "side for most ops; see the catalogue)."
    ),
}

def caption_of(name: str, judging: Judging | None = None) -> str:
    """The caption of a figure file: its figure's, with its intervals' level from the policy
    the tables were judged with (judging.json), and for one page of a large grid which page.
    Without a policy (snakemake --report's captions, written before judging.json exists) it
    says "CI" and leaves the level to the figure, which states it."""
    base, page = split_figure_name(name)
    caption = CAPTIONS[base].format(ci=judging.ci if judging else "CI")
    if not page:
        return caption
    return (f"{caption} Page {page}: the grid has more ops and dtypes than one page holds, so this "
            "figure is drawn in pages of whole op families (the title names them).")


def compare_caption(name: str, judging: Judging) -> str:
    """The caption of a figure of a comparison of machines."""
    return COMPARE_CAPTIONS[name].format(ci=judging.ci)


# The figures of a comparison of machines (results/compare/<A>-vs-<B>/figures/).
COMPARE_CAPTIONS = {
    "speedups": "Speedup of PyTorch over NumPy on each machine's own CPU against size, every machine "
                "overlaid in its colour, with {ci} bands; above the dashed line at 1 PyTorch is faster. "
                "Solid lines run on a GPU, patterned ones on the CPU, with the thread count in the legend.",
    "ratio": "Time of each cell on machine B divided by its time on the reference A, with the {ci} of the "
             "ratio; below 1 B is faster. Filled markers differ by more than the minimum effect, grey ones are "
             "the same within it, and pale ones undecided (the CI cannot tell yet, or a machine was unstable).",
    "break_even": "Smallest size from which each GPU series beats NumPy with the copies counted (the "
                  "end-to-end speedup's CI above 1), per machine. A hollow marker with an arrow was not reached "
                  "by the largest size measured; an arrow to the left means at or below the smallest size.",
    "bandwidth": "Host↔device copy bandwidth against copy size on each machine, per direction and host memory "
                 "kind, with {ci}s; the dotted line in a machine's colour is its link's nominal rate.",
}
