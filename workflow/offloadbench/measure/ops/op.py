"""What an op is: its spec, inputs, computation, host finish and error against float64, and
the helpers the op modules build theirs with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...catalogue import OpSpec, get_spec
from ..correctness import relative_error


@dataclass(frozen=True)
class Op:
    spec: OpSpec
    make_inputs: Callable[[np.random.Generator, int], list[np.ndarray]]  # float64, on the host
    compute: Callable  # compute(lib, *inputs) -> result: an array, or a tuple of arrays
    error: Callable  # error(inputs as float64, host result, rows) -> relative error
    finish: Callable[[np.ndarray], object] | None = None  # host work on the result
    checks_sampled_rows: bool = False  # its error looks at the sampled rows only
    kernel: object | None = None  # the user's kernels.Kernel, for user kernels

    @property
    def name(self) -> str:
        return self.spec.name

    def argument_name(self, index: int) -> str:
        """The name of the op's argument at `index` (a kernel's parameter after xp), as the
        report names an argument a call changes."""
        return self.kernel.parameter(index) if self.kernel is not None else f"#{index + 1}"


def _uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.random(shape, dtype=np.float64) * 2.0 - 1.0


def spec_inputs(spec: OpSpec, adjust: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None):
    """Arrays of the spec's input shapes, uniform in [-1, 1) (random, never zeros), then
    `adjust`ed where the maths needs structure (a symmetric or a well-conditioned matrix)."""

    def make(rng: np.random.Generator, n: int) -> list[np.ndarray]:
        arrays = [_uniform(rng, shape) for shape in spec.input_shapes(n)]
        return adjust(arrays) if adjust else arrays

    return make


def rows_error(reference_rows: Callable[[list[np.ndarray], np.ndarray], np.ndarray]):
    """An error function that compares sampled rows of a 2-D result with their reference."""

    def error(inputs: list[np.ndarray], result: np.ndarray, rows: np.ndarray) -> float:
        return relative_error(np.asarray(result)[rows], reference_rows(inputs, rows))

    return error


def float64_error(compute: Callable):
    """An error function that compares the whole result with the same maths, `compute`, run
    by NumPy on the float64 inputs: for ops whose reference costs no more than the op."""

    def error(inputs: list[np.ndarray], result, rows: np.ndarray) -> float:
        return relative_error(result, compute(np, *inputs))

    return error


def spec_op(name: str, compute: Callable, error: Callable | None = None, adjust=None, **extra) -> Op:
    """The op `name` on uniform inputs of its spec's shapes (see `spec_inputs`), checked in
    full against float64 NumPy unless another `error` is given; `extra`: the Op's other
    fields (a host finish, checks of sampled rows)."""
    spec = get_spec(name)
    return Op(spec=spec, make_inputs=spec_inputs(spec, adjust), compute=compute,
              error=error or float64_error(compute), **extra)
