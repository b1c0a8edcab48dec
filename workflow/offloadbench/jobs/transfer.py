"""The transfer job: the copy-bandwidth sweep of one device, alone on the machine.

    python -m offloadbench.jobs.transfer --devices cuda,mps --machine laptop --settings '{...}' --out-dir raw/transfer
"""

from __future__ import annotations

import argparse
import sys

from ..records import TRANSFER_SCHEMA
from .device_job import parse_args, run_devices
from .environment import model_name


def sweep_device(args: argparse.Namespace, settings: dict, device: str, torch,
                 absent: str | None) -> tuple[list[dict], str | None, dict]:
    """The device's copy sweep, its name, and its link's rate."""
    from ..measure.timing import StopRule
    from ..measure.transfer import link_rate, sweep
    from ..units import parse_size

    device_name = model_name(device, torch)
    stop = StopRule(target_rel_ci=float(settings["target_rel_ci"]), budget_s=float(settings["budget_s"]))
    points = sweep(torch, device, [parse_size(s) for s in settings["sizes"]], list(settings["memory"]), stop, absent)
    return points, device_name, {"link": link_rate(settings.get("link_gbs"), device, torch) if device_name else None}


def main(argv: list[str] | None = None) -> int:
    args = parse_args("Sweep host<->device copy bandwidth for one device.", "transfer",
                      sys.argv[1:] if argv is None else argv)
    return run_devices(args, 1, "transfer", TRANSFER_SCHEMA, sweep_device, "sweep_s")  # a copy is driven by one thread


if __name__ == "__main__":
    sys.exit(main())
