"""The transfer job: the copy-bandwidth sweep of one device, alone on the machine.

    python -m offloadbench.jobs.sweep --devices cuda,mps --machine laptop --settings '{...}' --out-dir raw/transfer
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from ..logs import stderr_to_log
from ..measure.threads import thread_env
from ..records import SCHEMA_VERSION, TRANSFER_SCHEMA, validate_record, write_json_atomic
from .environment import import_torch, known_absent
from .lock import host_lock


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Sweep host<->device copy bandwidth for one device.")
    parser.add_argument("--devices", required=True, help="comma-separated, one record each")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--settings", required=True, help="the config's transfer section as JSON")
    parser.add_argument("--environment", help="environment.json: a device it records as absent is skipped at once")
    parser.add_argument("--out-dir", required=True, help="one <device>.json per device goes here")
    parser.add_argument("--log", help="the job's log; without it, stderr stays where it is")
    return parser.parse_args(argv)


def sweep_record(args: argparse.Namespace, device: str, waited: float) -> dict:
    os.environ.update(thread_env(1))  # a copy is driven by one host thread; set before torch loads
    from ..measure.provenance import host_facts, utc_now, where
    from ..measure.timing import StopRule
    from ..measure.transfer import link_rate, sweep
    from ..units import parse_size

    settings = json.loads(args.settings)
    started, begin = utc_now(), time.perf_counter()
    absent = known_absent(args.environment, device)
    torch = None if absent else import_torch()
    device_name = None
    if torch is not None and device == "cuda" and torch.cuda.is_available():
        device_name = torch.cuda.get_device_name(0)
    elif torch is not None and device == "mps" and torch.backends.mps.is_available():
        device_name = "Apple MPS"
    stop = StopRule(target_rel_ci=float(settings["target_rel_ci"]), budget_s=float(settings["budget_s"]))
    points = sweep(torch, device, [parse_size(s) for s in settings["sizes"]], list(settings["memory"]), stop, absent)
    record = {
        "schema_version": SCHEMA_VERSION,
        "kind": "transfer",
        "machine": args.machine,
        "device": device,
        "device_name": device_name,
        "link": link_rate(settings.get("link_gbs"), device) if device_name else None,
        "points": points,
        "settings": settings,
        "provenance": host_facts([device_name] if device_name else None),
        "process": where(),
        "started_at": started,
        "finished_at": utc_now(),
        "lock_wait_s": waited,
        "sweep_s": time.perf_counter() - begin,
    }
    return validate_record(record, device, TRANSFER_SCHEMA)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with stderr_to_log(args.log), host_lock() as waited:
        for device in args.devices.split(","):
            record = sweep_record(args, device, waited)
            write_json_atomic(Path(args.out_dir) / f"{device}.json", record)
            for reason in sorted({p["reason"] for p in record["points"] if p["status"] == "skipped"}):
                print(f"transfer {device}: skipped: {reason}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
