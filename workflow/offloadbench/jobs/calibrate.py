"""The roofs job: memory bandwidth and peak matmul rate of one device, alone on the machine.

    python -m offloadbench.jobs.calibrate --device cpu --machine laptop --settings '{...}' --out ...

It uses every core of the machine, as the "all" thread cells do, so the roofs bound them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..cells import usable_cores
from ..logs import stderr_to_log
from ..measure.threads import thread_env
from ..records import ROOFS_SCHEMA, SCHEMA_VERSION, validate_record, write_json_atomic
from .lock import host_lock


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Measure a device's memory bandwidth and matmul rate.")
    parser.add_argument("--device", required=True, choices=["cpu", "cuda", "mps"])
    parser.add_argument("--machine", required=True)
    parser.add_argument("--settings", required=True, help="the config's roofs section as JSON")
    parser.add_argument("--grid", required=True, help="the config's grid section as JSON (libraries, dtypes)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--log")
    return parser.parse_args(argv)


def roofs_record(args: argparse.Namespace, waited: float) -> dict:
    os.environ.update(thread_env(usable_cores()))  # before numpy and torch load
    from ..measure.provenance import host_facts, utc_now, where
    from ..measure.roofs import RoofSizes, calibrate
    from ..measure.threads import apply_thread_limits
    from ..units import parse_size

    settings, grid = json.loads(args.settings), json.loads(args.grid)
    started, begin = utc_now(), time.perf_counter()
    try:
        import torch
    except ImportError:
        torch = None
    threads = apply_thread_limits(usable_cores(), torch)
    kind = "cpu" if args.device == "cpu" else "gpu"
    sizes = RoofSizes(parse_size(settings[f"{kind}_triad_size"]), int(settings[f"{kind}_matmul_n"]))
    device_name = None
    if args.device == "cuda" and torch is not None and torch.cuda.is_available():
        device_name = torch.cuda.get_device_name(0)
    points = calibrate(args.device, list(grid["libraries"]), list(grid["dtypes"]), sizes, float(settings["budget_s"]), torch)
    record = {
        "schema_version": SCHEMA_VERSION,
        "kind": "roofs",
        "machine": args.machine,
        "device": args.device,
        "device_name": device_name or ("cpu" if args.device == "cpu" else None),
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
    return validate_record(record, args.out, ROOFS_SCHEMA)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with stderr_to_log(args.log):
        with host_lock() as waited:
            record = roofs_record(args, waited)
        write_json_atomic(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
