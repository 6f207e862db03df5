"""CUDA per-element transforms of the mainframe kinds (packed, zoned, binary, hfloat), both
ways, for the tile kernels of :mod:`kernels.cuda.transpose`: the same value transforms
as the CPU ops (:mod:`kernels.mainframe`, ``register_jitable``), reading the record's
bytes from the staged tile and, on the way back, ORing them into the cleared tile.

EBCDIC text: :func:`text_length` gives each element's UTF-8 length in the tile pass, the
scan makes offsets of them, and :func:`copy_text` writes the bytes through the code
page's table (the tables ride in the plan's int64 ``tables``); :func:`rev_text` is the
way back.
"""

from numba import cuda, int64, uint64

from ..mainframe import (
    ascii_zoned_byte,
    below_pow10,
    binary_fits,
    digit_at,
    digit_groups,
    digit_limit,
    divmod_u128_small,
    fold_chunk,
    ibm_to_ieee,
    ieee_to_ibm,
    magnitude_128,
    mul_add_u128,
    pack_sign_nibble,
    packed_sign,
    positive_sign,
    signed_128,
    zoned_ascii_byte,
    zoned_overpunch,
)
from ..plan import (
    COUNT,
    DATA,
    E_INEXACT,
    E_INVALID,
    E_RANGE,
    E_TOO_LONG,
    E_UTF,
    F_ASCII,
    F_LEADING,
    F_NULL_INVALID,
    F_SEPARATE,
    F_SIGNED,
    F_TRIM_LEFT,
    F_TRIM_RIGHT,
    F_TRUNC_BIN,
    F_TRUNCATE,
    FLAGS,
    K_BINARY,
    K_HFLOAT,
    K_PACKED,
    K_ZONED,
    KIND,
    OFFS,
    OFFSETS,
    P1,
    P2,
    P3,
    SENT,
    TABLE,
    WIDTH,
)
from .device import _dev, _fault, _get, _load, _offset_at, _put, _store, _utf8_start, _utf8_whole
from .tile import _divmod32, _element

MAINFRAME_KINDS = (1 << K_PACKED) | (1 << K_ZONED) | (1 << K_BINARY) | (1 << K_HFLOAT)


@_dev
def _decode_digits(words, wb, p, op):
    """``(status, negative, hi, lo)``: the magnitude of a packed, zoned or binary element."""
    kind, w, digits, flags = op[KIND], op[WIDTH], op[P1], op[FLAGS]
    signed = (flags & F_SIGNED) != 0
    hi, lo = uint64(0), uint64(0)
    if kind == K_BINARY:
        raw = uint64(0)
        for t in range(w):
            raw = (raw << uint64(8)) | uint64(_get(words, wb, p + t, 1))
        negative = False
        if signed and (raw >> uint64(8 * w - 1)) & uint64(1):
            negative = True
            raw = (~raw + uint64(1)) & (uint64(0xFFFFFFFFFFFFFFFF) >> uint64(64 - 8 * w))
            if w == 8 and raw == uint64(0):
                raw = uint64(1) << uint64(63)
        limit = digit_limit(digits) if (flags & F_TRUNC_BIN) == 0 else uint64(0)
        if limit != uint64(0) and raw >= limit:
            return E_INVALID, False, hi, raw
        return 0, negative, hi, raw
    chunk, nd = int64(0), 0
    negative = False
    if kind == K_PACKED:
        for t in range(w):
            b = _get(words, wb, p + t, 1)
            h, low = b >> 4, b & 0xF
            if h > 9 or (t == 0 and digits % 2 == 0 and h != 0):
                return E_INVALID, False, hi, lo
            chunk = chunk * 10 + h
            nd += 1
            if t == w - 1:
                sign = packed_sign(low, signed)
                if sign == 0:
                    return E_INVALID, False, hi, lo
                negative = sign < 0
                break
            if low > 9:
                return E_INVALID, False, hi, lo
            chunk = chunk * 10 + low
            nd += 1
            if nd >= 17:
                hi, lo = fold_chunk(hi, lo, chunk, nd)
                chunk, nd = int64(0), 0
    else:
        leading, separate = (flags & F_LEADING) != 0, (flags & F_SEPARATE) != 0
        d0, d1 = 0, w
        if separate:
            sb = _get(words, wb, p + (0 if leading else w - 1), 1)
            if sb == (op[SENT] >> 8) & 0xFF:
                negative = True
            elif sb != op[SENT] & 0xFF:
                return E_INVALID, False, hi, lo
            if leading:
                d0 = 1
            else:
                d1 = w - 1
        over = -1 if separate else (d0 if leading else d1 - 1)
        for t in range(d0, d1):
            b = _get(words, wb, p + t, 1)
            if (flags & F_ASCII) != 0:
                b = ascii_zoned_byte(b)
            if t == over:
                d, sign = zoned_overpunch(b, signed)
                if d < 0:
                    return E_INVALID, False, hi, lo
                negative = sign < 0
            else:
                d = b & 0xF
                if (b >> 4) != 0xF or d > 9:
                    return E_INVALID, False, hi, lo
            chunk = chunk * 10 + d
            nd += 1
            if nd == 18:
                hi, lo = fold_chunk(hi, lo, chunk, nd)
                chunk, nd = int64(0), 0
    if nd:
        hi, lo = fold_chunk(hi, lo, chunk, nd)
    return 0, negative, hi, lo


@_dev
def _decode_element(words, wb, p, op):
    """``(status, hi, lo)``: the Arrow value of a mainframe element (decimal128 halves,
    int64 in ``lo``, or IEEE bits in ``lo``), or a fault code."""
    w = op[WIDTH]
    if op[KIND] == K_HFLOAT:
        raw = int64(0)
        for t in range(w):
            raw = (raw << 8) | _get(words, wb, p + t, 1)
        bits, status = ibm_to_ieee(raw, w)
        return (E_RANGE if status != 0 else 0), int64(0), bits
    status, negative, hi, lo = _decode_digits(words, wb, p, op)
    if status != 0:
        return status, int64(0), int64(0)
    for _ in range(op[P3]):  # PIC 9PP
        hi, lo = mul_add_u128(hi, lo, 10, 0)
    if op[P2] == 8 and (
        hi != uint64(0) or lo > (uint64(1) << uint64(63)) or (lo == (uint64(1) << uint64(63)) and not negative)
    ):
        return E_RANGE, int64(0), int64(0)
    shi, slo = signed_128(hi, lo, -1 if negative else 1)
    return 0, shi, slo


@_dev
def fwd_mainframe(a8, a16, a32, a64, words, wb, op, offs, e, r0, slot, err, j, nops):
    """One element, records -> columns (invalid: a fault, or zeros under a null)."""
    i, p = _element(op, offs, e, r0, slot)
    status, hi, lo = _decode_element(words, wb, p, op)
    if status != 0:
        if (op[FLAGS] & F_NULL_INVALID) == 0:
            _fault(err, r0 + _divmod32(e, op[COUNT])[0], j, status, nops)
        hi, lo = int64(0), int64(0)
    dst, w = op[DATA], op[WIDTH]
    if op[KIND] == K_HFLOAT:
        _store(a8, a16, a32, a64, dst + i * w, w, lo)
    elif op[P2] == 16:
        _store(a8, a16, a32, a64, dst + i * 16, 8, lo)
        _store(a8, a16, a32, a64, dst + i * 16 + 8, 8, hi)
    else:
        _store(a8, a16, a32, a64, dst + i * 8, 8, lo)


@_dev
def valid_mainframe(words, wb, op, offs, e, r0, slot):
    """Whether element e decodes (its validity bit, with ``invalid="null"``)."""
    _, p = _element(op, offs, e, r0, slot)
    status, _, _ = _decode_element(words, wb, p, op)
    return status == 0


@_dev
def _put_digits(words, wb, p, op, hi, lo, negative):
    """OR the packed or zoned bytes of magnitude ``(hi, lo)`` into the cleared tile."""
    kind, w, digits, flags = op[KIND], op[WIDTH], op[P1], op[FLAGS]
    signed = (flags & F_SIGNED) != 0
    groups = cuda.local.array(5, int64)
    digit_groups(hi, lo, groups)
    sign = pack_sign_nibble(negative, positive_sign(op[TABLE], signed))
    if kind == K_PACKED:
        for t in range(w):
            j_hi = 2 * (w - 1 - t)
            low = sign if t == w - 1 else digit_at(groups, j_hi - 1)
            _put(words, wb, p + t, 1, (digit_at(groups, j_hi) << 4) | low)
        return
    leading, separate = (flags & F_LEADING) != 0, (flags & F_SEPARATE) != 0
    d0 = 1 if separate and leading else 0
    over = -1 if separate else (0 if leading else digits - 1)
    for t in range(digits):
        zone = sign if t == over else 0xF
        byte = (zone << 4) | digit_at(groups, digits - 1 - t)
        _put(words, wb, p + d0 + t, 1, zoned_ascii_byte(byte) if (flags & F_ASCII) != 0 else byte)
    if separate:
        _put(words, wb, p + (0 if leading else w - 1), 1, ((op[SENT] >> 8) if negative else op[SENT]) & 0xFF)


@_dev
def rev_mainframe(a8, a16, a32, a64, words, wb, op, i, p, r, err, j, nops):
    """One element, columns -> records, range-checked as on the CPU."""
    kind, w, data = op[KIND], op[WIDTH], op[DATA]
    if kind == K_HFLOAT:
        ibm, status = ieee_to_ibm(_load(a8, a16, a32, a64, data + i * w, w), w)
        if status != 0:
            _fault(err, r, j, E_RANGE, nops)
            return
        for t in range(w):
            _put(words, wb, p + t, 1, (ibm >> (8 * (w - 1 - t))) & 0xFF)
        return
    if op[P2] == 16:
        lo, hi = _load(a8, a16, a32, a64, data + i * 16, 8), _load(a8, a16, a32, a64, data + i * 16 + 8, 8)
    else:
        lo = _load(a8, a16, a32, a64, data + i * 8, 8)
        hi = int64(-1) if lo < 0 else int64(0)
    negative, mh, ml = magnitude_128(hi, lo)
    for _ in range(op[P3]):
        mh, ml, rem = divmod_u128_small(mh, ml, 10)
        if rem != 0:
            _fault(err, r, j, E_INEXACT, nops)
            return
    if mh == uint64(0) and ml == uint64(0):
        negative = False
    signed = (op[FLAGS] & F_SIGNED) != 0
    if negative and not signed:
        _fault(err, r, j, E_RANGE, nops)
        return
    if kind == K_BINARY:
        if not binary_fits(mh, ml, negative, signed, w, op[P1], (op[FLAGS] & F_TRUNC_BIN) != 0):
            _fault(err, r, j, E_RANGE, nops)
            return
        v = (~ml + uint64(1)) if negative else ml
        for t in range(w):
            _put(words, wb, p + t, 1, int64((v >> uint64(8 * (w - 1 - t))) & uint64(0xFF)))
        return
    if not below_pow10(mh, ml, op[P1]):
        _fault(err, r, j, E_RANGE, nops)
        return
    _put_digits(words, wb, p, op, mh, ml, negative)


# ------------------------------------------------------------------ EBCDIC text


@_dev
def _text_bounds(words, wb, p, op):
    """``(first, end)``: the bytes of a text element kept after trimming EBCDIC spaces."""
    first, end = 0, op[WIDTH]
    space = 0x20 if (op[FLAGS] & F_ASCII) != 0 else 0x40
    if (op[FLAGS] & F_TRIM_RIGHT) != 0:
        while end > 0 and _get(words, wb, p + end - 1, 1) == space:
            end -= 1
    if (op[FLAGS] & F_TRIM_LEFT) != 0:
        while first < end and _get(words, wb, p + first, 1) == space:
            first += 1
    return first, end


@_dev
def text_length(words, wb, op, offs, e, r0, slot, tables):
    """UTF-8 bytes of one text element (TABLE: the code page's 256 entries in ``tables``)."""
    _, p = _element(op, offs, e, r0, slot)
    first, end = _text_bounds(words, wb, p, op)
    length = int64(0)
    for t in range(first, end):
        length += tables[uint64(op[TABLE] + _get(words, wb, p + t, 1))] >> 24
    return length


@cuda.jit
def copy_text(rec, n, stride, op, offs, a8, a16, a32, a64, tables):
    """Write each text element's UTF-8 at its final offset (after the scan), one element a
    thread, through the code page's table."""
    c, ow = op[COUNT], op[P2]
    i_next = cuda.grid(1)
    while i_next < n * c:
        i = i_next
        i_next += cuda.gridsize(1)
        r = i // c
        p = r * stride + offs[op[OFFS] + i % c]
        first, end = _text_bounds(rec, 0, p, op)
        pos = op[DATA] + _offset_at(a32, a64, op[OFFSETS], i, ow)
        for t in range(first, end):
            code = tables[uint64(op[TABLE] + _get(rec, 0, p + t, 1))]
            size = code >> 24
            for u in range(size):
                a8[uint64(pos + u)] = (code >> (8 * u)) & 0xFF
            pos += size


@_dev
def rev_text(a8, a16, a32, a64, words, wb, op, i, p, r, err, j, nops, tables):
    """UTF-8 -> EBCDIC through the code page's encode table (65536 entries in ``tables``,
    -1: no byte), padded with EBCDIC spaces; a character with no byte is E_RANGE here
    (the fault word holds codes below 8), reported as such for text fields."""
    n, data, ow = op[WIDTH], op[DATA], op[P2]
    start = _offset_at(a32, a64, op[OFFSETS], i, ow)
    length = _offset_at(a32, a64, op[OFFSETS], i + 1, ow) - start
    t, m = int64(0), int64(0)
    while t < length:
        cp, need = _utf8_start(int64(a8[uint64(data + start + t)]))
        if need < 0 or t + need >= length:
            _fault(err, r, j, E_UTF, nops)
            return
        for u in range(1, need + 1):
            cb = int64(a8[uint64(data + start + t + u)])
            if cb & 0xC0 != 0x80:
                _fault(err, r, j, E_UTF, nops)
                return
            cp = (cp << 6) | (cb & 0x3F)
        if not _utf8_whole(cp, need):
            _fault(err, r, j, E_UTF, nops)
            return
        t += need + 1
        if m >= n:
            if (op[FLAGS] & F_TRUNCATE) == 0:
                _fault(err, r, j, E_TOO_LONG, nops)
            return
        byte = int64(-1) if cp > 0xFFFF else tables[uint64(op[TABLE] + cp)]
        if byte < 0:
            _fault(err, r, j, E_RANGE, nops)
            return
        _put(words, wb, p + m, 1, byte)
        m += 1
    space = 0x20 if (op[FLAGS] & F_ASCII) != 0 else 0x40
    while m < n:
        _put(words, wb, p + m, 1, space)
        m += 1
