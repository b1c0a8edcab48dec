"""Claim macros in LaTeX (`claims.tex`), so that a paper's numbers follow a rerun: one
`\\newcommand` per headline number of a machine, or of a comparison of machines, each with
a comment saying what it holds; every body goes through `escape.tex_escape`.

Macro names. A LaTeX control word is letters only, so a macro name is built from words:

- the text is split into runs of letters and runs of digits (anything else separates);
- a run of letters keeps its spelling with its first letter upper-cased;
- a run of digits is spelt out in English, each word capitalised: "32" -> "ThirtyTwo",
  "200" -> "TwoHundred", "4096" -> "FourThousandNinetySix"; leading zeros are spelt one
  by one, so "007" -> "ZeroZeroSeven" stays apart from "7" -> "Seven".

A machine's prefix is "ob" followed by its label so spelt: `machine_prefix("h200-lab")` is
`obHTwoHundredLab`, `machine_prefix("laptop")` is `obLaptop`; a comparison's prefix is
"ob", the reference machine, "Vs", the other machine (`obLaptopVsHTwoHundredLab`). A macro
is the prefix followed by what it holds, e.g. `\\obHTwoHundredLabMatmulCudaFloatThirtyTwoBreakEven`.
Labels that differ only in punctuation ("a-b", "a_b", "ab") give the same prefix, and op
names such as "mat-mul" and "mat_mul" the same words: every macro set checks its names
and fails with `MacroCollision` naming both sources rather than write a file that LaTeX
would reject, or worse, accept with the wrong number.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ... import libraries
from ...analysis.columns import compile_fallbacks, headline, interval
from ...cells import EAGER
from ...errors import UserError
from ...verdicts import VERDICTS, Judging
from ..escape import tex_comment, tex_escape
from ..format import cell_phrase, finite, fmt_break_even, fmt_sig, format_bytes, times_of
from .decisions import answer, who
from .latex_tables import NA, machine_of, with_machines
from .tables import ok_rows, processes_range


def number_words(digits: str) -> str:
    """A run of digits in capitalised English words: "32" -> "ThirtyTwo", "007" -> "ZeroZeroSeven"."""
    if not digits.isdigit() or not digits.isascii():
        raise ValueError(f"not a run of digits: {digits!r}")
    import inflect  # the LaTeX rule's only: numbers in words

    stripped = digits.lstrip("0")
    zeros = "Zero" * (len(digits) - len(stripped))
    if not stripped:
        return zeros
    words = inflect.engine()
    if len(stripped) > 12:  # past the billions, read it digit by digit
        return zeros + "".join(words.number_to_words(d).capitalize() for d in stripped)
    said = words.number_to_words(int(stripped), andword="")  # "one thousand, two hundred thirty-four"
    return zeros + "".join(part.capitalize() for part in re.findall(r"[a-z]+", said))


def camel_words(text) -> str:
    """Text as a run of capitalised words, letters only (see the module docstring)."""
    words = []
    for run in re.findall(r"[A-Za-z]+|[0-9]+", str(text)):
        words.append(number_words(run) if run.isdigit() else run[0].upper() + run[1:])
    return "".join(words)


def machine_prefix(machine: str) -> str:
    """The macro prefix of a machine label: "h200-lab" -> "obHTwoHundredLab"."""
    words = camel_words(machine)
    if not words:
        raise ValueError(f"machine label {machine!r} has no letter or digit to name its LaTeX macros by")
    return "ob" + words


def pair_prefix(reference: str, other: str) -> str:
    """The macro prefix of a comparison: "laptop", "h200-lab" -> "obLaptopVsHTwoHundredLab"."""
    return machine_prefix(reference) + "Vs" + machine_prefix(other)[2:]


class MacroCollision(UserError):
    """Two claims would be written under one macro name (labels that differ only in
    punctuation, "remote1" and "remote-1"): one line, naming them."""


@dataclass
class Macros:
    """`\\newcommand` lines under one prefix, each with a comment; names checked as they come."""

    prefix: str
    lines: dict[str, tuple[str, str]] = field(default_factory=dict)  # name: (body, what it is)

    def __post_init__(self):
        if not re.fullmatch(r"[A-Za-z]+", self.prefix or ""):
            raise ValueError(f"macro prefix {self.prefix!r} must be letters only (see machine_prefix)")

    def add(self, name: str, body, what: str) -> None:
        full = self.prefix + name
        if not re.fullmatch(r"[A-Za-z]+", full):
            raise ValueError(f"macro name \\{full} must be letters only")
        if full in self.lines:
            raise MacroCollision(f"two claims would both be \\{full}: {self.lines[full][1]!r} and {what!r}; "
                                 "rename one of the labels so they differ in more than punctuation")
        self.lines[full] = (tex_escape(body if str(body).strip() else NA), what)

    def text(self) -> str:
        return "".join(f"% {tex_comment(what)}\n\\newcommand{{\\{name}}}{{{body}}}\n"
                       for name, (body, what) in self.lines.items())


def _add_ratio(macros: Macros, name: str, row, column: str, verdict: str, what: str, judging: Judging) -> None:
    """Value, CI bounds, verdict, cell and the two times behind the largest ratio in `column`."""
    if row is None:
        for suffix in ("", "Low", "High", "Verdict", "Cell"):
            macros.add(name + suffix, NA, f"{what}{' ' + suffix.lower() if suffix else ''}: nothing measured")
        return
    value, low, high = interval(row, column)
    macros.add(name, fmt_sig(value), f"{what} (ratio of times)")
    macros.add(name + "Low", fmt_sig(low), f"{what}: lower end of the {judging.ci}")
    macros.add(name + "High", fmt_sig(high), f"{what}: upper end of the {judging.ci}")
    macros.add(name + "Verdict", str(row.get(verdict, NA)), f"{what}: verdict")
    macros.add(name + "Cell", cell_phrase(row), f"{what}: the cell it was measured in")


def _extreme(frame: pd.DataFrame, column: str, largest: bool = True):
    """The row with the largest (or smallest) finite value in `column`, None when there is none."""
    if frame.empty or column not in frame.columns:
        return None
    values = pd.to_numeric(frame[column], errors="coerce")
    if not values.notna().any():
        return None
    return frame.loc[values.idxmax() if largest else values.idxmin()]


def claims_macros(timings: pd.DataFrame, speedups: pd.DataFrame, transfer: pd.DataFrame, judging: Judging,
                  machine: str = "", decisions: pd.DataFrame | None = None) -> str:
    """`\\newcommand` macros for one machine's headline numbers, named after `machine_prefix`
    of `machine` (left empty: of the tables' machine column). Claims with no data (no speedup,
    no GPU) still get their macros, saying "n/a", so a paper keeps compiling after a rerun on
    a machine without them.
    """
    machine = machine or machine_of(timings) or machine_of(speedups) or machine_of(transfer)
    if not machine:
        raise ValueError("claims_macros: no machine column to derive the prefix from; pass machine=")
    macros = Macros(machine_prefix(machine))
    macros.add("Machine", machine, "the machine label these numbers were measured on")

    ok = ok_rows(timings)
    macros.add("Cells", len(ok), "the number of cells measured (status ok)")
    macros.add("CellsInGrid", len(timings), "the number of cells in the grid, measured or not")
    macros.add("ProcessesPerCell", processes_range(ok), "the number of processes each cell was measured in")

    best = headline(speedups)  # the decisions' quantity: end to end, on a GPU the copies counted
    _add_ratio(macros, "LargestSpeedup", best, "end_to_end_speedup", "end_to_end_verdict",
               "the largest speedup over NumPy, end to end (copies counted)", judging)
    macros.add("LargestSpeedupTimes", times_of(best, end_to_end=True) if best is not None else NA,
               "the two end-to-end medians behind the largest speedup")
    _add_ratio(macros, "LargestSpeedupResident", best, "speedup", "speedup_verdict",
               "the cell of the largest speedup, with the data already where it runs", judging)
    speedups = speedups[~compile_fallbacks(speedups)]  # code that did not all compile is no compiled speedup

    gpu = speedups[speedups["device"] != "cpu"] if "device" in speedups.columns else speedups.iloc[0:0]
    gpu = gpu if "mode" in gpu.columns else gpu.assign(mode=EAGER)  # tables from before modes ran eager only
    for (op, library, mode, device, dtype), group in gpu.groupby(["op", "library", "mode", "device", "dtype"]):
        row = group.loc[group["size"].idxmax()]
        # eager torch, the library that drives the GPUs, keeps the names claims had before other libraries
        plain = mode == EAGER and library in libraries.NAMES and libraries.get(library).drives_devices
        variant = "" if plain else camel_words(library) + camel_words(mode)
        macros.add(camel_words(op) + variant + camel_words(device) + camel_words(dtype) + "BreakEven",
                   fmt_break_even(row.get("break_even_size"), row.get("break_even_status")),
                   f"break-even size n of {op} ({library} {mode}), {dtype} on {device}, copies counted")

    _add_decisions(macros, decisions, judging)

    copies = ok_rows(transfer)
    copies = copies[copies["gbs"].map(finite)] if not copies.empty else copies
    words = {"h2d": "HostToDevice", "d2h": "DeviceToHost"}
    for (device, memory, direction), group in copies.groupby(["device", "memory", "direction"]):
        row = group.loc[group["gbs"].idxmax()]
        name = camel_words(device) + camel_words(memory) + words.get(direction, camel_words(direction)) + "Bandwidth"
        what = f"the best {memory} copy bandwidth {direction} on {device} (GB/s)"
        macros.add(name, fmt_sig(row["gbs"]), what)
        macros.add(name + "Low", fmt_sig(row["gbs_ci_low"]), f"{what}: lower end of the {judging.ci}")
        macros.add(name + "High", fmt_sig(row["gbs_ci_high"]), f"{what}: upper end of the {judging.ci}")
        macros.add(name + "Size", format_bytes(row["bytes"]), f"{what}: the copy size it was reached at")
    if copies.empty:
        macros.add("CopyBandwidth", NA, "no copy bandwidth was measured on this machine")
    return macros.text()


def decision_macro(row) -> str:
    """The macro name of one decision, after the prefix: op, device, dtype, and on the CPU its
    threads, then Decision: `MatmulCpuFloatThirtyTwoThreadsOneDecision`."""
    threads = f"Threads{camel_words(row['threads'])}" if row["device"] == "cpu" else ""
    return camel_words(row["op"]) + camel_words(row["device"]) + camel_words(row["dtype"]) + threads + "Decision"


def _add_decisions(macros: Macros, decisions: pd.DataFrame | None, judging: Judging) -> None:
    """One macro per decision: its sentence, as the report and the terminal say it."""
    if decisions is None or decisions.empty:
        macros.add("Decisions", NA, "no decision: nothing but NumPy has a result and a baseline")
        return
    for _, row in decisions.iterrows():
        macros.add(decision_macro(row), answer(row, judging), f"the decision for {who(row)}")


def comparison_macros(comparison: pd.DataFrame, judging: Judging, machines: Sequence[str] = ()) -> str:
    """Per machine pair: how many cells are faster, slower, same, undecided, and the extreme ratios."""
    frame, pairs = with_machines(comparison, machines)
    sets = []
    for a, b in pairs:
        macros = Macros(pair_prefix(a, b))
        rows = frame[(frame["machine_a"].astype(str) == a) & (frame["machine_b"].astype(str) == b)]
        macros.add("Reference", a, "the reference machine a of this comparison")
        macros.add("Other", b, "the machine b compared with it")
        macros.add("Cells", len(rows), "cells measured on both machines")
        verdicts = rows["verdict"].astype(str).value_counts() if not rows.empty else pd.Series(dtype=int)
        for verdict in VERDICTS:
            macros.add(camel_words(verdict), int(verdicts.get(verdict, 0)), f"cells whose verdict is {verdict}")
        _add_ratio(macros, "LargestRatio", _extreme(rows, "ratio"), "ratio", "verdict",
                   f"the largest time ratio {b}/{a}", judging)
        _add_ratio(macros, "SmallestRatio", _extreme(rows, "ratio", largest=False), "ratio", "verdict",
                   f"the smallest time ratio {b}/{a}", judging)
        sets.append(macros)
    if not sets:
        return "% No machine pair to compare.\n"
    names = [f"{b} against {a}" for a, b in pairs]
    seen: dict[str, int] = {}
    for k, macros in enumerate(sets):
        for name in macros.lines:
            first = seen.setdefault(name, k)
            if first != k:
                raise MacroCollision(f"\\{name} would be defined by two machine pairs, {names[first]} and {names[k]}: "
                                     "their labels spell the same; rename one so they differ in more than punctuation")
    return "\n".join(f"% {tex_comment(b)} against {tex_comment(a)}\n" + macros.text()
                     for (a, b), macros in zip(pairs, sets, strict=True))
