"""Spectral: the 2-D real FFT. NumPy ≥ 2 and torch both transform float32 in float32."""

from __future__ import annotations

from . import spec_op


def _fft2(lib, x):
    return lib.fft.rfft2(x)


OPS = [
    spec_op("fft2", _fft2),
]
