"""User kernels: the user's own NumPy functions, measured like the ops of the catalogue.

    from offloadbench import kernel

    @kernel
    def heat_step(xp, u, v):
        return u + 0.1 * (xp.roll(u, 1, axis=0) + xp.roll(u, -1, axis=0) - 2 * u) * v

`xp` is the array namespace: NumPy for numpy cells, torch through array-api-compat for
torch cells on any device, so one function serves every library, device and mode. A
function whose first parameter is not `xp` takes plain NumPy arrays: it is measured as
numpy and numpy compiled only.

Two ways to know a kernels file, kept apart on purpose:
- `read_kernel_files` parses it (`ast`, nothing runs): the config check, the grid and the
  duration estimate need the names, the parameters and the literal options, and must not
  import code that may import torch (the Snakefile's process stays light);
- `load_kernels` imports it, in measuring workers only: the code runs with the user's
  rights, like a test file.

Pure Python, no heavy imports: `offloadbench/__init__.py` re-exports `kernel`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import libraries
from .catalogue import KERNEL_FAMILY
from .errors import UserError
from .layout import RESERVED_NAMES

FAMILY = KERNEL_FAMILY  # the family every user kernel is shown under
DEFAULT_N_MEANS = "side of the n×n array arguments"
# The options of @kernel: literals whose value the config check reads from the source without
# running it (n_means to summary), then the functions only the measuring workers run.
OPTIONS = ("n_means", "min_size", "tolerance", "summary", "inputs", "flops", "bytes")


class KernelError(UserError):
    """A kernels file that cannot be used; one line names the file (and line) and why."""


@dataclass(frozen=True)
class Kernel:
    """A user function with its optional models; what `@kernel` returns.

    inputs(n, rng) -> list of float64 NumPy arrays (default: one n×n array per parameter,
    uniform in [-1, 1)); flops(n) and bytes(n, itemsize) the FLOP count and the least
    memory traffic of one call; tolerance the relative error allowed against float64
    NumPy (a number, or a mapping dtype -> number); n_means what the size n is."""

    fn: Callable
    takes_xp: bool
    arrays: int  # parameters after xp (arrays, or scalars where `inputs` gives them)
    parameters: tuple[str, ...] = ()  # their names, as the report names an argument a call changes
    inputs: Callable | None = None
    flops: Callable | None = None
    bytes: Callable | None = None
    tolerance: float | Mapping[str, float] | None = None
    n_means: str = DEFAULT_N_MEANS
    min_size: int = 1
    summary: str = ""

    @property
    def name(self) -> str:
        return self.fn.__name__

    def parameter(self, index: int) -> str:
        """The name of the parameter at `index` after xp ("#3" where the signature has none)."""
        return self.parameters[index] if index < len(self.parameters) else f"#{index + 1}"

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _parameters(names: list[str]) -> tuple[bool, int]:
    """Whether a kernel takes `xp` first, and how many parameters follow."""
    takes_xp = bool(names) and names[0] == "xp"
    return takes_xp, len(names) - takes_xp


def kernel(fn: Callable | None = None, **options):
    """Mark a function as a kernel: `@kernel` or `@kernel(flops=..., bytes=..., ...)`."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"@kernel: unknown option {unknown[0]!r} (known: {', '.join(OPTIONS)})")

    def wrap(function: Callable) -> Kernel:
        names = [p.name for p in inspect.signature(function).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        takes_xp, arrays = _parameters(names)
        doc = (function.__doc__ or "").strip().splitlines()
        return Kernel(function, takes_xp, arrays, tuple(names[takes_xp:]),
                      **{"summary": doc[0] if doc else "", **options})

    return wrap(fn) if fn is not None else wrap


@dataclass(frozen=True)
class KernelInfo:
    """What the source says about one kernel, read without running it."""

    name: str
    file: str
    line: int
    takes_xp: bool
    arrays: int
    options: dict = field(default_factory=dict)  # the literal options; callables as True
    sha256: str = ""  # of the file, so that an edited kernel is measured again
    # the elements of its inputs as a function of n, where a run measured them (estimate.py)
    measured_inputs: Callable[[float], float] | None = None

    @property
    def own_inputs(self) -> bool:
        """Whether it makes its own inputs (`inputs=`), whose sizes only running it tells."""
        return bool(self.options.get("inputs"))

    @property
    def libraries(self) -> tuple[str, ...]:
        return libraries.for_kernel(self.takes_xp)

    @property
    def min_size(self) -> int:
        value = self.options.get("min_size", 1)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else 1

    @property
    def n_means(self) -> str:
        value = self.options.get("n_means")
        return value if isinstance(value, str) else DEFAULT_N_MEANS

    def describe(self) -> dict:
        """What a record keeps of the kernel: enough to show it without the file."""
        return {"kind": "kernel", "family": FAMILY, "file": self.file, "sha256": self.sha256,
                "takes_xp": self.takes_xp, "n_means": self.n_means}


def _decorator_options(node: ast.FunctionDef) -> dict | None:
    """The options of a `@kernel` or `@kernel(...)` decorator, or None when there is none."""
    for decorator in node.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call else decorator
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
        if name != "kernel":
            continue
        options = {}
        for keyword in call.keywords if call else []:
            try:
                options[keyword.arg] = ast.literal_eval(keyword.value)
            except ValueError:
                options[keyword.arg] = True  # a function: known to be given, run in the worker
        return options
    return None


def read_kernel_file(path: str, where: str) -> dict[str, KernelInfo]:
    """The kernels of one file, from its source alone; KernelError in one line."""
    source_path = Path(path)
    if not source_path.is_file():
        raise KernelError(f"{where}: no file {path!r} (paths are relative to the folder snakemake runs in)")
    data = source_path.read_bytes()
    try:
        tree = ast.parse(data, filename=path)
    except SyntaxError as error:
        raise KernelError(f"{path}:{error.lineno}: syntax error: {error.msg}") from None
    except (MemoryError, RecursionError, ValueError) as error:  # nested too deep, NUL bytes, ...
        raise KernelError(f"{path}: Python cannot parse this file ({type(error).__name__}"
                          f"{': ' + str(error)[:200] if str(error) else ''})") from None
    digest = hashlib.sha256(data).hexdigest()
    found = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        options = _decorator_options(node)
        if options is None:
            continue
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise KernelError(f"{path}:{node.lineno}: @kernel of {node.name}: unknown option {unknown[0]!r} "
                              f"(known: {', '.join(OPTIONS)})")
        takes_xp, arrays = _parameters([a.arg for a in node.args.posonlyargs + node.args.args])
        if arrays == 0 and not options.get("inputs"):
            raise KernelError(f"{path}:{node.lineno}: kernel {node.name} takes no array argument")
        found[node.name] = KernelInfo(node.name, path, node.lineno, takes_xp, arrays, options, digest)
    return found


def read_kernel_files(paths: list[str], builtin: Mapping | tuple = ()) -> dict[str, KernelInfo]:
    """Every kernel of the config's `kernels` files; a name that clashes with an op of the
    catalogue (`builtin`) or with another kernel is refused in one line."""
    kernels: dict[str, KernelInfo] = {}
    for i, path in enumerate(paths):
        where = f"config key kernels[{i}]"
        found = read_kernel_file(path, where)
        if not found:
            raise KernelError(f"{where}: {path} defines no function decorated with @kernel")
        for name, info in found.items():
            if name in RESERVED_NAMES:
                raise KernelError(f"{path}:{info.line}: kernel {name!r} has the name of a results folder "
                                  f"({', '.join(RESERVED_NAMES)}); rename it")
            if name in builtin:
                raise KernelError(f"{path}:{info.line}: kernel {name!r} has the name of an op of the catalogue; "
                                  "rename it")
            if name in kernels:
                first = kernels[name]
                raise KernelError(f"{path}:{info.line}: kernel {name!r} is also defined in {first.file}:{first.line}; "
                                  "rename one of them")
            kernels[name] = info
    return kernels


def load_kernels(paths: list[str]) -> dict[str, Kernel]:
    """Import the kernels files (measuring workers only) and return their kernels by name."""
    kernels = {}
    for i, path in enumerate(paths):
        spec = importlib.util.spec_from_file_location(f"offloadbench_user_kernels_{i}", path)
        if spec is None or spec.loader is None:
            raise KernelError(f"{path}: cannot be imported as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # TorchDynamo looks a function's globals up through its module
        spec.loader.exec_module(module)
        for value in vars(module).values():
            if isinstance(value, Kernel):
                kernels[value.name] = value
    return kernels


def kernel_tolerance(k: Kernel, dtype: str) -> float | None:
    """The kernel's own tolerance for a dtype, or None for the dtype-aware default."""
    value = k.tolerance.get(dtype) if isinstance(k.tolerance, Mapping) else k.tolerance
    return float(value) if value is not None and math.isfinite(float(value)) else None
