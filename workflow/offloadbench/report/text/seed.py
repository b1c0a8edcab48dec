"""The seed claims this project was started to check, and the sentences that check them."""

from __future__ import annotations

import math

import pandas as pd

from ...analysis.columns import interval
from ...compared import baseline_rows
from ...verdicts import MAX_CI_SPAN, Judging, ci_span
from ..format import (
    fmt_calls,
    fmt_interval,
    fmt_percent,
    fmt_plain,
    fmt_ratio,
    fmt_seconds,
    fmt_times,
    threads_phrase,
    widest_threads,
)

SEED_SIZE = 10000
SEED_DTYPE = "float32"
SEED_GPU_S = 0.0708
SEED_CPU_S = 1.445
SEED_SPEEDUP = 10.0
SEED_SAVING = 0.40
SEED_CLAIM = (
    f"Seed: a {SEED_SIZE}×{SEED_SIZE} {SEED_DTYPE} matmul takes {SEED_GPU_S} s on a GPU against "
    f"{SEED_CPU_S} s on a CPU, more than {fmt_plain(SEED_SPEEDUP)}× faster than NumPy; copying the result "
    f"back costs time, yet the total still saves up to {fmt_percent(SEED_SAVING)} when the result is then plotted."
)


def judge(lo: float, hi: float, claim: float) -> str:
    """Whether an interval supports a claimed threshold ("more than claim")."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "cannot be decided (no CI)"
    if ci_span(lo, hi) > MAX_CI_SPAN:
        return "cannot be decided (its CI is too wide to be a result)"
    if lo > claim:
        return "holds"
    if hi < claim:
        return "does not hold"
    return "cannot be decided (the CI includes the claimed value)"


def _pick_baseline(rows: pd.DataFrame) -> tuple[pd.Series | None, str]:
    """NumPy on the most CPU threads measured, and how many that is in words."""
    numpy = rows[baseline_rows(rows)]
    if numpy.empty:
        return None, ""
    widest, label = widest_threads(numpy)
    return widest.iloc[0], threads_phrase(widest, label)


def matmul_claims(timings: pd.DataFrame, speedups: pd.DataFrame, judging: Judging) -> list[str]:
    ok = timings[(timings["op"] == "matmul") & (timings["dtype"] == SEED_DTYPE) & (timings["status"] == "ok")]
    if ok.empty:
        return [f"- No {SEED_DTYPE} matmul was measured here, so the seed's timings cannot be compared."]
    n = int(ok["size"].max())
    at_n = ok[ok["size"] == n]
    gpu = at_n[at_n["device"] != "cpu"]
    base, threads = _pick_baseline(at_n)
    lines = []
    if n != SEED_SIZE:
        lines.append(
            f"- This grid's largest {SEED_DTYPE} matmul is n = {n}, not the seed's {SEED_SIZE}; matmul time grows as n³, "
            f"so the seed's seconds are not compared directly. Run `config/paper.yaml` to measure n = {SEED_SIZE}."
        )
    if base is not None:
        line = (f"- NumPy on the CPU ({threads}) takes {fmt_seconds(base['median_s'], 4)} at n = {n} "
                f"({fmt_interval(base['ci_low_s'], base['ci_high_s'], judging.ci, unit=' s')})")
        if n == SEED_SIZE:
            line += f", against the seed's {SEED_CPU_S} s: this CPU is {fmt_times(SEED_CPU_S / base['median_s'])} as fast as the seed's"
        lines.append(line + ".")
    if gpu.empty:
        lines.append("- No GPU cell ran here, so the GPU half of the claim (and the \"more than 10×\") cannot be checked on this machine.")
    for row in gpu.itertuples():  # none where no GPU cell ran
        line = f"- PyTorch on {row.device} ({row.device_name}) takes {fmt_seconds(row.median_s, 4)} device-resident and {fmt_seconds(row.end_to_end_s, 4)} with copies at n = {n}"
        if n == SEED_SIZE:
            line += f", against the seed's {SEED_GPU_S} s"
        lines.append(line + ".")
        speed = speedups[(speedups["op"] == "matmul") & (speedups["device"] == row.device) & (speedups["dtype"] == SEED_DTYPE) & (speedups["size"] == n)]
        if not speed.empty:
            lines.append(speedup_claim(speed.iloc[0], n, judging))
    return lines


def speedup_claim(s: pd.Series, n: int, judging: Judging) -> str:
    """The "more than 10x" claim, judged separately with the data on the device and with
    the copies counted: it can hold for one and not the other."""
    where = "" if n == SEED_SIZE else f" at n = {n}"
    parts = []
    for label, column in (("with the data already on the device", "speedup"), ("with the copies counted", "end_to_end_speedup")):
        value, low, high = interval(s, column)
        verdict = judge(low, high, SEED_SPEEDUP)
        parts.append(f"{label}, {fmt_ratio(value, low, high, judging.ci)}: it **{verdict}**")
    return f"- \"More than {fmt_plain(SEED_SPEEDUP)}× faster than NumPy\"{where}: " + "; ".join(parts) + "."


def judge_up_to(lo: float, hi: float, claim: float) -> str:
    """Whether an interval reaches a claimed largest value ("up to claim")."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "cannot be decided (no CI)"
    if hi < claim:
        return f"is not reached here: the saving stays below {fmt_percent(claim)}"
    if lo > claim:
        return f"is exceeded here: the saving is larger than {fmt_percent(claim)}"
    return f"is consistent with this machine (the CI includes {fmt_percent(claim)})"


def saving_claims(speedups: pd.DataFrame, timings: pd.DataFrame, judging: Judging) -> list[str]:
    plot_gpu = speedups[(speedups["op"] == "compute_then_plot") & (speedups["device"] != "cpu")]
    if plot_gpu.empty:
        in_grid = (timings["op"] == "compute_then_plot").any()
        why = "no GPU cell of it ran here" if in_grid else "the `compute_then_plot` op is not in this grid"
        return [f"- The \"saves up to {fmt_percent(SEED_SAVING)} when the result is then plotted\" claim cannot be checked: {why}."]
    lines = []
    for (device, dtype), group in plot_gpu.groupby(["device", "dtype"]):
        # Saving = 1 - t_gpu / t_numpy = 1 - 1 / end-to-end speedup; monotone, so the CI maps through.
        saving = 1 - 1 / group["end_to_end_speedup"]
        best = group.loc[saving.idxmax()]
        s, lo, hi = (1 - 1 / v for v in interval(best, "end_to_end_speedup"))
        verdict = judge_up_to(lo, hi, SEED_SAVING)
        cell = timings[(timings["op"] == "compute_then_plot") & (timings["device"] == device)
                       & (timings["dtype"] == dtype) & (timings["size"] == best["size"])]
        shares = ""
        if not cell.empty and cell.iloc[0]["end_to_end_s"] > 0:
            c = cell.iloc[0]
            shares = (f" Of the GPU's total there, the copy back takes {fmt_percent(c['d2h_s'] / c['end_to_end_s'])} "
                      f"and the plotting {fmt_percent(c['finish_s'] / c['end_to_end_s'])}.")
        lines.append(
            f"- Compute then plot, {dtype} on {device}: the largest total-time saving over NumPy is {fmt_percent(s)} "
            f"({fmt_interval(lo, hi, judging.ci, 100, '%')}) at n = {int(best['size'])}, copies and plotting included. "
            f"The seed's \"saves up to {fmt_percent(SEED_SAVING)}\" **{verdict}**.{shares}"
        )
        steps = steps_for_saving(group, timings[(timings["op"] == "compute_then_plot") & (timings["device"] == device)
                                               & (timings["dtype"] == dtype)])
        if steps:
            lines.append(f"- A program that computes k steps on {device} between plots, with one copy in and out per "
                         f"plot, saves the seed's {fmt_percent(SEED_SAVING)} of NumPy's time from {steps} between "
                         "plots (from the medians; NumPy computes and plots on the host).")
    return lines


def steps_for_saving(speedups: pd.DataFrame, timings: pd.DataFrame, saving: float = SEED_SAVING) -> str:
    """Per size, the steps k between plots from which the device saves `saving`: NumPy takes
    k·numpy + plot, the device h2d + k·compute + d2h + plot, so k ≥ (copies + saving·plot) ÷
    ((1 − saving)·numpy − compute) — the calls per round trip of the seed's workflow."""
    parts = []
    by_size = timings.set_index("size")
    for _, row in speedups.sort_values("size").iterrows():
        size = row["size"]
        if size not in by_size.index:
            continue
        cell = by_size.loc[size]
        copies, plot = cell["h2d_s"] + cell["d2h_s"], cell["finish_s"]
        gain = (1 - saving) * row["baseline_median_s"] - row["median_s"]
        if not all(math.isfinite(v) for v in (copies, plot, gain)):
            continue
        words = "never" if gain <= 0 else f"{fmt_calls(max(1, (copies + saving * plot) / gain))} steps"
        parts.append(f"{words} at n = {int(size)}")
    return "; ".join(parts)


def check_seed_claims(timings: pd.DataFrame, speedups: pd.DataFrame, judging: Judging) -> list[str]:
    # the seed's claims are about NumPy and PyTorch as called: eager rows only
    timings, speedups = (frame[frame["mode"] == "eager"] if "mode" in frame else frame for frame in (timings, speedups))
    return matmul_claims(timings, speedups, judging) + saving_claims(speedups, timings, judging)
