"""Every op of the catalogue (arrays.py, linalg.py, plotting.py) and the user's kernels
(user.py), found by name.

An op (op.py) pairs its spec (`offloadbench.catalogue`: what n means, shapes, FLOP and byte
models) with random inputs, the computation (one function for every library, `lib`
being its array namespace; the few API differences are branched on inside), an optional host
finish (plotting), and its error against a float64 reference computed from the same
rounded inputs, on sampled rows where a full reference would cost more than the op.
"""

from __future__ import annotations

import functools

from ...catalogue import get_spec
from .op import Op

__all__ = ["Op", "get_op"]


@functools.cache
def _registry() -> dict[str, Op]:
    from . import arrays, linalg, plotting

    modules = (linalg, plotting, arrays)
    return {op.name: op for module in modules for op in module.OPS}


def get_op(name: str, kernels: dict | None = None) -> Op:
    """An op of the catalogue, or the user kernel `name` of `kernels` (name -> kernels.Kernel)."""
    if kernels and name in kernels:
        from .user import kernel_op

        return kernel_op(kernels[name])
    if name not in _registry():
        get_spec(name)  # an unknown name: the catalogue's error lists the known ones
        raise KeyError(f"op {name!r} has a spec but no implementation")
    return _registry()[name]
