"""Paper tables and claim macros in LaTeX, so that a paper's numbers follow a rerun.

`write_latex` writes, for one machine, booktabs tables of the timings, speedups and copy
bandwidth under `tables/` and a `claims.tex` of `\\newcommand` macros holding the headline
numbers; `write_comparison_latex` does the same for a comparison of two machines. Every
text cell, header, caption and macro body is escaped here, in `tex_escape`, and nowhere
else; the result is plain ASCII, so it compiles with pdflatex, xelatex and lualatex alike.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...analysis.columns import compile_fallbacks, interval
from ...cells import EAGER
from ...errors import UserError
from ...verdicts import DECIDED, VERDICTS
from ..format import cell_phrase, finite, fmt_ci, fmt_sig, format_bytes, time_unit, times_of
from .conditions import controls_warning
from .decisions import WEAK_MARK, WEAK_NOTE, answer, table_rows, who

NA = "n/a"

# ASCII-only output: these are the characters pdflatex cannot take as they are.
_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "–": "--",
    "—": "---",
    "×": r"\ensuremath{\times}",
    "±": r"\ensuremath{\pm}",
    "µ": r"\textmu{}",
    "μ": r"\textmu{}",
    "≈": r"\ensuremath{\approx}",
    "†": r"\textdagger{}",
    "≤": r"\ensuremath{\leq}",
    "≥": r"\ensuremath{\geq}",
    "→": r"\ensuremath{\rightarrow}",
    "÷": r"\ensuremath{\div}",
    "’": "'",
    "‘": "`",
    "“": "``",
    "”": "''",
    "\u00a0": "~",
}
_LABEL = re.compile(r"^[A-Za-z0-9:.\-]+$")


_BLANKS = re.compile(r"[\t\n\v\f\r]")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")  # ESC, NUL, DEL, ...: no engine takes them as text


def _plain(text) -> str:
    """Text with line breaks and tabs as spaces and every other ASCII control character left out."""
    return _CONTROLS.sub("", _BLANKS.sub(" ", str(text)))


def tex_escape(text) -> str:
    """Text as LaTeX source that prints it; control characters are left out and other
    non-ASCII characters become `?` (never a crash)."""
    out = []
    for ch in _plain(text):
        if ch in _TEX_SPECIAL:
            out.append(_TEX_SPECIAL[ch])
        elif ch.isascii():
            out.append(ch)
        else:
            out.append("?")
    return "".join(out)


# --- numbers --------------------------------------------------------------------------


def _cell_text(value) -> str:
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":
        return "yes" if value else "no"
    if isinstance(value, int) or (hasattr(value, "dtype") and pd.api.types.is_integer_dtype(value.dtype)):
        return str(int(value))
    if isinstance(value, float) or (hasattr(value, "dtype") and pd.api.types.is_float_dtype(value.dtype)):
        return fmt_sig(value)
    if value is None or value is pd.NA:
        return "–"
    return str(value)


# --- tables ---------------------------------------------------------------------------

_RIGHT = re.compile(r"^(?:[-–]$|(?:[-–≈≤≥<>]\s*)?[0-9])")


def booktabs_table(frame: pd.DataFrame, columns, caption: str, label: str, empty: str = "No rows.") -> str:
    """`frame`'s `columns` (a list, or a mapping column -> header) as a booktabs table float.

    Numbers get three significant digits, text and headers are escaped, columns whose
    every cell starts with a number are right-aligned. An empty frame gives one row that
    says `empty`, so a paper that \\input's the file still compiles.
    """
    headers = dict(columns) if isinstance(columns, Mapping) else {c: c for c in columns}
    if not headers:
        raise ValueError("booktabs_table needs at least one column")
    if not _LABEL.match(label):
        raise ValueError(f"LaTeX label {label!r}: use letters, digits, ':', '.' and '-'")
    missing = [c for c in headers if c not in frame.columns]
    if missing and not frame.empty:
        raise KeyError(f"booktabs_table: the frame has no column {missing}")
    if frame.empty:
        cells = [[empty] + [""] * (len(headers) - 1)]
    else:
        cells = [[_cell_text(v) for v in row] for row in frame[list(headers)].itertuples(index=False)]
    align = "".join(
        "r" if not frame.empty and all(_RIGHT.match(row[i]) or row[i] == "" for row in cells) else "l"
        for i in range(len(headers))
    )
    # Positional column labels: two headers may read the same, which Styler refuses as labels.
    body = pd.DataFrame([[tex_escape(c) for c in row] for row in cells], columns=range(len(headers)))
    names = [tex_escape(h) for h in headers.values()]
    styler = body.style.hide(axis="index").format_index(lambda i: names[i], axis=1)
    tex = styler.to_latex(
        column_format=align, hrules=True, caption=tex_escape(caption), label=label, position_float="centering"
    )
    note = f"% {_comment(empty)}\n" if frame.empty else ""
    return f"% Generated by offloadbench; edits are lost on the next run.\n{note}{tex}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "x"


def _machine_of(frame: pd.DataFrame, fallback: str = "") -> str:
    if "machine" in frame.columns and not frame.empty:
        return str(frame["machine"].iloc[0])
    return fallback


_CELL_HEADERS = {"op": "op", "library": "library", "device": "device", "dtype": "dtype", "size": "n",
                 "threads": "threads"}


def _cell_headers(frame: pd.DataFrame) -> dict:
    """The columns that name a cell; the mode only where some cell is compiled."""
    compiled = "mode" in frame.columns and (frame["mode"].astype(str) != EAGER).any()
    return {**_CELL_HEADERS, "mode": "mode"} if compiled else dict(_CELL_HEADERS)


def timings_tex(timings: pd.DataFrame, machine: str = "") -> str:
    """Compute time of every cell that ran, with its 95% CI and throughput."""
    machine = machine or _machine_of(timings)
    ok = timings[timings["status"] == "ok"] if "status" in timings.columns else timings.iloc[0:0]
    unit, scale = time_unit(ok.get("median_s", []))
    flags = ok["unstable"] if "unstable" in ok.columns else pd.Series("", index=ok.index)
    flagged = flags.fillna("").astype(str) != ""
    median = [
        fmt_ci(r.median_s / scale, r.ci_low_s / scale, r.ci_high_s / scale) + (" *" if flag else "")
        for r, flag in zip(ok.itertuples(index=False), flagged, strict=True)
    ]
    frame = ok.assign(median=median)
    processes = sorted({int(p) for p in ok.get("processes", []) if finite(p)})
    caption = (
        f"Compute time per cell on {machine}: median over {_range_text(processes)} process(es), "
        f"with its 95% CI in parentheses; GFLOP/s from the FLOP model."
    )
    if flagged.any():
        caption += f" * marks the {int(flagged.sum())} cell(s) flagged unstable by the noise checks."
    headers = {**_cell_headers(frame), "median": f"median ({unit}), 95% CI", "gflops": "GFLOP/s"}
    return booktabs_table(frame, headers, caption, f"tab:{_slug(machine)}-timings", "No cell ran.")


def _break_even_text(row) -> str:
    """A series' break-even size as a short text: "606", "at most 256", "not reached"."""
    size = row.get("break_even_size")
    if not finite(size):
        return "not reached"
    if row.get("break_even_status") == "from the smallest size":
        return f"at most {float(size):.0f}"
    return f"{float(size):.0f}"


def speedups_tex(speedups: pd.DataFrame, machine: str = "") -> str:
    """Speedup over NumPy with the data on the device and with the copies counted."""
    machine = machine or _machine_of(speedups)
    frame = speedups.copy()
    if not frame.empty:
        frame["resident"] = [fmt_ci(r.speedup, r.speedup_ci_low, r.speedup_ci_high, ratio=True)
                             for r in frame.itertuples(index=False)]
        frame["e2e"] = [fmt_ci(r.end_to_end_speedup, r.end_to_end_speedup_ci_low, r.end_to_end_speedup_ci_high,
                               ratio=True) for r in frame.itertuples(index=False)]
        frame["v"] = frame["speedup_verdict"]
        frame["e2e_v"] = frame["end_to_end_verdict"]
        frame["be"] = [_break_even_text(row) for _, row in frame.iterrows()]
    caption = (
        f"Speedup of PyTorch over NumPy on {machine} (NumPy time / PyTorch time), with its 95% CI: with the "
        "data already on the device, and end to end with the host-device copies counted. Verdict: faster or "
        "slower when the CI excludes 1, else same. Break-even: the size n from which the end-to-end speedup "
        "stays above 1."
    )
    headers = {**_cell_headers(frame), "resident": "speedup (95% CI)", "v": "verdict",
               "e2e": "end-to-end speedup (95% CI)", "e2e_v": "end-to-end verdict", "be": "break-even n"}
    if "calls_per_round_trip" in frame and frame["calls_per_round_trip"].map(finite).any():
        frame["trip"] = [fmt_ci(*interval(r, "calls_per_round_trip")) for _, r in frame.iterrows()]
        headers["trip"] = "calls per round trip k* (95% CI)"
        caption_extra = (" k*: the calls the data must stay on the device for one copy in and out to pay, "
                         "(h2d + d2h) / (NumPy's time - the device's compute time); at most 1: a copy on every "
                         "call pays.")
        caption += caption_extra
    return booktabs_table(frame, headers, caption, f"tab:{_slug(machine)}-speedups",
                          "No PyTorch cell has both a result and a NumPy baseline.")


def transfer_tex(transfer: pd.DataFrame, machine: str = "") -> str:
    """Host-device copy bandwidth per direction, memory kind and size."""
    machine = machine or _machine_of(transfer)
    ok = transfer[transfer["status"] == "ok"] if "status" in transfer.columns else transfer.iloc[0:0]
    frame = ok.copy()
    if not frame.empty:
        frame["dir"] = frame["direction"].map({"h2d": "host → device", "d2h": "device → host"}).fillna(frame["direction"])
        frame["size"] = frame["bytes"].map(format_bytes)
        frame["bw"] = [fmt_ci(r.gbs, r.gbs_ci_low, r.gbs_ci_high) for r in frame.itertuples(index=False)]
        frame["share"] = [f"{100 * f:.0f}" if finite(f) else "–" for f in frame["link_fraction"]]
    links = sorted({f"{k} ({g:.0f} GB/s)" for k, g in zip(ok.get("link", []), ok.get("link_gbs", []), strict=True)
                    if isinstance(k, str) and k and finite(g)})
    caption = f"Host-device copy bandwidth on {machine}, median with its 95% CI"
    caption += f"; link: {', '.join(links)}." if links else "."
    reasons = "; ".join(sorted({str(r) for r in transfer.get("reason", []) if isinstance(r, str) and r}))
    empty = f"No copy was measured ({reasons})." if reasons else "No copy was measured."
    headers = {"device": "device", "dir": "direction", "memory": "memory", "size": "size",
               "bw": "GB/s (95% CI)", "share": "% of link"}
    return booktabs_table(frame, headers, caption, f"tab:{_slug(machine)}-transfer", empty)


def decisions_tex(decisions: pd.DataFrame, machine: str = "", warning: str = "") -> str:
    """The answer: one decision per op (or kernel), place and dtype, as the report leads with;
    `warning` is the self-comparisons' where they were called faster or slower too often."""
    machine = machine or _machine_of(decisions)
    frame = table_rows(decisions) if not decisions.empty else pd.DataFrame()
    headers = {name: name for name in frame.columns} or {"op": "op", "decision": "decision"}
    caption = (f"What to use on {machine}, per operation: the decision at the largest size measured, against NumPy "
               "end to end (on a GPU with the copies counted), the size from which it holds, its speedup over "
               "NumPy there with the 95% CI (for stay with NumPy: the best alternative's), the calls that pay a "
               "compile back (with the compiler's start-up in parentheses), and where a size cannot tell yet, the "
               "processes per cell that would likely decide it.")
    if "speedup (95% CI)" in frame and frame["speedup (95% CI)"].str.contains(WEAK_MARK).any():
        caption += f" {WEAK_NOTE}"
    if warning:
        caption += f" {warning}"
    return booktabs_table(frame, headers, caption, f"tab:{_slug(machine)}-decisions",
                          "No variant other than NumPy has both a result and a NumPy baseline.")


def _pairs(comparison: pd.DataFrame, machines: Sequence[str]) -> list[tuple[str, str]]:
    if not comparison.empty and {"machine_a", "machine_b"} <= set(comparison.columns):
        pairs = comparison[["machine_a", "machine_b"]].astype(str).drop_duplicates()
        return list(pairs.itertuples(index=False, name=None))
    machines = [str(m) for m in machines]
    return [(machines[0], m) for m in machines[1:]]


def _with_machines(comparison: pd.DataFrame, machines: Sequence[str]) -> pd.DataFrame:
    """The comparison with its machine columns, filled from `machines` when it has none."""
    frame = comparison.copy()
    for column, k in (("machine_a", 0), ("machine_b", 1)):
        if column not in frame.columns:
            if len(machines) < 2 and not frame.empty:
                raise ValueError("the comparison has no machine columns: name both machines in `machines`")
            frame[column] = str(machines[k]) if len(machines) > k else ""
    return frame


def comparison_tex(comparison: pd.DataFrame, machines: Sequence[str] = ()) -> str:
    """Each cell's median on two machines, the ratio b/a with its 95% CI, and the verdict."""
    frame = _with_machines(comparison, machines)
    pairs = _pairs(frame, machines)
    unit, scale = time_unit(pd.concat([frame.get("median_a_s", pd.Series()), frame.get("median_b_s", pd.Series())]))
    if not frame.empty:
        frame["ta"] = frame["median_a_s"] / scale
        frame["tb"] = frame["median_b_s"] / scale
        frame["r"] = [fmt_ci(r.ratio, r.ratio_ci_low, r.ratio_ci_high, ratio=True) for r in frame.itertuples(index=False)]
    if len(pairs) == 1:
        a, b = pairs[0]
        headers = {**_cell_headers(frame), "ta": f"median on {a} ({unit})", "tb": f"median on {b} ({unit})",
                   "r": f"ratio {b}/{a} (95% CI)", "verdict": "verdict"}
        title = f"{b} against {a}"
    else:
        headers = {"machine_a": "machine a", "machine_b": "machine b", **_cell_headers(frame),
                   "ta": f"median on a ({unit})", "tb": f"median on b ({unit})", "r": "ratio b/a (95% CI)",
                   "verdict": "verdict"}
        title = "each machine b against its reference a"
    caption = (f"Machine comparison, {title}: median compute time of each cell on both machines and their ratio "
               "with its 95% CI; the verdict is undecided where the CI cannot decide.")
    label = "tab:comparison" + "".join(f"-{_slug(a)}-{_slug(b)}" for a, b in pairs[:1])
    return booktabs_table(frame, headers, caption, label, "No cell was measured on both machines.")


# --- macros ---------------------------------------------------------------------------

_ONES = ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten", "Eleven",
         "Twelve", "Thirteen", "Fourteen", "Fifteen", "Sixteen", "Seventeen", "Eighteen", "Nineteen"]
_TENS = ["", "", "Twenty", "Thirty", "Forty", "Fifty", "Sixty", "Seventy", "Eighty", "Ninety"]
_SCALES = [(10**9, "Billion"), (10**6, "Million"), (10**3, "Thousand"), (10**2, "Hundred")]


def number_words(digits: str) -> str:
    """A run of digits in capitalised English words: "32" -> "ThirtyTwo", "007" -> "ZeroZeroSeven"."""
    if not digits.isdigit() or not digits.isascii():
        raise ValueError(f"not a run of digits: {digits!r}")
    stripped = digits.lstrip("0")
    zeros = "Zero" * (len(digits) - len(stripped))
    if not stripped:
        return zeros
    if len(stripped) > 12:  # past the billions, read it digit by digit
        return zeros + "".join(_ONES[int(d)] for d in stripped)
    return zeros + _spell(int(stripped))


def _spell(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + (_ONES[n % 10] if n % 10 else "")
    for scale, word in _SCALES:
        if n >= scale:
            head, rest = divmod(n, scale)
            return _spell(head) + word + (_spell(rest) if rest else "")
    raise AssertionError(n)


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
    lines: list[tuple[str, str, str]] = field(default_factory=list)  # name, body, what it is

    def __post_init__(self):
        if not re.fullmatch(r"[A-Za-z]+", self.prefix or ""):
            raise ValueError(f"macro prefix {self.prefix!r} must be letters only (see machine_prefix)")

    def add(self, name: str, body, what: str) -> None:
        full = self.prefix + name
        if not re.fullmatch(r"[A-Za-z]+", full):
            raise ValueError(f"macro name \\{full} must be letters only")
        for other, _, other_what in self.lines:
            if other == full:
                raise MacroCollision(
                    f"two claims would both be \\{full}: {other_what!r} and {what!r}; "
                    "rename one of the labels so they differ in more than punctuation"
                )
        text = tex_escape(body if str(body).strip() else NA)
        self.lines.append((full, text, what))

    def text(self) -> str:
        return "".join(f"% {_comment(what)}\n\\newcommand{{\\{name}}}{{{body}}}\n" for name, body, what in self.lines)


_PLAIN = {"–": "-", "—": "-", "×": "x", "±": "+-", "µ": "u", "μ": "u", "≈": "~", "≤": "<=", "≥": ">=",
          "→": "->", "÷": "/"}


def _comment(text: str) -> str:
    """Text for a `%` comment: one line, ASCII like the rest of the file."""
    text = " ".join(_plain(text).split())
    return "".join(ch if ch.isascii() else _PLAIN.get(ch, "?") for ch in text)


def _range_text(values: Sequence[int]) -> str:
    if not values:
        return NA
    return str(values[0]) if values[0] == values[-1] else f"{values[0]} to {values[-1]}"


def _add_ratio(macros: Macros, name: str, row, column: str, verdict: str, what: str) -> None:
    """Value, CI bounds, verdict, cell and the two times behind the largest ratio in `column`."""
    if row is None:
        for suffix in ("", "Low", "High", "Verdict", "Cell"):
            macros.add(name + suffix, NA, f"{what}{' ' + suffix.lower() if suffix else ''}: nothing measured")
        return
    value, low, high = interval(row, column)
    macros.add(name, fmt_sig(value), f"{what} (ratio of times)")
    macros.add(name + "Low", fmt_sig(low), f"{what}: lower end of the 95% CI")
    macros.add(name + "High", fmt_sig(high), f"{what}: upper end of the 95% CI")
    said = str(row.get(verdict, NA))
    macros.add(name + "Verdict", said, f"{what}: verdict")
    macros.add(name + "Cell", cell_phrase(row), f"{what}: the cell it was measured in")


def _extreme(frame: pd.DataFrame, column: str, largest: bool = True):
    """The row with the largest (or smallest) finite value in `column`, None when there is none."""
    if frame.empty or column not in frame.columns:
        return None
    values = pd.to_numeric(frame[column], errors="coerce")
    if not values.notna().any():
        return None
    return frame.loc[values.idxmax() if largest else values.idxmin()]


def claims_macros(timings: pd.DataFrame, speedups: pd.DataFrame, transfer: pd.DataFrame, prefix: str = "",
                  machine: str = "", decisions: pd.DataFrame | None = None) -> str:
    """`\\newcommand` macros for one machine's headline numbers.

    `prefix` is the macro prefix itself; left empty, it is `machine_prefix` of `machine`,
    or of the tables' machine column. Claims with no data (no speedup, no GPU) still get their macros, saying
    "n/a", so a paper keeps compiling after a rerun on a machine without them.
    """
    machine = machine or _machine_of(timings) or _machine_of(speedups) or _machine_of(transfer)
    if not prefix:
        if not machine:
            raise ValueError("claims_macros: no machine column to derive the prefix from; pass prefix=")
        prefix = machine_prefix(machine)
    macros = Macros(prefix)
    macros.add("Machine", machine or NA, "the machine label these numbers were measured on")

    ok = timings[timings["status"] == "ok"] if "status" in timings.columns else timings.iloc[0:0]
    macros.add("Cells", len(ok), "the number of cells measured (status ok)")
    macros.add("CellsInGrid", len(timings), "the number of cells in the grid, measured or not")
    processes = sorted({int(p) for p in ok.get("processes", []) if finite(p)})
    macros.add("ProcessesPerCell", _range_text(processes), "the number of processes each cell was measured in")

    speedups = speedups[~compile_fallbacks(speedups)]  # code that did not all compile is no compiled speedup
    # A headline is a decided ratio: an undecided one (its CI spans more than 2×, say) is no result.
    best = _extreme(speedups[speedups["speedup_verdict"].isin(DECIDED)], "speedup")
    _add_ratio(macros, "LargestSpeedup", best, "speedup", "speedup_verdict", "the largest device-resident speedup over NumPy")
    macros.add("LargestSpeedupTimes", times_of(best) if best is not None else NA,
               "the two medians behind the largest speedup")
    best = _extreme(speedups[speedups["end_to_end_verdict"].isin(DECIDED)], "end_to_end_speedup")
    _add_ratio(macros, "LargestEndToEndSpeedup", best, "end_to_end_speedup", "end_to_end_verdict",
               "the largest end-to-end speedup over NumPy, copies counted")

    gpu = speedups[speedups["device"] != "cpu"] if "device" in speedups.columns else speedups.iloc[0:0]
    keys = ["op", "library", "mode", "device", "dtype"] if "mode" in gpu.columns else ["op", "library", "device", "dtype"]
    for values, group in gpu.groupby(keys):
        named = dict(zip(keys, values, strict=True))
        op, device, dtype, mode = named["op"], named["device"], named["dtype"], named.get("mode", EAGER)
        row = group.loc[group["size"].idxmax()]
        variant = "" if mode == EAGER else camel_words(named["library"]) + camel_words(mode)  # eager names as before
        macros.add(camel_words(op) + variant + camel_words(device) + camel_words(dtype) + "BreakEven",
                   _break_even_text(row),
                   f"break-even size n of {op} ({named['library']} {mode}), {dtype} on {device}, copies counted "
                   f"({row.get('break_even')})")

    _add_decisions(macros, decisions)

    copies = transfer[transfer["status"] == "ok"] if "status" in transfer.columns else transfer.iloc[0:0]
    copies = copies[copies["gbs"].map(finite)] if not copies.empty else copies
    words = {"h2d": "HostToDevice", "d2h": "DeviceToHost"}
    for (device, memory, direction), group in copies.groupby(["device", "memory", "direction"]):
        row = group.loc[group["gbs"].idxmax()]
        name = camel_words(device) + camel_words(memory) + words.get(direction, camel_words(direction)) + "Bandwidth"
        what = f"the best {memory} copy bandwidth {direction} on {device} (GB/s)"
        macros.add(name, fmt_sig(row["gbs"]), what)
        macros.add(name + "Low", fmt_sig(row["gbs_ci_low"]), f"{what}: lower end of the 95% CI")
        macros.add(name + "High", fmt_sig(row["gbs_ci_high"]), f"{what}: upper end of the 95% CI")
        macros.add(name + "Size", format_bytes(row["bytes"]), f"{what}: the copy size it was reached at")
    if copies.empty:
        macros.add("CopyBandwidth", NA, "no copy bandwidth was measured on this machine")
    return macros.text()


def decision_macro(row) -> str:
    """The macro name of one decision, after the prefix: op, device, dtype, and on the CPU its
    threads, then Decision: `MatmulCpuFloatThirtyTwoThreadsOneDecision`."""
    threads = f"Threads{camel_words(row['threads'])}" if row["device"] == "cpu" else ""
    return camel_words(row["op"]) + camel_words(row["device"]) + camel_words(row["dtype"]) + threads + "Decision"


def _add_decisions(macros: Macros, decisions: pd.DataFrame | None) -> None:
    """One macro per decision: its sentence, as the report and the terminal say it."""
    if decisions is None or decisions.empty:
        macros.add("Decisions", NA, "no decision: nothing but NumPy has a result and a baseline")
        return
    for _, row in decisions.iterrows():
        macros.add(decision_macro(row), answer(row), f"the decision for {who(row)}")


def comparison_macros(comparison: pd.DataFrame, machines: Sequence[str] = ()) -> str:
    """Per machine pair: how many cells are faster, slower, same, undecided, and the extreme ratios."""
    frame = _with_machines(comparison, machines)
    pairs = _pairs(frame, machines)
    parts = []
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
                   f"the largest time ratio {b}/{a}")
        _add_ratio(macros, "SmallestRatio", _extreme(rows, "ratio", largest=False), "ratio", "verdict",
                   f"the smallest time ratio {b}/{a}")
        parts.append(f"% {_comment(b)} against {_comment(a)}\n" + macros.text())
    if not parts:
        return "% No machine pair to compare.\n"
    _check_disjoint(parts, [f"{b} against {a}" for a, b in pairs])
    return "\n".join(parts)


def _check_disjoint(parts: Sequence[str], names: Sequence[str]) -> None:
    seen: dict[str, int] = {}
    for k, part in enumerate(parts):
        for name in re.findall(r"\\newcommand\{\\([A-Za-z]+)\}", part):
            first = seen.setdefault(name, k)
            if first != k:
                raise MacroCollision(f"\\{name} would be defined by two machine pairs, {names[first]} and {names[k]}: "
                                     "their labels spell the same; rename one so they differ in more than punctuation")


# --- files ----------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_latex(tables: dict, out_dir, machine: str) -> dict[str, Path]:
    """`tables/{timings,speedups,transfer,decisions}.tex` and `claims.tex` of one machine under `out_dir`."""
    out = Path(out_dir)
    timings = tables.get("timings", pd.DataFrame())
    speedups = tables.get("speedups", pd.DataFrame())
    transfer = tables.get("transfer", pd.DataFrame())
    decisions = tables.get("decisions", pd.DataFrame())
    prefix = machine_prefix(machine)
    header = (f"% Headline numbers of {_comment(machine)}, generated by offloadbench: \\input this file and use "
              f"the macros \\{prefix}... in the text.\n")
    return {
        "timings": _write(out / "tables" / "timings.tex", timings_tex(timings, machine)),
        "speedups": _write(out / "tables" / "speedups.tex", speedups_tex(speedups, machine)),
        "transfer": _write(out / "tables" / "transfer.tex", transfer_tex(transfer, machine)),
        "decisions": _write(out / "tables" / "decisions.tex",
                            decisions_tex(decisions, machine, controls_warning(tables.get("controls", pd.DataFrame())))),
        "claims": _write(out / "claims.tex",
                         header + claims_macros(timings, speedups, transfer, prefix=prefix, machine=machine,
                                                decisions=decisions)),
    }


def write_comparison_latex(comparison: pd.DataFrame, out_dir, machines: Sequence[str]) -> dict[str, Path]:
    """`tables/comparison.tex` and `claims.tex` of a machine comparison under `out_dir`.

    `machines` lists the reference machine first; it names the pair when the comparison
    table has no machine columns or no rows.
    """
    out = Path(out_dir)
    header = "% Machine comparison headlines, generated by offloadbench: \\input this file.\n"
    return {
        "comparison": _write(out / "tables" / "comparison.tex", comparison_tex(comparison, machines)),
        "claims": _write(out / "claims.tex", header + comparison_macros(comparison, machines)),
    }
