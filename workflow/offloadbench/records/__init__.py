"""Records: what a run writes and reads back, the boundary between measuring and analysing.

- `documents`: JSON read within bounds (finite numbers, depth, text lengths) and written atomically;
- `schemas`: every file's schema and the one-line refusal of a file that breaks it;
- `types`: the typed, frozen objects a record becomes when it is read (`CellRecord`,
  `RoundRecord`, `SettleRecord`, `DeviceRecord`, `Environment`): the analysis and the
  report read their attributes, never the documents' keys;
- `store`: the one builder of a cell's record, and the readers, older versions included.
- `legacy`: what older record versions wrote, in the current version's terms (the typed
  readers bring each older part up to date there).
"""

from .documents import write_bytes_atomic, write_json_atomic
from .schemas import (
    CELL_SCHEMA,
    ENVIRONMENT_SCHEMA,
    ROOFS_SCHEMA,
    TRANSFER_SCHEMA,
    MalformedRecord,
    validate_record,
    warm_validators,
)
from .store import (
    DOCUMENT_VERSION,
    FAILED,
    SCHEMA_VERSION,
    cell_record,
    check_record_path,
    device_samples,
    load_device_record,
    load_environment,
    load_judging,
    load_record,
    load_round,
    load_settle,
    read_json,
    samples_held,
    settings_differ,
)
from .types import CellRecord, DeviceRecord, Environment, RoundRecord, SettleRecord

__all__ = [
    "CELL_SCHEMA",
    "DOCUMENT_VERSION",
    "ENVIRONMENT_SCHEMA",
    "FAILED",
    "ROOFS_SCHEMA",
    "SCHEMA_VERSION",
    "TRANSFER_SCHEMA",
    "CellRecord",
    "DeviceRecord",
    "Environment",
    "MalformedRecord",
    "RoundRecord",
    "SettleRecord",
    "cell_record",
    "check_record_path",
    "device_samples",
    "load_device_record",
    "load_environment",
    "load_judging",
    "load_record",
    "load_round",
    "load_settle",
    "read_json",
    "samples_held",
    "settings_differ",
    "validate_record",
    "warm_validators",
    "write_bytes_atomic",
    "write_json_atomic",
]
