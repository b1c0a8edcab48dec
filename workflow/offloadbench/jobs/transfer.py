"""The transfer job: the copy-bandwidth sweep of one device, alone on the machine.

    python -m offloadbench.jobs.transfer --devices cuda,mps --machine laptop --settings '{...}' --out-dir raw/transfer
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..measure.devices import import_torch
from ..measure.threads import thread_env
from ..records import TRANSFER_SCHEMA
from .device_job import device_record, parse_args, run_devices
from .environment import known_absent, model_name


def sweep_record(args: argparse.Namespace, device: str, waited: float) -> dict:
    os.environ.update(thread_env(1))  # a copy is driven by one host thread; set before torch loads
    from ..measure.provenance import utc_now
    from ..measure.timing import StopRule
    from ..measure.transfer import link_rate, sweep
    from ..units import parse_size

    settings = json.loads(args.settings)
    started, begin = utc_now(), time.perf_counter()
    absent = known_absent(args.environment, device)
    torch = None if absent else import_torch()
    device_name = model_name(device, torch)
    stop = StopRule(target_rel_ci=float(settings["target_rel_ci"]), budget_s=float(settings["budget_s"]))
    points = sweep(torch, device, [parse_size(s) for s in settings["sizes"]], list(settings["memory"]), stop, absent)
    return device_record("transfer", TRANSFER_SCHEMA, args, device, device_name, points, settings, started, waited,
                         link=link_rate(settings.get("link_gbs"), device, torch) if device_name else None,
                         sweep_s=time.perf_counter() - begin)


def main(argv: list[str] | None = None) -> int:
    args = parse_args("Sweep host<->device copy bandwidth for one device.", "transfer",
                      sys.argv[1:] if argv is None else argv)
    return run_devices(args, sweep_record)


if __name__ == "__main__":
    sys.exit(main())
