"""The report's Method section, worded from the thresholds the run recorded: the measuring
method's in each round's record (Settings.method, written by the round), the analysis's in
judging.json (written beside the tables), the run's settings for what it was asked (extra
rounds, memory, TF32) and the analysis section for the bootstrap. Nothing here holds a threshold of its
own, so the text cannot drift from the code that measured; records from before the
thresholds were recorded show "?" where a number would be."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partialmethod

import pandas as pd

from ...records import RoundRecord
from ...run_settings import MeasureSection
from ...units import format_bytes
from ...verdicts import Judging
from ..format import finite, fmt_percent, fmt_plain

UNRECORDED = "?"


def recorded_method(rounds: list[RoundRecord], judging: Judging) -> dict[str, float]:
    """The thresholds the run used: the newest round's that recorded them, and the analysis's."""
    measuring = next((r.method for r in reversed(rounds) if r.method), {})
    return {**measuring, **dict(judging.method)}


class Numbers:
    """A threshold by name, worded; "?" where the records do not hold it."""

    def __init__(self, method: Mapping[str, float]):
        self.method = method

    def _said(self, key: str, words: Callable[[float], str]) -> str:
        value = self.method.get(key)
        return words(float(value)) if finite(value) else UNRECORDED

    percent = partialmethod(_said, words=fmt_percent)
    number = partialmethod(_said, words=fmt_plain)
    ms = partialmethod(_said, words=lambda v: f"{fmt_plain(v * 1e3)} ms")
    seconds = partialmethod(_said, words=lambda v: f"{fmt_plain(v)} s")
    size = partialmethod(_said, words=format_bytes)


def method_section(m: MeasureSection, a: dict, held: str, method: Mapping[str, float], judging: Judging,
                   rejudged: str = "") -> list[str]:
    """## Method: how the run measured and judged, from `method` (recorded_method); the
    run's measure settings `m` only for what it was asked (extra rounds, memory, TF32), the
    analysis section `a` for the bootstrap."""
    n = Numbers(method)
    copies = f"; {n.ms('preroll_copy_max_s')} for a GPU's copies" if "preroll_copy_max_s" in method else ""
    preroll = (f"until one runs within {n.percent('warmup_rel_tol')} of the region's best so far, for at least "
               f"{n.ms('preroll_s')} and at most {n.ms('preroll_max_s')} (none for calls that long{copies})"
               if "preroll_max_s" in method else  # records from before the pre-roll waited for the best
               f"about {n.ms('preroll_s')} of them (none for calls of {n.ms('preroll_up_to_s')} or more)")
    memory = (
        "pinned: the inputs live in pinned memory from the start (copying them there is not timed), "
        "as when an application allocates its buffers pinned. "
        if m.pinned_memory else "pageable. "
    )
    # the measuring thresholds every round has recorded since they were (the analysis's are this code's)
    unrecorded = (" The records of this run predate recorded thresholds: "
                  f"each number they do not hold shows as {UNRECORDED}." if "warmup_rel_tol" not in method else "")
    measuring = (
        f"As the records show, {held}. The run goes in rounds, and every round measures every "
        "cell once, in fresh worker processes (one per library, device, thread count and mode), alone on the machine "
        "(a host-wide lock). Within a round, the cells compared with each other (one op, dtype and size: every "
        "variant, device and thread count, and a self-comparison's twin) are measured in one *bout*: every worker "
        "first gets ready for its cell (imports, inputs, compile, warm-up), then the workers take turns, one "
        "computing at a time, in a fresh random order each cycle in which every cell goes first equally often; after "
        "a multi-threaded worker's turn the bout pauses while its thread pool spins down. A machine whose speed "
        "drifts over seconds so slows both sides of a ratio alike. Every worker reads, around each of its turns, "
        "how much CPU time other processes used (the machine's busy time minus its own and its bout's other "
        "workers') and the system's CPU pressure (how long some task waited for a CPU); a process that saw others use "
        f"more than {n.number('disturbed_cores')} cores, or a pressure above {n.percent('disturbed_pressure')}, is "
        "*disturbed*. A disturbed process is left out and replaced by a process of an extra round where the cap "
        "allows (recorded as replaced), and kept and flagged where too few would remain. A process whose "
        f"median lies far from the cell's others (beyond {n.percent('outlier_min_rel')} and "
        f"{n.number('outlier_sigmas')} times the spread its worker's cells typically show) is left out only where its "
        "own record shows why (its samples drifted or split in two, or its CPU clock moved), and only a minority "
        f"unreplaced, the cell keeping at least {n.number('min_kept_processes')}; one that is only fast or slow is "
        "kept, and where the kept processes fall into two groups far apart, the cell has two states, "
        "each reported. Extra rounds also run the bouts of the undecided comparisons that more processes would "
        f"likely decide within {m.max_processes} processes per cell, likeliest first (never a tie or an answer that "
        f"depends on a state), within {fmt_percent(m.extra_time_fraction)} of the planned rounds' time. Thread counts are set before NumPy and PyTorch load and read back afterwards. "
        "Inputs are random in [-1, 1), made before timing. Every region is timed with `time.perf_counter_ns` and "
        "the garbage collector off; GPU regions synchronise the device before the clock starts and before it stops. "
        f"A region first runs blocks of calls until one is within ±{n.percent('warmup_rel_tol')} of the best block "
        "before it, maps no more fresh pages per call than the fewest before it, and grew the C heap by less than "
        f"{n.size('heap_growth_bytes')} over the last blocks (warm-up, at most {n.seconds('warmup_budget_s')}, or "
        f"{n.seconds('warmup_growing_budget_s')} while the heap still grows), then repeats calls within a sample "
        f"until a sample lasts at least {n.ms('min_sample_s')} and the timer's own cost is below "
        f"{n.percent('max_overhead_frac')}. A turn samples each region of its cell for at least {n.ms('turn_s')}, "
        f"after untimed blocks of calls that bring back the steady state the other workers' turns disturbed: {preroll}. "
        "A bout runs at least "
        f"{n.number('min_cycles')} cycles; in the first two rounds it goes on, from {n.number('min_samples')} cycles, "
        "until the ratio of every pair it compares (end to end, the copies counted on a GPU) is known within "
        f"±{n.percent('target_rel_ci')} (the {n.percent('bout_stop_confidence')} CI of its median over the cycles) "
        f"and every cell compared with none has met that target, or until its cells' {n.seconds('budget_s')} per "
        "region are spent; from the third round it stops, unless precise before, at the cycles planned from the "
        "variances its earlier rounds showed (Kalibera & Jones); `measure.max_samples` caps the cycles; every sample is kept in `raw/` with its cycle and the fresh "
        "pages its calls mapped. Cells are flagged unstable when the samples have two "
        f"modes (a split explaining {n.percent('bimodal_explained_variance')} of their log variance or more), the "
        "second half drifts from the first, a readable CPU/GPU clock moved by more than "
        f"{n.percent('clock_change_rel')}, or a process failed; a missed CI target is only noted, as the CI is wider "
        "for it. Each result is checked against a float64 NumPy "
        f"reference on {n.number('check_rows')} sampled rows with a dtype-aware tolerance; a wrong result is an "
        f"error, not a speedup. TF32 is {'allowed' if m.allow_tf32 else 'off'}; host memory is {memory}"
        "The copy-out phase and the end-to-end region make a fresh host array each call, as `.cpu().numpy()` does; "
        f"the bandwidth sweep copies into reused buffers, so it shows what the link itself sustains.{unrecorded}"
    )
    intervals = (
        f"Every interval is a {judging.ci}. A cell's time is the geometric mean of its process medians; its CI comes "
        f"from a two-level bootstrap ({a['bootstrap_resamples']} resamples, random state {a['random_state']}): "
        "processes are resampled, then samples within each. Where the processes disagree more than their own noise "
        "explains, that spread sets the interval, with Student's t on the processes' degrees of freedom; otherwise "
        "the noise within each process does. A cell measured in one process has a CI of its within-process noise "
        "only, and the tables say so (`ci_scope`). A ratio of two cells that took turns in a bout in "
        f"{n.number('min_paired_rounds')} rounds or more is *paired in time*: per round, the median over the bout's cycles of the log of their times' ratio, "
        "then a t-interval on the rounds' medians with rounds − 1 degrees of freedom, so what a moment shares "
        "cancels and what a process does not (its memory, its pages) stays in the interval; the tables say which "
        "ratios were paired (`pairing`). "
        f"Every ratio gets one of four verdicts, with the minimum effect δ = {judging.delta}: *faster* when "
        "its CI lies above 1 and it is at least 1 + δ; *slower*, the mirror image; *the same* when the whole CI "
        "lies within ±δ of 1 (an equivalence test); *undecided* otherwise, and always when the CI spans more "
        f"than {n.number('max_ci_span')}×, which is never stated as a result.{' ' + rejudged if rejudged else ''}"
    )
    return ["## Method", "", measuring, "", intervals, ""]


def processes_held(timings: pd.DataFrame) -> str:
    """How many processes the records hold per measured cell, as a phrase: what the data
    are, whatever the current config asks for."""
    ok = timings[timings["status"] == "ok"] if "processes" in timings else timings.iloc[0:0]
    counts = ok["processes"].dropna().astype(int).value_counts().sort_index(ascending=False)
    if counts.empty:
        return "no cell was measured"
    if len(counts) == 1:
        p = int(counts.index[0])
        return f"each measured cell was measured in {'one process' if p == 1 else f'{p} independent processes'}"
    parts = [f"{n} cell{'s' if n != 1 else ''}{(' was' if n == 1 else ' were') + ' measured' if i == 0 else ''} "
             f"in {p} process{'es' if p != 1 else ''}" for i, (p, n) in enumerate(counts.items())]
    return ", ".join(parts)
