"""The signs of packed and zoned values on the GPU (``signs="keep"``): the CUDA side of
:mod:`kernels.signs`, one record a thread, the same per-value functions.

``read_signs`` and ``write_signs`` take device arrays (the records as flat uint8, the
elements' offsets, the signs as uint8 ``[n, elements]``) and the field's facts as
:mod:`kernels.signs` takes them; ``write_signs`` gives the first element whose kept sign
does not fit its value, or -1.
"""

import numpy as np
from numba import cuda

from ..signs import read_sign_at, write_sign_at

THREADS = 256
MAX_BLOCKS = 65535


@cuda.jit
def _read_signs(buf, stride, n, offs, width, zoned, leading, ascii_, signed, positive, out):
    start, step = cuda.grid(1), cuda.gridsize(1)
    for r in range(start, n, step):
        for k in range(offs.shape[0]):
            out[r, k] = read_sign_at(buf, r * stride + offs[k], width, zoned, leading, ascii_, signed, positive)


@cuda.jit
def _write_signs(buf, stride, n, offs, width, zoned, leading, ascii_, signed, kept, bad):
    start, step = cuda.grid(1), cuda.gridsize(1)
    c = offs.shape[0]
    for r in range(start, n, step):
        for k in range(c):
            if not write_sign_at(buf, r * stride + offs[k], width, zoned, leading, ascii_, signed, kept[r, k]):
                cuda.atomic.min(bad, 0, r * c + k)


def _blocks(n):
    return max(1, min(-(-n // THREADS), MAX_BLOCKS))


def read_signs(buf, stride, n, offs, width, zoned, leading, ascii_, signed, positive, out):
    """As :func:`kernels.signs.read_signs`, on the device arrays ``buf``, ``offs``, ``out``."""
    if n:
        _read_signs[_blocks(n), THREADS](buf, stride, n, offs, width, zoned, leading, ascii_, signed, positive, out)


def write_signs(buf, stride, n, offs, width, zoned, leading, ascii_, signed, kept):
    """As :func:`kernels.signs.write_signs`, on the device arrays ``buf``, ``offs``, ``kept``:
    every element whose kept sign fits is written; the first that does not, or -1."""
    if not n:
        return -1
    none = np.iinfo(np.int64).max
    bad = cuda.to_device(np.array([none], dtype=np.int64))
    _write_signs[_blocks(n), THREADS](buf, stride, n, offs, width, zoned, leading, ascii_, signed, kept, bad)
    first = int(bad.copy_to_host()[0])
    return -1 if first == none else first


def KERNELS():  # noqa: N802 - the name kernels/ptx.py looks for (--also)
    """The kernels of this module with the argument types their host functions pass."""
    from numba import types as t

    u8, i64, u8_2d = t.uint8[::1], t.int64[::1], t.uint8[:, ::1]
    facts = (t.int64, t.int64, i64, t.int64, t.int64, t.boolean, t.boolean, t.boolean)  # (zoned: 0, 1, SEPARATE)
    return {
        "read_signs": (_read_signs, (u8, *facts, t.int64, u8_2d)),
        "write_signs": (_write_signs, (u8, *facts, u8_2d, i64)),
    }
