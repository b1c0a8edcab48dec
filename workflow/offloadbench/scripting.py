"""Shared plumbing of the thin Snakemake scripts: stderr to the rule's log, one-line errors."""

from __future__ import annotations

import sys
from typing import Callable

from .errors import UserError


def run_logged(log_path: str, action: Callable[[], object]) -> None:
    """Run `action` with stderr in the log; a UserError ends the job with its one line,
    written to the log and to the terminal, where Snakemake's error block would hide it."""
    terminal = sys.stderr
    with open(log_path, "w", encoding="utf-8") as log:
        sys.stderr = log
        try:
            action()
        except UserError as error:
            for stream in (log, terminal):
                print(f"error: {error}", file=stream, flush=True)
            raise SystemExit(1) from None
        finally:
            sys.stderr = terminal
