"""SoA -> AoS on the CPU: one function per op kind, the staged block of records they fill,
and the chunk kernel the host function runs on every thread (see :mod:`kernels.cpu`)."""

import numpy as np

from .._memory import (
    bswap16,
    bswap32,
    bswap64,
    load8,
    load16,
    load32,
    load64,
    prefetch,
    store8,
    store16,
    store32,
    store64,
    stream_fence,
)
from ..plan import (
    COUNT,
    DATA,
    E_INEXACT,
    E_NUL,
    E_NULL,
    E_RANGE,
    E_TOO_LONG,
    E_UTF,
    ELEM0,
    F_SIGNED,
    F_TRUNCATE,
    FLAGS,
    K_BINARY,
    K_BITS,
    K_BOOL,
    K_BYTES,
    K_CIVIL,
    K_COPY,
    K_ENUM,
    K_HFLOAT,
    K_PACKED,
    K_SCALE,
    K_TEXT,
    K_UTF32,
    K_ZONED,
    KIND,
    N_NONE,
    NAT,
    NULLS,
    OFFS,
    OFFSETS,
    P1,
    P2,
    P3,
    SENT,
    SWAP,
    TABLE,
    VALID,
    WIDTH,
)
from ..threads import ROW_ALIGN
from . import mainframe
from .forward import _value_width
from .memory import (
    BLOCK_BYTES,
    STAGE_RECORD_MAX,
    _civil_from_days,
    _get_bit,
    _jit,
    _load,
    _load_word,
    _low_bits,
    _memcpy,
    _memset0,
    _offset_at,
    _sign_extend,
    _store,
    _stream_copy,
    _swap,
    _utf8_start,
    _utf8_whole,
)

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
                if not _utf8_whole(cp, need):
                    return r, E_UTF
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
        elif kind == K_PACKED or kind == K_ZONED or kind == K_BINARY:
            row, code = mainframe.rev_decimal(dst, itemsize, b0, b1, op, offs, kind)
        elif kind == K_HFLOAT:
            row, code = mainframe.rev_hfloat(dst, itemsize, b0, b1, op, offs)
        elif kind == K_TEXT:
            row, code = mainframe.rev_text(dst, itemsize, b0, b1, op, offs)
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
