"""Coverage benchmark: how often does a ratio's interval hold the true ratio, on a machine
whose speed drifts?

A simulated machine times two cells A and B whose true time ratio is known. Its speed
moves in time (a common factor at every instant: a random walk, and optionally a slow fade
such as a turbo boost running out), each worker process has a speed factor of its own
(its memory layout, where its pages landed), and each sample has noise. Each trial makes
the records a run would write, in the record format, and hands them to the analysis the
pipeline uses (analysis.measured), in two ways:

- **paired in time**: A and B take turns in one bout, one sample each per cycle, in a
  balanced random order (what the rounds do now);
- **separate processes**: each cell samples alone, B after A, in the same rounds (what
  the rounds did before bouts; the analysis then pairs them by round only).

It prints, per scenario and method, the share of intervals that hold the true ratio
(their coverage; the confidence level asked for is 95%) with its exact binomial interval,
and the median half-width.

    python benchmarks/coverage.py            # 2,000 trials per scenario and method
    python benchmarks/coverage.py --smoke    # 100 trials (the test suite)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

import numpy as np
from offloadbench.analysis.measured import Analysis, group_records
from offloadbench.cells import Cell
from offloadbench.records import CellRecord
from offloadbench.stats import binomial_interval
from offloadbench.verdicts import Judging

A = Cell("matmul", "numpy", "cpu", "float32", 1024, "1")
B = Cell("matmul", "torch", "cpu", "float32", 1024, "1")
TRUE_RATIO = 1.15  # B's time over A's, the torch/numpy ratio of the issue that asked for pairing
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Machine:
    """How the simulated machine's speed moves (all as sd of log time)."""

    name: str
    walk: float = 0.02  # per turn: the random walk of the machine's speed (about 30% over 200 turns)
    fade: float = 0.0  # the machine slows by this much (log) over one round, in a straight line
    process: float = 0.03  # each worker process's own factor
    noise: float = 0.02  # each sample's own


SCENARIOS = (
    Machine("drifting speed"),
    Machine("drifting speed, fading turbo", fade=0.25),
    Machine("quiet machine", walk=0.002, process=0.01, noise=0.01),
)


def record(cell: Cell, round_: int, rounds: int, seconds: list[float], cycles: list[int] | None,
           bout: str | None) -> CellRecord:
    """A cell's record of one round as a worker writes it (only what the analysis reads)."""
    phase = {"samples_s": seconds, **({"cycles": cycles} if cycles is not None else {})}
    return CellRecord.from_json({
        "schema_version": 3, "cell": cell.as_dict(), "machine": "sim", "status": "ok", "reason": "",
        "process": {"round": round_, "processes": rounds, "worker": cell.worker.name},
        "samples_s": seconds, "phases": {"compute": phase},
        **({"bout": {"id": bout, "group": cell.group_name, "cycles": len(seconds)}} if bout else {}),
    })


def trial(machine: Machine, rounds: int, cycles: int, paired: bool, rng: np.random.Generator) -> list[CellRecord]:
    """The records of one simulated run: `rounds` rounds, A and B `cycles` samples each."""
    records = []
    for k in range(1, rounds + 1):
        turns = 2 * cycles
        speed = np.cumsum(rng.normal(0, machine.walk, turns)) + machine.fade * np.arange(turns) / turns
        own = {A: rng.normal(0, machine.process), B: rng.normal(0, machine.process)}
        base = {A: math.log(1e-3), B: math.log(1e-3 * TRUE_RATIO)}
        if paired:  # one turn each per cycle; who goes first alternates at random, balanced
            first = rng.permutation(np.arange(cycles) % 2)
            at = {A: 2 * np.arange(cycles) + first, B: 2 * np.arange(cycles) + 1 - first}
        else:  # A's process samples alone, then B's
            at = {A: np.arange(cycles), B: cycles + np.arange(cycles)}
        for cell in (A, B):
            logs = base[cell] + own[cell] + speed[at[cell]] + rng.normal(0, machine.noise, cycles)
            records.append(record(cell, k, rounds, np.exp(logs).tolist(), list(range(cycles)) if paired else None,
                                  f"bout-{k}" if paired else None))
    return records


@dataclass
class Tally:
    held: int = 0
    trials: int = 0
    half_widths: list[float] | None = None
    pairing: str = ""

    def add(self, low: float, high: float, value: float) -> None:
        self.trials += 1
        self.held += low <= TRUE_RATIO <= high
        self.half_widths = (self.half_widths or []) + [(math.log(high) - math.log(low)) / 2]


def coverage(machine: Machine, rounds: int, cycles: int, paired: bool, trials: int, seed: int) -> Tally:
    rng = np.random.default_rng(seed)
    analysis = Analysis(resamples=300, judging=Judging(confidence=CONFIDENCE))
    tally = Tally()
    for _ in range(trials):
        cells = {mc.cell: mc for mc in group_records(trial(machine, rounds, cycles, paired, rng), analysis, "sim")}
        ratio = cells[B].ratio(cells[A], "compute")
        tally.pairing = ratio.pairing
        tally.add(ratio.low, ratio.high, ratio.value)
    return tally


def table(trials: int, rounds: int, cycles: int, seed: int = 0) -> list[tuple[Machine, str, Tally]]:
    rows = []
    for i, machine in enumerate(SCENARIOS):
        for paired in (True, False):
            method = "paired in time (bouts)" if paired else "separate processes"
            rows.append((machine, method, coverage(machine, rounds, cycles, paired, trials, seed + 2 * i + paired)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="processes per cell (measure.processes)")
    parser.add_argument("--cycles", type=int, default=30, help="samples per cell and round")
    args = parser.parse_args(argv)
    trials = 100 if args.smoke else args.trials
    print(f"coverage of the {CONFIDENCE:.0%} interval of B/A = {TRUE_RATIO} ({trials} simulated runs per row, "
          f"{args.rounds} rounds of {args.cycles} samples per cell)")
    print("| machine | method | analysed as | coverage (95% CI) | median half-width |")
    print("|---|---|---|---|---|")
    for machine, method, tally in table(trials, args.rounds, args.cycles):
        low, high = binomial_interval(tally.held, tally.trials, 0.95)
        half = statistics.median(tally.half_widths or [math.nan])
        print(f"| {machine.name} | {method} | {tally.pairing} | {tally.held / tally.trials:.1%} "
              f"({low:.1%}–{high:.1%}) | ±{math.expm1(half):.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
