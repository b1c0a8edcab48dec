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
measured it (`carried`), and a cell that failed that check is not measured again. The
round's record splits its wall time into the workers' start, each phase of the cells'
preparation and finish, the bouts' sampling and their pauses (`split_s`).

The round trusts only what answers its command: every command carries a fresh token, and
an event counts only with that token and the form the command expects. A line a kernel
wrote to the measuring channel, a `done` it forged, a channel it closed: each ends that
cell as an error with one line saying so, and its worker is replaced. A `done` whose record
is not where the round asked for it is an error too. `measure.timeout_s` limits a cell's
own time, its preparation, turns and finish together; a worker that does not start within
it leaves `timeout` records for its cells.

Finished records wait in raw/.partial/p<k>/ until the round ends (every path absolute, so
nothing a kernel does to its working directory moves one), and a rerun picks them up: an interrupted round redoes only the cells it had not finished (in bouts of their own).
This process imports nothing heavy; the workers load numpy and torch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from .. import estimate, grid, layout, schedule
from ..allocation import plan_cycles
from ..catalogue import SPECS, measured_scale
from ..cells import ITEMSIZE, Cell, WorkerSpec
from ..errors import UserError
from ..kernels import read_kernel_files
from ..logs import run_job, tell
from ..machine import mismatch
from ..measure import devices, system
from ..measure.allocator import STEADY, allocator_env
from ..measure.provenance import host_facts, utc_now, where
from ..measure.settings import Settings
from ..measure.threads import thread_env
from ..records import (
    FAILED,
    CellRecord,
    MalformedRecord,
    cell_record,
    load_environment,
    load_record,
    load_round,
    read_json,
    settings_differ,
    write_json_atomic,
)
from ..units import fmt_duration
from .bout import Bout
from .bout import method as bout_method
from .launcher import Launcher, LauncherFailed
from .launcher import available as launcher_available
from .lock import DEFAULT_TIMEOUT_S, host_lock
from .protocol import WROTE_TO_CHANNEL, ProtocolFault, WorkerProcess, well_formed
from .worker import EXIT_REFUSED

PROGRESS_EVERY_S = 20.0
WRONG_RESULT = "wrong result"  # how the reason of a cell that failed its check begins (measure/cell.py)


class Refused(UserError):
    """The round must stop without measuring (another machine's label, say)."""


class WorkerFailed(Exception):
    """A worker did not start: its cells get records with `status` and `reason`."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Measure every cell of the grid once, in fresh processes.")
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True, help="measure.processes: the planned rounds")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--grid", required=True, help="the config's grid section as JSON")
    parser.add_argument("--settings", required=True, help="the config's measure section as JSON")
    parser.add_argument("--environment", required=True, help="environment.json of this machine label")
    parser.add_argument("--raw", required=True, help="results/<machine>/raw")
    parser.add_argument("--kernels", default="[]", help="the config's kernels files as JSON")
    parser.add_argument("--compile", default="{}", help="the config's compile section as JSON")
    parser.add_argument("--log", help="the job's log; without it, stderr stays where it is")
    parser.add_argument("--only", help="an extra round: the keys of the cells it measures, as JSON (jobs/settle)")
    return parser.parse_args(argv)


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot (Linux's
    /proc/vmstat), or None where that is not known."""
    try:
        with open("/proc/vmstat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def death_reason(returncode: int, oom_before: int | None = None) -> tuple[str, str]:
    """Status and reason for a measuring process that ended in the middle of a cell; a
    SIGKILL reads as out of memory only where the kernel's OOM killer killed meanwhile
    (`oom_before`: its count when the cell began)."""
    if returncode < 0:
        sig = -returncode
        if sig == signal.SIGKILL:
            now = oom_kills()
            if oom_before is not None and now is not None and now > oom_before:
                return "oom", "killed by the kernel's out-of-memory killer (SIGKILL)"
            return "error", "the measuring process was killed by SIGKILL"
        return "error", f"the measuring process died from signal {signal.Signals(sig).name}"
    return "error", f"the measuring process exited with status {returncode}"


class Round:
    def __init__(self, args: argparse.Namespace, terminal):
        self.args, self.terminal = args, terminal
        self.raw = Path(args.raw).resolve()  # every record path absolute, whatever a kernel does to its folder
        self.settings = json.loads(args.settings)
        self.timeout_s = float(self.settings["timeout_s"])
        self.compile_settings = json.loads(args.compile)
        self.min_cycles = int(self.settings.get("min_cycles", 4))  # the fewest cycles of a bout
        self.kernels = read_kernel_files(json.loads(args.kernels), SPECS)
        self.environment = load_environment(args.environment)
        self.cells = grid.expand(json.loads(args.grid), self.kernels, self.environment.usable_devices)
        self.extra = args.only is not None
        if self.extra:  # an extra round measures only what settling asked for
            only = set(json.loads(args.only))
            self.cells = [cell for cell in self.cells if cell.key in only]
        self.name = f"extra round {args.round}" if self.extra else f"round {args.round}/{args.processes}"
        self.workers: dict[WorkerSpec, WorkerProcess] = {}
        self.launchers: dict[str, Launcher] = {}  # by what they import: numpy, or torch too
        self.history: dict[str, dict] = {}
        self.bouts: list[dict] = []
        self.done = 0
        self.expected_done = 0.0
        self.todo: list[Cell] = []
        self.statuses: dict[Cell, str] = {}  # of every cell with a record, for the manifest
        self.costs: dict[Cell, float] = {}
        self.workers_s = 0.0  # the estimate of starting the workers
        self.scales: dict[tuple, dict] = {}  # per series: its measured memory scale (memory_scale)
        self.carried: dict[Cell, dict] = {}  # what earlier rounds measured once of each cell (check, memory)
        self.split: Counter = Counter()  # seconds of the round by what they went to (split_s)
        self.reported: dict[Cell, dict] = {}  # the phases each cell's process reported when prepared
        self.spent: dict[Cell, float] = {}  # seconds each cell's commands took: its share of timeout_s
        self.oom_before: dict[Cell, int | None] = {}  # the OOM killer's count when each cell began
        self.broken: dict[WorkerSpec, WorkerFailed] = {}  # workers that did not start, and why
        self.facts = host_facts()

    # paths
    def final(self, cell: Cell) -> Path:
        return self.raw / layout.record_relpath(cell, self.args.round)

    def memory_scale(self, cell: Cell) -> dict:
        """What the records of the cell's series (any size) measured of its results and
        temporaries, in outputs (catalogue.measured_scale), on the host and the device: the
        worker's out-of-memory check then uses the calibrated model. A run measures a cell's
        peaks once, so each cell's earliest readable record is enough."""
        series = (cell.op, cell.library, cell.device, cell.dtype, cell.mode)
        if series not in self.scales:
            points: dict[str, list] = {"host": [], "device": []}
            pattern = f"{cell.library}-{cell.device}-{cell.dtype}-n*-t*{'-compiled' if cell.compiled else ''}"
            for folder in sorted((self.raw / cell.op).glob(pattern))[:200]:
                for path in sorted(folder.glob("p*.json"), key=lambda p: (len(p.stem), p.stem)):
                    try:
                        record = load_record(path)
                    except (UserError, OSError):
                        continue
                    for where, peak in (("host", record.host_peak), ("device", record.device_peak)):
                        if record.ok and peak.peak_bytes is not None:
                            points[where].append((record.cell.size, peak.peak_bytes))
                    break
            spec = estimate.spec_of(cell.op, self.kernels)
            self.scales[series] = {where: measured_scale(found, spec, ITEMSIZE[cell.dtype])
                                   for where, found in points.items() if found}
        return self.scales[series]

    def partial(self, cell: Cell) -> Path:
        return self.raw / layout.partial_relpath(cell, self.args.round)

    def finished_status(self, path: Path) -> str | None:
        """The status of a valid record under the current measure settings at `path`, if any."""
        if not path.exists():
            return None
        try:
            record = load_record(path)
        except MalformedRecord:
            return None
        if settings_differ(record.settings, self.settings) or self.kernel_edited(record):
            return None
        return record.status

    def kernel_edited(self, record: CellRecord) -> bool:
        """A user kernel's file changed since the record was taken: measure it anew. A cell
        skipped for its device never ran the kernel, so its edits do not matter."""
        info = self.kernels.get(record.cell.op)
        if info is None or record.status == "skipped":
            return False
        return record.kernel_sha256 != info.sha256

    def earlier_facts(self, cell: Cell) -> dict | None:
        """What an earlier round of this run measured once of the cell: its check, model and
        peak memory, with that round's number (None: this round measures them). The earliest
        valid record under the current settings counts."""
        folder = self.raw / cell.key
        rounds = sorted(int(p.stem[1:]) for p in folder.glob("p*.json") if p.stem[1:].isdigit())
        for k in rounds:
            if k == self.args.round:
                continue
            path = folder / f"p{k}.json"
            try:
                record = load_record(path)
            except MalformedRecord:
                continue
            if settings_differ(record.settings, self.settings) or self.kernel_edited(record):
                continue
            if record.check.failed or (record.status == "error" and record.reason.startswith(WRONG_RESULT)):
                return {"round": k, "failed": record.reason}
            if record.ok and record.check.passed:
                document = read_json(path)
                facts = {name: document.get(name) for name in ("check", "model", "memory")}
                if all(isinstance(value, dict) for value in facts.values()):
                    conversion = document.get("conversion")
                    return {"round": k, **facts, **({"conversion": conversion} if isinstance(conversion, dict) else {})}
        return None

    def earlier_bouts(self) -> dict[str, list[dict]]:
        """Each group's bouts in the run's earlier rounds (their records), for planning its cycles."""
        found: dict[str, list[dict]] = {}
        for kind in ("planned", "extra"):
            for path in layout.round_records(self.raw, kind):
                try:
                    record = load_round(path)
                except MalformedRecord:
                    continue
                if record.round == self.args.round and record.extra == self.extra:
                    continue
                for bout in record.bouts:
                    found.setdefault(str(bout.get("group")), []).append(dict(bout))
        return found

    def device_reason(self, cell: Cell) -> str | None:
        """Why this machine cannot measure the cell at all (environment.json), or None."""
        reason = None
        if cell.library == "torch" or cell.compiled:
            reason = self.environment.device_reason(cell.device)
        if not reason and cell.compiled:
            reason = self.environment.compile_reason(cell.device)
        return reason

    # the round
    def run(self) -> int:
        different = mismatch(self.environment.fingerprint, self.facts["fingerprint"])
        if different:
            raise Refused(
                f"this host's {different} recorded in {self.args.environment}: choose a new "
                "`machine:` label rather than mixing machines"
            )
        for cell in self.cells:
            status = self.finished_status(self.final(cell)) or self.finished_status(self.partial(cell))
            if status:
                self.statuses[cell] = status
                continue
            facts = None if self.device_reason(cell) else self.earlier_facts(cell)
            if facts and "failed" in facts:  # a wrong result is not measured again
                self.write_failure(cell, "error", f"{facts['failed']} (round {facts['round']}, not measured again)",
                                   None, None)
                continue
            if facts:
                self.carried[cell] = facts
            self.todo.append(cell)
        self.costs = self.estimated_costs()
        self.workers_s = estimate.workers_seconds([c for c in self.todo if not self.device_reason(c)])
        started = utc_now()
        lock_wait, before, after = 0.0, None, None
        if self.todo:
            with host_lock(label=f"{self.args.machine}, {self.name}",
                           timeout_s=float(self.settings.get("lock_timeout_s", DEFAULT_TIMEOUT_S)),
                           say=lambda line: tell(self.terminal, line)) as lock_wait:
                before = system.snapshot()
                self.began = self.last_report = time.monotonic()
                try:
                    self.start_workers({cell.worker for cell in self.todo if not self.device_reason(cell)})
                    separate = self.settings.get("pairing") == "separate"
                    groups = schedule.groups(self.todo, self.args.round, separate)
                    plans = {} if separate else plan_cycles(self.earlier_bouts(), [g[0].group_name for g in groups],
                                                            self.min_cycles)
                    for cells in groups:
                        bout = Bout(self, cells, plans.get(cells[0].group_name)).run()
                        self.bouts.append(bout.as_dict())
                        self.split["sampling"] += bout.sampling_s
                        self.split["paused"] += bout.paused_s
                    for bout in self.bouts:  # each group's share of starting the workers
                        bout["process_s"] += self.split["start"] / len(self.bouts)
                finally:
                    self.retire(list(self.workers.values()))
                    for launcher in self.launchers.values():
                        launcher.close()
                after = system.snapshot()
        self.publish()
        self.write_manifest(started, lock_wait, before, after)
        self.say_done()
        return 0

    def estimated_costs(self) -> dict[Cell, float]:
        """Each cell's predicted seconds (zero for cells of absent devices), for progress lines."""
        roofs = estimate.roofs_for(self.raw.parent)
        return {c: 0.0 if self.device_reason(c) else estimate.cell_seconds(c, self.settings, roofs, self.kernels)
                for c in self.todo}

    def cell_done(self, cell: Cell) -> None:
        """A cell of the round has its record: count it for the progress lines."""
        self.done += 1
        self.expected_done += self.costs.get(cell, 0.0)
        self.report_progress()

    def start_workers(self, specs) -> None:
        """Start the round's workers: the launchers side by side (their imports take seconds
        each), then the workers, then wait until each is ready."""
        began = time.monotonic()
        ordered = sorted(specs, key=lambda spec: spec.name)
        for launcher in {id(l): l for spec in ordered if (l := self.launcher(spec)) is not None}.values():
            with contextlib.suppress(LauncherFailed):  # said at each of its workers' cells
                launcher.ready()
        launched = []
        for spec in ordered:
            with contextlib.suppress(WorkerFailed):  # kept in self.broken, said at each of its cells
                launched.append(self.start_worker(spec))
        for worker in launched:
            with contextlib.suppress(WorkerFailed):
                self.await_ready(worker)
        self.split["start"] += time.monotonic() - began

    def worker(self, spec: WorkerSpec) -> WorkerProcess:
        """The running worker of `spec`, started when it is not running; WorkerFailed when it
        did not start (in this round, once: its later cells are told the same at once)."""
        if spec in self.broken:
            raise self.broken[spec]
        if spec in self.workers and self.workers[spec].proc.poll() is None:
            return self.workers[spec]
        began = time.monotonic()
        try:
            return self.await_ready(self.start_worker(spec))
        finally:
            self.split["start"] += time.monotonic() - began

    def start_worker(self, spec: WorkerSpec) -> WorkerProcess:
        """Launch the worker of `spec`; a launcher that failed is the worker's failure."""
        try:
            return self.launch(spec)
        except LauncherFailed as error:
            timed_out = "did not answer" in str(error)
            self.broken[spec] = WorkerFailed("timeout" if timed_out else "error", f"its worker did not start: {error}")
            raise self.broken[spec] from None

    def compile_cache_dir(self, name: str) -> str:
        """The compile cache of a compiled worker kind (or the launcher's): one per kind and
        run, under raw/, so the first round compiles as a program's first run does (an empty
        cache) and later rounds reuse what it compiled (compile time is its own phase, never a
        sample)."""
        folder = self.raw / layout.COMPILE_CACHE_DIR / name
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder)

    def worker_env(self, spec: WorkerSpec) -> dict[str, str]:
        """The environment variables a worker of `spec` sets on top of the job's: its threads,
        and a compiled worker's compiler settings."""
        env = thread_env(spec.host_threads)  # the label resolved once, here, for the environment and the worker
        if spec.compiled and self.compile_settings.get("cold_cache", True):
            cache = self.compile_cache_dir(spec.name)
            env.update(TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
        if spec.compiled and spec.device == "cpu":
            # the compiler in the worker's own process: a pool of compile processes (and the
            # thread that feeds it) cannot cross the fork of each cell's process
            env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
            if self.environment.vec_isa_known:
                env["TORCHINDUCTOR_VEC_ISA_OK"] = "1"  # its checks ran once, in the environment job
        return env

    def launcher(self, spec: WorkerSpec) -> Launcher | None:
        """The round's launcher for `spec`'s imports, started at its first worker (None where
        workers are started on their own). Those of CPU workers never see a GPU, so nothing
        in them can initialise CUDA before they fork; the GPU workers have one of their own."""
        if not launcher_available():
            return None
        imports = "gpu" if spec.device != "cpu" else "compiler" if spec.compiled else \
            "torch" if spec.library == "torch" else "numpy"
        if imports not in self.launchers:
            # every worker sets its own threads; the launcher imports with one, so no pool runs at a fork
            env = {**os.environ, **thread_env(1), **allocator_env(str(self.settings.get("allocator", STEADY)))}
            if imports != "gpu":
                env = devices.hide_gpus(env)
            if imports == "compiler":  # the compiler started there, once, for every compiled CPU worker
                env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
                if self.environment.vec_isa_known:
                    env["TORCHINDUCTOR_VEC_ISA_OK"] = "1"
                if self.compile_settings.get("cold_cache", True):  # a cache of its own
                    env["TORCHINDUCTOR_CACHE_DIR"] = self.compile_cache_dir("launcher")
            self.launchers[imports] = Launcher(imports, env, self.timeout_s, self.args.compile)
        return self.launchers[imports]

    def launch(self, spec: WorkerSpec) -> WorkerProcess:
        """Start the worker of `spec`, forked by the round's launcher where there is one (it
        dies with this job, and its cells' processes with it)."""
        token = secrets.token_hex(8)
        argv = [
            "--token", token, "--library", spec.library, "--device", spec.device, "--threads-label", spec.threads,
            "--threads", str(spec.host_threads), "--mode", spec.mode, *(["--twin"] if spec.twin else []),
            "--machine", self.args.machine, "--round", str(self.args.round), "--processes", str(self.args.processes),
            "--settings", self.args.settings, "--environment", self.args.environment,
            "--kernels", self.args.kernels, "--compile", self.args.compile,
        ]
        launcher = self.launcher(spec)
        if launcher is not None:
            proc = launcher.spawn(argv, self.worker_env(spec))
            worker = WorkerProcess(spec, proc, os.fdopen(proc.events_fd, "rb", buffering=0), proc.pid, utc_now(),
                                   token=token)
        else:
            read_fd, write_fd = os.pipe()
            env = {**os.environ, **self.worker_env(spec),
                   **allocator_env(str(self.settings.get("allocator", STEADY)))}
            sys.stderr.flush()
            proc = subprocess.Popen([sys.executable, "-m", "offloadbench.jobs.worker", *argv,
                                     "--events-fd", str(write_fd)],
                                    stdin=subprocess.PIPE, stdout=sys.stderr.fileno(), env=env, pass_fds=(write_fd,))
            os.close(write_fd)
            worker = WorkerProcess(spec, proc, os.fdopen(read_fd, "rb", buffering=0), proc.pid, utc_now(),
                                   token=token)
        self.workers[spec] = worker
        self.history.setdefault(spec.name, {"processes": []})["processes"].append(
            {"pid": proc.pid, "started_at": worker.started_at})
        return worker

    def await_ready(self, worker: WorkerProcess) -> WorkerProcess:
        """Wait for a launched worker's first event; refuse the round where it refused, and
        raise WorkerFailed where it did not start (kept in self.broken)."""
        spec = worker.spec
        timed_out = False
        try:
            event = worker.next_event(time.monotonic() + self.timeout_s)
            timed_out = event is None
        except (EOFError, ProtocolFault):
            event = None
        if event and "refused" in event:
            worker.kill()
            raise Refused(str(event["refused"]))
        if event and "broken" in event and event.get("token") == worker.token:  # it cannot measure, and says why
            worker.kill()
            self.broken[spec] = WorkerFailed("error", f"its worker cannot measure: {str(event['broken'])[:300]}")
            raise self.broken[spec]
        if not event or not isinstance(event.get("ready"), dict) or event.get("token") != worker.token:
            code = worker.kill()
            if code == EXIT_REFUSED:
                raise Refused(f"worker {spec.name} refused to start (see the log)")
            if timed_out:
                failed = WorkerFailed("timeout", f"its worker did not start within the cell time limit of "
                                                 f"{self.timeout_s:g} s")
            else:
                failed = WorkerFailed("error", f"its worker did not start: {death_reason(code)[1]} (see the log)")
            self.broken[spec] = failed
            raise failed
        worker.ready = event["ready"]
        self.history[spec.name]["processes"][-1].update(event["ready"])
        return worker

    def command(self, cell: Cell, command: dict, expect: str) -> dict | None:
        """Send the cell's worker one command and wait for its answer `expect`; None when the
        cell ended instead: it failed (its process wrote the record), or its process hung
        past the cell's time limit, died, or broke the protocol (this job writes the record)."""
        kind = next(iter(command))
        before = self.workers.get(cell.worker)
        if kind != "prepare" and before is not None and cell.key in before.prepared and before.proc.poll() is not None:
            status, reason = death_reason(before.proc.returncode, self.oom_before.get(cell))
            return self.cell_failed(cell, status, f"{reason} (its worker, between its commands)", before)
        try:
            worker = self.worker(cell.worker)
        except WorkerFailed as failed:
            return self.cell_failed(cell, failed.status, failed.reason, None)
        if kind != "prepare" and cell.key not in worker.prepared:
            return self.cell_failed(cell, "error", f"its worker process ended between its commands (before {kind})",
                                    worker)
        if kind == "prepare":
            worker.cells += 1
            command["position"] = worker.cells
            if cell in self.carried:
                command["carried"] = self.carried[cell]
            self.oom_before[cell] = oom_kills()
        command["token"] = token = secrets.token_hex(8)
        began = time.monotonic()
        deadline = began + max(0.0, self.timeout_s - self.spent.get(cell, 0.0))  # the limit is the cell's
        phase, ending, died, sent = kind, "ended", None, True
        try:
            worker.send(command)
        except OSError:  # its worker is gone
            sent = False
        while sent:
            try:
                event = worker.next_event(deadline)
            except EOFError:
                break
            except ProtocolFault as fault:
                ending = str(fault)
                break
            if event is None:
                ending = "timeout"
                break
            if event.get("token") == worker.token:  # the worker's own: a fork, or a cell's process that died
                if event.get("died") == cell.key:
                    died = event["returncode"] if isinstance(event.get("returncode"), int) else 1
                    break
                if event.get("forked") == cell.key:
                    worker.cell_pid = event["pid"] if isinstance(event.get("pid"), int) else None
                continue  # late news of an earlier cell, whose record is written
            if event.get("token") != token:  # a stray line, a stale or forged event
                ending = WROTE_TO_CHANNEL
                break
            if "phase" in event:
                phase = str(event["phase"])[:80]
                continue
            if event.get("fault") == cell.key:
                ending = str(event.get("reason") or WROTE_TO_CHANNEL)[:200]
                break
            if not well_formed(event, expect, cell.key):
                ending = WROTE_TO_CHANNEL
                break
            self.spent[cell] = self.spent.get(cell, 0.0) + time.monotonic() - began
            self.count_split(cell, kind, time.monotonic() - began, event.get("phases_s"))
            if kind == "prepare" and "prepared" in event:
                worker.prepared.add(cell.key)
                worker.cell_pid = event["pid"]
            if "done" in event:
                worker.cell_pid = None
                worker.prepared.discard(cell.key)
                if not self.partial(cell).exists():  # a `done` without the record it stands for
                    return self.cell_failed(cell, "error", "it said it was done, but wrote no record", worker)
                self.ended(cell, event)
                if event.get("replace"):  # its code left what cannot be undone: a fresh worker next
                    self.retire([worker])
            return event if expect in event else None
        if ending == "timeout":
            worker.kill()
            return self.cell_failed(cell, "timeout", f"exceeded the cell time limit of {self.timeout_s:g} s during "
                                                     f"{phase}", worker)
        if died is None and ending != "ended":  # a protocol fault: its worker is replaced
            worker.kill()
            return self.cell_failed(cell, "error", f"{ending} (during {phase})", worker)
        code = died if died is not None else worker.kill()
        status, reason = death_reason(code, self.oom_before.get(cell))
        return self.cell_failed(cell, status, f"{reason} (during {phase})", worker)

    def cell_failed(self, cell: Cell, status: str, reason: str, worker: WorkerProcess | None) -> None:
        """The cell ended without its process's record: this job writes one and says why."""
        if worker is not None:
            worker.cell_pid = None
            worker.prepared.discard(cell.key)
        self.write_failure(cell, status, reason, worker, worker.cells if worker else None)
        tell(self.terminal, f"cell {cell.label}: {status}: {reason}")
        self.cell_done(cell)

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
        for name, value in new.items():
            self.split[name] += value
        self.split["handover"] += max(0.0, seconds - sum(new.values()))

    def pids(self, specs) -> list[int]:
        """The pids of the processes measuring for those of these workers that are running,
        each once."""
        return [worker.busy_pid for spec in dict.fromkeys(specs)
                if (worker := self.workers.get(spec)) is not None and worker.proc.poll() is None]

    def sibling_pids(self, cell: Cell, cells) -> list[int]:
        """The pids of the running workers of `cells` other than `cell`'s."""
        return self.pids(other.worker for other in cells if other.worker != cell.worker)

    def ended(self, cell: Cell, event: dict) -> None:
        """The cell's worker wrote its record."""
        self.statuses[cell] = event["status"]
        if event["status"] in FAILED:
            tell(self.terminal, f"cell {cell.label}: {event['status']}: {event['reason']}")
        self.cell_done(cell)

    def write_failure(self, cell: Cell, status: str, reason: str, worker: WorkerProcess | None, position) -> None:
        now = utc_now()
        process = {
            "round": self.args.round, "processes": self.args.processes, "worker": cell.worker.name,
            "pid": worker.pid if worker else None, "position": position, **where(),
        }
        info = self.kernels.get(cell.op)  # its file's hash: a rerun measures it again only once the file changed
        record = cell_record(
            cell, self.args.machine, process, status=status, reason=reason, started_at=now, finished_at=now,
            provenance=self.facts, settings=self.settings, measured={"op_info": info.describe()} if info else None,
        )
        write_json_atomic(self.partial(cell), record)
        self.statuses[cell] = status

    def retire(self, workers: list[WorkerProcess]) -> None:
        """End the workers: every command channel closed first, so they all end at once."""
        for worker in workers:
            worker.end_commands()
        for worker in workers:
            worker.close()
            entry = self.history[worker.spec.name]["processes"][-1]
            entry.update(finished_at=utc_now(), cells=worker.cells, returncode=worker.proc.returncode)

    def report_progress(self) -> None:
        """Cells done and time left, every 20 s (estimate.remaining_s): the estimate alone for
        the round's first tenth, then blended with the round's own pace. The workers' start,
        paid before the first cell, counts as done; the round's close after its last cell
        is still to come."""
        now = time.monotonic()
        if now - self.last_report < PROGRESS_EVERY_S or self.done == len(self.todo):
            return
        self.last_report = now
        started = self.workers_s if self.done else 0.0
        left = estimate.remaining_s(now - self.began, started + self.expected_done,
                                    self.workers_s + sum(self.costs.values()) + estimate.ROUND_CLOSE_S)
        tell(self.terminal, f"{self.name}: {self.done}/{len(self.todo)} cells, "
                            f"about {fmt_duration(left)} left in this round")

    # after the round
    def publish(self) -> None:
        """Move the round's finished records from .partial/ to their places."""
        for cell in self.cells:
            partial = self.partial(cell)
            if partial.exists():
                final = self.final(cell)
                final.parent.mkdir(parents=True, exist_ok=True)
                rendering = partial.with_suffix(".png")  # what ops that plot rendered
                if rendering.exists():
                    os.replace(rendering, final.with_suffix(".png"))
                os.replace(partial, final)
        partial = self.raw / layout.partial_dir(self.args.round)
        shutil.rmtree(partial, ignore_errors=True)
        with contextlib.suppress(OSError):  # other rounds may still be waiting there
            partial.parent.rmdir()

    def write_manifest(self, started: str, lock_wait: float, before: dict | None, after: dict | None) -> None:
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
            "estimated_s": sum(self.costs.values()) + self.workers_s + estimate.ROUND_CLOSE_S,
            "took_s": time.monotonic() - self.began if self.todo else 0.0,
            "split_s": self.split_s(),
            "statuses": dict(Counter(self.statuses.values())),
            "lock_wait_s": lock_wait,
            "workers": self.history,
            "launchers": [launcher.as_dict() for launcher in self.launchers.values()],
            "bouts": self.bouts,
            "system_before": before,
            "system_after": after,
            "advice": system.advice(before) if before else [],
            # the method's thresholds as this code applied them: the report words its method from these
            "method": {**Settings.from_config(self.settings, self.compile_settings).method(),
                       **bout_method(self.min_cycles)},
            **where(),
        })

    def split_s(self) -> dict[str, float]:
        """The round's wall time by what it went to; `other` is the rest (the lock, the
        system check, the records moved into place)."""
        took = time.monotonic() - self.began if self.todo else 0.0
        split = {name: round(value, 4) for name, value in sorted(self.split.items())}
        split["other"] = round(max(0.0, took - sum(self.split.values())), 4)
        return split

    def say_done(self) -> None:
        if not self.todo:
            return
        took = time.monotonic() - self.began
        tell(self.terminal, f"{self.name}: {len(self.todo)} cells in {fmt_duration(took)}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run_job(args.log, lambda terminal: Round(args, terminal).run(), f"round {args.round} of {args.machine}")


if __name__ == "__main__":
    sys.exit(main())
