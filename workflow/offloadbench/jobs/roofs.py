"""The roofs job: memory bandwidth and peak matmul rate of one device, alone on the machine.

    python -m offloadbench.jobs.roofs --devices cpu,cuda --machine laptop --settings '{...}' --out-dir raw/roofs

It uses every core of the machine, as the "all" thread cells do, so the roofs bound them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..cells import usable_cores
from ..measure.devices import import_torch
from ..measure.threads import thread_env
from ..records import ROOFS_SCHEMA
from .device_job import device_record, parse_args, run_devices
from .environment import known_absent, model_name


def roofs_record(args: argparse.Namespace, device: str, waited: float) -> dict:
    os.environ.update(thread_env(usable_cores()))  # before numpy and torch load
    from ..measure.provenance import utc_now
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
    points = calibrate(device, list(grid["libraries"]), list(grid["dtypes"]), sizes, float(settings["budget_s"]),
                       torch, absent)
    return device_record("roofs", ROOFS_SCHEMA, args, device, model_name(device, torch), points, settings, started,
                         waited, threads=threads, calibration_s=time.perf_counter() - begin)


def main(argv: list[str] | None = None) -> int:
    args = parse_args("Measure a device's memory bandwidth and matmul rate.", "roofs",
                      sys.argv[1:] if argv is None else argv, grid=True)
    return run_devices(args, roofs_record)


if __name__ == "__main__":
    sys.exit(main())
