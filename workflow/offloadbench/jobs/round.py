"""One round of the run: every cell measured once, in fresh worker processes, one group at
a time, each group in one bout (jobs/bout.py).

    python -m offloadbench.jobs.round --round 2 --processes 3 --machine laptop ...

The round takes the host's benchmark lock, starts a worker process per library, device,
threads and mode (and twin) at once, and measures the groups of its cells in turn
(schedule.groups). On the CPU each worker forks a fresh process for each of its cells
(jobs/worker.py), so no cell inherits what another allocated; a cell's process that hangs
past the cell's time limit or dies (the kernel's OOM killer, a segfault) turns that cell
into a `timeout`, `oom` or `error` record, and the round goes on (a fresh worker after a
hang), so a failing cell stops no other. Cells of a device this machine lacks are recorded
as skipped without starting a process.

What does not change between rounds is measured once per run: a cell's check against
float64, its FLOP and byte model and its peak memory come from the first round that
measured it (`carried`, from jobs/earlier.py), and a cell that failed that check is not
measured again. The round's record splits its wall time into the workers' start, each
phase of the cells' preparation and finish, the bouts' sampling and their pauses
(`split_s`).

The round trusts only what answers its command: every command carries a fresh token, and
an event counts only with that token and the form the command expects. A line a kernel
wrote to the measuring channel, a `Done` it forged, a channel it closed: each ends that
cell as an error with one line saying so, and its worker is replaced. A `Done` whose record
is not where the round asked for it is an error too. `measure.timeout_s` limits a cell's
own time, its preparation, turns and finish together; a worker that does not start within
it leaves `timeout` records for its cells.

Finished records wait until the round ends (jobs/staging.py), so an interrupted round's
rerun redoes only the cells it had not finished (in bouts of their own). The workers are
started, restarted and retired by jobs/pool.py; the messages they exchange with this job,
their channels and a dead worker's reason are in jobs/protocol.py. This process imports
nothing heavy; the workers load numpy and torch.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path

from .. import estimate, grid, layout, libraries, schedule
from ..allocation import plan_cycles
from ..catalogue import SPECS
from ..cells import Cell
from ..kernels import read_kernel_files
from ..logs import run_job, tell
from ..measure import system
from ..measure.provenance import host_facts, utc_now, where
from ..measure.settings import Settings
from ..records import FAILED, cell_record, load_environment, write_json_atomic
from ..run_settings import RunSettings
from ..units import fmt_duration
from .bout import Bout
from .bout import method as bout_method
from .earlier import EarlierRecords
from .environment import foreign_host
from .lock import host_lock
from .pool import Refused, WorkerFailed, Workers
from .protocol import (
    WROTE_TO_CHANNEL,
    Died,
    Done,
    Fault,
    Forked,
    Message,
    Phase,
    Prepared,
    ProtocolFault,
    WorkerProcess,
    death_reason,
    oom_kills,
)
from .staging import Staging

PROGRESS_EVERY_S = 20.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Measure every cell of the grid once, in fresh processes.")
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True, help="measure.processes: the planned rounds")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--grid", required=True, help="the config's grid section as JSON")
    parser.add_argument("--settings", required=True, help="the run's settings file (run_settings.py)")
    parser.add_argument("--environment", required=True, help="environment.json of this machine label")
    parser.add_argument("--raw", required=True, help="results/<machine>/raw")
    parser.add_argument("--kernels", default="[]", help="the config's kernels files as JSON")
    parser.add_argument("--log", help="the job's log; without it, stderr stays where it is")
    parser.add_argument("--only", help="an extra round: the keys of the cells it measures, as JSON (jobs/settle)")
    return parser.parse_args(argv)


class Round:
    def __init__(self, args: argparse.Namespace, terminal):
        self.args, self.terminal = args, terminal
        self.raw = Path(args.raw).resolve()  # every record path absolute, whatever a kernel does to its folder
        self.run_settings = RunSettings.read(args.settings)
        self.settings = self.run_settings.measure
        self.timeout_s = self.settings.timeout_s
        self.min_cycles = self.settings.min_cycles  # the fewest cycles of a bout
        self.kernels = read_kernel_files(json.loads(args.kernels), SPECS)
        self.environment = load_environment(args.environment)
        self.cells = grid.expand(json.loads(args.grid), self.kernels, self.environment.usable_devices)
        self.extra = args.only is not None
        if self.extra:  # an extra round measures only what settling asked for
            only = set(json.loads(args.only))
            self.cells = [cell for cell in self.cells if cell.key in only]
        self.name = f"extra round {args.round}" if self.extra else f"round {args.round}/{args.processes}"
        self.bouts: list[dict] = []
        self.done = 0
        self.expected_done = 0.0
        self.todo: list[Cell] = []
        self.statuses: dict[Cell, str] = {}  # of every cell with a record, for the manifest
        self.carried: dict[Cell, dict] = {}  # what earlier rounds measured once of each cell (check, memory)
        self.split: Counter = Counter()  # seconds of the round by what they went to (split_s)
        self.reported: dict[Cell, dict] = {}  # the phases each cell's process reported when prepared
        self.spent: dict[Cell, float] = {}  # seconds each cell's commands took: its share of timeout_s
        self.oom_before: dict[Cell, int | None] = {}  # the OOM killer's count when each cell began
        self.facts = host_facts()
        self.earlier = EarlierRecords(self.raw, args.round, self.extra, self.settings.recorded(), self.kernels)
        self.staging = Staging(self.raw, args.round)
        self.pool = Workers(args, self.run_settings, self.environment, self.raw, self.split)

    def device_reason(self, cell: Cell) -> str | None:
        """Why this machine cannot measure the cell at all (environment.json), or None."""
        missing = self.environment.library_reason(cell.library)
        if missing:
            return missing
        seam = libraries.needs_torch(cell.library, cell.compiled, cell.device)
        reason = self.environment.device_reason(cell.device) if seam else None
        torch_compiles = cell.compiled and libraries.runtime(cell.library, cell.compiled).uses_torch
        return reason or (self.environment.compile_reason(cell.device) if torch_compiles else None)

    # the round
    def run(self) -> int:
        refusal = foreign_host(self.args.environment, self.facts["fingerprint"])
        if refusal:
            raise Refused(refusal)
        for cell in self.cells:
            status = self.earlier.finished_status(self.staging.final(cell), self.staging.partial(cell))
            if status:
                self.statuses[cell] = status
                continue
            facts = None if self.device_reason(cell) else self.earlier.facts(cell)
            if facts and "failed" in facts:  # a wrong result is not measured again
                self.write_failure(cell, "error", f"{facts['failed']} (round {facts['round']}, not measured again)")
                continue
            if facts:
                self.carried[cell] = facts
            self.todo.append(cell)
        roofs = estimate.roofs_for(self.raw.parent)  # each cell's predicted seconds, for the progress lines
        self.costs = {c: 0.0 if self.device_reason(c) else estimate.cell_seconds(c, self.settings, roofs, self.kernels)
                      for c in self.todo}
        # the estimate of starting the workers
        self.workers_s = estimate.workers_seconds([c for c in self.todo if not self.device_reason(c)])
        self.estimated_s = sum(self.costs.values()) + self.workers_s + estimate.ROUND_CLOSE_S
        started = utc_now()
        lock_wait, before, after = 0.0, None, None
        if self.todo:
            with host_lock(label=f"{self.args.machine}, {self.name}",
                           timeout_s=self.settings.lock_timeout_s,
                           say=lambda line: tell(self.terminal, line)) as lock_wait:
                before = system.snapshot()
                self.began = self.last_report = time.monotonic()
                try:
                    self.pool.start({cell.worker for cell in self.todo if not self.device_reason(cell)})
                    separate = self.settings.pairing == "separate"
                    groups = schedule.groups(self.todo, self.args.round, separate)
                    plans = {} if separate else plan_cycles(self.earlier.bouts(), [g[0].group_name for g in groups],
                                                            self.min_cycles)
                    for cells in groups:
                        bout = Bout(self, cells, plans.get(cells[0].group_name)).run()
                        self.bouts.append(asdict(bout))
                        self.split["sampling"] += bout.sampling_s
                        self.split["paused"] += bout.paused_s
                    for bout in self.bouts:  # each group's share of starting the workers
                        bout["process_s"] += self.split["start"] / len(self.bouts)
                finally:
                    self.pool.close()
                after = system.snapshot()
        self.staging.publish(self.cells)
        self.write_manifest(started, lock_wait, before, after)
        if self.todo:
            tell(self.terminal, f"{self.name}: {len(self.todo)} cells in {fmt_duration(time.monotonic() - self.began)}")
        return 0

    def cell_done(self, cell: Cell, status: str, reason: str) -> None:
        """A cell of the round has its record: say why where it failed, and count it for the
        progress lines."""
        self.statuses[cell] = status
        if status in FAILED:
            tell(self.terminal, f"cell {cell.label}: {status}: {reason}")
        self.done += 1
        self.expected_done += self.costs.get(cell, 0.0)
        self.report_progress()

    def command(self, cell: Cell, command: Message, expect: type[Message]) -> Message | None:
        """Send the cell's worker one command and wait for its answer of type `expect`; None
        when the cell ended instead: it failed (its process wrote the record), or its process
        hung past the cell's time limit, died, or broke the protocol (this job writes the
        record)."""
        kind = command.tag
        before = self.pool.workers.get(cell.worker)
        if kind != "prepare" and before is not None and cell.key in before.prepared and before.proc.poll() is not None:
            status, reason = death_reason(before.proc.returncode, self.oom_before.get(cell))
            return self.cell_failed(cell, status, f"{reason} (its worker, between its commands)", before)
        try:
            worker = self.pool.get(cell.worker)
        except WorkerFailed as failed:
            return self.cell_failed(cell, failed.status, failed.reason, None)
        if kind != "prepare" and cell.key not in worker.prepared:
            return self.cell_failed(cell, "error", f"its worker process ended between its commands (before {kind})",
                                    worker)
        if kind == "prepare":
            worker.cells += 1
            command = replace(command, position=worker.cells, carried=self.carried.get(cell))
            self.oom_before[cell] = oom_kills()
        token = secrets.token_hex(8)
        began = time.monotonic()
        deadline = began + max(0.0, self.timeout_s - self.spent.get(cell, 0.0))  # the limit is the cell's
        phase, ending, died, sent = kind, "ended", None, True
        try:
            worker.send(command, token)
        except OSError:  # its worker is gone
            sent = False
        while sent:
            try:
                received = worker.next_event(deadline)
            except EOFError:
                break
            except ProtocolFault as fault:
                ending = str(fault)
                break
            if received is None:
                ending = "timeout"
                break
            sender, event = received
            if sender == worker.token:  # the worker's own: a fork, or a cell's process that died
                if isinstance(event, Died) and event.key == cell.key:
                    died = event.returncode
                    break
                if isinstance(event, Forked) and event.key == cell.key:
                    worker.cell_pid = event.pid
                continue  # late news of an earlier cell, whose record is written
            if sender == token and isinstance(event, Phase):
                phase = event.phase[:80]
                continue
            if sender != token or not isinstance(event, expect | Done | Fault) or event.key != cell.key:
                ending = WROTE_TO_CHANNEL  # a stray line, a stale or forged event
                break
            if isinstance(event, Fault):
                ending = (event.reason or WROTE_TO_CHANNEL)[:200]
                break
            self.spent[cell] = self.spent.get(cell, 0.0) + time.monotonic() - began
            self.count_split(cell, kind, time.monotonic() - began, getattr(event, "phases_s", None))
            if isinstance(event, Prepared):
                worker.prepared.add(cell.key)
                worker.cell_pid = event.pid
            if isinstance(event, Done):
                worker.cell_pid = None
                worker.prepared.discard(cell.key)
                if not self.staging.partial(cell).exists():  # a `Done` without the record it stands for
                    return self.cell_failed(cell, "error", "it said it was done, but wrote no record", worker)
                self.cell_done(cell, event.status, event.reason)
                if event.replace:  # its code left what cannot be undone: a fresh worker next
                    self.pool.retire([worker])
            return event if isinstance(event, expect) else None
        code = died if died is not None else worker.kill()  # a hung or faulty worker is replaced
        if ending == "timeout":
            return self.cell_failed(cell, "timeout", f"exceeded the cell time limit of {self.timeout_s:g} s during "
                                                     f"{phase}", worker)
        if died is None and ending != "ended":  # a protocol fault
            return self.cell_failed(cell, "error", f"{ending} (during {phase})", worker)
        status, reason = death_reason(code, self.oom_before.get(cell))
        return self.cell_failed(cell, status, f"{reason} (during {phase})", worker)

    def cell_failed(self, cell: Cell, status: str, reason: str, worker: WorkerProcess | None) -> None:
        """The cell ended without its process's record: this job writes one and says why."""
        if worker is not None:
            worker.cell_pid = None
            worker.prepared.discard(cell.key)
        self.write_failure(cell, status, reason, worker)
        self.cell_done(cell, status, reason)

    def count_split(self, cell: Cell, kind: str, seconds: float, phases: dict | None) -> None:
        """A prepare or finish command's wall time, by the phases its cell's process reported
        (the seconds of each so far: a finish counts what came after the preparation); what
        they leave (the fork, the messages) is the hand-over's. Turns are the bout's."""
        if kind == "turn":
            return
        phases = {str(name): float(value) for name, value in (phases or {}).items()
                  if isinstance(value, int | float) and value >= 0}
        before = self.reported.pop(cell, {}) if kind == "finish" else {}
        if kind == "prepare":
            self.reported[cell] = phases
        new = {name: max(0.0, value - before.get(name, 0.0)) for name, value in phases.items()}
        self.split.update(new)
        self.split["handover"] += max(0.0, seconds - sum(new.values()))

    def write_failure(self, cell: Cell, status: str, reason: str, worker: WorkerProcess | None = None) -> None:
        """The cell's record, written by this job (`worker`: the one it failed in, if any)."""
        now = utc_now()
        process = {
            "round": self.args.round, "processes": self.args.processes, "worker": cell.worker.name,
            "pid": worker.proc.pid if worker else None, "position": worker.cells if worker else None, **where(),
        }
        info = self.kernels.get(cell.op)  # its file's hash: a rerun measures it again only once the file changed
        record = cell_record(
            cell, self.args.machine, process, status=status, reason=reason, started_at=now, finished_at=now,
            provenance=self.facts, settings=self.settings.recorded(), measured={"op_info": info.describe()} if info else None,
        )
        write_json_atomic(self.staging.partial(cell), record)
        self.statuses[cell] = status

    def report_progress(self) -> None:
        """Cells done and time left, every 20 s (estimate.remaining_s): the estimate alone for
        the round's first tenth, then blended with the round's own pace. The workers' start,
        paid before the first cell, counts as done; the round's close after its last cell
        is still to come."""
        now = time.monotonic()
        if now - self.last_report < PROGRESS_EVERY_S or self.done == len(self.todo):
            return
        self.last_report = now
        left = estimate.remaining_s(now - self.began, self.workers_s + self.expected_done, self.estimated_s)
        tell(self.terminal, f"{self.name}: {self.done}/{len(self.todo)} cells, "
                            f"about {fmt_duration(left)} left in this round")

    def write_manifest(self, started: str, lock_wait: float, before: dict | None, after: dict | None) -> None:
        took = time.monotonic() - self.began if self.todo else 0.0
        # the round's wall time by what it went to; `other` is the rest (the lock, the system
        # check, the records moved into place)
        split = {name: round(value, 4) for name, value in sorted(self.split.items())}
        split["other"] = round(max(0.0, took - sum(self.split.values())), 4)
        manifest = layout.extra_round_relpath if self.extra else layout.round_relpath
        write_json_atomic(self.raw / manifest(self.args.round), {
            "kind": "round",
            "machine": self.args.machine,
            "round": self.args.round,
            "processes": self.args.processes,
            "extra": self.extra,
            "started_at": started,
            "finished_at": utc_now(),
            "cells": len(self.cells),
            "measured_now": len(self.todo),
            "estimated_s": self.estimated_s,
            "took_s": took,
            "split_s": split,
            "statuses": dict(Counter(self.statuses.values())),
            "lock_wait_s": lock_wait,
            "workers": self.pool.history,
            "launchers": [launcher.as_dict() for launcher in self.pool.launchers.values()],
            "bouts": self.bouts,
            "system_before": before,
            "system_after": after,
            "advice": system.advice(before) if before else [],
            # the method's thresholds as this code applied them: the report words its method from these
            "method": {**Settings.from_run(self.run_settings).method(),
                       **bout_method(self.min_cycles)},
            **where(),
        })


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run_job(args.log, lambda terminal: Round(args, terminal).run(), f"round {args.round} of {args.machine}")


if __name__ == "__main__":
    sys.exit(main())
