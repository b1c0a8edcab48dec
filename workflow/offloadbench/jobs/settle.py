"""The settling job: extra rounds after the planned ones, until the verdicts settle.

It reads every record, asks analysis/settle.py which cells an extra round should measure
(replacements of disturbed or outlying processes, both sides of undecided comparisons),
and runs that round as the round job does (`jobs.round --only`), under the host lock. It
stops when nothing is left to measure, when every cell that needs more is at
`measure.max_processes`, or when the extra rounds would pass `measure.extra_time_fraction`
of the time the planned rounds took (their wall time, from their own records). It writes raw/rounds/settle.json: what each extra
round measured and why, and how many comparisons stayed undecided.

Interrupted, it plans again from the records on disk: the same round, which then resumes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from .. import layout
from ..analysis.measured import Analysis, grid_records, load_cells
from ..analysis.pairs import comparisons
from ..analysis.settle import plan_round
from ..logs import run_job, tell
from ..records import load_environment, load_round, write_json_atomic
from ..run_settings import RunSettings
from ..units import fmt_duration
from ..verdicts import UNDECIDED

WORKER_START_S = 1.0  # per worker an extra round starts, on top of its cells' own time
NO_EXTRA = "measure.max_processes allows no extra round"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Extra rounds until the verdicts settle.")
    for name in ("machine", "grid", "analysis", "environment", "raw", "out"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--settings", required=True, help="the run's settings file (run_settings.py)")
    parser.add_argument("--kernels", default="[]")
    parser.add_argument("--log")
    return parser.parse_args(argv)


class Settling:
    def __init__(self, args: argparse.Namespace, terminal):
        self.args, self.terminal = args, terminal
        self.raw = Path(args.raw)
        self.settings = RunSettings.read(args.settings).measure
        self.grid = json.loads(args.grid)
        self.kernels = json.loads(args.kernels)
        self.analysis = Analysis.from_config(json.loads(args.analysis))
        self.environment = load_environment(args.environment)
        self.planned = self.settings.processes
        self.cap = self.settings.max_processes

    def cells(self):
        paths = grid_records(str(self.raw), self.grid, self.planned, self.kernels, self.environment)
        return load_cells(paths, self.environment, self.analysis)

    def extra_rounds(self) -> list[int]:
        """The extra rounds already run (their own records, rounds/extra-<k>.json)."""
        return [load_round(p).round for p in layout.round_records(self.raw, "extra")]

    def planned_cell_seconds(self, cells) -> float:
        """The cells' own measuring seconds in the planned rounds, from the records: a planned
        round rerun with nothing to do leaves its records, not its time."""
        return sum(r.seconds for mc in cells for r in mc.records if r.round <= self.planned)

    def round_seconds(self, kind: str) -> float:
        """The wall seconds the "planned" (or "extra") rounds took, from their own records."""
        return sum(load_round(p).took_s or 0.0 for p in layout.round_records(self.raw, kind))

    def budget_s(self, cells) -> float:
        """A share of the planned rounds' time: their wall time, or their cells' own seconds
        where that is larger (a planned round rerun with nothing to do took no time)."""
        planned = max(self.round_seconds("planned"), self.planned_cell_seconds(cells))
        return self.settings.extra_time_fraction * planned

    def overhead(self, cells) -> float:
        """Wall time per second of cell time in the planned rounds: worker starts, compiles, pauses."""
        cell_s = self.planned_cell_seconds(cells)
        return max(1.0, self.round_seconds("planned") / cell_s) if cell_s > 0 else 1.0

    def predicted_s(self, cells, chosen) -> float:
        """The next round's time: its cells' mean time per process so far, plus worker starts."""
        by_cell = {mc.cell: mc for mc in cells}
        seconds = sum(sum(r.seconds for r in by_cell[c].records) / max(1, len(by_cell[c].records)) for c in chosen)
        workers = {(c.library, c.device, c.threads, c.mode) for c in chosen}
        return seconds * self.overhead(cells) + WORKER_START_S * len(workers)

    def run(self) -> int:
        if self.cap <= self.planned:  # no extra round can run: nothing to plan, nor to read
            return self.close(NO_EXTRA, budget_s=0.0, spent_s=0.0, extra_rounds=[], comparisons=0,
                              undecided_at_start=[], undecided_at_end=[], rounds_needed={}, cannot_decide={},
                              stopped=NO_EXTRA)
        history = []
        cells = self.cells()
        budget = self.budget_s(cells)
        undecided_at_start = [c.name for c in comparisons(cells) if c.verdict == UNDECIDED]
        stopped = "every verdict settled"
        cannot_decide: dict[str, dict] = {}
        while self.cap > self.planned:
            whole = plan_round(cells, self.cap)
            cannot_decide = whole.cannot_decide
            spent = self.round_seconds("extra")
            if not whole.cells:
                stopped = "nothing left to measure" if not whole.capped and not cannot_decide else \
                    "what is left cannot be decided within measure.max_processes"
                break
            # the likeliest decisions first, as many as the rest of the budget buys
            plan = whole.within(lambda chosen, cells=cells, spent=spent:
                                spent + self.predicted_s(cells, chosen) <= budget)
            if not plan.cells:
                stopped = f"the time budget ({fmt_duration(budget)}, measure.extra_time_fraction) reached"
                break
            k = max([self.planned, *self.extra_rounds()]) + 1
            tell(self.terminal, f"settling: extra round {k} for {len(plan.cells)} cells: {len(plan.undecided)} "
                                f"undecided comparisons, {len(plan.replacing)} processes to replace")
            code = self.measure(k, plan.cells)
            if code != 0:
                return code
            history.append({"round": k, "cells": len(plan.cells), "undecided": plan.undecided,
                            "replacing": plan.replacing,
                            "why": {cell.key: why for cell, why in plan.cells.items()}})
            cells = self.cells()
        final = comparisons(cells)
        still = [c.name for c in final if c.verdict == UNDECIDED]
        rounds_needed = Counter(name for entry in history for name in entry["undecided"])
        return self.close(
            f"{len(rounds_needed)} comparisons needed extra rounds ({len(history)} in all); {len(still)} of "
            f"{len(final)} stayed undecided; {stopped}",
            budget_s=budget, spent_s=self.round_seconds("extra"), extra_rounds=history, comparisons=len(final),
            undecided_at_start=undecided_at_start, undecided_at_end=still, rounds_needed=rounds_needed,
            cannot_decide={name: why for name, why in cannot_decide.items() if name in still}, stopped=stopped)

    def close(self, line: str, **summary) -> int:
        """Write raw/rounds/settle.json and say `line`; no round compiles after this one."""
        write_json_atomic(self.args.out, {"kind": "settle", "planned_rounds": self.planned, "max_processes": self.cap,
                                          **summary})
        shutil.rmtree(self.raw / layout.COMPILE_CACHE_DIR, ignore_errors=True)
        tell(self.terminal, f"settling: {line}")
        return 0

    def measure(self, k: int, chosen) -> int:
        args = self.args
        command = [sys.executable, "-m", "offloadbench.jobs.round", "--round", str(k), "--processes", str(self.planned),
                   "--machine", args.machine, "--grid", args.grid, "--settings", args.settings,
                   "--environment", args.environment, "--raw", args.raw, "--kernels", args.kernels,
                   "--only", json.dumps(sorted(c.key for c in chosen))]
        if args.log:
            command += ["--log", f"{args.log}.x{k}"]
        return subprocess.run(command, check=False, stderr=self.terminal).returncode  # its progress lines reach the user


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run_job(args.log, lambda terminal: Settling(args, terminal).run(), f"settling {args.machine}")


if __name__ == "__main__":
    sys.exit(main())
