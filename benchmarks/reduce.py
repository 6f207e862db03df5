"""Column reductions on the CPU with Numba: sum, mean, min, max and a filtered count.

The same functions take a contiguous SoA column or a strided field view of AoS records
(``records["qty"]``, a view whose stride is the record size): the benchmarks use them
to price the layout, with one loop and two memory access patterns. Rows are cut into
one chunk per thread, as in :mod:`kernels.cpu`; partial results are combined here.
Integers sum into int64 (uint64 for unsigned), floats into float64.
"""

import numpy as np
from numba import njit

from layouts.kernels.threads import chunk_starts, thread_pool

__all__ = ["column_sum", "column_mean", "column_min", "column_max", "count_greater"]

_jit = njit(nogil=True, cache=True)


@njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
def _sum(a, r0, r1, zero):
    acc = zero  # the accumulator's type; reassociation lets float sums use vector lanes
    for i in range(r0, r1):  # (a different rounding order from NumPy's pairwise sum)
        acc += a[i]
    return acc


@_jit
def _extreme(a, r0, r1, largest):
    """The smallest (or largest) value of rows r0..r1; a NaN wins, as in NumPy."""
    m = a[r0]
    for i in range(r0 + 1, r1):
        v = a[i]
        if v != v:
            return v
        if (v > m) if largest else (v < m):
            m = v
    return m


@_jit
def _count_greater(a, r0, r1, x):
    c = np.int64(0)
    for i in range(r0, r1):
        c += a[i] > x
    return c


def _chunks(fn, a, threads, *extra):
    """``fn(a, r0, r1, *extra)`` on one chunk of rows per thread; the partial results."""
    if a.ndim != 1:
        raise ValueError(f"reductions take a 1-D column or field view, got shape {a.shape}")
    starts = chunk_starts(len(a), a.strides[0] if len(a) else 1, threads)
    spans = [(int(r0), int(r1)) for r0, r1 in zip(starts[:-1], starts[1:]) if r1 > r0]
    if len(spans) <= 1:
        return [fn(a, *span, *extra) for span in spans]
    return list(thread_pool().map(lambda span: fn(a, *span, *extra), spans))


def column_sum(a, threads=None):
    """Sum of a 1-D numeric column or strided field view."""
    kind = a.dtype.kind
    if kind == "b":
        a = a.view(np.uint8)
    acc = np.float64 if kind == "f" else np.uint64 if kind in "bu" else np.int64
    return np.array(_chunks(_sum, a, threads, acc(0)), dtype=acc).sum(dtype=acc)


def column_mean(a, threads=None):
    """Mean (float64) of a 1-D numeric column; NaN for an empty one."""
    return float(column_sum(a, threads)) / len(a) if len(a) else float("nan")


def column_min(a, threads=None):
    parts = _chunks(_extreme, _nonempty(a, "min"), threads, False)
    return np.min(np.array(parts, dtype=a.dtype))


def column_max(a, threads=None):
    parts = _chunks(_extreme, _nonempty(a, "max"), threads, True)
    return np.max(np.array(parts, dtype=a.dtype))


def count_greater(a, x, threads=None):
    """Rows with a value greater than ``x`` (the filter ``qty > x``)."""
    return int(sum(_chunks(_count_greater, a, threads, a.dtype.type(x))))


def _nonempty(a, what):
    if len(a) == 0:
        raise ValueError(f"{what} of an empty column has no value")
    return a
