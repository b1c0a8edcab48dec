"""The roofs job: memory bandwidth and peak matmul rate of one device, alone on the machine.

    python -m offloadbench.jobs.calibrate --devices cpu,cuda --machine laptop --settings '{...}' --out-dir raw/roofs

It uses every core of the machine, as the "all" thread cells do, so the roofs bound them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from ..cells import usable_cores
from ..logs import stderr_to_log
from ..measure.threads import thread_env
from ..records import ROOFS_SCHEMA, SCHEMA_VERSION, validate_record, write_json_atomic
from .environment import import_torch, known_absent
from .lock import host_lock


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Measure a device's memory bandwidth and matmul rate.")
    parser.add_argument("--devices", required=True, help="comma-separated, one record each")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--settings", required=True, help="the config's roofs section as JSON")
    parser.add_argument("--grid", required=True, help="the config's grid section as JSON (libraries, dtypes)")
    parser.add_argument("--environment", help="environment.json: a device it records as absent is skipped at once")
    parser.add_argument("--out-dir", required=True, help="one <device>.json per device goes here")
    parser.add_argument("--log")
    return parser.parse_args(argv)


def roofs_record(args: argparse.Namespace, device: str, waited: float) -> dict:
    os.environ.update(thread_env(usable_cores()))  # before numpy and torch load
    from ..measure.provenance import host_facts, utc_now, where
    from ..measure.roofs import RoofSizes, calibrate
    from ..measure.threads import apply_thread_limits
    from ..units import parse_size

    settings, grid = json.loads(args.settings), json.loads(args.grid)
    started, begin = utc_now(), time.perf_counter()
    absent = known_absent(args.environment, device)
    torch = None if absent else import_torch()
    threads = apply_thread_limits(usable_cores(), torch)
    kind = "cpu" if device == "cpu" else "gpu"
    sizes = RoofSizes(parse_size(settings[f"{kind}_triad_size"]), int(settings[f"{kind}_matmul_n"]))
    device_name = None
    if device == "cuda" and torch is not None and torch.cuda.is_available():
        device_name = torch.cuda.get_device_name(0)
    points = calibrate(device, list(grid["libraries"]), list(grid["dtypes"]), sizes, float(settings["budget_s"]),
                       torch, absent)
    record = {
        "schema_version": SCHEMA_VERSION,
        "kind": "roofs",
        "machine": args.machine,
        "device": device,
        "device_name": device_name or ("cpu" if device == "cpu" else None),
        "points": points,
        "threads": threads,
        "settings": settings,
        "provenance": host_facts([device_name] if device_name else None),
        "process": where(),
        "started_at": started,
        "finished_at": utc_now(),
        "lock_wait_s": waited,
        "calibration_s": time.perf_counter() - begin,
    }
    return validate_record(record, device, ROOFS_SCHEMA)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with stderr_to_log(args.log), host_lock() as waited:
        for device in args.devices.split(","):
            write_json_atomic(Path(args.out_dir) / f"{device}.json", roofs_record(args, device, waited))
    return 0


if __name__ == "__main__":
    sys.exit(main())
