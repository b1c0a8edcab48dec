"""What older record versions wrote, in the current version's terms: the one module that knows
them. The typed readers (types.py) bring each older part up to date here, then read only the
current names.

- version 2 named a record's processes `rounds` (a cell record's `process.rounds`, a round's
  `rounds`);
- before version 3 the measure setting `random_state` was called `seed`;
- before version 4 a noise flag kept only its words: "[region: ]kind ... 12.0% ...";
- a settle record from before typed advice said in words what would decide a comparison.

The shipped H200 results are version 1 records, and the tests read each older form named
here (tests/analysis/test_records.py, tests/jobs/test_settle.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

RENAMED_SETTINGS = {"seed": "random_state"}
# A flag's words began with one of these before version 4: (its words' prefix, its kind).
FLAG_PREFIXES = (("CI not reached", "not_converged"), ("bimodal samples", "bimodal"), ("drift", "drift"),
                 ("CPU clock changed", "cpu_clock"), ("GPU clock changed", "gpu_clock"), ("disturbed", "disturbed"))
# The kinds found in one timed region (the others are about the whole sampling window, region "").
REGION_KINDS = ("not_converged", "bimodal", "drift")


def processes(data: Mapping):
    """The processes a record counts, as written: `processes`, or version 2's `rounds`."""
    return data.get("processes", data.get("rounds"))


def settings(data: Mapping) -> dict:
    """A record's measure settings under their current names."""
    return {RENAMED_SETTINGS.get(key, key): value for key, value in data.items()}


def flag(text: str) -> dict:
    """A flag kept as words (before version 4) as the current version writes one: its kind,
    region ("" for the whole sampling window), size (the words' first percentage, as a
    fraction) and the words themselves."""
    head, _, tail = text.partition(": ")  # "end_to_end: drift: ..." names its region; "drift: ..." does not
    named = tail and head.isidentifier() and head not in ("drift", "disturbed")
    region, rest = (head, tail) if named else ("", text)
    kind = next((k for prefix, k in FLAG_PREFIXES if rest.startswith(prefix)), "")
    found = re.search(r"(\d+(?:\.\d+)?)%", rest)
    return {"kind": kind, "region": region or ("compute" if kind in REGION_KINDS else ""),
            "size": float(found.group(1)) / 100 if found else 0.0, "text": text}


def would_decide(text: str) -> dict:
    """A settle record's advice kept as words, as the current version writes it: the
    processes per cell that would decide the comparison (None: no number would), and
    whether its cells share every core with the orchestrator."""
    found = re.search(r"about (\d+) processes", text)
    return {"processes": int(found.group(1)) if found else None, "shares_cores": "every core" in text}
