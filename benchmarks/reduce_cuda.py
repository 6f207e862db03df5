"""Column reductions on an NVIDIA GPU with Numba CUDA, over AoS records or SoA columns.

The field is passed as a 2-D device array ``a`` of the field's type over the record
bytes, ``(records, itemsize // width)``, and the column ``col = offset // width``
(a contiguous SoA column is ``(n, 1)``, column 0). Each thread reduces a grid-stride
run of rows in registers, then adds its partial into the one-element result with an
atomic: a few thousand atomics for any number of rows. Imported only when used; runs
under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) without a GPU.
"""

import math

import numpy as np
from numba import cuda

__all__ = ["field_matrix", "reduce_field", "OPS"]

THREADS = 256
OPS = ("sum", "mean", "min", "max", "count>x")


@cuda.jit
def _sum(a, col, start, out):
    acc = start  # zero, in the accumulator's type
    for i in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        acc += a[i, col]
    cuda.atomic.add(out, 0, acc)


@cuda.jit
def _min(a, col, start, out):
    m = start  # the first row's value: any value of the column is a safe start
    for i in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        m = min(m, a[i, col])
    cuda.atomic.min(out, 0, m)


@cuda.jit
def _max(a, col, start, out):
    m = start
    for i in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        m = max(m, a[i, col])
    cuda.atomic.max(out, 0, m)


@cuda.jit
def _count_greater(a, col, x, out):
    c = 0
    for i in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        if a[i, col] > x:
            c += 1
    cuda.atomic.add(out, 0, c)


def field_matrix(raw, itemsize, offset, dtype):
    """View record bytes (a 1-D uint8 array of ``n * itemsize`` bytes, on the device or
    the host) as the ``(n, itemsize // width)`` array of the field's type, and the
    field's column in it."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize
    if offset % width or itemsize % width:
        raise ValueError(
            f"a field of {width} bytes at offset {offset} of a {itemsize}-byte record is not "
            f"aligned to its width; this kernel reads aligned fields only"
        )
    return raw.view(dtype).reshape(-1, itemsize // width), offset // width


def reduce_field(a, col, op, x=0, blocks=None):
    """One reduction over column ``col`` of the device array ``a``; a host scalar."""
    n = a.shape[0]
    if n == 0:
        raise ValueError(f"{op} of an empty column has no value")
    blocks = blocks or min(math.ceil(n / THREADS), 1024)
    acc_type = np.float64 if a.dtype.kind == "f" else np.int64  # integers up to 32 bits wide
    if op in ("sum", "mean"):
        out = cuda.to_device(np.zeros(1, acc_type))
        _sum[blocks, THREADS](a, col, acc_type(0), out)
        total = out.copy_to_host()[0]
        return total / n if op == "mean" else total
    if op in ("min", "max"):
        first = a[0:1, col]
        first = first.copy_to_host() if hasattr(first, "copy_to_host") else np.asarray(first)
        start = first.astype(acc_type)
        out = cuda.to_device(start)
        (_min if op == "min" else _max)[blocks, THREADS](a, col, start[0], out)
        return out.copy_to_host()[0]
    if op == "count>x":
        out = cuda.to_device(np.zeros(1, np.int64))
        _count_greater[blocks, THREADS](a, col, a.dtype.type(x), out)
        return int(out.copy_to_host()[0])
    raise ValueError(f"op must be one of {OPS}, got {op!r}")


def signatures():
    """Argument types of the kernels as :func:`reduce_field` launches them on a float64
    field of records (the PTX compile test walks these)."""
    from numba import types as t

    a = t.float64[:, :]
    return {
        "sum": (_sum, (a, t.int64, t.float64, t.float64[::1])),
        "min": (_min, (a, t.int64, t.float64, t.float64[::1])),
        "max": (_max, (a, t.int64, t.float64, t.float64[::1])),
        "count_greater": (_count_greater, (a, t.int64, t.float64, t.int64[::1])),
    }


KERNELS = signatures
"""This module's kernels with their argument types, for ``python -m layouts.kernels.ptx
--also layouts.benchmarks.reduce_cuda`` (the sm_90 report)."""
PREFIX = "reduce_"
