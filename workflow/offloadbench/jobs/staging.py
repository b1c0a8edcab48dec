"""Where a round's records wait and where they go: each finished record waits in
raw/.partial/p<k>/ until the round ends (every path absolute, so nothing a kernel does to
its working directory moves one), then moves to raw/<cell>/p<k>.json with the rendering
of an op that plots; a rerun of an interrupted round finds the waiting ones and redoes
only the rest.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from .. import layout
from ..cells import Cell


class Staging:
    """The records of round `round_number` under `raw`."""

    def __init__(self, raw: Path, round_number: int):
        self.raw, self.round = raw.resolve(), round_number

    def partial(self, cell: Cell) -> Path:
        return self.raw / layout.partial_relpath(cell, self.round)

    def final(self, cell: Cell) -> Path:
        return self.raw / layout.record_relpath(cell, self.round)

    def publish(self, cells) -> None:
        """Move the round's finished records from .partial/ to their places."""
        for cell in cells:
            partial = self.partial(cell)
            if partial.exists():
                final = self.final(cell)
                final.parent.mkdir(parents=True, exist_ok=True)
                rendering = partial.with_suffix(".png")  # what ops that plot rendered
                if rendering.exists():
                    os.replace(rendering, final.with_suffix(".png"))
                os.replace(partial, final)
        partial = self.raw / layout.partial_dir(self.round)
        shutil.rmtree(partial, ignore_errors=True)
        with contextlib.suppress(OSError):  # other rounds may still be waiting there
            partial.parent.rmdir()
