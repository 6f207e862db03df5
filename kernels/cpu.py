"""CPU backend: AoS <-> SoA in one pass over the records, with Numba.

The records are cut into one chunk per thread (chunk starts are multiples of 64 rows,
so no two threads share a byte of a bitmap). Inside a chunk, rows go in blocks of
about 16 KiB: a block is read from memory once, and every column's values for those
rows are written while the block is still in cache. Byte swaps, bit-packing of
booleans, sentinel nulls, time-unit scaling and string trimming happen inside that
pass. Variable-length strings are written per chunk at a worst-case position and
moved together afterwards (a pass over the string bytes only, not the records).

The way back assembles a block of records in a buffer that stays in cache (its padding
zeroed once per thread, not per block), prefetching the next block's column values,
and copies it out in one sequential pass. Outputs of STREAM_BYTES and more, both ways,
leave the staging buffer by streaming stores, which do not read the lines they write
(a plain store does: twice the memory traffic). See docs/performance.md.

Host functions: :func:`aos_to_soa` and :func:`soa_to_aos`. Both run a copy plan (see
:mod:`kernels.plan`) and return ``None`` or the first fault as ``(row, op, code)``.
The inner functions are compiled ahead of time (the wheel carries them, see
:mod:`kernels._cache`) or once per machine, and cached on disk by the content of their
sources: the plan is data, so a new layout costs no compilation either.
:func:`precompile` loads or compiles them; :func:`missing` tells which would compile.
"""

import contextlib
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _cache, _scalar
from ._memory import bswap16, bswap32, bswap64, load8, load16, load32, load64
from ._memory import store8, store16, store32, store64, stream_fence, stream_line
from ._memory import prefetch
from .plan import (
    COUNT, DATA, E_INEXACT, E_NUL, E_NULL, E_RANGE, E_TOO_LONG, E_UTF, ELEM0, F_SIGNED, F_TRUNCATE,
    F_DENSE, F_UTF8, FLAGS, K_BITS, K_BOOL, K_BYTES, K_CIVIL, K_COPY, K_CSTR, K_ENUM, K_SCALE, K_UTF32,
    KIND, N_BITS, N_NONE, NAT, NCOLS, NULLS, OFFS, OFFSETS, P1, P2, P3, SENT, SWAP, TABLE, VALID,
    WIDTH,
)

__all__ = ["aos_to_soa", "soa_to_aos", "default_threads", "precompile", "missing"]

BLOCK_BYTES = 16 * 1024
ROW_ALIGN = 64
MIN_CHUNK_BYTES = 1 << 20
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


@_jit
def _low_bits(value, nbits):
    """The low ``nbits`` of value, zero-extended (all 64 bits when nbits == 64)."""
    if nbits >= 64:
        return value
    return value & ((np.int64(1) << nbits) - 1)


@_jit
def _sign_extend(value, nbits):
    """Read the low ``nbits`` of value as a two's complement number."""
    if nbits >= 64:
        return value
    value = _low_bits(value, nbits)
    if (value >> (nbits - 1)) & 1:
        value -= np.int64(1) << nbits
    return value


@_jit
def _load_word(addr, width, swap):
    """A 1/2/4/8-byte word in native order, as int64 raw bits."""
    v = _load(addr, width)
    return _swap(v, width) if swap else v


@_jit
def _is_nan(bits, width):
    if width == 8:
        e, m = 0x7FF0000000000000, 0x000FFFFFFFFFFFFF
    elif width == 4:
        e, m = 0x7F800000, 0x007FFFFF
    else:
        e, m = 0x7C00, 0x03FF
    return (bits & e) == e and (bits & m) != 0


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


_days_from_civil = _jit(_scalar.days_from_civil)
_civil_from_days = _jit(_scalar.civil_from_days)
_utf8_lead = _jit(_scalar.utf8_lead)
_utf8_start = _jit(_scalar.utf8_start)


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


# --------------------------------------------------------------- AoS -> SoA, per op


@_jit
def _fwd_copy(src, stride, b0, b1, op, offs):
    w, c, dst = op[WIDTH], op[COUNT], op[DATA]
    swap = op[SWAP] != 0
    for k in range(c):
        base = src + offs[op[OFFS] + k]
        if w == 8:
            if swap:
                for r in range(b0, b1):
                    store64(dst + (r * c + k) * 8, bswap64(load64(base + r * stride)))
            else:
                for r in range(b0, b1):
                    store64(dst + (r * c + k) * 8, load64(base + r * stride))
        elif w == 4:
            if swap:
                for r in range(b0, b1):
                    store32(dst + (r * c + k) * 4, bswap32(load32(base + r * stride)))
            else:
                for r in range(b0, b1):
                    store32(dst + (r * c + k) * 4, load32(base + r * stride))
        elif w == 2:
            if swap:
                for r in range(b0, b1):
                    store16(dst + (r * c + k) * 2, bswap16(load16(base + r * stride)))
            else:
                for r in range(b0, b1):
                    store16(dst + (r * c + k) * 2, load16(base + r * stride))
        else:
            for r in range(b0, b1):
                store8(dst + r * c + k, load8(base + r * stride))
    if op[VALID] != 0:
        # Sentinels: compare the native values just written (still in cache).
        valid, mode, sent = op[VALID], op[NULLS], op[SENT]
        _clear_bits(valid, b0 * c, b1 * c)
        for i in range(b0 * c, b1 * c):
            v = _load(dst + i * w, w)
            null = v == sent if mode == N_BITS else _is_nan(v, w)
            if not null:
                _set_bit(valid, i)


@_jit
def _fwd_bytes(src, stride, b0, b1, op, offs):
    n, c, dst = op[WIDTH], op[COUNT], op[DATA]
    for k in range(c):
        base = src + offs[op[OFFS] + k]
        if n == 16:
            for r in range(b0, b1):
                d = dst + (r * c + k) * 16
                store64(d, load64(base + r * stride))
                store64(d + 8, load64(base + r * stride + 8))
        elif n == 8:
            for r in range(b0, b1):
                store64(dst + (r * c + k) * 8, load64(base + r * stride))
        else:
            for r in range(b0, b1):
                _memcpy(dst + (r * c + k) * n, base + r * stride, n)


@_jit
def _fwd_bool(src, stride, b0, b1, op, offs):
    c, dst = op[COUNT], op[DATA]
    if c == 1:
        base = src + offs[op[OFFS]]
        r = b0
        while r < b1:
            byte = 0
            for t in range(min(8, b1 - r)):
                if load8(base + (r + t) * stride) != 0:
                    byte |= 1 << t
            store8(dst + (r >> 3), byte)
            r += 8
        return
    _clear_bits(dst, b0 * c, b1 * c)
    for k in range(c):
        base = src + offs[op[OFFS] + k]
        for r in range(b0, b1):
            if load8(base + r * stride) != 0:
                _set_bit(dst, r * c + k)


@_jit
def _word_rows(base, stride, b0, b1, w, swap, out):
    """The w-byte word at ``base + r * stride`` for rows [b0, b1), native order, into out."""
    if w == 4:
        for r in range(b0, b1):
            v = np.int64(load32(base + r * stride))
            out[r - b0] = np.int64(bswap32(v)) if swap else v
    elif w == 2:
        for r in range(b0, b1):
            v = np.int64(load16(base + r * stride))
            out[r - b0] = np.int64(bswap16(v)) if swap else v
    elif w == 1:
        for r in range(b0, b1):
            out[r - b0] = np.int64(load8(base + r * stride))
    else:
        for r in range(b0, b1):
            out[r - b0] = _load_word(base + r * stride, w, swap)


@_jit
def _fwd_bits(src, stride, b0, b1, op, offs):
    """C bit-field: load its container word, shift, mask, sign-extend; store the value."""
    w, c, dst = op[WIDTH], op[COUNT], op[DATA]
    swap, shift, nbits, outw = op[SWAP] != 0, op[P1], op[P2], op[P3]
    signed = (op[FLAGS] & F_SIGNED) != 0
    up, down = np.uint64(64 - shift - nbits), np.uint64(64 - nbits)  # top bit to bit 63, then back
    words = np.empty(b1 - b0, dtype=np.int64)
    if outw == 0:
        _clear_bits(dst, b0 * c, b1 * c)
    for k in range(c):
        _word_rows(src + offs[op[OFFS] + k], stride, b0, b1, w, swap, words)
        for t in range(b1 - b0):
            u = np.uint64(words[t]) << up
            v = (np.int64(u) >> down) if signed else np.int64(u >> down)
            i = (b0 + t) * c + k
            if outw == 4:
                store32(dst + i * 4, v)
            elif outw == 0:
                if v != 0:
                    _set_bit(dst, i)
            else:
                _store(dst + i * outw, outw, v)


@_jit
def _fwd_enum(src, stride, b0, b1, op, offs):
    """C enum value -> dictionary index: a dense table lookup (F_DENSE) or a binary
    search of the ascending values; -1 where no enumerator has the value."""
    w, c, dst, table, size = op[WIDTH], op[COUNT], op[DATA], op[TABLE], op[P2]
    swap, signed, lo = op[SWAP] != 0, (op[FLAGS] & F_SIGNED) != 0, op[P1]
    dense = (op[FLAGS] & F_DENSE) != 0
    words = np.empty(b1 - b0, dtype=np.int64)
    for k in range(c):
        _word_rows(src + offs[op[OFFS] + k], stride, b0, b1, w, swap, words)
        for t in range(b1 - b0):
            v = _sign_extend(words[t], 8 * w) if signed else _low_bits(words[t], 8 * w)
            if dense:
                j = v - lo
                idx = np.int64(load64(table + j * 8)) if 0 <= j < size else -1
            else:
                a, b = 0, size
                while a < b:
                    mid = (a + b) >> 1
                    if np.int64(load64(table + mid * 8)) < v:
                        a = mid + 1
                    else:
                        b = mid
                idx = a if a < size and np.int64(load64(table + a * 8)) == v else -1
            store32(dst + ((b0 + t) * c + k) * 4, idx)


@_jit
def _fwd_time(src, stride, b0, b1, op, offs, civil):
    """datetime64/timedelta64 counts -> Arrow counts: NaT -> null, checked scaling."""
    c, dst, valid, f, ow = op[COUNT], op[DATA], op[VALID], op[P1], op[P2]
    swap = op[SWAP] != 0
    lim = I64_MAX // f
    _clear_bits(valid, b0 * c, b1 * c)
    for k in range(c):
        base = src + offs[op[OFFS] + k]
        for r in range(b0, b1):
            i = r * c + k
            v = np.int64(load64(base + r * stride))
            if swap:
                v = np.int64(bswap64(v))
            if v == NAT:
                _store(dst + i * ow, ow, 0)
                continue
            if civil:
                if v > (1 << 40) or v < -(1 << 40):
                    return r, E_RANGE
                months = v * f
                res = _days_from_civil(1970 + months // 12, months % 12 + 1, 1)
            else:
                if v > lim or v < -lim:
                    return r, E_RANGE
                res = v * f
            if ow == 4 and (res < I32_MIN or res > I32_MAX):
                return r, E_RANGE
            _store(dst + i * ow, ow, res)
            _set_bit(valid, i)
    return -1, 0


@_jit
def _fwd_string(src, stride, r0, b0, b1, op, offs):
    """S<n> trimmed at the first NUL, or U<n> as UTF-8, into chunk-local var data."""
    n, c, per, ow = op[WIDTH], op[COUNT], op[P1], op[P2]
    data = op[DATA] + r0 * c * per
    offsets, utf32 = op[OFFSETS], op[KIND] == K_UTF32
    swap, check = op[SWAP] != 0, (op[FLAGS] & F_UTF8) != 0
    for r in range(b0, b1):
        for k in range(c):
            i = r * c + k
            pos = 0 if i == r0 * c else _offset_at(offsets, i, ow)
            if i == 0:
                _set_offset(offsets, 0, ow, 0)
            s = src + r * stride + offs[op[OFFS] + k]
            out = data + pos
            if not utf32:
                length = 0
                while length < n and load8(s + length) != 0:
                    length += 1
                _memcpy(out, s, length)
                if check and not _utf8_valid(out, length):
                    return r, E_UTF
            else:
                ncp = n // 4
                while ncp > 0 and load32(s + (ncp - 1) * 4) == 0:
                    ncp -= 1
                length = 0
                for t in range(ncp):
                    cp = np.int64(load32(s + t * 4))
                    if swap:
                        cp = np.int64(bswap32(cp))
                    if cp < 0x80:
                        store8(out + length, cp)
                        length += 1
                    elif cp < 0x800:
                        store8(out + length, 0xC0 | (cp >> 6))
                        store8(out + length + 1, 0x80 | (cp & 0x3F))
                        length += 2
                    elif cp < 0x10000:
                        if 0xD800 <= cp <= 0xDFFF:
                            return r, E_UTF
                        store8(out + length, 0xE0 | (cp >> 12))
                        store8(out + length + 1, 0x80 | ((cp >> 6) & 0x3F))
                        store8(out + length + 2, 0x80 | (cp & 0x3F))
                        length += 3
                    elif cp <= 0x10FFFF:
                        store8(out + length, 0xF0 | (cp >> 18))
                        store8(out + length + 1, 0x80 | ((cp >> 12) & 0x3F))
                        store8(out + length + 2, 0x80 | ((cp >> 6) & 0x3F))
                        store8(out + length + 3, 0x80 | (cp & 0x3F))
                        length += 4
                    else:
                        return r, E_UTF
            _set_offset(offsets, i + 1, ow, pos + length)
    return -1, 0


@_jit
def _forward_block(src, stride, r0, b0, b1, ops, offs, err):
    """Every op over records [b0, b1); returns the fault code (0: none)."""
    for j in range(ops.shape[0]):
        op = ops[j]
        kind = op[KIND]
        row, code = -1, 0
        if kind == K_COPY:
            _fwd_copy(src, stride, b0, b1, op, offs)
        elif kind == K_BYTES:
            _fwd_bytes(src, stride, b0, b1, op, offs)
        elif kind == K_BOOL:
            _fwd_bool(src, stride, b0, b1, op, offs)
        elif kind == K_SCALE or kind == K_CIVIL:
            row, code = _fwd_time(src, stride, b0, b1, op, offs, kind == K_CIVIL)
        elif kind == K_BITS:
            _fwd_bits(src, stride, b0, b1, op, offs)
        elif kind == K_ENUM:
            _fwd_enum(src, stride, b0, b1, op, offs)
        else:
            row, code = _fwd_string(src, stride, r0, b0, b1, op, offs)
        if code != 0:
            err[0], err[1], err[2] = row, j, code
            return code
    return 0


@_jit
def _value_width(op):
    """Bytes of one value in the op's Arrow column; 0 for a bitmap; -1 for var-length."""
    kind = op[KIND]
    if kind == K_COPY or kind == K_BYTES:
        return op[WIDTH]
    if kind == K_SCALE or kind == K_CIVIL:
        return op[P2]
    if kind == K_BITS:
        return op[P3]
    if kind == K_ENUM:
        return 4
    if kind == K_BOOL:
        return 0
    return -1


@_jit
def _stage_plan(ops, block):
    """Where each op's values and validity for one block of rows go in the staging
    buffer: ``(ops x 2)`` byte offsets (-1: not staged), and the buffer's size. Strings
    are not staged (they are written in place; see _fwd_string)."""
    at = np.full((ops.shape[0], 2), -1, dtype=np.int64)
    size = 0
    for j in range(ops.shape[0]):
        w, c = _value_width(ops[j]), ops[j, COUNT]
        if w < 0:
            continue
        at[j, 0] = size
        size += -(-(block * c * w if w else -(-(block * c) // 8)) // 64) * 64
        if ops[j, VALID] != 0:
            at[j, 1] = size
            size += -(-(-(-(block * c) // 8)) // 64) * 64
    return at, size


@_jit
def _unstage(dst, stage, e0, e1, w):
    """Elements [e0, e1) of a column (w bytes each, 0: bits) from the staging buffer to
    their place. Values are streamed; bitmaps, a 64th of the values, use plain stores."""
    if w == 0:
        _memcpy(dst + e0 // 8, stage, (e1 - e0 + 7) // 8)
    else:
        _stream_copy(dst + e0 * w, stage, (e1 - e0) * w)


@_jit
def _forward_rows(src, stride, r0, r1, ops, offs, stream, err, stop):
    """Convert records [r0, r1) of one chunk, block by block; the first fault goes to err.
    Returns early, leaving the chunk unfinished, once ``stop[0]`` is set.

    With ``stream``, a block's fixed-width columns are written to a buffer that stays in
    cache and then streamed to their places (each output byte is written once, never
    read). Block starts are multiples of 64 rows, so every bitmap piece is whole bytes."""
    block = max(ROW_ALIGN, (BLOCK_BYTES // stride) // ROW_ALIGN * ROW_ALIGN)
    at, size = _stage_plan(ops, min(block, r1 - r0))
    stage = np.empty(size if stream else 0, dtype=np.uint8)
    # The arrays are made here and used in a function without early exits: Numba's
    # reference counting of arrays across a loop's several exits is not to be trusted.
    _forward_blocks(src, stride, r0, r1, ops, offs, block, stream, at, stage, ops.copy(), err, stop)


@_jit
def _forward_blocks(src, stride, r0, r1, ops, offs, block, stream, at, stage, staged, err, stop):
    base = stage.ctypes.data
    b0 = r0
    while b0 < r1:
        if stop[0] != 0:
            break
        b1 = min(b0 + block, r1)
        if stream:
            for j in range(ops.shape[0]):
                w, c = _value_width(ops[j]), ops[j, COUNT]
                if at[j, 0] >= 0:  # element i of the block at base + at + (i - b0 * c) * w
                    staged[j, DATA] = base + at[j, 0] - (b0 * c * w if w else b0 * c // 8)
                if at[j, 1] >= 0:
                    staged[j, VALID] = base + at[j, 1] - b0 * c // 8
        if _forward_block(src, stride, r0, b0, b1, staged, offs, err) != 0:
            break
        if stream:
            for j in range(ops.shape[0]):
                w, c = _value_width(ops[j]), ops[j, COUNT]
                if at[j, 0] >= 0:
                    _unstage(ops[j, DATA], base + at[j, 0], b0 * c, b1 * c, w)
                if at[j, 1] >= 0:
                    _unstage(ops[j, VALID], base + at[j, 1], b0 * c, b1 * c, 0)
        b0 = b1
    if stream:
        stream_fence()


@_jit
def _compact_strings(op, starts):
    """Move each chunk's strings next to the previous chunk's and fix the offsets."""
    c, per, ow = op[COUNT], op[P1], op[P2]
    data, offsets = op[DATA], op[OFFSETS]
    total = 0
    for ci in range(starts.shape[0] - 1):
        i0, i1 = starts[ci] * c, starts[ci + 1] * c
        size = _offset_at(offsets, i1, ow)
        if total != i0 * per:
            _memcpy(data + total, data + i0 * per, size)
        if total != 0:
            for i in range(i0 + 1, i1 + 1):
                _set_offset(offsets, i, ow, _offset_at(offsets, i, ow) + total)
        total += size
    return total


# --------------------------------------------------------------- SoA -> AoS, per op


@_jit
def _rev_copy(dst, itemsize, b0, b1, op, offs):
    w, c, src, e0 = op[WIDTH], op[COUNT], op[DATA], op[ELEM0]
    swap = op[SWAP] != 0
    valid, mode, fill = op[VALID], op[NULLS], op[SENT]
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        if valid != 0:
            for r in range(b0, b1):
                i = e0 + r * c + k
                if _get_bit(valid, i):
                    v = _load(src + i * w, w)
                elif mode != N_NONE:
                    v = fill
                else:
                    return r, E_NULL
                _store(base + r * itemsize, w, _swap(v, w) if swap else v)
        elif w == 8:
            if swap:
                for r in range(b0, b1):
                    store64(base + r * itemsize, bswap64(load64(src + (e0 + r * c + k) * 8)))
            else:
                for r in range(b0, b1):
                    store64(base + r * itemsize, load64(src + (e0 + r * c + k) * 8))
        elif w == 4:
            if swap:
                for r in range(b0, b1):
                    store32(base + r * itemsize, bswap32(load32(src + (e0 + r * c + k) * 4)))
            else:
                for r in range(b0, b1):
                    store32(base + r * itemsize, load32(src + (e0 + r * c + k) * 4))
        elif w == 2:
            if swap:
                for r in range(b0, b1):
                    store16(base + r * itemsize, bswap16(load16(src + (e0 + r * c + k) * 2)))
            else:
                for r in range(b0, b1):
                    store16(base + r * itemsize, load16(src + (e0 + r * c + k) * 2))
        else:
            for r in range(b0, b1):
                store8(base + r * itemsize, load8(src + e0 + r * c + k))
    return -1, 0


@_jit
def _rev_bytes(dst, itemsize, b0, b1, op, offs):
    n, c, src, e0, valid = op[WIDTH], op[COUNT], op[DATA], op[ELEM0], op[VALID]
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        if valid == 0 and n == 8:
            for r in range(b0, b1):
                store64(base + r * itemsize, load64(src + (e0 + r * c + k) * 8))
            continue
        for r in range(b0, b1):
            i = e0 + r * c + k
            if valid != 0 and not _get_bit(valid, i):
                return r, E_NULL
            _memcpy(base + r * itemsize, src + i * n, n)
    return -1, 0


@_jit
def _rev_bool(dst, itemsize, b0, b1, op, offs):
    c, src, e0, valid = op[COUNT], op[DATA], op[ELEM0], op[VALID]
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        if valid == 0 and c == 1 and e0 == 0:
            r = b0
            while r < b1:
                byte = load8(src + (r >> 3))
                for t in range(min(8, b1 - r)):
                    store8(base + (r + t) * itemsize, (byte >> t) & 1)
                r += 8
            continue
        for r in range(b0, b1):
            i = e0 + r * c + k
            if valid != 0 and not _get_bit(valid, i):
                return r, E_NULL
            store8(base + r * itemsize, _get_bit(src, i))
    return -1, 0


@_jit
def _column_values(op, c, k, b0, b1, out):
    """Element k of rows [b0, b1) of a K_BITS/K_ENUM column as int64 (sign-extended when
    F_SIGNED) into out; a null takes the fill value. Returns the first row with a null
    and no fill, or -1."""
    valid, outw, data, e0 = op[VALID], op[P3], op[DATA], op[ELEM0]
    signed = (op[FLAGS] & F_SIGNED) != 0
    if outw == 4 and signed:
        for r in range(b0, b1):
            out[r - b0] = np.int64(np.int32(load32(data + (e0 + r * c + k) * 4)))
    elif outw == 4:
        for r in range(b0, b1):
            out[r - b0] = np.int64(load32(data + (e0 + r * c + k) * 4))
    else:
        for r in range(b0, b1):
            i = e0 + r * c + k
            v = np.int64(_get_bit(data, i)) if outw == 0 else _load(data + i * outw, outw)
            out[r - b0] = _sign_extend(v, 8 * outw) if signed and outw != 0 else v
    if valid != 0:
        for r in range(b0, b1):
            if not _get_bit(valid, e0 + r * c + k):
                if op[NULLS] == N_NONE:
                    return r
                out[r - b0] = op[SENT]
    return -1


@_jit
def _rev_bits(dst, itemsize, b0, b1, op, offs):
    """Value -> C bit-field: range-checked, merged into its container word in place."""
    w, c = op[WIDTH], op[COUNT]
    swap, shift, nbits = op[SWAP] != 0, op[P1], op[P2]
    signed = (op[FLAGS] & F_SIGNED) != 0
    field = _low_bits(np.int64(-1), nbits) << shift
    if nbits == 64:
        lo, hi = np.int64(-(2**63)), np.int64(2**63 - 1)
    elif signed:
        lo, hi = -(np.int64(1) << (nbits - 1)), (np.int64(1) << (nbits - 1)) - 1
    else:
        lo, hi = np.int64(0), (np.int64(1) << nbits) - 1
    values = np.empty(b1 - b0, dtype=np.int64)
    for k in range(c):
        row = _column_values(op, c, k, b0, b1, values)
        if row >= 0:
            return row, E_NULL
        bad = False
        for t in range(b1 - b0):
            bad |= (values[t] < lo) | (values[t] > hi)
        if bad:
            for t in range(b1 - b0):
                if values[t] < lo or values[t] > hi:
                    return b0 + t, E_RANGE
        base = dst + offs[op[OFFS] + k]
        for t in range(b1 - b0):
            a = base + (b0 + t) * itemsize
            bits = (values[t] << shift) & field
            if w == 4 and not swap:
                store32(a, (np.int64(load32(a)) & ~field) | bits)
            elif w == 4:
                store32(a, bswap32((np.int64(bswap32(load32(a))) & ~field) | bits))
            elif w == 2 and swap:
                store16(a, bswap16((np.int64(bswap16(load16(a))) & ~field) | bits))
            elif w == 1:
                store8(a, (np.int64(load8(a)) & ~field) | bits)
            else:
                word = (_load_word(a, w, swap) & ~field) | bits
                _store(a, w, _swap(word, w) if swap else word)
    return -1, 0


@_jit
def _rev_enum(dst, itemsize, b0, b1, op, offs):
    """Dictionary index -> the value of its entry (from TABLE), stored as the C enum."""
    w, c, table, size = op[WIDTH], op[COUNT], op[TABLE], op[P2]
    swap, valid = op[SWAP] != 0, op[VALID]
    idx = np.empty(b1 - b0, dtype=np.int64)
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        row = _column_values(op, c, k, b0, b1, idx)
        if row >= 0:
            return row, E_NULL
        for t in range(b1 - b0):
            r = b0 + t
            if valid != 0 and not _get_bit(valid, op[ELEM0] + r * c + k):
                v = idx[t]  # the fill value, already an enum value
            elif idx[t] < 0 or idx[t] >= size:
                return r, E_RANGE
            else:
                v = np.int64(load64(table + idx[t] * 8))
            _store(base + r * itemsize, w, _swap(v, w) if swap else v)
    return -1, 0


@_jit
def _rev_time(dst, itemsize, b0, b1, op, offs, civil):
    c, src, e0, valid, f, ow = op[COUNT], op[DATA], op[ELEM0], op[VALID], op[P1], op[P2]
    swap = op[SWAP] != 0
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        for r in range(b0, b1):
            i = e0 + r * c + k
            if valid != 0 and not _get_bit(valid, i):
                v = NAT
            else:
                v = _load(src + i * ow, ow)
                if ow == 4:
                    v = np.int64(np.int32(v))
                if civil:
                    y, m, d = _civil_from_days(v)
                    if d != 1 or (f == 12 and m != 1):
                        return r, E_INEXACT
                    v = ((y - 1970) * 12 + m - 1) // f
                else:
                    if v % f != 0:
                        return r, E_INEXACT
                    v = v // f
                    if v == NAT:
                        return r, E_RANGE
            store64(base + r * itemsize, np.int64(bswap64(v)) if swap else v)
    return -1, 0


@_jit
def _rev_string(dst, itemsize, b0, b1, op, offs):
    """binary/string -> S<n> (NUL padded) or UTF-8 -> U<n> (UTF-32, NUL padded)."""
    n, c, data, offsets, e0, ow = op[WIDTH], op[COUNT], op[DATA], op[OFFSETS], op[ELEM0], op[P2]
    valid, utf32 = op[VALID], op[KIND] == K_UTF32
    swap, truncate = op[SWAP] != 0, (op[FLAGS] & F_TRUNCATE) != 0
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        for r in range(b0, b1):
            i = e0 + r * c + k
            if valid != 0 and not _get_bit(valid, i):
                return r, E_NULL
            start = _offset_at(offsets, i, ow)
            length = _offset_at(offsets, i + 1, ow) - start
            s, out = data + start, base + r * itemsize
            if not utf32:
                if length > n:
                    if not truncate:
                        return r, E_TOO_LONG
                    length = n
                for t in range(length):  # a C string ends at its first NUL: the rest would be lost
                    if load8(s + t) == 0:
                        return r, E_NUL
                _memcpy(out, s, length)
                _memset0(out + length, n - length)
                continue
            ncp, t = 0, 0
            while t < length:
                cp, need = _utf8_start(np.int64(load8(s + t)))
                if need < 0 or t + need >= length:
                    return r, E_UTF
                for u in range(1, need + 1):
                    cb = np.int64(load8(s + t + u))
                    if cb & 0xC0 != 0x80:
                        return r, E_UTF
                    cp = (cp << 6) | (cb & 0x3F)
                t += need + 1
                if ncp * 4 >= n:
                    if not truncate:
                        return r, E_TOO_LONG
                    break
                store32(out + ncp * 4, np.int64(bswap32(cp)) if swap else cp)
                ncp += 1
            _memset0(out + ncp * 4, n - ncp * 4)
    return -1, 0


@_jit
def _reverse_block(dst, itemsize, b0, b1, ops, offs, err):
    """Every op over records [b0, b1) at ``dst``; returns the fault code (0: none)."""
    for j in range(ops.shape[0]):
        op = ops[j]
        kind = op[KIND]
        if kind == K_COPY:
            row, code = _rev_copy(dst, itemsize, b0, b1, op, offs)
        elif kind == K_BYTES:
            row, code = _rev_bytes(dst, itemsize, b0, b1, op, offs)
        elif kind == K_BOOL:
            row, code = _rev_bool(dst, itemsize, b0, b1, op, offs)
        elif kind == K_SCALE or kind == K_CIVIL:
            row, code = _rev_time(dst, itemsize, b0, b1, op, offs, kind == K_CIVIL)
        elif kind == K_BITS:
            row, code = _rev_bits(dst, itemsize, b0, b1, op, offs)
        elif kind == K_ENUM:
            row, code = _rev_enum(dst, itemsize, b0, b1, op, offs)
        else:
            row, code = _rev_string(dst, itemsize, b0, b1, op, offs)
        if code != 0:
            err[0], err[1], err[2] = row, j, code
            return code
    return 0


@_jit
def _prefetch_columns(ops, b0, b1):
    """Ask for the fixed-width values of rows [b0, b1) of every column to be loaded: the
    columns are read in short bursts, one after another, which the hardware's own
    prefetchers do not foresee."""
    for j in range(ops.shape[0]):
        w, c = _value_width(ops[j]), ops[j, COUNT]
        if w <= 0:
            continue
        a, end = ops[j, DATA] + (ops[j, ELEM0] + b0 * c) * w, ops[j, DATA] + (ops[j, ELEM0] + b1 * c) * w
        while a < end:
            prefetch(a)
            a += 64


@_jit
def _reverse_rows(dst, itemsize, r0, r1, ops, offs, zero, stream, err, stop):
    """Write records [r0, r1) of one chunk from the columns; the first fault goes to err.
    Returns early, leaving the chunk unfinished, once ``stop[0]`` is set.

    A block of records is assembled in a buffer that stays in cache, then copied to
    ``dst`` in one sequential pass (with ``stream``, by streaming stores: each output
    byte is written once, never read). Every op writes all bytes of its field, so the
    buffer's padding, zeroed once (``zero``), stays zero: no block is cleared again.
    Records over STAGE_RECORD_MAX bytes are written in place, each block cleared first."""
    block = max(ROW_ALIGN, (BLOCK_BYTES // itemsize) // ROW_ALIGN * ROW_ALIGN)
    size = min(block, r1 - r0) * itemsize if itemsize <= STAGE_RECORD_MAX else 0
    stage = np.zeros(size, dtype=np.uint8) if zero else np.empty(size, dtype=np.uint8)
    _reverse_blocks(dst, itemsize, r0, r1, ops, offs, block, zero, stream, stage, err, stop)  # (see _forward_rows)


@_jit
def _reverse_blocks(dst, itemsize, r0, r1, ops, offs, block, zero, stream, stage, err, stop):
    base, staged = stage.ctypes.data, stage.size > 0
    b0 = r0
    while b0 < r1:
        if stop[0] != 0:
            break
        b1 = min(b0 + block, r1)
        _prefetch_columns(ops, b1, min(b1 + block, r1))  # the next block's, while this one is written
        if staged:
            at = base - b0 * itemsize  # row r of this block at stage[(r - b0) * itemsize]
        else:
            at = dst
            if zero:
                _memset0(dst + b0 * itemsize, (b1 - b0) * itemsize)
        if _reverse_block(at, itemsize, b0, b1, ops, offs, err) != 0:
            break
        if staged and stream:
            _stream_copy(dst + b0 * itemsize, base, (b1 - b0) * itemsize)
        elif staged:
            _memcpy(dst + b0 * itemsize, base, (b1 - b0) * itemsize)
        b0 = b1
    if stream:
        stream_fence()


# --------------------------------------------------------------------- host side

_pool = None


def default_threads():
    """Threads the CPU kernels use: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _chunk_starts(n, itemsize, threads):
    """Row starts of the chunks (multiples of ROW_ALIGN), with n appended."""
    threads = default_threads() if threads is None else threads
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    by_size = max(1, n * itemsize // MIN_CHUNK_BYTES)
    parts = min(threads, by_size)
    step = -(-n // parts)
    step = -(-step // ROW_ALIGN) * ROW_ALIGN
    return np.array(list(range(0, n, step)) + [n], dtype=np.int64) if n else np.zeros(1, np.int64)


def thread_pool():
    """The kernels' one pool of worker threads, made on first use with all its threads
    started at once, Ctrl-C held meanwhile: a KeyboardInterrupt inside ``Thread.start``
    would leave a worker running that the pool never stops (the process then hangs at
    exit). A Ctrl-C held is raised once the pool is whole."""
    global _pool
    if _pool is None:
        n = default_threads()
        pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="layouts")
        with _sigint_held() as held:
            gate = threading.Barrier(n + 1, timeout=10)
            for _ in range(n):
                pool.submit(gate.wait)  # each blocks until all are up: n threads start
            try:
                gate.wait()
            except threading.BrokenBarrierError:  # a thread did not start in time: the pool starts it later
                pass
        _pool = pool
        if held:
            raise KeyboardInterrupt
    return _pool


@contextlib.contextmanager
def _sigint_held():
    """In the main thread, with Python's own SIGINT handler in place: Ctrl-C is counted
    (in the list yielded) instead of raised while the block runs."""
    held = []
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield held
        return
    while True:
        try:
            signal.signal(signal.SIGINT, lambda *_: held.append(1))
            break
        except KeyboardInterrupt:
            held.append(1)
    try:
        yield held
    finally:
        while True:
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                break
            except KeyboardInterrupt:
                held.append(1)


class _Chunks:
    """The chunks of one kernel call, claimed one at a time by the calling thread and by
    pool workers (a worker that starts after the call is over finds nothing to claim).

    The caller's buffers must outlive every worker that writes them. A KeyboardInterrupt
    (or any exception) in the calling thread therefore stops the call: ``stop`` is set,
    so no chunk is claimed after it and running kernels return at their next block of
    rows, and the caller waits until no worker runs a kernel before it goes on. The
    call's buffers (``owners``) are also held here, by every queued worker task, so
    that they stay alive even if the caller leaves early (a second interrupt).
    """

    def __init__(self, fn, starts, head, tail, owners):
        self.fn, self.starts, self.head, self.tail, self.owners = fn, starts, head, tail, owners
        self.count = starts.shape[0] - 1
        self.errs = np.full((max(self.count, 1), 3), -1, dtype=np.int64)
        self.stop = np.zeros(1, dtype=np.int64)
        self.lock = threading.Lock()
        self.next = self.running = self.finished = 0
        self.done = threading.Event()
        self.error = None

    def _claim(self, worker):
        with self.lock:
            if self.stop[0] or self.next >= self.count:
                return -1
            ci, self.next = self.next, self.next + 1
            self.running += worker
            return ci

    def _convert(self, ci):
        self.fn(*self.head, self.starts[ci], self.starts[ci + 1], *self.tail, self.errs[ci], self.stop)

    def _finished(self, worker):
        with self.lock:
            self.running -= worker
            self.finished += 1
            if self.finished == self.count:
                self.done.set()

    def work(self):
        """A pool worker's share: chunks until none is left or the call stops."""
        while (ci := self._claim(1)) >= 0:
            try:
                self._convert(ci)
            except BaseException as err:  # noqa: BLE001 - re-raised by the caller
                self.error = err
                self.stop[0] = 1
                self.done.set()
            finally:
                self._finished(1)

    def run(self, helpers):
        """Convert every chunk with ``helpers`` pool workers and the calling thread."""
        try:
            pool = thread_pool() if helpers else None
            for _ in range(helpers):
                pool.submit(self.work)
            while (ci := self._claim(0)) >= 0:
                self._convert(ci)
                self._finished(0)
            self.done.wait()
            if self.error is not None:
                raise self.error
        except BaseException:
            self.halt()
            raise

    def halt(self):
        """Stop the call and wait until no worker runs a kernel, through further
        interrupts (the first one is on its way up already)."""
        while True:
            try:
                self.stop[0] = 1  # (inside the try: a second Ctrl-C here must not skip the wait)
                with self.lock:
                    if self.running == 0:
                        return
                time.sleep(0.001)
            except KeyboardInterrupt:
                pass

    def fault(self):
        bad = self.errs[self.errs[:, 2] > 0]
        if len(bad):
            row, op, code = bad[np.argmin(bad[:, 0])]
            return int(row), int(op), int(code)
        return None


def _run_chunks(fn, starts, args, owners):
    """Call fn(*args[:2], r0, r1, *args[2:], err, stop) on every chunk, in parallel
    threads (see :class:`_Chunks`); returns the first fault or None. ``owners`` are the
    objects whose memory the kernels read and write."""
    if starts.shape[0] == 2:  # one chunk: in this thread, no worker to wait for
        err, stop = np.full(3, -1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        fn(*args[:2], starts[0], starts[1], *args[2:], err, stop)
        return (int(err[0]), int(err[1]), int(err[2])) if err[2] > 0 else None
    job = _Chunks(fn, starts, args[:2], args[2:], owners)
    if job.count:
        job.run(min(job.count - 1, default_threads()))
    return job.fault()


def aos_to_soa(src, stride, n, ops, offs, *, threads=None, owners=None):
    """Scatter ``n`` records at address ``src`` into the column buffers named by ``ops``.

    Parameters
    ----------
    src : int
        Address of the first record.
    stride : int
        Bytes from one record to the next (the itemsize for contiguous records).
    n : int
        Number of records.
    ops, offs : numpy.ndarray
        The copy plan (see :mod:`kernels.plan`).
    threads : int, optional
        Threads to use; defaults to :func:`default_threads`.
    owners : object, optional
        What owns the memory at those addresses (arrays, buffers): held until no
        worker thread uses it, also when the call is interrupted.

    Returns
    -------
    None, or ``(row, op, code)`` of the first value that could not be converted.
    String columns' offsets are final on return (``None``) only. A KeyboardInterrupt
    stops the worker threads at their next block of rows; it is raised once none runs.
    """
    starts = _chunk_starts(n, stride, threads)
    stream = n * stride >= STREAM_BYTES and stride <= STAGE_RECORD_MAX
    fault = _run_chunks(_forward_rows, starts, (src, stride, ops, offs, stream), owners)
    if fault is None:
        for j in range(ops.shape[0]):
            if ops[j, KIND] in (K_CSTR, K_UTF32):
                if n:
                    _compact_strings(ops[j], starts)
                else:  # no row wrote it: an empty column's one offset is 0
                    _set_offset(ops[j, OFFSETS], 0, ops[j, P2], 0)
    return fault


def soa_to_aos(dst, itemsize, n, ops, offs, *, zero=True, threads=None, owners=None):
    """Gather ``n`` records into the contiguous buffer at address ``dst`` from the columns.

    ``zero=True`` clears each record first, so padding bytes come out as zeros.
    Returns ``None`` or ``(row, op, code)`` of the first value that could not be written.
    ``owners`` and interrupts as in :func:`aos_to_soa`.
    """
    starts = _chunk_starts(n, itemsize, threads)
    stream = n * itemsize >= STREAM_BYTES
    return _run_chunks(_reverse_rows, starts, (dst, itemsize, ops, offs, zero, stream), owners)


# ------------------------------------------------------------- compiled ahead of time


def _entries():
    """The kernels called from Python, each with arguments of the types the host functions
    above pass it (no rows: a call runs nothing). One signature each, so they can be
    compiled before they are needed: ``(name, kernel, arguments)``."""
    ops, offs = np.zeros((1, NCOLS), dtype=np.int64), np.zeros(1, dtype=np.int64)
    err, stop, starts = np.full(3, -1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    return [
        ("records -> columns", _forward_rows, (0, 1, starts[0], starts[0], ops, offs, False, err, stop)),
        ("strings", _compact_strings, (ops[0], starts)),
        ("columns -> records", _reverse_rows, (0, 1, starts[0], starts[0], ops, offs, True, False, err, stop)),
    ]


def _signature(kernel, args):
    from numba import typeof

    return tuple(typeof(a) for a in args)


def missing(reverse=True):
    """Names of the kernels that the next conversion would compile (none is on disk for
    this machine: not shipped for this platform and versions, not cached here yet),
    found without compiling or loading anything. ``reverse=False``: records -> columns only."""
    names = []
    for name, kernel, args in _entries():
        if not reverse and kernel is _reverse_rows:
            continue
        sig = _signature(kernel, args)
        if sig in kernel.overloads:
            continue
        cache = kernel._cache
        holds = getattr(cache, "holds", None)
        if holds is None or not holds(sig, kernel.targetctx.codegen().magic_tuple()):
            names.append(name)
    return names


def precompile(progress=None):
    """Load every kernel, compiling those that are on disk nowhere (see :func:`missing`)
    and saving them for the next process. ``progress(name, i, n)`` is called before
    kernel i of n is loaded or compiled. Returns ``{name: seconds}``."""
    entries, took = _entries(), {}
    for i, (name, kernel, args) in enumerate(entries):
        if progress is not None:
            progress(name, i, len(entries))
        t0 = time.perf_counter()
        kernel(*args)
        took[name] = time.perf_counter() - t0
    return took
