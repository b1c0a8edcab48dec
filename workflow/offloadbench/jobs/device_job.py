"""What the per-device jobs (roofs, copy sweep) share: their command line, their thread
counts, one host lock around all their devices, each device's torch, and the record's
envelope."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..logs import stderr_to_log, tell
from ..measure.devices import import_torch
from ..measure.threads import thread_env
from ..records import DOCUMENT_VERSION, validate_record, write_json_atomic
from .environment import known_absent
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


def device_record(kind: str, schema: dict, args: argparse.Namespace, device: str, waited: float, measure: Callable,
                  seconds_field: str) -> dict:
    """The validated record of one device: the points `measure(args, settings, device,
    torch, absent)` took, with the device's name and the record's own fields it gives (torch
    is not loaded for a device environment.json records as absent), where and when they were
    measured, and the seconds that took (`seconds_field`)."""
    from ..measure.provenance import host_facts, utc_now, where  # after the job has set its thread counts

    settings = json.loads(args.settings)
    started, begin = utc_now(), time.perf_counter()
    absent = known_absent(args.environment, device)
    torch = None if absent else import_torch()
    points, device_name, fields = measure(args, settings, device, torch, absent)
    record = {
        "schema_version": DOCUMENT_VERSION,
        "kind": kind,
        "machine": args.machine,
        "device": device,
        "device_name": device_name,
        "points": points,
        "settings": settings,
        **fields,
        seconds_field: time.perf_counter() - begin,
        "provenance": host_facts([device_name] if device_name not in (None, "cpu") else None),
        "process": where(),
        "started_at": started,
        "finished_at": utc_now(),
        "lock_wait_s": waited,
    }
    return validate_record(record, device, schema)


def run_devices(args: argparse.Namespace, threads: int, kind: str, schema: dict, measure: Callable,
                seconds_field: str) -> int:
    """One record per device, all under one hold of the host lock, measured with `threads`
    host threads; skipped points are said on stderr."""
    os.environ.update(thread_env(threads))  # before numpy and torch load
    with stderr_to_log(args.log) as terminal:
        try:
            with host_lock(label=f"{args.machine}, {Path(args.out_dir).name}", timeout_s=args.lock_timeout_s,
                           say=lambda line: tell(terminal, line)) as waited:
                for device in args.devices.split(","):
                    record = device_record(kind, schema, args, device, waited, measure, seconds_field)
                    write_json_atomic(Path(args.out_dir) / f"{device}.json", record)
                    for reason in sorted({p["reason"] for p in record["points"] if p["status"] == "skipped"}):
                        print(f"{record['kind']} {device}: skipped: {reason}", file=sys.stderr)
        except LockError as error:
            tell(terminal, f"error: {error}")
            return 1
    return 0
