"""What the per-device jobs (roofs, copy sweep) share: their command line, one host lock
around all their devices, and the record's envelope."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ..logs import stderr_to_log, tell
from ..records import DOCUMENT_VERSION, validate_record, write_json_atomic
from .lock import DEFAULT_TIMEOUT_S, LockError, host_lock


def parse_args(description: str, section: str, argv: list[str], grid: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--devices", required=True, help="comma-separated, one record each")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--settings", required=True, help=f"the config's {section} section as JSON")
    if grid:
        parser.add_argument("--grid", required=True, help="the config's grid section as JSON (libraries, dtypes)")
    parser.add_argument("--environment", help="environment.json: a device it records as absent is skipped at once")
    parser.add_argument("--out-dir", required=True, help="one <device>.json per device goes here")
    parser.add_argument("--log", help="the job's log; without it, stderr stays where it is")
    parser.add_argument("--lock-timeout-s", type=float, default=DEFAULT_TIMEOUT_S,
                        help="most seconds to wait for the host's benchmark lock (measure.lock_timeout_s)")
    return parser.parse_args(argv)


def device_record(kind: str, schema: dict, args: argparse.Namespace, device: str, device_name: str | None,
                  points: list[dict], settings: dict, started: str, waited: float, **fields) -> dict:
    """The validated record of one device: its points, where and when they were measured."""
    from ..measure.provenance import host_facts, utc_now, where  # after the job has set its thread counts

    record = {
        "schema_version": DOCUMENT_VERSION,
        "kind": kind,
        "machine": args.machine,
        "device": device,
        "device_name": device_name,
        "points": points,
        "settings": settings,
        **fields,
        "provenance": host_facts([device_name] if device_name not in (None, "cpu") else None),
        "process": where(),
        "started_at": started,
        "finished_at": utc_now(),
        "lock_wait_s": waited,
    }
    return validate_record(record, device, schema)


def run_devices(args: argparse.Namespace, record_of: Callable[[argparse.Namespace, str, float], dict]) -> int:
    """One record per device, all under one hold of the host lock; skipped points are said on stderr."""
    with stderr_to_log(args.log) as terminal:
        try:
            with host_lock(label=f"{args.machine}, {Path(args.out_dir).name}", timeout_s=args.lock_timeout_s,
                           say=lambda line: tell(terminal, line)) as waited:
                for device in args.devices.split(","):
                    record = record_of(args, device, waited)
                    write_json_atomic(Path(args.out_dir) / f"{device}.json", record)
                    for reason in sorted({p["reason"] for p in record["points"] if p["status"] == "skipped"}):
                        print(f"{record['kind']} {device}: skipped: {reason}", file=sys.stderr)
        except LockError as error:
            tell(terminal, f"error: {error}")
            return 1
    return 0
