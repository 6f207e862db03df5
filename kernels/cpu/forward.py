"""AoS -> SoA on the CPU: one function per op kind, the block of rows they share, and the
chunk kernel the host function runs on every thread (see :mod:`kernels.cpu`)."""

import numpy as np

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
    stream_fence,
)
from ..plan import (
    COUNT,
    DATA,
    E_INVALID,
    E_RANGE,
    E_UTF,
    ELEM0,
    F_DENSE,
    F_SIGNED,
    F_UTF8,
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
    N_BITS,
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
from .memory import (
    BLOCK_BYTES,
    I32_MAX,
    I32_MIN,
    I64_MAX,
    _clear_bits,
    _days_from_civil,
    _is_nan,
    _jit,
    _load,
    _load_word,
    _low_bits,
    _memcpy,
    _move_down,
    _offset_at,
    _set_bit,
    _set_offset,
    _sign_extend,
    _store,
    _stream_copy,
    _utf8_valid,
)

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
    """Bytes 0 and 1 to bits; ``(row, E_INVALID)`` for the first other byte (no bit holds
    it: it would come back as 1), else ``(-1, 0)``."""
    c, dst = op[COUNT], op[DATA]
    seen = 0
    if c == 1:
        base = src + offs[op[OFFS]]
        r = b0
        while r < b1:
            byte = 0
            for t in range(min(8, b1 - r)):
                v = load8(base + (r + t) * stride)
                seen |= v
                if v != 0:
                    byte |= 1 << t
            store8(dst + (r >> 3), byte)
            r += 8
    else:
        _clear_bits(dst, b0 * c, b1 * c)
        for k in range(c):
            base = src + offs[op[OFFS] + k]
            for r in range(b0, b1):
                v = load8(base + r * stride)
                seen |= v
                if v != 0:
                    _set_bit(dst, r * c + k)
    if seen > 1:
        for r in range(b0, b1):
            for k in range(c):
                if load8(src + offs[op[OFFS] + k] + r * stride) > 1:
                    return r, E_INVALID
    return -1, 0


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
            row, code = _fwd_bool(src, stride, b0, b1, op, offs)
        elif kind == K_SCALE or kind == K_CIVIL:
            row, code = _fwd_time(src, stride, b0, b1, op, offs, kind == K_CIVIL)
        elif kind == K_BITS:
            _fwd_bits(src, stride, b0, b1, op, offs)
        elif kind == K_ENUM:
            _fwd_enum(src, stride, b0, b1, op, offs)
        elif kind == K_PACKED or kind == K_ZONED or kind == K_BINARY:
            row, code = mainframe.fwd_decimal(src, stride, b0, b1, op, offs, kind)
        elif kind == K_HFLOAT:
            row, code = mainframe.fwd_hfloat(src, stride, b0, b1, op, offs)
        elif kind == K_TEXT:
            row, code = mainframe.fwd_text(src, stride, r0, b0, b1, op, offs)
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
    if kind == K_PACKED or kind == K_ZONED or kind == K_BINARY:
        return op[P2]
    if kind == K_HFLOAT:
        return op[WIDTH]
    return -1


@_jit
def _stage_plan(ops, block):
    """Where each op's values and validity for one block of rows go in the staging
    buffer: ``(ops x 3)`` byte offsets (-1: not staged), and the buffer's size. Strings
    are written in place (see _fwd_string), but for text that
    :func:`kernels.cpu.mainframe.text_stages`: its third column, the block's values, which
    the op streams to their place itself (it alone knows where they go), from the
    address the staged plan's ELEM0 holds (unused by AoS -> SoA ops otherwise)."""
    at = np.full((ops.shape[0], 3), -1, dtype=np.int64)
    size = 0
    for j in range(ops.shape[0]):
        w, c = _value_width(ops[j]), ops[j, COUNT]
        if w < 0:
            if mainframe.text_stages(ops[j]):  # a block's text, staged by the op itself
                at[j, 2] = size
                size += -(-(block * c * ops[j, WIDTH]) // 64) * 64
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
def _stage_block(ops, staged, at, base, b0):
    """Point the staged copy of the plan at the stage for the block starting at row b0:
    element i of the block goes to base + at + (i - b0 * count) * width."""
    for j in range(ops.shape[0]):
        w, c = _value_width(ops[j]), ops[j, COUNT]
        if at[j, 0] >= 0:
            staged[j, DATA] = base + at[j, 0] - (b0 * c * w if w else b0 * c // 8)
        if at[j, 1] >= 0:
            staged[j, VALID] = base + at[j, 1] - b0 * c // 8
        if at[j, 2] >= 0:
            staged[j, ELEM0] = base + at[j, 2]


@_jit
def _unstage_block(ops, at, base, b0, b1):
    """Move rows b0..b1 of every staged column to the real output, by streaming stores."""
    for j in range(ops.shape[0]):
        w, c = _value_width(ops[j]), ops[j, COUNT]
        if at[j, 0] >= 0:
            _unstage(ops[j, DATA], base + at[j, 0], b0 * c, b1 * c, w)
        if at[j, 1] >= 0:
            _unstage(ops[j, VALID], base + at[j, 1], b0 * c, b1 * c, 0)


@_jit
def _forward_blocks(src, stride, r0, r1, ops, offs, block, stream, at, stage, staged, err, stop):
    base = stage.ctypes.data
    b0 = r0
    while b0 < r1:
        if stop[0] != 0:
            break
        b1 = min(b0 + block, r1)
        if stream:
            _stage_block(ops, staged, at, base, b0)
        if _forward_block(src, stride, r0, b0, b1, staged, offs, err) != 0:
            break
        if stream:
            _unstage_block(ops, at, base, b0, b1)
        b0 = b1
    if stream:
        stream_fence()


@_jit
def _compact_strings(op, starts, stream):
    """Move each chunk's strings next to the previous chunk's and fix the offsets; with
    ``stream`` (an output past the caches), by streaming stores where a chunk's new place
    ends before its old one starts."""
    c, per, ow = op[COUNT], op[P1], op[P2]
    data, offsets = op[DATA], op[OFFSETS]
    total = 0
    for ci in range(starts.shape[0] - 1):
        i0, i1 = starts[ci] * c, starts[ci + 1] * c
        size = _offset_at(offsets, i1, ow)
        if stream and total + size <= i0 * per:  # apart (per above the width)
            _stream_copy(data + total, data + i0 * per, size)
        elif total != i0 * per:
            _move_down(data + total, data + i0 * per, size)
        if total != 0 and ow == 4:  # (one loop per offset width: LLVM vectorises each)
            for i in range(i0 + 1, i1 + 1):
                store32(offsets + i * 4, np.int64(np.int32(load32(offsets + i * 4))) + total)
        elif total != 0:
            for i in range(i0 + 1, i1 + 1):
                store64(offsets + i * 8, np.int64(load64(offsets + i * 8)) + total)
        total += size
    if stream:
        stream_fence()
    return total
