"""The cuDF bridge's kernels (:mod:`layouts._cuda.cudf`): bits <-> bytes, enum codes under nulls
and string offsets, one element (or output byte) a thread, with their host functions."""

import numpy as np
from numba import cuda

from .device import THREADS

# ------------------------------------------------- the cuDF bridge (layouts._cuda.cudf)
# Bits <-> bytes, enum codes under nulls and string offsets: one element (or output
# byte) a thread, launched by the host functions below over a 1-D grid.


@cuda.jit
def _bits_to_bits(src, start, step, n, out):
    """Byte j of ``out``: bits ``start + (8j + b) * step`` of ``src`` (a bitmap realigned)."""
    j = cuda.grid(1)
    if j < out.shape[0]:
        byte = 0
        for b in range(8):
            i = j * 8 + b
            if i < n:
                e = start + i * step
                byte |= ((src[e >> 3] >> (e & 7)) & 1) << b
        out[j] = byte


@cuda.jit
def _bits_to_bytes(src, start, step, n, out):
    """``out[i]``: bit ``start + i * step`` of ``src`` as 0 or 1 (Arrow booleans for cuDF)."""
    i = cuda.grid(1)
    if i < n:
        e = start + i * step
        out[i] = (src[e >> 3] >> (e & 7)) & 1


@cuda.jit
def _bytes_to_bits(src, n, out):
    """Byte j of ``out``: bit b set where ``src[8j + b]`` is not 0 (cuDF booleans for Arrow)."""
    j = cuda.grid(1)
    if j < out.shape[0]:
        byte = 0
        for b in range(8):
            i = j * 8 + b
            if i < n and src[i] != 0:
                byte |= 1 << b
        out[j] = byte


@cuda.jit
def _codes_with_nulls(codes, bits, start, n, out):
    """``out[i]``: ``codes[i]``, or -1 where bit ``start + i`` of ``bits`` is 0 (cuDF's null code)."""
    i = cuda.grid(1)
    if i < n:
        e = start + i
        out[i] = codes[i] if (bits[e >> 3] >> (e & 7)) & 1 else -1


@cuda.jit
def _offsets_check(offsets, n, lo, hi, bad):
    """``bad[0]``: the smallest row whose offsets go down or leave ``[lo, hi]``."""
    i = cuda.grid(1)
    if i < n:
        a, b = offsets[i], offsets[i + 1]
        if a > b or a < lo or b > hi:
            cuda.atomic.min(bad, 0, i)


@cuda.jit
def _offsets_rebase(offsets, count, lo):
    """Subtract ``lo`` from the first ``count`` offsets."""
    i = cuda.grid(1)
    if i < count:
        offsets[i] -= lo


# ------------------------------------------------- the cuDF bridge, host side


def _grid(count):
    """Blocks of THREADS threads for one thread per item of ``count``."""
    return -(-count // THREADS)


def bits_to_bits(src, start, step, n, out, *, stream=0):
    """Realign a bitmap: bit ``i`` of ``out`` (uint8, ``ceil(n / 8)`` bytes or more) is
    bit ``start + i * step`` of ``src`` (uint8) for ``i < n``; the bits after ``n`` in
    every byte of ``out`` are 0. Queued on ``stream``."""
    if out.shape[0] > 0:
        _bits_to_bits[_grid(out.shape[0]), THREADS, stream](src, start, step, n, out)


def bits_to_bytes(src, start, step, n, out, *, stream=0):
    """Unpack bits: ``out[i]`` (uint8) is bit ``start + i * step`` of ``src`` (uint8) as
    0 or 1, for ``i < n`` (Arrow booleans to cuDF's one byte a value). Queued on ``stream``."""
    if n > 0:
        _bits_to_bytes[_grid(n), THREADS, stream](src, start, step, n, out)


def bytes_to_bits(src, n, out, *, stream=0):
    """Pack bytes: bit ``i`` of ``out`` (uint8) is set where ``src[i]`` (uint8) is not 0,
    for ``i < n``; the bits after ``n`` in every byte of ``out`` are 0 (cuDF booleans or
    byte masks to Arrow's bits). Queued on ``stream``."""
    if out.shape[0] > 0:
        _bytes_to_bits[_grid(out.shape[0]), THREADS, stream](src, n, out)


def codes_with_nulls(codes, bits, start, n, out, *, stream=0):
    """``out[i]`` (int32) is ``codes[i]`` (int32), or -1 where bit ``start + i`` of the
    validity bitmap ``bits`` (uint8) is 0, for ``i < n``: cuDF's code for a null. Queued
    on ``stream``."""
    if n > 0:
        _codes_with_nulls[_grid(n), THREADS, stream](codes, bits, start, n, out)


def offsets_check(offsets, n, lo, hi, *, stream=0):
    """The first of ``n`` rows whose Arrow offsets (int32 or int64, ``n + 1`` of them)
    go down or leave ``[lo, hi]``, or None where all are in order. Waits for ``stream``."""
    if n <= 0:
        return None
    bad = cuda.to_device(np.array([n], dtype=np.int64), stream=stream)
    _offsets_check[_grid(n), THREADS, stream](offsets, n, lo, hi, bad)
    host = bad.copy_to_host(stream=stream)
    if stream:
        stream.synchronize()
    row = int(host[0])
    return row if row < n else None


def offsets_rebase(offsets, count, lo, *, stream=0):
    """Subtract ``lo`` from the first ``count`` offsets (int32 or int64), in place.
    Queued on ``stream``."""
    if count > 0:
        _offsets_rebase[_grid(count), THREADS, stream](offsets, count, lo)
