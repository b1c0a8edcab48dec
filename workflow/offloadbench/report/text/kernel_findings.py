"""What the report says of the user's kernels beyond their timings: which run as numpy
only and why, which arguments a call updates in place and how such a kernel was timed, and
which return another precision than their cells' (the per-op section of the report,
report.text.markdown)."""

from __future__ import annotations

import pandas as pd

from ... import libraries
from ...kernels import FAMILY as KERNEL_FAMILY
from ...units import fmt_time
from ..format import and_list, fmt_error, text_of


def numpy_only_lines(timings: pd.DataFrame) -> list[str]:
    """Which of the user's kernels run as numpy only, and why (those without a FLOP model
    are said once, with the roofs: ops_findings.bound_notes)."""
    plain = libraries.for_kernel(takes_xp=False)
    needs_xp = timings["library"].map(lambda name: name not in plain).astype(bool) if "library" in timings else None
    if "family" not in timings or not needs_xp.any():
        return []
    kernels = timings[timings["family"] == KERNEL_FAMILY]
    others = and_list(sorted(set(timings.loc[needs_xp, "library"])))
    return [f"- {op} takes plain NumPy arrays (its first parameter is not `xp`), so it runs as numpy "
            f"and numpy compiled only: {others} needs the array namespace `xp` to run the same code."
            for op in sorted(set(kernels["op"]) - set(kernels.loc[needs_xp.loc[kernels.index], "op"]))]


def in_place_lines(timings: pd.DataFrame) -> list[str]:
    """Per kernel that updates its arguments: which, what that makes of them (outputs,
    checked and copied back), how its calls were timed and what putting the arguments back
    cost, outside the clock."""
    if "changes" not in timings:
        return []
    lines = []
    for op, rows in timings[timings["changes"].fillna("").astype(str) != ""].groupby("op", sort=True):
        changes = text_of(rows["changes"].iloc[0])  # the record's names, as they come
        restore = pd.to_numeric(rows.get("restore_s"), errors="coerce").dropna()
        cost = (f" (putting them back took {fmt_time(restore.min())} to {fmt_time(restore.max())} a call, "
                "never timed)" if not restore.empty and restore.min() != restore.max()
                else f" (putting them back took {fmt_time(restore.iloc[0])} a call, never timed)"
                if not restore.empty else "")
        # one sentence naming the kernel: the report has one such line per kernel, never the same twice
        lines.append(
            f"- {op} updates {changes} in place, so these arguments are its outputs, checked against float64 NumPy "
            f"and copied back from a GPU with its results; each call of {op} was timed alone from the inputs of the "
            f"first call, what it changed put back before the next outside the clock{cost}, and its resident trips "
            f"call {op} again on the same device arrays, as its own time loop would.")
    return lines


def precision_lines(timings: pd.DataFrame) -> list[str]:
    """Per kernel whose result has another precision than its cells' (a float64 accumulator
    in a float32 cell): said, so that an upcast no one meant stays visible."""
    if "returns" not in timings:
        return []
    lines = []
    returning = timings[timings["returns"].fillna("").astype(str) != ""]
    for (op, dtype, returns), rows in returning.groupby(["op", "dtype", "returns"], sort=True):
        variants = sorted(set(rows["variant"]))
        tolerance = pd.to_numeric(rows.get("tolerance"), errors="coerce").dropna()
        tol = f" ({fmt_error(tolerance.iloc[0])})" if not tolerance.empty else ""
        lines.append(f"- {op} returns {returns} in {dtype} cells ({and_list(variants)}): measured and "
                     f"checked at the {dtype} tolerance{tol} like any result. If the code did not mean to compute "
                     f"in {returns}, a constant or an accumulator of that type is the likely cause.")
    return lines


def kernel_lines(timings: pd.DataFrame) -> list[str]:
    """Everything the report says of the user's kernels in one op's section."""
    return [*numpy_only_lines(timings), *in_place_lines(timings), *precision_lines(timings)]
