"""Which machine a result belongs to: its label, and the hardware fingerprint that every
result under one label must share, so that one label never mixes two machines; and the
host's memory."""

from __future__ import annotations

import os
import re
import socket

# What a machine label may be: it names a folder, a Snakemake wildcard and a figure's legend.
LABEL_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
LABEL_RULE = "a label starts with a letter or digit and holds only letters, digits, '_', '.' and '-'"


def is_label(text: str) -> bool:
    return re.fullmatch(LABEL_PATTERN, text) is not None and len(text) <= 100


def machine_label(hostname: str | None = None) -> str:
    """The `auto` machine label: the short hostname, lower-cased, safe as a folder name."""
    short = (hostname or socket.gethostname()).split(".")[0].lower()
    label = re.sub(r"[^a-z0-9_-]+", "-", short).strip("-")
    return label or "unknown-host"


def fingerprint(cpu_model: str | None, logical_cores: int | None, gpu_names: list[str] | None = None) -> dict:
    """The hardware identity of a host; `gpus` is None where no GPU was looked at."""
    return {
        "cpu_model": cpu_model,
        "logical_cores": logical_cores,
        "gpus": sorted(gpu_names) if gpu_names is not None else None,
    }


def mismatch(recorded: dict | None, found: dict | None) -> str | None:
    """How `found` differs from the `recorded` fingerprint, or None when they may be the
    same machine (a field missing on either side is no evidence)."""
    recorded, found = recorded or {}, found or {}
    for key in ("cpu_model", "logical_cores"):
        if recorded.get(key) is not None and found.get(key) is not None and recorded[key] != found[key]:
            return f"{key} is {found[key]!r}, not {recorded[key]!r}"
    mine, theirs = found.get("gpus"), recorded.get("gpus")
    if mine and theirs is not None:
        missing = [name for name in mine if name not in theirs]
        if missing:
            return f"GPU {missing[0]!r} is not among {theirs}"
    return None


def host_memory_bytes() -> int | None:
    """This host's memory (psutil where sysconf cannot say): recorded in environment.json, and
    what the estimate weighs the cells it will refuse against."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        try:
            import psutil
        except ImportError:
            return None
        return int(psutil.virtual_memory().total)
