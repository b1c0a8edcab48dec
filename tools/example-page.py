"""Write the example page of a results folder (its answer, heatmap and copy-cost figure) into
a folder, as `make example` does for docs/example/ from the shipped H200 results.

    python tools/example-page.py <results folder> <out folder>
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from offloadbench.errors import UserError, one_line
from offloadbench.report.publish import write_example

if len(sys.argv) != 3:
    sys.exit(__doc__.strip().splitlines()[-1].strip())
try:
    for path in write_example(Path(sys.argv[1]), Path(sys.argv[2])):
        print(f"wrote {path}")
except UserError as error:
    sys.exit(f"error: {one_line(error, 500)}")
