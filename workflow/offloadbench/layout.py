"""Where things live under results/<machine>/, shared by the Snakefile and the package.

Kept free of heavy imports: the Snakefile reads it at parse time.
"""

from __future__ import annotations

from pathlib import Path

from .catalogue import family_of, op_order
from .cells import Cell

FIGURE_NAMES = ("heatmap", "speedup", "copy_cost", "transfer_overhead", "bandwidth", "roofline", "throughput", "memory",
                "round_trip")
# Figures with a panel (or a heatmap row) per op and dtype: past a page's worth of panels they
# become pages of whole op families, <name>-1.pdf/.png, <name>-2, ... report/style.py's grid
# holds 6 × 6 panels on a page.
BY_FAMILY = ("heatmap", "speedup", "copy_cost", "transfer_overhead", "throughput", "memory", "round_trip")
PAGE_PANELS = 36
COMPARE_FIGURE_NAMES = ("speedups", "ratio", "break_even", "bandwidth")
TABLES = ("timings", "speedups", "thread_scaling", "decisions", "decision_sizes", "losses", "controls", "memory",
          "resident", "states", "flags", "transfer", "roofs")
SETTINGS = "settings.json"  # beside environment.json: the measure and compile settings of the run
JUDGING = "judging.json"  # beside the tables: the policy (δ, confidence level) they were judged with
LATEX_TABLES = ("timings", "speedups", "transfer", "decisions")  # tables/<name>.tex of a machine
# Folders below raw/ besides one per op: per-device records, round records, unfinished rounds.
DEVICE_RECORD_DIRS = ("roofs", "transfer")
ROUNDS_DIR = "rounds"
PARTIAL_DIR = ".partial"
COMPILE_CACHE_DIR = ".compile-cache"  # the compiled workers' caches, shared by a run's rounds
NOT_CELL_DIRS = (*DEVICE_RECORD_DIRS, ROUNDS_DIR, PARTIAL_DIR, COMPILE_CACHE_DIR)
# Folders of results/<machine>/ itself; with NOT_CELL_DIRS, names no op or kernel may take
# (a kernel's records live in raw/<name>/, and readers skip these folders).
MACHINE_DIRS = ("raw", "tables", "figures", "logs", "report", "compare", "bundles")
RESERVED_NAMES = tuple(sorted({*NOT_CELL_DIRS, *MACHINE_DIRS}))


def figure_parts(ops, dtypes) -> dict[str, list[str]]:
    """The ops each figure file of the BY_FAMILY kind shows, by the suffix of its name: one
    file ("") for a grid that fits a page, else pages "1", "2", ... of whole families in
    catalogue order (a family larger than a page fills pages of its own)."""
    ordered = op_order(ops)
    per_page = max(1, PAGE_PANELS // max(1, len(set(dtypes))))
    if len(ordered) <= per_page:
        return {"": ordered}
    families: dict[str, list[str]] = {}
    for op in ordered:
        families.setdefault(family_of(op), []).append(op)
    pages: list[list[str]] = []
    for members in families.values():
        if pages and len(pages[-1]) + len(members) <= per_page:
            pages[-1] += members
        else:
            pages += [members[k:k + per_page] for k in range(0, len(members), per_page)]
    return {str(i): page for i, page in enumerate(pages, start=1)}


def figure_names(ops, dtypes) -> list[str]:
    """Every figure file of a machine (without its extension), for a grid of these ops and dtypes."""
    parts = figure_parts(ops, dtypes)
    return [f"{name}-{suffix}" if suffix else name for name in FIGURE_NAMES
            for suffix in (parts if name in BY_FAMILY else [""])]


def machine_figures(tables) -> list[str]:
    """The figure files of a machine's tables: from the ops and dtypes its timings hold."""
    timings = tables["timings"]
    return figure_names(timings["op"], timings["dtype"]) if len(timings) else list(FIGURE_NAMES)


def split_figure_name(name: str) -> tuple[str, str]:
    """("speedup", "2") from "speedup-2"; ("roofline", "") from "roofline"."""
    for base in sorted(FIGURE_NAMES, key=len, reverse=True):
        if name == base or name.startswith(base + "-"):
            return base, name[len(base) + 1:]
    raise ValueError(f"{name!r} is no figure of this pipeline")


def record_relpath(cell: Cell, round_index: int) -> str:
    """Path of a cell's record from one round, below results/<machine>/raw/."""
    return f"{cell.key}/p{round_index}.json"


def grid_record_paths(raw: str, cells, rounds: int) -> list[tuple[int, str]]:
    """(round, path) of every record a finished run of `rounds` rounds holds below `raw`."""
    return [(k, f"{raw}/{record_relpath(cell, k)}") for k in range(1, rounds + 1) for cell in cells]


def extra_record_paths(raw: str, cells, rounds: int) -> list[str]:
    """Records of extra rounds (beyond `rounds`) that are newer than their cell's regular
    ones: a regular record taken again later (other settings) makes older extras stale."""
    found = []
    for cell in cells:
        folder = Path(raw) / cell.key
        regular = [folder / f"p{k}.json" for k in range(1, rounds + 1)]
        newest = max((p.stat().st_mtime for p in regular if p.exists()), default=0.0)
        for path in sorted(folder.glob("p*.json")):
            k = path.stem[1:]
            if k.isdigit() and int(k) > rounds and path.stat().st_mtime >= newest:
                found.append(str(path))
    return found


def partial_dir(round_index: int) -> str:
    """Where a round keeps its finished records until the whole round is done: the round's
    records appear together, and an interrupted round resumes where it stopped."""
    return f"{PARTIAL_DIR}/p{round_index}"


def partial_relpath(cell: Cell, round_index: int) -> str:
    return f"{partial_dir(round_index)}/{cell.key}.json"


def round_relpath(round_index: int) -> str:
    """A round's own record (its manifest): its worker processes, its bouts and the system
    check around it. Named apart from the cells' p<k>.json records."""
    return f"{ROUNDS_DIR}/round-{round_index}.json"


def extra_round_relpath(round_index: int) -> str:
    """An extra round's own record (extra-<k>, so that raising measure.processes later still
    runs its regular round k for the cells the extra round did not measure)."""
    return f"{ROUNDS_DIR}/extra-{round_index}.json"


# Round records of results from before they were named apart from the cells' records.
ROUND_PATTERNS = {"planned": ("round-*.json", "p*.json"), "extra": ("extra-*.json", "x*.json")}


def round_records(raw, kind: str) -> list:
    """The round records of one kind ("planned" or "extra") below `raw`, old names too."""
    folder = Path(raw) / ROUNDS_DIR
    found = {path for pattern in ROUND_PATTERNS[kind] for path in folder.glob(pattern)}
    number = lambda path: int("".join(filter(str.isdigit, path.stem)) or 0)  # round-10 after round-9
    return sorted(found, key=lambda path: (number(path), path.name))


SETTLE_RELPATH = f"{ROUNDS_DIR}/settle.json"  # what the extra rounds did, and why they stopped
