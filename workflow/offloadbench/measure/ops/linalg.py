"""Linear algebra: the compute-bound end of the catalogue."""

from __future__ import annotations

from ...catalogue import get_spec
from . import Op, rows_error, uniform_inputs


def _matmul(lib, a, b):
    return a @ b


OPS = [
    Op(
        spec=get_spec("matmul"),
        make_inputs=uniform_inputs(2, lambda n: (n, n)),
        compute=_matmul,
        error=rows_error(lambda inputs, rows: inputs[0][rows] @ inputs[1]),
    ),
]
