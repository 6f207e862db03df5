"""Loads, stores, copies, bitmaps and string offsets at raw addresses: what every CPU kernel
is made of (the shared value transforms come from :mod:`kernels.values`)."""

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .. import _cache, values
from .._memory import (
    bswap16,
    bswap32,
    bswap64,
    load8,
    load16,
    load32,
    load64,
    store8,
    store16,
    store32,
    store64,
    stream_line,
)

BLOCK_BYTES = 16 * 1024
STREAM_BYTES = 16 << 20  # output at least this large bypasses the caches (see _stream_copy)
STAGE_RECORD_MAX = 4096  # bigger records are written in place, not staged (64 rows of them at least)
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MAX = 2**63 - 1

_jit = _cache.jit(nogil=True)  # numba.njit, cached on disk by content (kernels/_cache.py)

# --------------------------------------------------------------------------- helpers


@_jit
def _load(addr, width):
    """Load 1 to 8 bytes (little-endian order for odd widths) as an int64 of raw bits."""
    if width == 8:
        return np.int64(load64(addr))
    if width == 4:
        return np.int64(load32(addr))
    if width == 2:
        return np.int64(load16(addr))
    if width == 1:
        return np.int64(load8(addr))
    v = np.int64(0)
    for i in range(width):  # 3, 5, 6, 7 bytes: a bit-field word at the end of a record
        v |= np.int64(load8(addr + i)) << (8 * i)
    return v


@_jit
def _store(addr, width, value):
    if width == 8:
        store64(addr, value)
    elif width == 4:
        store32(addr, value)
    elif width == 2:
        store16(addr, value)
    elif width == 1:
        store8(addr, value)
    else:
        for i in range(width):
            store8(addr + i, (value >> (8 * i)) & 0xFF)


@_jit
def _swap(value, width):
    if width == 8:
        return np.int64(bswap64(value))
    if width == 4:
        return np.int64(bswap32(value))
    if width == 2:
        return np.int64(bswap16(value))
    if width == 1:
        return value
    v = np.int64(0)
    for i in range(width):
        v |= ((value >> (8 * i)) & 0xFF) << (8 * (width - 1 - i))
    return v


_low_bits = _jit(values.low_bits)


_sign_extend = _jit(values.sign_extend)


@_jit
def _load_word(addr, width, swap):
    """A 1/2/4/8-byte word in native order, as int64 raw bits."""
    v = _load(addr, width)
    return _swap(v, width) if swap else v


_is_nan = _jit(values.is_nan)


@_jit
def _memset0(addr, nbytes):
    i = 0
    while i + 8 <= nbytes:
        store64(addr + i, 0)
        i += 8
    while i < nbytes:
        store8(addr + i, 0)
        i += 1


@_jit
def _memcpy(dst, src, nbytes):
    """Copy forward; safe for overlapping ranges when dst <= src."""
    i = 0
    while i + 8 <= nbytes:
        store64(dst + i, load64(src + i))
        i += 8
    while i < nbytes:
        store8(dst + i, load8(src + i))
        i += 1


@intrinsic
def _copy32(typingctx, dst, src):
    """Copy the 32 bytes at ``src`` to ``dst`` (any alignment): one vector load, then one
    vector store (two of 16 bytes on a CPU without 32-byte vectors)."""

    def codegen(context, builder, sig, args):
        vec = ir.VectorType(ir.IntType(8), 32)
        value = builder.load(builder.inttoptr(args[1], vec.as_pointer()), align=1)
        builder.store(value, builder.inttoptr(args[0], vec.as_pointer()), align=1)
        return context.get_dummy_value()

    return types.void(types.int64, types.int64), codegen


@_jit
def _move_down(dst, src, nbytes):
    """Copy forward 32 bytes at a time, ``dst`` below ``src`` (the ranges may overlap): each
    load reads bytes no earlier store wrote (they are all below the bytes still to read)."""
    i = 0
    while i + 32 <= nbytes:
        _copy32(dst + i, src + i)
        i += 32
    _memcpy(dst + i, src + i, nbytes - i)


@_jit
def _stream_copy(dst, src, nbytes):
    """Copy ``nbytes`` from ``src`` (in cache) to ``dst`` with streaming stores: the
    destination's cache lines are written without being read first. Plain stores for
    the bytes before dst's first 64-byte boundary and after its last one."""
    head = min(nbytes, (-dst) & 63)
    _memcpy(dst, src, head)
    i = head
    while i + 64 <= nbytes:
        stream_line(dst + i, src + i)
        i += 64
    _memcpy(dst + i, src + i, nbytes - i)


@_jit
def _get_bit(bitmap, i):
    return (load8(bitmap + (i >> 3)) >> (i & 7)) & 1


@_jit
def _set_bit(bitmap, i):
    a = bitmap + (i >> 3)
    store8(a, load8(a) | (1 << (i & 7)))


@_jit
def _clear_bits(bitmap, i0, i1):
    """Zero the bytes holding bits [i0, i1); i0 is a multiple of 8."""
    _memset0(bitmap + (i0 >> 3), ((i1 + 7) >> 3) - (i0 >> 3))


_days_from_civil = _jit(values.days_from_civil)
_civil_from_days = _jit(values.civil_from_days)
_utf8_lead = _jit(values.utf8_lead)
_utf8_start = _jit(values.utf8_start)
_utf8_whole = _jit(values.utf8_whole)


@_jit
def _utf8_valid(addr, n):
    i = 0
    while i < n:
        b = load8(addr + i)
        if b < 0x80:
            i += 1
            continue
        need, lo, hi = _utf8_lead(b)
        if need < 0 or i + need >= n:
            return False
        c1 = load8(addr + i + 1)
        if c1 < lo or c1 > hi:
            return False
        for t in range(2, need + 1):
            ct = load8(addr + i + t)
            if ct < 0x80 or ct > 0xBF:
                return False
        i += need + 1
    return True


@_jit
def _offset_at(offsets, i, ow):
    if ow == 8:
        return np.int64(load64(offsets + i * 8))
    return np.int64(np.int32(load32(offsets + i * 4)))


@_jit
def _set_offset(offsets, i, ow, value):
    if ow == 8:
        store64(offsets + i * 8, value)
    else:
        store32(offsets + i * 4, value)
