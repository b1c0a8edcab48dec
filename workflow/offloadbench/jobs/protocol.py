"""The protocol between the round job and its workers, both ends in one place: its typed
messages, and the channels they travel on. The round sends one command per line on a
worker's stdin (`WorkerProcess.send`), and the worker reads them (`CommandReader`); the
worker answers with one event per line on its measuring channel (`Channels`), which the
round reads within bounds (`next_event`). Each line is a JSON object: a message's fields
and the token of the command it answers (the worker's own token on its own events), and
a line counts only as a message of the form declared here (`read_message`). A kernel that
writes to, closes or replaces a channel ends its own cell, never the round
(`ProtocolFault`, `ChannelFault`). How a worker's process ended reads as a cell's status
and reason (`death_reason`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import dataclass_transform

from ..cells import WorkerSpec

WROTE_TO_CHANNEL = "its kernel wrote to the measuring channel"
STATUSES = ("ok", "error", "oom", "timeout", "skipped")


def wait_or_kill(proc) -> None:
    """Wait for a process told to end (a Popen or a LaunchedProcess); kill it after 30 s."""
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ProtocolFault(Exception):
    """What came on a worker's measuring channel is no event of the command in flight."""


# --- the messages ---------------------------------------------------------------------------
# A message's first field is its tag: its name says the kind on the wire, its value is the
# cell's key where the message is about a cell. The fields are the keys of the JSON line.
MESSAGES: dict[str, type] = {}
FORMS = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "dict": (dict,), "list": (list,)}


@dataclass_transform(frozen_default=True, field_specifiers=(field,))  # what a subclass is, for type checkers
class Message:
    def __init_subclass__(cls, **kwargs):
        """Declare a message kind: each subclass is a frozen dataclass, known by its tag."""
        super().__init_subclass__(**kwargs)
        dataclass(frozen=True)(cls)
        MESSAGES[fields(cls)[0].name] = cls

    @property
    def tag(self) -> str:
        """Its kind: the name of its first field."""
        return fields(self)[0].name

    @property
    def key(self) -> str:
        """The tag's value: the cell's key, for a message about a cell."""
        return getattr(self, self.tag)

    def valid(self) -> bool:
        """A form the fields' types cannot say (overridden where there is one)."""
        return True

    def line(self, token: str) -> str:
        """One JSON line: its fields and the token it carries."""
        return json.dumps({**asdict(self), "token": token}) + "\n"


def _fits(value, form: str) -> bool:
    """Whether a decoded value has a field's declared form ("int", "str | None", ...)."""
    if value is None:
        return "None" in form
    kinds = tuple(kind for name, kinds in FORMS.items() if name in form.split(" | ") for kind in kinds)
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


def read_message(data: dict) -> Message | None:
    """The message a decoded line stands for; None where it has no single tag of ours, or a
    field of another form."""
    tags = [tag for tag in MESSAGES if tag in data]
    if len(tags) != 1:
        return None
    kind = MESSAGES[tags[0]]
    if any(f.name not in data and f.default is MISSING and f.default_factory is MISSING for f in fields(kind)):
        return None
    if not all(_fits(data[f.name], f.type) for f in fields(kind) if f.name in data):
        return None
    found = kind(**{f.name: data[f.name] for f in fields(kind) if f.name in data})
    return found if found.valid() else None


# The round's commands, in a cell's order.
class Prepare(Message):
    """Make the cell's inputs, compile and warm up; `out` is where its record goes."""

    prepare: str
    out: str
    artifact: bool = False  # an op that plots renders next to the record
    memory_scale: dict = field(default_factory=dict)  # what its series measured (jobs/earlier.py)
    position: int = 0  # the worker's how-manieth cell
    carried: dict | None = None  # what an earlier round measured once of it


class Turn(Message):
    """One turn of the bout: `after` is the worker whose turn came before (with its threads)."""

    turn: str
    cycle: int
    position: int = 0
    after: str | None = None
    after_threads: int | None = None
    pause_s: float = 0.0
    siblings: list = field(default_factory=list)  # pids of the bout's other running workers


class Finish(Message):
    """Check against float64, read the peak memory and the noise, and write the record."""

    finish: str
    stop_reason: str | None = None
    bout: dict | None = None


# The worker's own events, with its own token.
class Ready(Message):
    ready: dict  # its pid, import and warm-up seconds, compiler start, threads


class Refusal(Message):
    refused: str  # why it stops the round (another machine's label)


class Broken(Message):
    broken: str  # why it cannot measure its cells


class Forked(Message):
    forked: str
    pid: int


class Died(Message):
    died: str
    returncode: int  # negative: the signal


# A cell's events, with its command's token.
class Phase(Message):
    phase: str  # the phase of the command now running, for a timeout's reason


class Fault(Message):
    fault: str
    reason: str  # what its kernel did to a channel


class Prepared(Message):
    prepared: str
    pid: int
    regions: int
    phases_s: dict = field(default_factory=dict)


class Turned(Message):
    turned: str
    converged: bool
    medians: dict  # each timed region's median over the turn

    def valid(self) -> bool:
        return all(_fits(value, "float") for value in self.medians.values())


class Done(Message):
    """The cell's record is written; `replace`: its code left what cannot be undone."""

    done: str
    status: str
    reason: str
    phases_s: dict = field(default_factory=dict)
    replace: bool = False

    def valid(self) -> bool:
        return self.status in STATUSES


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot (Linux's
    /proc/vmstat), or None where that is not known."""
    with contextlib.suppress(OSError, ValueError), open("/proc/vmstat", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("oom_kill "):
                return int(line.split()[1])
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


@dataclass
class WorkerProcess:
    """A running worker, and what the round saw of it."""

    spec: WorkerSpec
    proc: subprocess.Popen
    events: object
    cells: int = 0
    buffer: bytes = b""
    cell_pid: int | None = None  # the process measuring its current cell (itself where it forks none)
    token: str = ""  # of its own events (ready, forked, died)
    prepared: set = field(default_factory=set)  # the keys of the cells this process prepared

    def send(self, command: Message, token: str) -> None:
        self.proc.stdin.write(command.line(token).encode())
        self.proc.stdin.flush()

    def next_event(self, deadline: float) -> tuple[object, Message | None] | None:
        """The next event's token and message (None: a line of no declared form), or None
        when the deadline passed; EOFError when the worker died, ProtocolFault on a line
        that is no JSON object."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.events], [], [], min(remaining, 1.0))
            if ready:
                chunk = os.read(self.events.fileno(), 65536)
                if not chunk:
                    raise EOFError(self.spec.name)
                self.buffer += chunk
            if len(self.buffer) > MAX_EVENT_BYTES:
                raise ProtocolFault(WROTE_TO_CHANNEL)
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            raise ProtocolFault(WROTE_TO_CHANNEL) from None
        if not isinstance(event, dict):
            raise ProtocolFault(WROTE_TO_CHANNEL)
        return event.get("token"), read_message(event)

    def kill(self) -> int:
        """Kill the worker and its cell's process, and wait until both are gone (a killed
        cell's process writes no record after the round job has written its own)."""
        cell = self.cell_pid if self.cell_pid != self.proc.pid else None
        if cell is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(cell, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        if cell is not None:
            wait_gone(cell)
        return code

    def end_commands(self) -> None:
        """Close the command channel: the worker ends once it has read what was sent."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()

    def close(self) -> None:
        self.end_commands()
        wait_or_kill(self.proc)
        self.events.close()


MAX_EVENT_BYTES = 1 << 20  # an event line longer than this is no event of ours


def wait_gone(pid: int, wait_s: float = 2.0) -> None:
    """Wait until a killed process is gone (or a zombie) and can write nothing more."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                if handle.read().rsplit(")", 1)[-1].split()[:1] in (["Z"], ["X"]):
                    return
        except OSError:
            return
        time.sleep(0.005)


class CommandReader:
    """The round job's commands, one JSON object per line, read straight from the file
    descriptor into one buffer kept for the process's life: between two turns a cell's
    process allocates next to nothing on the heap, as the function alone would not. The
    round sends a command only once the last one is answered, so nothing is buffered here
    when a cell's process is forked: the child and the worker never both see one command."""

    def __init__(self, fd: int, size: int = 1 << 16):
        self.fd = fd
        self.buffer = bytearray(size)
        self.start = self.end = 0  # the unread bytes

    def next(self) -> tuple[str, Message | None] | None:
        """The next command's token and message; None once the round job has closed the
        channel."""
        while True:
            newline = self.buffer.find(b"\n", self.start, self.end)
            if newline >= 0:
                line = bytes(memoryview(self.buffer)[self.start:newline])
                self.start = newline + 1
                if line.strip():
                    command = json.loads(line)
                    return str(command.get("token", "")), read_message(command)
                continue
            if self.start:  # move the unread bytes to the front
                self.buffer[:self.end - self.start] = self.buffer[self.start:self.end]
                self.start, self.end = 0, self.end - self.start
            if self.end == len(self.buffer):
                self.buffer.extend(bytes(len(self.buffer)))  # a command longer than the buffer
            read = os.readv(self.fd, [memoryview(self.buffer)[self.end:]])
            if not read:
                return None
            self.end += read


def _identity(fd: int) -> tuple[int, int] | None:
    """Which open file a descriptor is (None: closed)."""
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class ChannelFault(Exception):
    """A kernel closed or replaced a channel to the round job; the cell ends here."""


class Channels:
    """The worker's two channels to the round job, on private copies of their descriptors: a
    kernel that closes stdin or the events descriptor cannot cut the worker off, and
    `fault` names what it did. Every event carries `token`: that of the command in flight,
    the worker's own between cells."""

    def __init__(self, events_fd: int, token: str):
        self.token = token
        self.watched = {0: "the command channel", events_fd: "the measuring channel"}
        self.identity = {fd: _identity(fd) for fd in self.watched}
        self.command_fd = os.dup(0)
        self.events = os.fdopen(os.dup(events_fd), "w", buffering=1)

    def fault(self) -> str | None:
        """What a kernel did to the original descriptors, or None."""
        for fd, name in self.watched.items():
            now = _identity(fd)
            if now != self.identity[fd]:
                return f"its kernel {'closed' if now is None else 'replaced'} {name}"
        return None

    def send(self, event: Message) -> None:
        """One event, marked with the token it answers (the round drops events without it)."""
        self.events.write(event.line(self.token))
        self.events.flush()

    def check(self, key: str) -> None:
        """Where a kernel tampered with a channel, say so and end the cell `key` (ChannelFault)."""
        fault = self.fault()
        if fault:
            self.send(Fault(key, fault))
            raise ChannelFault(fault)

    def answer(self, event: Message) -> None:
        """Answer the command in flight, unless a kernel tampered with a channel (`check`)."""
        self.check(event.key)
        self.send(event)
