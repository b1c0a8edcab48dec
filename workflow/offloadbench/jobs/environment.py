"""The environment job: write this machine's provenance, environment.json, once.

    python -m offloadbench.jobs.environment --machine laptop --out results/laptop/environment.json

It runs in the rule's own environment (as the workers do), so it records the versions that
are measured, and it stops the run when the grid needs torch and this environment has
none, rather than letting every torch cell be skipped. The other measuring jobs ask here
what this machine is: a device environment.json records as absent (`known_absent`), a host
whose hardware differs from what it recorded (`foreign_host`), a device's model name.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import libraries as registry
from ..errors import UserError
from ..logs import stderr_to_log, tell
from ..machine import mismatch
from ..measure import devices
from ..records import load_environment, write_json_atomic


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Record this machine's hardware and software.")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--libraries", default="numpy,torch", help="libraries the grid measures")
    parser.add_argument("--compiled-on", default="", help="the devices the grid has compiled cells on, comma-separated")
    parser.add_argument("--out", required=True)
    parser.add_argument("--log")
    return parser.parse_args(argv)


def known_absent(environment_path: str | None, device: str) -> str | None:
    """Why environment.json says `device` cannot be used here, or None."""
    if device == "cpu" or not environment_path or not os.path.exists(environment_path):
        return None
    return load_environment(environment_path).device_reason(device)


def model_name(device: str, torch) -> str | None:
    """Which device this is ("cpu" for the host), or None where it cannot be used here."""
    return None if devices.unavailable_reason(device, torch) else devices.get(device, torch).model_name()


def foreign_host(environment_path: str | None, fingerprint: dict) -> str | None:
    """Why this host must not measure under the machine label of `environment_path`: its
    hardware differs from what that label recorded (None: it may, or nothing is recorded)."""
    if not environment_path or not os.path.exists(environment_path):
        return None
    different = mismatch(load_environment(environment_path).fingerprint, fingerprint)
    if not different:
        return None
    return (f"this host's {different} recorded in {environment_path}: choose a new `machine:` label rather than "
            "mixing machines")


def capture(machine: str, libraries: list[str], compiled_on: set[str] = frozenset()) -> dict:
    from ..measure.provenance import environment

    torch = devices.import_torch()  # first: the stand-in GPU brings a CuPy of its own
    versions = registry.versions()
    # an extra the grid names but this Python lacks: its cells are skipped, with the way to it
    missing = {name: f"{name} is not installed in the Python that runs the measure rules ({sys.executable}): "
                     f"pip install -r {registry.get(name).requirements} (`make run` does it where the config names it)"
               for name in libraries if versions[name] is None and registry.get(name).requirements}
    needing = [name for name in libraries if registry.get(name).uses_torch]
    if torch is None and needing:
        raise UserError(
            f"the grid needs torch (for {', '.join(needing)}), but the Python that runs the measure rules "
            f"({sys.executable}) cannot import it: install requirements.txt there, or run with --sdm conda"
        )
    return {**environment(torch, machine, compiled_on), "libraries_missing": missing}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with stderr_to_log(args.log) as terminal:
        try:
            write_json_atomic(args.out, capture(args.machine, args.libraries.split(","),
                                                     set(filter(None, args.compiled_on.split(",")))))
        except UserError as error:
            tell(terminal, f"error: {error}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
