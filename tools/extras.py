"""The pip requirements files of the extra libraries a config's grid names (JAX), one per
line, for `make run` to install before the pipeline runs; nothing for the default grid.

    python tools/extras.py config/jax.yaml      # requirements-jax.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from offloadbench import libraries


def extras(config_path: Path) -> list[str]:
    grid = (yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}).get("grid") or {}
    named = grid.get("libraries") or []
    return sorted({libraries.get(name).requirements for name in named
                   if name in libraries.NAMES and libraries.get(name).requirements})


if __name__ == "__main__":
    print("\n".join(extras(Path(sys.argv[1]))))
