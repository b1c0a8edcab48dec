"""The stand-in GPU's CuPy: a `cupy` whose arrays live on the stand-in device, so that the
tests take CuPy's paths of the measuring code on a machine without a GPU, and fail where
CuPy fails.

`standin_gpu.install` puts it in `sys.modules` as `cupy` (and `cupyx`) where the stand-in
is switched on, so a real CuPy is never shadowed elsewhere. Its arrays hold NumPy arrays;
their work runs on the CPU and goes on the stand-in's stream, as torch's does. Where CuPy
fails, it fails:
- an array refuses implicit conversion to NumPy (`np.asarray(x)`, a NumPy function mixing
  it with host arrays): "Implicit conversion to a NumPy array is not allowed";
- a call that mixes its arrays with NumPy arrays raises "Unsupported type";
- its work is asynchronous, as on the stand-in GPU: only a synchronisation (or a copy to
  the host) waits for it, so a timed region without one reads too fast;
- a process forked after CUDA was used cannot use it; CUDA_VISIBLE_DEVICES="" hides it;
- allocations count against the stand-in's memory (shared with torch's) and past it raise
  an out-of-memory error; its memory pool keeps what it freed, as CuPy's does.
Every call, copy and synchronisation goes into the stand-in's log (`recording()`).
"""

from __future__ import annotations

import operator
import sys
import time
import types
import weakref

import numpy as np
import standin_gpu

VERSION = "14.2.0+standin"
IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy "
            "array explicitly.")


class OutOfMemoryError(MemoryError):
    """cupy.cuda.memory.OutOfMemoryError."""


class MemoryPool:
    """CuPy's default pool: it keeps the blocks its arrays free for reuse, so the bytes it
    holds only fall when `free_all_blocks` gives them back."""

    def __init__(self):
        self.used = 0
        self.held = 0

    def allocate(self, nbytes: int) -> None:
        device = standin_gpu.state()
        grow = max(0, self.used + nbytes - self.held)
        if grow and device.allocated + grow > device.capacity:
            raise OutOfMemoryError(f"Out of memory allocating {nbytes:,} bytes (allocated so far: "
                                   f"{self.used:,} bytes). (stand-in GPU)")
        device.allocated += grow
        device.peak = max(device.peak, device.allocated)
        self.used += nbytes
        self.held += grow

    def release(self, nbytes: int) -> None:
        self.used -= nbytes

    def used_bytes(self) -> int:
        return self.used

    def total_bytes(self) -> int:
        return self.held

    def free_all_blocks(self) -> None:
        standin_gpu.state().allocated -= self.held - self.used
        self.held = self.used


POOL = MemoryPool()
PINNED: dict[int, int] = {}  # host data address -> arrays holding it


def _unpin(address: int) -> None:
    PINNED[address] -= 1
    if PINNED[address] <= 0:
        del PINNED[address]


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def is_pinned(array) -> bool:
    return isinstance(array, np.ndarray) and _address(array) in PINNED


def _refuse_host_arrays(values) -> None:
    for value in values:
        if isinstance(value, np.ndarray):
            raise TypeError(f"Unsupported type {type(value)}")
        if isinstance(value, tuple | list):
            _refuse_host_arrays(value)


def _plain(value):
    if isinstance(value, ndarray):
        return value._data
    if isinstance(value, tuple | list):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _arrays(values) -> list:
    found = []
    for value in values:
        if isinstance(value, ndarray):
            found.append(value)
        elif isinstance(value, tuple | list):
            found += _arrays(value)
    return found


def _adopt(value, given: dict):
    """Results of device work as device arrays: an input's memory stays that input (`out=`,
    in-place operators), NumPy's scalars become 0-d arrays, as CuPy's reductions give."""
    if isinstance(value, np.ndarray):
        own = given.get(id(value))
        return own if own is not None else ndarray(value)
    if isinstance(value, np.generic):
        return ndarray(np.asarray(value))
    if isinstance(value, tuple | list):
        return type(value)(_adopt(v, given) for v in value)
    return value


def _call(fn, args: tuple, kwargs: dict, name: str):
    """One piece of device work: its arrays on the device, its time on the stream."""
    device = standin_gpu.state()
    device.init()
    _refuse_host_arrays(args)
    _refuse_host_arrays(tuple(kwargs.values()))
    device.flush()
    device.note("call", name)
    began = time.perf_counter()
    result = fn(*_plain(args), **_plain(kwargs))
    device.enqueue(time.perf_counter() - began + standin_gpu.LAUNCH_S, since=began)
    return _adopt(result, {id(a._data): a for a in _arrays((*args, *kwargs.values()))})


def _device_function(fn, name: str):
    def run(*args, **kwargs):
        return _call(fn, args, kwargs, name)

    run.__name__ = name
    return run


class ndarray:
    """An array on the stand-in device."""

    __array_priority__ = 1000

    def __init__(self, data: np.ndarray):
        self._data = data
        if data.flags.owndata:  # a view holds no memory of its own
            POOL.allocate(data.nbytes)
            weakref.finalize(self, POOL.release, data.nbytes)

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    nbytes = property(lambda self: self._data.nbytes)
    itemsize = property(lambda self: self._data.itemsize)
    strides = property(lambda self: self._data.strides)
    T = property(lambda self: _call(np.transpose, (self,), {}, "transpose"))
    device = property(lambda self: _Device(0))  # CuPy's Device, which NumPy's `device=` refuses

    def __array__(self, *args, **kwargs):
        raise TypeError(IMPLICIT)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _call(getattr(ufunc, method), inputs, kwargs, ufunc.__name__)

    def __array_function__(self, func, types_, args, kwargs):
        return _call(func, args, kwargs, func.__name__)

    def get(self, stream=None, out=None, blocking=True):
        """The array copied to the host (into `out`, which may be pinned), waiting for the
        work queued before it."""
        device = standin_gpu.state()
        device.init()
        device.flush()
        target = np.empty_like(self._data) if out is None else out
        np.copyto(target, self._data)
        device.copied("d2h", self._data.nbytes, pinned=is_pinned(out))
        device.wait()
        return target

    def set(self, host, stream=None):
        _copy_in(host, self._data)

    def __getitem__(self, key):
        index = _plain(key)  # an index may be a device array (a mask, a gather)
        return _call(lambda data: data[index], (self,), {}, "getitem")

    def __setitem__(self, key, value):
        index = _plain(key)
        _call(lambda data, new: data.__setitem__(index, new), (self, value), {}, "setitem")

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def _scalar(self):
        if self._data.size != 1:
            raise TypeError("only size-1 arrays can be converted to Python scalars")
        return self.get().item()

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def __bool__(self):
        return bool(self._scalar())

    def __repr__(self):
        return f"array({self._data!r}) (stand-in CuPy)"

    def __getattr__(self, name: str):
        """The array's methods (sum, astype, copy, reshape, ...), as device calls; none of
        NumPy's protocols (`__array_interface__` would hand NumPy the device's memory)."""
        if name.startswith("__"):
            raise AttributeError(name)
        attribute = getattr(self._data, name)
        if not callable(attribute):
            return attribute
        return _device_function(lambda *args, **kwargs: getattr(_plain(self), name)(*args, **kwargs), name)


def _operator(name: str, reflected: bool = False):
    fn = getattr(operator, name)

    def method(self, other):
        return _call(fn, (other, self) if reflected else (self, other), {}, name)

    return method


def _in_place(name: str):
    fn = getattr(operator, name)

    def method(self, other):
        _call(fn, (self, other), {}, name)
        return self  # the same array, written into

    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor",
              "lt", "le", "gt", "ge", "eq", "ne", "lshift", "rshift"):
    _dunder = _name.rstrip("_")
    setattr(ndarray, f"__{_dunder}__", _operator(_name))
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(ndarray, f"__r{_dunder}__", _operator(_name, reflected=True))
        setattr(ndarray, f"__i{_dunder}__", _in_place(f"i{_dunder}"))
def _unary(name: str):
    fn = getattr(operator, name)

    def method(self):
        return _call(fn, (self,), {}, name)

    return method


for _name in ("neg", "pos", "abs", "invert"):
    setattr(ndarray, f"__{_name}__", _unary(_name))
ndarray.__module__ = "cupy"
ndarray.__hash__ = None


def _copy_in(host, destination=None):
    """A host array copied to the device, the host waiting for it (CuPy copies pageable
    memory synchronously)."""
    device = standin_gpu.state()
    device.init()
    device.flush()
    host = np.asarray(host)
    if destination is None:
        destination = np.empty_like(host)
    np.copyto(destination, host)
    device.copied("h2d", host.nbytes, pinned=is_pinned(host))
    device.wait()
    return destination


def asarray(value, dtype=None, order=None):
    """A device array of `value`: a host array is copied over; a device array is itself."""
    if isinstance(value, ndarray):
        return value if dtype is None else value.astype(dtype)
    data = _copy_in(np.asarray(value, dtype=dtype))
    return ndarray(data)


def array(value, dtype=None, copy=True, order="K", **_):
    if isinstance(value, ndarray):
        return value.astype(dtype or value.dtype, copy=True)
    return ndarray(_copy_in(np.array(value, dtype=dtype, order=order)))


def asnumpy(value, stream=None, out=None):
    return value.get(out=out) if isinstance(value, ndarray) else np.asarray(value)


def get_array_module(*args):
    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else np


class _Namespace(types.ModuleType):
    """A NumPy module (numpy, numpy.linalg, numpy.fft, ...) whose functions run on the device."""

    def __init__(self, name: str, numpy_module, own: dict):
        super().__init__(name)
        self._numpy = numpy_module
        self.__dict__.update(own)

    def __getattr__(self, name: str):
        found = getattr(self._numpy, name)
        if isinstance(found, types.ModuleType):
            value = _Namespace(f"{self.__name__}.{name}", found, {})
        elif isinstance(found, type) or not callable(found):
            value = found  # dtypes and constants, as CuPy takes NumPy's
        else:
            value = _device_function(found, name)
        setattr(self, name, value)
        return value


def _synchronize() -> None:
    standin_gpu.state().synchronize()


class _Device:
    def __init__(self, index=0):
        self.id = index.id if isinstance(index, _Device) else int(index or 0)

    def synchronize(self) -> None:
        _synchronize()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Stream:
    def synchronize(self) -> None:
        _synchronize()


def _count() -> int:
    return len(standin_gpu.state().visible)


def empty_pinned(shape, dtype=np.float64, order="C"):
    """Page-locked host memory (cupyx.empty_pinned)."""
    array_ = np.empty(shape, dtype=dtype, order=order)
    address = _address(array_)
    PINNED[address] = PINNED.get(address, 0) + 1
    weakref.finalize(array_, _unpin, address)
    return array_


def zeros_pinned(shape, dtype=np.float64, order="C"):
    array_ = empty_pinned(shape, dtype, order)
    array_.fill(0)
    return array_


def modules() -> dict[str, types.ModuleType]:
    """`cupy` with its submodules, and `cupyx`, to put in sys.modules: enough of them that
    array-api-compat's CuPy namespace imports (`from cupy import *`, `cupy.cuda.device`)."""
    stream = _Stream()
    device = types.ModuleType("cupy.cuda.device")
    device.Device = _Device
    cuda = types.ModuleType("cupy.cuda")
    cuda.__dict__.update(
        Device=_Device, device=device, Stream=types.SimpleNamespace(null=stream), get_current_stream=lambda: stream,
        runtime=types.SimpleNamespace(deviceSynchronize=_synchronize, getDeviceCount=_count),
        memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
        is_available=lambda: bool(_count()))
    linalg, fft = _Namespace("cupy.linalg", np.linalg, {}), _Namespace("cupy.fft", np.fft, {})
    for sub, numpy_module in ((linalg, np.linalg), (fft, np.fft)):
        sub.__all__ = [name for name in dir(numpy_module) if not name.startswith("_") and callable(
            getattr(numpy_module, name)) and not isinstance(getattr(numpy_module, name), types.ModuleType)]
    own = {"ndarray": ndarray, "asarray": asarray, "array": array, "asnumpy": asnumpy, "cuda": cuda,
           "linalg": linalg, "fft": fft, "get_array_module": get_array_module,
           "get_default_memory_pool": lambda: POOL, "__version__": VERSION, "__file__": __file__}
    cupy = _Namespace("cupy", np, own)
    cupy.__all__ = sorted({name for name in np.__all__ if not name.startswith("_") and name not in ("linalg", "fft")}
                          | {"ndarray", "asarray", "array", "asnumpy", "get_array_module"})
    cupyx = types.ModuleType("cupyx")
    cupyx.__dict__.update(empty_pinned=empty_pinned, zeros_pinned=zeros_pinned)
    return {"cupy": cupy, "cupy.cuda": cuda, "cupy.cuda.device": device, "cupy.linalg": linalg, "cupy.fft": fft,
            "cupyx": cupyx}
