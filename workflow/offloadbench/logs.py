"""Shared plumbing of the jobs: stderr to the rule's log, one-line messages to the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import TextIO

from .errors import UserError, one_line, printable


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


_STAGES: list[str] = []  # what the job is doing now, innermost last
_FAILED_IN: list[list[str]] = []  # the stages an exception left, innermost last (at most one)


@contextlib.contextmanager
def stage(what: str):
    """Name what a job is doing now ("the section of op heat_step", "figure speedup"), so
    that a failure says where it happened in one line (`run_logged`)."""
    _STAGES.append(what)
    try:
        yield
    except Exception:
        if not _FAILED_IN:  # the innermost stage sees the exception first
            _FAILED_IN.append(list(_STAGES))
        raise
    finally:
        _STAGES.pop()


def failure_line(what: str, error: BaseException, log_path: str | None) -> str:
    """One line for a failure that is no UserError (a bug, or data no check foresaw): the
    step, the stage it was in, the exception, and where the traceback is."""
    where = f" while writing {' / '.join(_FAILED_IN[0])}" if _FAILED_IN else ""
    log = f"; the traceback is in {log_path}" if log_path else ""
    return (f"error: {what} failed{where}: {type(error).__name__}: {one_line(error, 200)}{log}. The measurements "
            "are kept: once it is fixed, run again and only this step is redone")


def run_logged(log_path: str, action: Callable[[], object], what: str = "this step") -> None:
    """Run `action` with stderr in the log; a UserError ends the job with its one line,
    written to the log and to the terminal, where Snakemake's error block would hide it.
    Any other exception leaves its traceback in the log only, and one line on the
    terminal names the step (`what`) and the stage it was in (`stage`)."""
    _FAILED_IN.clear()
    with stderr_to_log(log_path) as terminal:
        try:
            action()
        except UserError as error:
            tell(terminal, f"error: {error}")
            raise SystemExit(1) from None
        except Exception as error:  # noqa: BLE001 - one line on the terminal, the traceback in the log
            traceback.print_exc(file=sys.stderr)
            tell(terminal, failure_line(what, error, log_path))
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
