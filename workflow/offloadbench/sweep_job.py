"""The transfer job: the copy-bandwidth sweep of one device, alone on the machine."""

from __future__ import annotations

import argparse
import json
import sys
import time

from .job import host_lock
from .records import write_json_atomic
from .scripting import stderr_to_log


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Sweep host<->device copy bandwidth for one device.")
    parser.add_argument("--device", required=True, choices=["cuda", "mps"])
    parser.add_argument("--machine", required=True)
    parser.add_argument("--settings", required=True, help="the config's transfer section as JSON")
    parser.add_argument("--out", required=True)
    parser.add_argument("--log", help="the job's log; without it, stderr stays where it is")
    return parser.parse_args(argv)


def run(argv: list[str]) -> int:
    args = parse_args(argv)
    with stderr_to_log(args.log):
        return _sweep(args)


def _sweep(args: argparse.Namespace) -> int:
    settings = json.loads(args.settings)
    with host_lock() as waited:
        from .threads import set_thread_env

        set_thread_env(1)  # a copy is driven by one host thread
        from .provenance import fingerprint, host_facts, utc_now
        from .timing import StopRule
        from .transfer import link_rate, parse_size, sweep

        started = utc_now()
        begin = time.perf_counter()
        try:
            import torch
        except ImportError:
            torch = None
        facts = host_facts()
        device_name = None
        if torch is not None and args.device == "cuda" and torch.cuda.is_available():
            device_name = torch.cuda.get_device_name(0)
        elif torch is not None and args.device == "mps" and torch.backends.mps.is_available():
            device_name = "Apple MPS"
        stop = StopRule(target_rel_ci=float(settings["target_rel_ci"]), budget_s=float(settings["budget_s"]))
        sizes = [parse_size(s) for s in settings["sizes"]]
        points = sweep(torch, args.device, sizes, list(settings["memory"]), stop)
        record = {
            "schema_version": 1,
            "kind": "transfer",
            "machine": args.machine,
            "device": args.device,
            "device_name": device_name,
            "link": link_rate(settings.get("link_gbs"), args.device) if device_name else None,
            "points": points,
            "settings": settings,
            "provenance": {**facts, "fingerprint": fingerprint(facts, [device_name] if device_name else None)},
            "started_at": started,
            "finished_at": utc_now(),
            "lock_wait_s": waited,
            "sweep_s": time.perf_counter() - begin,
        }
        write_json_atomic(args.out, record)
    skipped = {p["reason"] for p in points if p["status"] == "skipped"}
    for reason in sorted(skipped):
        print(f"transfer {args.device}: skipped: {reason}", file=sys.stderr)
    return 0
