"""The roofs job: memory bandwidth and peak matmul rate of one device, alone on the machine.

    python -m offloadbench.jobs.roofs --devices cpu,cuda --machine laptop --settings '{...}' --out-dir raw/roofs

It uses every core of the machine, as the "all" thread cells do, so the roofs bound them.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..cells import usable_cores
from ..records import ROOFS_SCHEMA
from .device_job import parse_args, run_devices
from .environment import model_name


def calibrate_device(args: argparse.Namespace, settings: dict, device: str, torch,
                     absent: str | None) -> tuple[list[dict], str | None, dict]:
    """The device's roofs, its name, and the threads they were measured with."""
    from ..measure.roofs import RoofSizes, calibrate
    from ..measure.threads import apply_thread_limits
    from ..units import parse_size

    grid = json.loads(args.grid)
    threads = apply_thread_limits(usable_cores(), torch)
    kind = "cpu" if device == "cpu" else "gpu"
    sizes = RoofSizes(parse_size(settings[f"{kind}_triad_size"]), int(settings[f"{kind}_matmul_n"]))
    points = calibrate(device, list(grid["libraries"]), list(grid["dtypes"]), sizes, float(settings["budget_s"]),
                       torch, absent)
    return points, model_name(device, torch), {"threads": threads}


def main(argv: list[str] | None = None) -> int:
    args = parse_args("Measure a device's memory bandwidth and matmul rate.", "roofs",
                      sys.argv[1:] if argv is None else argv, grid=True)
    return run_devices(args, usable_cores(), "roofs", ROOFS_SCHEMA, calibrate_device, "calibration_s")


if __name__ == "__main__":
    sys.exit(main())
