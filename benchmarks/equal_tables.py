"""The tables of one run's raw records, built by two checkouts of this code, compared value by
value: a refactoring that moves words out of the tables must leave every number as it was.

    python benchmarks/equal_tables.py <results folder> <older checkout> [<newer checkout>]

Each checkout re-aggregates the same records in a process of its own (its own package on
the path); the tables are then compared column by column. Columns that only changed their
representation (a decision in words against its code, a tie said in words against a
boolean, a comparison's states as "<answer>: <details>" against an answer beside its
details, the by-size answers as "n: variant; …" and the open sizes as "256, 1024" against
decision_sizes.csv's rows, a break-even size in words against its size, status and the
series' sizes, why the losers lose in words against losses.csv's rows as the newer report
words them, why a ratio is undecided in words against its code, the peak note in words against
the processes' least and greatest peak, a cell's two states in words against each state's
time, pages and rounds, GPU resident trips in words against resident.csv's rows, the precision
notes against their regions and widest CI, a comparison's ratio in each state in words against
states.csv's rows, a ratio's noise flags in words against whether either cell is flagged) are
compared through that mapping; columns one side lacks are listed.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
BUILD = """
import sys
sys.path.insert(0, sys.argv[1] + "/workflow")
from offloadbench.analysis.measured import Analysis
from offloadbench.analysis.sources import Source
from offloadbench.csvsafe import write_csv
from offloadbench.layout import TABLES
from pathlib import Path
tables = Source("run", Path(sys.argv[2])).tables(Analysis())
for name in TABLES:
    write_csv(tables[name], Path(sys.argv[3]) / f"{name}.csv")
"""
# decisions.csv's decision in words (before) and as a code with the variant (after)
DECISION_CODES = {"stay with NumPy": "stay", "cannot tell yet": "unsure", "depends on the state": "depends"}


def build(checkout: Path, results: Path, out: Path) -> None:
    out.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", BUILD, str(checkout), str(results), str(out)], check=True)


def as_code(decision: str) -> str:
    return "use" if decision.startswith("use ") else DECISION_CODES.get(decision, decision)


# a comparison's states in words, "<answer>: <details>" (before), and as a value beside the details (after)
STATES_ANSWERS = {"depends on the state": "depends", "holds in both states": "holds", "differs in one round": "one_round"}


def split_states(text: str) -> tuple[str, str]:
    answer, _, details = text.partition(": ")
    return (STATES_ANSWERS[answer], details) if answer in STATES_ANSWERS else ("", text)


def normalised(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    if name != "timings" and "states" in frame and "states_answer" not in frame:
        split = frame["states"].astype(str).map(split_states)
        frame = frame.assign(states_answer=split.map(lambda pair: pair[0]), states=split.map(lambda pair: pair[1]))
    if name == "decisions" and "decision" in frame:
        frame = frame.assign(decision=frame["decision"].astype(str).map(as_code))
    if "tie" in frame:
        frame = frame.assign(tie=frame["tie"].map(lambda v: str(v) not in ("", "nan", "False", "false")))
    return frame


def with_by_size_words(decisions: pd.DataFrame, sizes_path: Path) -> pd.DataFrame:
    """decisions.csv's by-size answers as the older version wrote them ("256: numpy; 1024: ?"),
    from decision_sizes.csv's rows."""
    if not sizes_path.exists() or "by_size" in decisions:
        return decisions
    sizes = pd.read_csv(sizes_path, dtype=str, keep_default_na=False)
    key = ["op", "device", "dtype", "threads"]
    words = {tuple(k): "; ".join(f"{r.size}: {r.variant or '?'}" for r in group.itertuples())
             for k, group in sizes.groupby(key, sort=False)}
    return decisions.assign(by_size=[words.get(tuple(r[k] for k in key), "") for _, r in decisions.iterrows()])


def with_open_sizes(decisions: pd.DataFrame, sizes_path: Path) -> pd.DataFrame:
    """decisions.csv's open sizes as the older version wrote them ("256, 1024"), from
    decision_sizes.csv's unsure rows."""
    sizes = pd.read_csv(sizes_path, dtype=str, keep_default_na=False)
    key = ["op", "device", "dtype", "threads"]
    open_sizes = {tuple(k): ", ".join(g.loc[g["decision"] == "unsure", "size"]) for k, g in sizes.groupby(key, sort=False)}
    return decisions.assign(undecided_sizes=[open_sizes.get(tuple(r[k] for k in key), "") for _, r in decisions.iterrows()])


def with_break_even_words(speedups: pd.DataFrame) -> pd.DataFrame:
    """speedups.csv's break-even in words as the older version wrote them, from its size, its
    status and the sizes of its series."""
    series = ["op", "library", "mode", "device", "dtype", "threads"]
    words = []
    for _, row in speedups.iterrows():
        mine = speedups[(speedups[series] == row[series]).all(axis=1)]["size"].astype(int)
        status = row["break_even_status"]
        if status == "not reached":
            words.append(f"not reached within the grid (up to n = {mine.max()})")
        elif status == "from the smallest size":
            words.append(f"at or below the smallest size measured (n ≤ {mine.min()})")
        else:
            size = float(row["break_even_size"])
            words.append(f"n ≈ {size:.0f} (between {mine[mine < size].max()} and {mine[mine >= size].min()})")
    return speedups.assign(break_even=words)


def with_why_words(decisions: pd.DataFrame, new: Path, checkout: Path) -> pd.DataFrame:
    """decisions.csv's why the losers lose in words, as the older version wrote them, from
    losses.csv's rows worded by the newer checkout's report."""
    sys.path.insert(0, str(checkout / "workflow"))
    from offloadbench.analysis.tables import read_tables
    from offloadbench.report.text.decisions import why_losers_lose

    read = read_tables({name: str(new / f"{name}.csv") for name in ("decisions", "losses")})["decisions"]
    return decisions.assign(why=[why_losers_lose(row) for _, row in read.iterrows()])


# why a ratio is undecided, in the older words (by how they begin) and as the newer code
UNDECIDED_WORDS = (("no CI", "no_ci"), ("tie at the boundary", "tie"), ("its CI spans", "too_wide"),
                   ("its CI includes 1", "across_one"), ("the difference is real", "below_delta"),
                   ("depends on the state", "depends_on_state"))
UNDECIDED_COLUMNS = ("speedup_undecided", "end_to_end_undecided", "verdict_undecided")


def undecided_codes(frame: pd.DataFrame) -> pd.DataFrame:
    """The older why-undecided words as the newer codes (any other words: a side was unstable)."""
    def code(words: str) -> str:
        return next((c for start, c in UNDECIDED_WORDS if words.startswith(start)), "unstable") if words else ""

    return frame.assign(**{c: frame[c].map(code) for c in UNDECIDED_COLUMNS if c in frame})


def with_peak_note(timings: pd.DataFrame, checkout: Path) -> pd.DataFrame:
    """timings.csv's peak note in words, as the older version wrote it, from the processes'
    least and greatest host peak and the records' reason."""
    sys.path.insert(0, str(checkout / "workflow"))
    from offloadbench.units import format_bytes

    def note(row) -> str:
        low, high = pd.to_numeric(row["peak_host_low_bytes"]), pd.to_numeric(row["peak_host_high_bytes"])
        if np.isfinite(low) and high > 1.25 * max(1, low):
            return f"processes disagree: {format_bytes(int(low))} to {format_bytes(int(high))}"
        if not np.isfinite(low) and row["status"] == "ok":
            return row["peak_reason"] or "not measured"
        return ""

    return timings.assign(peak_note=[note(row) for _, row in timings.iterrows()])


def with_state_words(timings: pd.DataFrame, checkout: Path) -> pd.DataFrame:
    """timings.csv's two states in words, as the older version wrote them, from each state's
    time, fresh pages per call and rounds."""
    sys.path.insert(0, str(checkout / "workflow"))
    from offloadbench.units import fmt_time

    def words(row) -> str:
        if not row["state_fast_rounds"]:
            return ""
        fast, slow = row["state_fast_rounds"].split(), row["state_slow_rounds"].split()
        pages = [pd.to_numeric(row[f"state_{state}_faults_per_call"]) for state in ("fast", "slow")]
        differs = (f"fresh pages per call: {pages[0]:,.0f} in the fast state, {pages[1]:,.0f} in the slow"
                   if all(np.isfinite(pages)) and abs(pages[1] - pages[0]) >= 1 else
                   "nothing the records show differs between them")
        return (f"two states: {fmt_time(float(row['state_fast_s']))} in {len(fast)} of {len(fast) + len(slow)} "
                f"processes (rounds {', '.join(fast)}), {fmt_time(float(row['state_slow_s']))} in {len(slow)} "
                f"(rounds {', '.join(slow)}); {differs}")

    return timings.assign(states=[words(row) for _, row in timings.iterrows()])


def with_flag_words(timings: pd.DataFrame, flags_path: Path, checkout: Path) -> pd.DataFrame:
    """timings.csv's `unstable` and `replaced` as the older version wrote them, from
    flags.csv's rows worded by the newer checkout's report."""
    sys.path.insert(0, str(checkout / "workflow"))
    from offloadbench.analysis.tables import read_tables
    from offloadbench.cells import Cell
    from offloadbench.report.text.conditions import flags_phrase, left_out_phrase, rows_by_cell

    read = read_tables({"timings": str(flags_path.with_name("timings.csv")), "flags": str(flags_path)})
    flagged, left_out = (dict(rows_by_cell(read["timings"], read["flags"], left_out=side)) for side in (False, True))
    keys = [Cell.from_dict(row).key for _, row in read["timings"].iterrows()]
    return timings.assign(unstable=[flags_phrase(flagged[k]) if k in flagged else "" for k in keys],
                          replaced=[left_out_phrase(left_out[k]) if k in left_out else "" for k in keys])


def with_cache_words(timings: pd.DataFrame, checkout: Path) -> pd.DataFrame:
    """timings.csv's compile cache in words, as the older version wrote it, from its values
    worded by the newer checkout's report."""
    sys.path.insert(0, str(checkout / "workflow"))
    from offloadbench.report.text.compile_findings import cache_words

    return timings.assign(compile_cache=[cache_words(row) if row["compile_processes"] else ""
                                         for _, row in timings.iterrows()])


def with_resident_words(timings: pd.DataFrame, trips_path: Path, checkout: Path) -> pd.DataFrame:
    """timings.csv's resident columns as the older version wrote them (the largest k's trip,
    and every trip in words or why there is none), from resident.csv's rows."""
    sys.path.insert(0, str(checkout / "workflow"))
    from offloadbench.units import fmt_time

    key = ["op", "library", "device", "dtype", "size", "threads", "mode"]
    trips = pd.read_csv(trips_path, dtype=str, keep_default_na=False)
    found = {tuple(row[k] for k in key): rows for row, rows in ((r.iloc[0], r) for _, r in trips.groupby(key))}

    def columns(row) -> dict:
        rows = found.get(tuple(row[k] for k in key))
        if rows is None:
            return {"resident_calls": "", "resident_s": "", "resident_predicted_s": "", "resident": row["resident_reason"]}
        rows = rows.assign(k=rows["calls"].astype(int)).sort_values("k")
        parts = [f"k = {r.k}: {fmt_time(float(r.resident_s))}, the phases predict {fmt_time(float(r.predicted_s))} "
                 f"({float(r.resident_s) / float(r.predicted_s):.2f}×)" if r.predicted_s and float(r.predicted_s) > 0
                 else f"k = {r.k}: {fmt_time(float(r.resident_s))}" for r in rows.itertuples()]
        last = rows.iloc[-1]
        return {"resident_calls": last["calls"], "resident_s": last["resident_s"],
                "resident_predicted_s": last["predicted_s"], "resident": "; ".join(parts)}

    built = pd.DataFrame([columns(row) for _, row in timings.iterrows()], index=timings.index)
    return timings.assign(**{c: built[c] for c in built.columns})


def precision_values(notes: str) -> str:
    """timings.csv's older precision notes ("CI not reached (±3.1% > ±2.0%, …) (in 1 of 3
    processes)", one per region) as the values the newer version keeps: the regions, the
    widest CI to the notes' precision, and the processes where one region missed (several
    regions' processes may overlap, so their count is not compared). Each region's own CI and
    count are dropped from the table; they stay in the raw records."""
    if not notes:
        return ""
    found = [(note.split(": CI")[0] if ": CI" in note else "compute", note.split("(")[1].split(" >")[0])
             for note in notes.split("; ")]
    widest = max(math.inf if w == "undefined" else float(w.strip("±%")) for _, w in found)
    count = "?" if len(found) > 1 else notes.split("(in ")[1].split(" of")[0] if "(in " in notes else "1"
    return f"{' '.join(sorted({r for r, _ in found}))} {widest:.1f} in {count}"


def precision_values_of(row) -> str:
    if not row["precision_regions"]:
        return ""
    count = row["precision_processes"] if " " not in row["precision_regions"] else "?"
    return f"{row['precision_regions']} {100 * float(row['precision_widest_rel_ci']):.1f} in {count}"


def with_state_ratio_words(name: str, frame: pd.DataFrame, states_path: Path, checkout: Path) -> pd.DataFrame:
    """A comparison table's (or decisions.csv's) `states` in words, as the older version wrote
    them ("1.3× where <cell> ran 1.2 ms (2 of 6 rounds); …"), from states.csv's rows."""
    sys.path.insert(0, str(checkout / "workflow"))
    from offloadbench.units import fmt_time

    states = pd.read_csv(states_path, dtype=str, keep_default_na=False)
    kind = {"speedups": "speedup", "decisions": "speedup", "thread_scaling": "thread scaling",
            "controls": "self-comparison"}[name]
    key = ["op", "device", "dtype", "threads", "size", "variant"] if name == "decisions" else \
        ["op", "library", "device", "dtype", "size", "threads", "mode"]
    found: dict[tuple, list] = {}
    for row in states[states["kind"] == kind].to_dict("records"):
        found.setdefault(tuple(row[k] for k in key), []).append(row)

    def where(s) -> str:
        return " and ".join(f"{s[f'{side}_cell']} ran {fmt_time(float(s[f'{side}_state_s']))}"
                            for side in ("base", "contender") if s[f"{side}_state"])

    def words(row) -> str:
        at = tuple(row["compared_variant" if k == "variant" and name == "decisions" else k] for k in key)
        return "; ".join(f"{float(s['ratio']):.3g}× where {where(s)} ({s['rounds']} of {s['of_rounds']} rounds)"
                         for s in found.get(at, []))

    return frame.assign(states=[words(row) for _, row in frame.iterrows()])


def compare(old: Path, new: Path, checkout: Path = ROOT) -> dict:
    report = {}
    for name in sorted({p.stem for p in new.glob("*.csv")} - {p.stem for p in old.glob("*.csv")}):
        report[name] = {"only after": "the whole table"}
    for path in sorted(old.glob("*.csv")):
        name = path.stem
        if not (new / path.name).exists():
            report[name] = {"only before": "the whole table"}
            continue
        a = normalised(name, pd.read_csv(path, dtype=str, keep_default_na=False))
        b = normalised(name, pd.read_csv(new / path.name, dtype=str, keep_default_na=False))
        if any(c in a and not a[c].isin(["", *dict(UNDECIDED_WORDS).values(), "unstable"]).all()
               for c in UNDECIDED_COLUMNS):
            a = undecided_codes(a)
        if name == "timings" and "peak_note" in a and "peak_note" not in b:
            b = with_peak_note(b, checkout)
        if name == "timings" and "resident" in a and "resident_reason" in b:
            b = with_resident_words(b, new / "resident.csv", checkout)
        if name in ("speedups", "thread_scaling", "controls", "decisions") and "states" in a and "states" not in b:
            b = with_state_ratio_words(name, b, new / "states.csv", checkout)
        if name == "timings" and "precision_notes" in a and "precision_processes" in b:
            a = a.assign(precision_notes=a["precision_notes"].map(precision_values))
            b = b.assign(precision_notes=[precision_values_of(row) for _, row in b.iterrows()])
        if name == "timings" and "states" in a and "state_fast_rounds" in b:
            b = with_state_words(b, checkout)
        if name == "timings" and "compile_cache" in a and "compile_cache_cold" in b:
            b = with_cache_words(b, checkout)
        if name == "timings" and "replaced" in a and "replaced" not in b:
            b = with_flag_words(b, new / "flags.csv", checkout)
        if name in ("speedups", "thread_scaling", "controls") and "unstable" in a and "flagged" in b:
            a = a.assign(flagged=(a.pop("unstable") != "").map(str))  # the words now live in timings alone
        if name == "decisions" and "by_size" in a:
            b = with_by_size_words(b, new / "decision_sizes.csv")
        if name == "decisions" and "undecided_sizes" in a and "undecided_sizes" not in b:
            b = with_open_sizes(b, new / "decision_sizes.csv")
        if name == "speedups" and "break_even" in a and "break_even" not in b:
            b = with_break_even_words(b)
        if name == "decisions" and "why" in a and "why" not in b:
            b = with_why_words(b, new, checkout)
        shared = [c for c in a.columns if c in b.columns]
        differing = []
        if len(a) != len(b):
            differing.append(f"rows {len(a)} against {len(b)}")
        else:
            for column in shared:
                x, y = a[column].astype(str).to_numpy(), b[column].astype(str).to_numpy()
                numbers_x, numbers_y = pd.to_numeric(a[column], errors="coerce"), pd.to_numeric(b[column], errors="coerce")
                if numbers_x.notna().any() and (numbers_x.notna() == numbers_y.notna()).all():
                    same = np.allclose(numbers_x.fillna(0), numbers_y.fillna(0), rtol=1e-12, atol=0) and \
                        (x[numbers_x.isna()] == y[numbers_y.isna()]).all()
                else:
                    same = (x == y).all()
                if not same:
                    differing.append(column)
        report[name] = {"rows": len(a), "columns compared": len(shared), "differing": differing,
                        "only before": [c for c in a.columns if c not in b.columns],
                        "only after": [c for c in b.columns if c not in a.columns]}
    return report


def main(argv: list[str]) -> int:
    results, older = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    newer = Path(argv[2]).resolve() if len(argv) > 2 else ROOT
    with tempfile.TemporaryDirectory() as tmp:
        build(older, results, Path(tmp) / "old")
        build(newer, results, Path(tmp) / "new")
        report = compare(Path(tmp) / "old", Path(tmp) / "new", newer)
    print(json.dumps(report, indent=1))
    return 1 if any(entry.get("differing") for entry in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
