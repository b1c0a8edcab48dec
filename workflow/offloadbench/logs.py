"""Shared plumbing of the jobs: stderr to the rule's log, one-line messages to the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import TextIO

from .errors import UserError, printable


@contextlib.contextmanager
def stderr_to_log(log_path: str | None):
    """Send stderr of this process, of C libraries and of forked children to the log;
    yield a stream that still reaches the terminal, for the few lines a user must see."""
    if not log_path:
        yield sys.stderr
        return
    sys.stderr.flush()
    previous = sys.stderr
    saved = os.dup(2)
    terminal = os.fdopen(saved, "w", buffering=1)
    with open(log_path, "w", encoding="utf-8", buffering=1) as log:
        os.dup2(log.fileno(), 2)  # C libraries and children write to fd 2
        sys.stderr = log  # Python code writes to sys.stderr, which need not be fd 2
        try:
            yield terminal
        finally:
            log.flush()
            sys.stderr = previous
            os.dup2(saved, 2)
            terminal.close()


def tell(terminal: TextIO, message: str) -> None:
    """One line to the log and, when they differ, to the terminal; printable, whatever data
    went into it (errors.printable)."""
    message = printable(message)
    print(message, file=sys.stderr, flush=True)
    if terminal is not sys.stderr:
        print(message, file=terminal, flush=True)


def run_logged(log_path: str, action: Callable[[], object]) -> None:
    """Run `action` with stderr in the log; a UserError ends the job with its one line,
    written to the log and to the terminal, where Snakemake's error block would hide it."""
    with stderr_to_log(log_path) as terminal:
        try:
            action()
        except UserError as error:
            tell(terminal, f"error: {error}")
            raise SystemExit(1) from None


def run_job(log_path: str | None, job: Callable[[TextIO], int], what: str) -> int:
    """Run a measuring job with stderr in its log; `job` gets the terminal stream for the
    lines a user must see. A UserError ends it with one line ("error: <what>: ...")."""
    with stderr_to_log(log_path) as terminal:
        try:
            return job(terminal)
        except UserError as error:
            tell(terminal, f"error: {what}: {error}")
            return 1
