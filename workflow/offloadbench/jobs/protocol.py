"""The channels between the round job and its workers, both ends in one place: the round
sends one JSON command per line on a worker's stdin (`WorkerProcess.send`), and the worker
reads them (`CommandReader`); the worker answers with one JSON event per line on its
measuring channel (`Channels`), which the round reads within bounds (`next_event`) and
checks for the form of the answer it waits for (`well_formed`). A kernel that writes to,
closes or replaces a channel ends its own cell, never the round (`ProtocolFault`,
`ChannelFault`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass, field

from ..cells import WorkerSpec

WROTE_TO_CHANNEL = "its kernel wrote to the measuring channel"
STATUSES = ("ok", "error", "oom", "timeout", "skipped")


class ProtocolFault(Exception):
    """What came on a worker's measuring channel is no event of the command in flight."""


@dataclass
class WorkerProcess:
    """A running worker, and what the round saw of it."""

    spec: WorkerSpec
    proc: subprocess.Popen
    events: object
    pid: int
    started_at: str
    ready: dict = field(default_factory=dict)
    cells: int = 0
    buffer: bytes = b""
    cell_pid: int | None = None  # the process measuring its current cell (itself where it forks none)
    token: str = ""  # of its own events (ready, forked, died)
    prepared: set = field(default_factory=set)  # the keys of the cells this process prepared

    def send(self, command: dict) -> None:
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def next_event(self, deadline: float) -> dict | None:
        """The next event, or None when the deadline passed; EOFError when the worker died."""
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
        return event

    def kill(self) -> int:
        """Kill the worker and its cell's process, and wait until both are gone (a killed
        cell's process writes no record after the round job has written its own)."""
        cell = self.cell_pid if self.cell_pid != self.pid else None
        if cell is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(cell, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        if cell is not None:
            wait_gone(cell)
        return code

    @property
    def busy_pid(self) -> int:
        """The process whose CPU time is the worker's: its cell's, where it forked one."""
        return self.cell_pid or self.pid

    def end_commands(self) -> None:
        """Close the command channel: the worker ends once it has read what was sent."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def close(self) -> None:
        self.end_commands()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.events.close()


MAX_EVENT_BYTES = 1 << 20  # an event line longer than this is no event of ours


def well_formed(event: dict, expect: str, key: str) -> bool:
    """Whether an event with the command's token has the form of the answer it stands for."""
    if event.get("done") == key:
        return event.get("status") in STATUSES and isinstance(event.get("reason"), str)
    if expect == "prepared":
        return event.get("prepared") == key and isinstance(event.get("pid"), int) and \
            isinstance(event.get("regions"), int)
    if expect == "turned":
        medians = event.get("medians")
        return (event.get("turned") == key and isinstance(event.get("converged"), bool)
                and isinstance(medians, dict) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                      for v in medians.values()))
    return False


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

    def next(self) -> dict | None:
        """The next command; None once the round job has closed the channel."""
        while True:
            newline = self.buffer.find(b"\n", self.start, self.end)
            if newline >= 0:
                line = bytes(memoryview(self.buffer)[self.start:newline])
                self.start = newline + 1
                if line.strip():
                    return json.loads(line)
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
    `fault` names what it did."""

    def __init__(self, events_fd: int):
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

    def send(self, token: str, **event) -> None:
        """One event, marked with the worker's token (the round drops events without it)."""
        self.events.write(json.dumps({**event, "token": token}) + "\n")
        self.events.flush()

    def answer(self, token: str, key: str, **event) -> None:
        """Answer the command in flight, unless a kernel tampered with a channel: then say so
        and end the cell (ChannelFault)."""
        fault = self.fault()
        if fault:
            self.send(token, fault=key, reason=fault)
            raise ChannelFault(fault)
        self.send(token, **event)
