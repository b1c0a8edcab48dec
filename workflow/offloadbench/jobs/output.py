"""What a cell prints, capped in the round's log: the first and the last 64 KiB of each
cell's stdout and stderr, and how much was dropped between them. A kernel that prints
200 kB per call cannot fill the disk with the log.

A CPU cell's process writes into a pipe its worker drains while it waits for the cell
(`CappedOutput.drain`); a worker that measures its cells itself (GPU) drains its own
stdout and stderr in a thread, cell by cell (`ProcessOutput`).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading

KEEP_BYTES = 64 * 1024
CHUNK = 1 << 16


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            written = os.write(fd, data)
        except OSError:
            return  # the log is gone: nothing else to do with the output
        data = data[written:]


class CappedOutput:
    """One cell's output on its way to `sink`: the head written as it comes, the tail kept
    until the cell ends (`close`)."""

    def __init__(self, label: str, sink: int = 2):
        self.label, self.sink = label, sink
        self.head = 0  # bytes written so far, up to KEEP_BYTES
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        if self.head < KEEP_BYTES:
            first = data[:KEEP_BYTES - self.head]
            _write_all(self.sink, first)
            self.head += len(first)
            data = data[len(first):]
        if data:
            self.tail += data
            if len(self.tail) > KEEP_BYTES:
                cut = len(self.tail) - KEEP_BYTES
                self.dropped += cut
                del self.tail[:cut]

    def close(self) -> None:
        """Write what is kept of the tail, after a line saying what was dropped."""
        if self.dropped:
            note = (f"\n[... {self.dropped} bytes of the output of cell {self.label} dropped: the log keeps the "
                    f"first and the last {KEEP_BYTES // 1024} KiB ...]\n")
            _write_all(self.sink, note.encode())
        _write_all(self.sink, bytes(self.tail))

    def drain(self, fd: int, pid: int) -> int:
        """Read the cell's process's output from `fd` until it ends; its exit code (negative:
        the signal). A process it started that still holds the pipe does not keep the worker
        waiting."""
        # a Python built without pidfd_open (some conda and standalone builds) watches the pipe alone
        pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
        try:
            while True:
                watched = [fd] if pidfd is None else [fd, pidfd]
                ready, _, _ = select.select(watched, [], [])
                if fd in ready:
                    chunk = os.read(fd, CHUNK)
                    if not chunk:
                        break
                    self.feed(chunk)
                elif pidfd in ready:  # ended: take what is in the pipe, without waiting for EOF
                    os.set_blocking(fd, False)
                    with contextlib.suppress(BlockingIOError):
                        while chunk := os.read(fd, CHUNK):
                            self.feed(chunk)
                    break
        finally:
            os.close(fd)
            if pidfd is not None:
                os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        self.close()
        return os.waitstatus_to_exitcode(status)


class ProcessOutput:
    """This process's stdout and stderr, drained by a thread into one CappedOutput per cell."""

    def __init__(self):
        self.lock = threading.Lock()
        sink = os.dup(2)
        self.current = CappedOutput("before the first cell", sink)
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        threading.Thread(target=self._drain, args=(read_fd,), daemon=True, name="offloadbench-output").start()

    def _drain(self, fd: int) -> None:
        while chunk := os.read(fd, CHUNK):
            with self.lock:
                self.current.feed(chunk)

    def end_cell(self, label: str) -> None:
        """The cell `label` has ended: close its output; what follows is the next cell's."""
        with self.lock:
            self.current.label = label
            self.current.close()
            self.current = CappedOutput("after " + label, self.current.sink)
