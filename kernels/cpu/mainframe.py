"""CPU ops of the mainframe kinds (text, packed, zoned, binary, hfloat), both ways.

Each op converts one column over a block of records, as the other ops of the CPU
transpose do (same arguments, same ``(row, code)`` result), calling the value
transforms of :mod:`kernels.mainframe` for the semantics. A value that is not valid
data returns ``E_INVALID`` at its row, or, with ``F_NULL_INVALID``, becomes a null.
"""

import numpy as np
from numba import literally

from .. import _cache
from .._memory import bswap64, load8, load16, load32, load64, store8, store16, store32, store64
from ..mainframe import (
    ascii_zoned_byte,
    below_pow10,
    binary_fits,
    digit_at,
    digit_groups,
    digit_limit,
    digits_of_nibbles,
    divmod_u128_small,
    fold_chunk,
    ibm_to_ieee,
    ieee_to_ibm,
    magnitude_128,
    mul_add_u128,
    pack_sign_nibble,
    packed_sign,
    packed_word,
    positive_sign,
    sign_nibble,
    zoned_ascii_byte,
    zoned_overpunch,
    zoned_word,
)
from ..plan import (
    COUNT,
    DATA,
    E_INEXACT,
    E_INVALID,
    E_NULL,
    E_RANGE,
    E_TOO_LONG,
    E_UTF,
    ELEM0,
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
    K_PACKED,
    K_TEXT,
    K_ZONED,
    KIND,
    OFFS,
    OFFSETS,
    P1,
    P2,
    P3,
    SENT,
    TABLE,
    VALID,
    WIDTH,
)
from .memory import (
    _clear_bits,
    _get_bit,
    _jit,
    _memcpy,
    _offset_at,
    _set_bit,
    _set_offset,
    _stream_copy,
    _utf8_start,
    _utf8_whole,
)

I64_MIN_MAG = np.uint64(2**63)

# The word decoders of the loops that convert a block's values one after another: inlined
# by Numba itself (LLVM keeps them as calls, each value's result going through memory).
_inline = _cache.jit(nogil=True, inline="always")


@_jit
def _store_number(dst, i, outw, hi, lo, negative):
    """Magnitude ``(hi, lo)`` with its sign into element i: decimal128 (outw 16) or int64;
    False if it does not fit int64."""
    if outw == 16:  # two's complement of the magnitude, without a branch: (x ^ m) - m, m all ones if negative
        m = np.uint64(0) - np.uint64(negative)
        store64(dst + i * 16, (lo ^ m) - m)
        store64(dst + i * 16 + 8, (hi ^ m) + (m & np.uint64(lo == np.uint64(0))))
        return True
    if hi != np.uint64(0) or lo > I64_MIN_MAG or (lo == I64_MIN_MAG and not negative):
        return False
    v = np.int64(lo)
    store64(dst + i * 8, -v if negative else v)
    return True


@_jit
def _store_zero(dst, i, outw):
    store64(dst + i * outw, 0)
    if outw == 16:
        store64(dst + i * 16 + 8, 0)


@_jit
def _scaled(hi, lo, pow10):
    """``(hi, lo) * 10**pow10`` (P scaling, PIC 9PP)."""
    for _ in range(pow10):
        hi, lo = mul_add_u128(hi, lo, 10, 0)
    return hi, lo


# --------------------------------------------------------------------------- decoders
# Each returns (status, negative, hi, lo): status 0, E_INVALID or E_RANGE.


@_jit
def _load_be(a, w):
    """The ``w`` (1 to 8) bytes at ``a`` as a big-endian word (right-aligned): one 8-byte
    load and a byte swap, which reads ``8 - w`` bytes past them (see :func:`fwd_decimal`)."""
    return np.uint64(bswap64(load64(a))) >> np.uint64(64 - 8 * w)


@_inline
def _decode_packed_short(a, width, digits, signed):
    """A packed field of up to 15 bytes (29 digits): one or two words, every nibble at once."""
    if width <= 8:  # up to 15 digits: one word, every nibble at once
        status, negative, v = packed_word(_load_be(a, width), width, digits, signed)
        return status, negative, np.uint64(0), v
    if width <= 15:  # up to 29 digits: two words (the 8 bytes at a are in the field)
        n_hi = width - 8
        x_hi = _load_be(a, n_hi)
        status, negative, v_lo = packed_word(_load_be(a + n_hi, 8), 8, 15, signed)
        six = np.uint64(0x0666666666666666)
        bad = ((x_hi + six) ^ x_hi ^ six) & np.uint64(0x1111111111111110)  # a digit nibble above 9
        if digits % 2 == 0:
            bad |= x_hi >> np.uint64(8 * n_hi - 4)  # an even digit count's padding nibble is 0
        if bad != np.uint64(0) or status != 0:
            return E_INVALID, False, np.uint64(0), np.uint64(0)
        v_hi = digits_of_nibbles(x_hi)
        if v_hi == np.uint64(0):
            return 0, negative, np.uint64(0), v_lo
        hi, lo = mul_add_u128(0, v_hi, 10**15, v_lo)
        return 0, negative, hi, lo
    return E_INVALID, False, np.uint64(0), np.uint64(0)


@_jit
def _decode_packed(a, width, digits, signed):
    if width <= 15:
        return _decode_packed_short(a, width, digits, signed)
    return _decode_packed_long(a, width, digits, signed)


@_jit
def _decode_packed_long(a, width, digits, signed):
    first_pad = digits % 2 == 0  # an even digit count leaves the first nibble as padding: it must be 0
    chunk, nd = np.int64(0), 0
    hi, lo = np.uint64(0), np.uint64(0)
    for t in range(width):
        b = np.int64(load8(a + t))
        h, low = b >> 4, b & 0xF
        if h > 9 or (t == 0 and first_pad and h != 0):
            return E_INVALID, False, hi, lo
        chunk = chunk * 10 + h
        nd += 1
        if t == width - 1:
            sign = packed_sign(low, signed)
            if sign == 0:
                return E_INVALID, False, hi, lo
            if hi == np.uint64(0) and lo == np.uint64(0):
                return 0, sign < 0, np.uint64(0), np.uint64(chunk)  # what was folded before is 0
            hi, lo = fold_chunk(hi, lo, chunk, nd)
            return 0, sign < 0, hi, lo
        if low > 9:
            return E_INVALID, False, hi, lo
        chunk = chunk * 10 + low
        nd += 1
        if nd >= 17:
            hi, lo = fold_chunk(hi, lo, chunk, nd)
            chunk, nd = np.int64(0), 0
    return E_INVALID, False, hi, lo


def _zoned_words(a, d0, d1, over, signed, negative):
    """Zoned digits [d0, d1) of the field at ``a`` (at most 16), the overpunched sign (if
    any) at byte ``over``: the bytes as two big-endian words, the sign's zone set to F.
    Reads up to 7 bytes past ``a + d1``."""
    n = d1 - d0
    n_lo = min(n, 8)
    split = d1 - n_lo
    x_hi = _load_be(a + d0, split - d0) if split > d0 else np.uint64(0)
    x_lo = _load_be(a + split, n_lo)
    if over >= 0:
        in_lo = over >= split
        shift = np.uint64(8 * ((d1 - 1 - over) if in_lo else (split - 1 - over)) + 4)
        zone = np.int64(((x_lo if in_lo else x_hi) >> shift) & np.uint64(0xF))
        valid, negative = sign_nibble(zone, signed)
        if not valid:
            return E_INVALID, False, np.uint64(0), np.uint64(0)
        if in_lo:
            x_lo |= np.uint64(0xF) << shift
        else:
            x_hi |= np.uint64(0xF) << shift
    bad_hi, v_hi = zoned_word(x_hi, n - n_lo)
    bad_lo, v_lo = zoned_word(x_lo, n_lo)
    if bad_hi or bad_lo:
        return E_INVALID, False, np.uint64(0), np.uint64(0)
    return 0, negative, np.uint64(0), v_hi * np.uint64(100000000) + v_lo  # (v_hi is 0 for n <= 8)


# inlined into the word loop (LLVM kept it a call there, its result going through memory),
# called from the exact one
_decode_zoned_words, _decode_zoned_words_inline = _jit(_zoned_words), _inline(_zoned_words)


@_jit
def _zoned_frame(a, width, flags, plus, minus):
    """``(status, d0, d1, over, negative)`` of a zoned field: its digit bytes [d0, d1), the
    byte with the overpunched sign (-1: a separate sign, read here into ``negative``)."""
    leading, separate = (flags & F_LEADING) != 0, (flags & F_SEPARATE) != 0
    d0, d1 = 0, width  # the digit bytes
    negative = False
    if separate:
        sb = np.int64(load8(a if leading else a + width - 1))
        if sb == plus:
            negative = False
        elif sb == minus:
            negative = True
        else:
            return E_INVALID, d0, d1, -1, False
        if leading:
            d0 = 1
        else:
            d1 = width - 1
    over = -1 if separate else (d0 if leading else d1 - 1)
    return 0, d0, d1, over, negative


@_inline
def _decode_zoned_short(a, width, signed, flags, plus, minus):
    """A zoned field of up to 16 digits: two words, every byte checked at once."""
    status, d0, d1, over, negative = _zoned_frame(a, width, flags, plus, minus)
    if status != 0:
        return status, False, np.uint64(0), np.uint64(0)
    return _decode_zoned_words_inline(a, d0, d1, over, signed, negative)


@_jit
def _decode_zoned(a, width, signed, flags, plus, minus):
    status, d0, d1, over, negative = _zoned_frame(a, width, flags, plus, minus)
    if status != 0:
        return status, False, np.uint64(0), np.uint64(0)
    if d1 - d0 <= 16:
        return _decode_zoned_words(a, d0, d1, over, signed, negative)
    chunk, nd = np.int64(0), 0
    hi, lo = np.uint64(0), np.uint64(0)
    for t in range(d0, d1):
        b = np.int64(load8(a + t))
        if t == over:
            d, sign = zoned_overpunch(b, signed)
            if d < 0:
                return E_INVALID, False, hi, lo
            negative = sign < 0
        else:  # F0-F9: zone F, digit 0-9 (d > 9 iff d + 6 >= 16)
            d = b & 0xF
            if ((b & 0xF0) ^ 0xF0) | ((d + 6) & 16):
                return E_INVALID, False, hi, lo
        chunk = chunk * 10 + d
        nd += 1
        if nd == 18:
            hi, lo = fold_chunk(hi, lo, chunk, nd)
            chunk, nd = np.int64(0), 0
    if nd:
        hi, lo = fold_chunk(hi, lo, chunk, nd)
    return 0, negative, hi, lo


@_jit
def _decode_zoned_ascii(a, width, signed, flags, scratch):
    """An ASCII zoned field (``F_ASCII``): its bytes through ``ascii_zoned_byte`` into
    ``scratch`` (an address of at least ``width`` bytes), then read as EBCDIC zoned."""
    for t in range(width):
        store8(scratch + t, ascii_zoned_byte(np.int64(load8(a + t))))
    return _decode_zoned(scratch, width, signed, flags, 0x4E, 0x60)


@_jit
def _zoned_to_ascii(a, width):
    """The EBCDIC zoned field just written at ``a`` made ASCII (``zoned_ascii_byte``)."""
    for t in range(width):
        store8(a + t, zoned_ascii_byte(np.int64(load8(a + t))))


@_jit
def _decode_binary(a, width, signed, limit):
    raw = _load_be(a, width)
    negative = False
    if signed and (raw >> np.uint64(8 * width - 1)) & np.uint64(1):
        negative = True
        raw = (~raw + np.uint64(1)) & (np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - 8 * width))
        if width == 8 and raw == np.uint64(0):
            raw = I64_MIN_MAG
    if limit != np.uint64(0) and raw >= limit:
        return E_INVALID, negative, np.uint64(0), raw
    return 0, negative, np.uint64(0), raw


def _decode_kind(kind, long_ok, a, w, digits, signed, flags, plus, minus, limit):
    """The field at ``a`` by the decoder of its kind; ``long_ok`` False (a constant): the
    word decoders only, for fields they take whole (no loop in the caller's loop).
    Compiled twice: inlined into the word loops (:data:`_decode`), called from the exact
    loop (:data:`_decode_call`: one copy, not one per call site, so it compiles faster)."""
    if kind == K_PACKED:
        return _decode_packed(a, w, digits, signed) if long_ok else _decode_packed_short(a, w, digits, signed)
    if kind == K_ZONED:
        if long_ok:
            return _decode_zoned(a, w, signed, flags, plus, minus)
        return _decode_zoned_short(a, w, signed, flags, plus, minus)
    return _decode_binary(a, w, signed, limit)


_decode = _inline(_decode_kind)
_decode_call = _jit(_decode_kind)


# --------------------------------------------------------------------------- AoS -> SoA


@_jit
def fwd_decimal(src, stride, b0, b1, op, offs, kind):
    """Packed, zoned or binary (``kind``) -> decimal128 / int64 (P2 bytes).

    Fields are loaded a word at a time: 8 bytes from a field's start, which for a field of
    fewer bytes reads up to 7 bytes past its end, into the next record when ``stride`` >= 8.
    A block's last row may have no next record: where a field's word loads may pass the
    record's end (a field in its last 8 bytes, every field of records of fewer than 8
    bytes), the block's last row (every row, for records of fewer than 8 bytes) is read from
    a copy of its fields followed by zeros (:func:`_decimal_alone`)."""
    c, w = op[COUNT], op[WIDTH]
    if op[VALID] != 0:
        _clear_bits(op[VALID], b0 * c, b1 * c)
    # Packed fields of up to 29 digits, zoned of up to 16, every binary one, no P scaling:
    # a loop of word decoders only (no loop inside it: LLVM keeps it in registers)
    separate = 1 if (op[FLAGS] & F_SEPARATE) != 0 else 0
    short = op[P3] == 0 and (
        (kind == K_PACKED and w <= 15)
        or (kind == K_ZONED and w - separate <= 16 and (op[FLAGS] & F_ASCII) == 0)  # ASCII: the exact loop
        or kind == K_BINARY
    )
    inside = True  # every load of every field stays in its record (they end before a + w + 8)
    for k in range(c):
        inside &= offs[op[OFFS] + k] + w + 8 <= stride
    alone = b1 if inside else (max(b0, b1 - 1) if stride >= 8 else b0)  # the rows from here on: from a copy
    # (np.int64(-1), not -1: a literal argument would compile another copy of every loop)
    row, code = _decimal_rows(src, stride, b0, alone, op, offs, kind, np.int64(-1), np.uint64(0), short)
    if code == 0 and alone < b1:
        row, code = _decimal_alone(src, stride, alone, b1, op, offs, kind, short)
    return row, code


@_jit
def _decimal_alone(src, stride, b0, b1, op, offs, kind, short):
    """fwd_decimal of rows [b0, b1) one at a time, each read from a copy of its fields."""
    c, w = op[COUNT], op[WIDTH]
    scratch = np.zeros(c * w + 16, dtype=np.uint8)
    tmp = scratch.ctypes.data
    row, code = -1, 0
    r = b0
    while code == 0 and r < b1:
        for k in range(c):
            _memcpy(tmp + k * w, src + r * stride + offs[op[OFFS] + k], w)
        row, code = _decimal_rows(src, stride, r, r + 1, op, offs, kind, r, tmp, short)
        r += 1
    return row, code


@_jit
def _decimal_rows(src, stride, b0, b1, op, offs, kind, alone, tmp, short):
    """fwd_decimal over rows [b0, b1); row ``alone`` is read from ``tmp`` (its fields' copy)."""
    if short:  # each kind its own loop (a constant kind: Numba compiles one per kind)
        w, flags = op[WIDTH], op[FLAGS]
        if kind == K_PACKED and w <= 8:  # the common shapes: a loop with every constant set up before it
            ok = _packed_rows(src, stride, b0, b1, op, offs, alone, tmp)
        elif kind == K_ZONED and (flags & (F_LEADING | F_SEPARATE)) == 0 and w <= 16:
            ok = _zoned_rows(src, stride, b0, b1, op, offs, alone, tmp)
        elif kind == K_BINARY:
            ok = _binary_rows(src, stride, b0, b1, op, offs, alone, tmp)
        elif kind == K_PACKED:  # 9 to 15 bytes: two words
            ok = _decimal_rows_short(src, stride, b0, b1, op, offs, K_PACKED, alone, tmp)
        else:  # zoned, the sign leading or separate
            ok = _decimal_rows_short(src, stride, b0, b1, op, offs, K_ZONED, alone, tmp)
        if ok:
            return -1, 0
    return _decimal_rows_exact(src, stride, b0, b1, op, offs, kind, alone, tmp)


@_jit
def _store_signed(dst, i, outw, v):
    """Signed 64-bit ``v`` (its two's complement bits) as element i: decimal128 (outw 16,
    the high word its sign) or int64."""
    if outw == 16:
        store64(dst + i * 16, v)
        store64(dst + i * 16 + 8, np.uint64(np.int64(v) >> np.int64(63)))
    else:
        store64(dst + i * 8, v)


@_jit
def _set_valid(op, b0, b1):
    """Every value of rows [b0, b1) valid (after a word loop that found none bad)."""
    valid, c = op[VALID], op[COUNT]
    if valid != 0:
        for i in range(b0 * c, b1 * c):
            _set_bit(valid, i)


@_jit
def _sign_bits(signed):
    """The sign nibbles (zones) a field accepts and those that make a value negative, as
    bits of two masks, as :func:`kernels.mainframe.sign_nibble` reads each (its rules in
    one place: the word loops look a nibble up in these)."""
    ok, neg = np.uint64(0), np.uint64(0)
    for nibble in range(16):
        valid, negative = sign_nibble(nibble, signed)
        ok |= np.uint64(1 if valid else 0) << np.uint64(nibble)
        neg |= np.uint64(1 if negative else 0) << np.uint64(nibble)
    return ok, neg


@_inline
def _field_base(src, stride, op, offs, k, alone, tmp):
    """Where column k of record r is: ``base + r * stride``. With ``alone`` (>= 0) the loop
    is over that one row, read from its fields' copy at ``tmp``: the base is moved so that
    row lands there (no per-row select in the loop)."""
    w = op[WIDTH]
    if alone >= 0:
        return tmp + k * w - alone * stride
    return src + offs[op[OFFS] + k]


@_jit
def _packed_rows(src, stride, b0, b1, op, offs, alone, tmp):
    """Packed fields of up to 8 bytes (15 digits), no P scaling, rows [b0, b1): one load,
    a byte swap and SWAR per value, no branch in the loop; False if a value was not valid
    (the caller converts the rows again, exactly). Rows [b0, b1) are all ``alone`` or
    none is (see fwd_decimal)."""
    if op[P2] == 16:  # one loop per output width (a constant in each: no test in the loop)
        bad = _packed_loop(src, stride, b0, b1, op, offs, alone, tmp, 16)
    else:
        bad = _packed_loop(src, stride, b0, b1, op, offs, alone, tmp, 8)
    if bad != np.uint64(0):
        return False
    _set_valid(op, b0, b1)
    return True


@_inline
def _packed_loop(src, stride, b0, b1, op, offs, alone, tmp, outw):
    w, c, dst, digits = op[WIDTH], op[COUNT], op[DATA], op[P1]
    ok_signs, neg_signs = _sign_bits((op[FLAGS] & F_SIGNED) != 0)
    sh = np.uint64(64 - 8 * w)
    six, carry = np.uint64(0x0666666666666666), np.uint64(0x1111111111111110)
    pad = np.uint64(4 * (2 * w - 2)) if digits % 2 == 0 else np.uint64(63)  # (63: a digit nibble's bit, 0)
    pad_mask = np.uint64(0xF) if digits % 2 == 0 else np.uint64(0)
    bad = np.uint64(0)
    for k in range(c):
        base = _field_base(src, stride, op, offs, k, alone, tmp)
        for r in range(b0, b1):
            x = np.uint64(bswap64(load64(base + r * stride))) >> sh
            sign = x & np.uint64(0xF)
            d = x >> np.uint64(4)
            bad |= ((d + six) ^ d ^ six) & carry  # a digit nibble above 9
            bad |= (d >> pad) & pad_mask  # an even digit count's padding nibble is 0
            bad |= ((ok_signs >> sign) & np.uint64(1)) ^ np.uint64(1)
            m = np.uint64(0) - ((neg_signs >> sign) & np.uint64(1))
            _store_signed(dst, r * c + k, outw, (digits_of_nibbles(d) ^ m) - m)
    return bad


@_jit
def _zoned_rows(src, stride, b0, b1, op, offs, alone, tmp):
    """Zoned fields of up to 16 digits with the sign overpunched on the last one (the
    usual ``PIC S9(n)``), EBCDIC, no P scaling, rows [b0, b1): two loads per value, every
    zone and digit checked at once; False if a value was not valid."""
    return _word_rows(src, stride, b0, b1, op, offs, alone, tmp, K_ZONED)


@_jit
def _word_rows(src, stride, b0, b1, op, offs, alone, tmp, kind):
    """The zoned or binary (``kind``, a compile-time constant) word loop over rows [b0, b1),
    one copy per output width and per shape (zoned: one or two words; binary: signed or
    not), each with them as constants (no test of them in the loop)."""
    literally(kind)
    flag = op[WIDTH] > 8 if kind == K_ZONED else (op[FLAGS] & F_SIGNED) != 0
    if flag and op[P2] == 16:
        bad = _word_loop(src, stride, b0, b1, op, offs, alone, tmp, kind, 16, True)
    elif flag:
        bad = _word_loop(src, stride, b0, b1, op, offs, alone, tmp, kind, 8, True)
    elif op[P2] == 16:
        bad = _word_loop(src, stride, b0, b1, op, offs, alone, tmp, kind, 16, False)
    else:
        bad = _word_loop(src, stride, b0, b1, op, offs, alone, tmp, kind, 8, False)
    if bad != np.uint64(0):
        return False
    _set_valid(op, b0, b1)
    return True


@_inline
def _word_loop(src, stride, b0, b1, op, offs, alone, tmp, kind, outw, flag):
    if kind == K_ZONED:
        return _zoned_loop(src, stride, b0, b1, op, offs, alone, tmp, outw, flag)
    return _binary_loop(src, stride, b0, b1, op, offs, alone, tmp, outw, flag)


@_inline
def _zoned_loop(src, stride, b0, b1, op, offs, alone, tmp, outw, two):
    w, c, dst = op[WIDTH], op[COUNT], op[DATA]
    ok_signs, neg_signs = _sign_bits((op[FLAGS] & F_SIGNED) != 0)
    n_lo = min(w, 8)
    n_hi = w - n_lo
    sh_lo = np.uint64(64 - 8 * n_lo)
    sh_hi = np.uint64(64 - 8 * n_hi) if n_hi > 0 else np.uint64(0)
    zones, m4 = np.uint64(0xF0F0F0F0F0F0F0F0), np.uint64(0x0F0F0F0F0F0F0F0F)
    mask_lo = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - 8 * n_lo)
    mask_hi = (np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - 8 * n_hi)) if n_hi > 0 else np.uint64(0)
    bad = np.uint64(0)
    for k in range(c):
        base = _field_base(src, stride, op, offs, k, alone, tmp)
        for r in range(b0, b1):
            a = base + r * stride
            x_lo = np.uint64(bswap64(load64(a + n_hi))) >> sh_lo
            zone = (x_lo >> np.uint64(4)) & np.uint64(0xF)  # the last byte's: the sign
            bad |= ((ok_signs >> zone) & np.uint64(1)) ^ np.uint64(1)
            x_lo |= np.uint64(0xF0)
            # (zoned_word's checks, the bad bits kept as bits: zone F, digit <= 9)
            d = x_lo & m4
            bad |= (((x_lo & zones) ^ zones) | ((d + np.uint64(0x0606060606060606)) & zones)) & mask_lo
            v = _zoned_digits(d)
            if two:
                x_hi = np.uint64(bswap64(load64(a))) >> sh_hi
                d_hi = x_hi & m4
                bad |= (((x_hi & zones) ^ zones) | ((d_hi + np.uint64(0x0606060606060606)) & zones)) & mask_hi
                v += (d_hi if n_hi == 1 else _zoned_digits(d_hi)) * np.uint64(100000000)  # (9 digits: one)
            m = np.uint64(0) - ((neg_signs >> zone) & np.uint64(1))
            _store_signed(dst, r * c + k, outw, (v ^ m) - m)
    return bad


@_jit
def _zoned_digits(d):
    """The value of the (up to 8) digits of ``d``, one per byte (most significant byte
    first, each 0-9): :func:`kernels.mainframe.zoned_word`'s SWAR."""
    m16, m32 = np.uint64(0x00FF00FF00FF00FF), np.uint64(0x0000FFFF0000FFFF)
    b = ((d >> np.uint64(8)) & m16) * np.uint64(10) + (d & m16)
    q = ((b >> np.uint64(16)) & m32) * np.uint64(100) + (b & m32)
    return (q >> np.uint64(32)) * np.uint64(10000) + (q & np.uint64(0xFFFFFFFF))


@_jit
def _binary_rows(src, stride, b0, b1, op, offs, alone, tmp):
    """Big-endian binary fields, rows [b0, b1): a load, a byte swap and a sign extension
    per value; False if one is over the PICTURE's digits (not ``TRUNC(BIN)``) or does not
    fit int64 (an unsigned 8-byte one from 2**63 on)."""
    return _word_rows(src, stride, b0, b1, op, offs, alone, tmp, K_BINARY)


@_inline
def _binary_loop(src, stride, b0, b1, op, offs, alone, tmp, outw, signed):
    w, c, dst, flags = op[WIDTH], op[COUNT], op[DATA], op[FLAGS]
    limit = digit_limit(op[P1]) if (flags & F_TRUNC_BIN) == 0 else np.uint64(0)
    check = np.uint64(1) if limit != np.uint64(0) else np.uint64(0)
    wide = np.uint64(1) if outw == 8 and w == 8 else np.uint64(0)  # unsigned into int64: 2**63 on is out
    sh = np.uint64(64 - 8 * w)
    bad = np.uint64(0)
    for k in range(c):
        base = _field_base(src, stride, op, offs, k, alone, tmp)
        for r in range(b0, b1):
            x = np.uint64(bswap64(load64(base + r * stride))) >> sh
            i = r * c + k
            if signed:
                v = np.int64(x << sh) >> np.int64(sh)  # sign-extended
                m = np.uint64(v >> np.int64(63))
                bad |= check & np.uint64(((np.uint64(v) ^ m) - m) >= limit)
                _store_signed(dst, i, outw, np.uint64(v))
            else:
                bad |= (check & np.uint64(x >= limit)) | (wide & (x >> np.uint64(63)))
                store64(dst + i * outw, x)
                if outw == 16:
                    store64(dst + i * 16 + 8, 0)
    return bad


@_jit
def _decimal_rows_exact(src, stride, b0, b1, op, offs, kind, alone, tmp):
    """Rows [b0, b1), value by value: the first invalid value ends it, or becomes a null."""
    w, c, dst, outw, digits, pow10 = op[WIDTH], op[COUNT], op[DATA], op[P2], op[P1], op[P3]
    flags = op[FLAGS]
    signed, to_null, valid = (flags & F_SIGNED) != 0, (flags & F_NULL_INVALID) != 0, op[VALID]
    plus, minus = op[SENT] & 0xFF, (op[SENT] >> 8) & 0xFF
    limit = digit_limit(digits) if (flags & F_TRUNC_BIN) == 0 else np.uint64(0)
    ascii_zoned = kind == K_ZONED and (flags & F_ASCII) != 0
    scratch = np.empty(w if ascii_zoned else 1, dtype=np.uint8)
    for k in range(c):
        base = src + offs[op[OFFS] + k]
        for r in range(b0, b1):
            a = tmp + k * w if r == alone else base + r * stride
            i = r * c + k
            if ascii_zoned:
                status, negative, hi, lo = _decode_zoned_ascii(a, w, signed, flags, scratch.ctypes.data)
            else:
                status, negative, hi, lo = _decode_call(kind, True, a, w, digits, signed, flags, plus, minus, limit)
            if status == 0 and pow10 > 0:
                hi, lo = _scaled(hi, lo, pow10)
            if status == 0 and not _store_number(dst, i, outw, hi, lo, negative):
                status = E_RANGE
            if status != 0:
                if not to_null:
                    return r, status
                _store_zero(dst, i, outw)
            elif valid != 0:
                _set_bit(valid, i)
    return -1, 0


@_jit
def _decimal_rows_short(src, stride, b0, b1, op, offs, kind, alone, tmp):
    """:func:`_decimal_rows` of the fields the word decoders take whole (see fwd_decimal):
    a loop with no exit and no null check. False if a value was not valid or did not fit
    (the caller then converts the rows again by :func:`_decimal_rows_exact`). ``kind`` is
    a compile-time constant: one loop per kind, with only its decoder in it."""
    literally(kind)
    w, c, dst, outw, digits = op[WIDTH], op[COUNT], op[DATA], op[P2], op[P1]
    flags = op[FLAGS]
    signed = (flags & F_SIGNED) != 0
    plus, minus = op[SENT] & 0xFF, (op[SENT] >> 8) & 0xFF
    limit = digit_limit(digits) if (flags & F_TRUNC_BIN) == 0 else np.uint64(0)
    bad = False
    for k in range(c):
        base = src + offs[op[OFFS] + k]
        for r in range(b0, b1):
            a = tmp + k * w if r == alone else base + r * stride
            status, negative, hi, lo = _decode(kind, False, a, w, digits, signed, flags, plus, minus, limit)
            ok = _store_number(dst, r * c + k, outw, hi, lo, negative)
            bad |= status != 0 or not ok
    if bad:
        return False
    valid = op[VALID]
    if valid != 0:
        for i in range(b0 * c, b1 * c):
            _set_bit(valid, i)
    return True


@_jit
def fwd_hfloat(src, stride, b0, b1, op, offs):
    """IBM hexadecimal float (WIDTH 4 or 8) -> float32 / float64."""
    w, c, dst, valid = op[WIDTH], op[COUNT], op[DATA], op[VALID]
    to_null = (op[FLAGS] & F_NULL_INVALID) != 0
    if valid != 0:
        _clear_bits(valid, b0 * c, b1 * c)
    for k in range(c):
        base = src + offs[op[OFFS] + k]
        for r in range(b0, b1):
            a = base + r * stride
            i = r * c + k
            if w == 4:
                raw = np.int64(load32(a))
                raw = ((raw & 0xFF) << 24) | ((raw & 0xFF00) << 8) | ((raw >> 8) & 0xFF00) | ((raw >> 24) & 0xFF)
            else:
                raw = np.int64(0)
                for t in range(8):
                    raw = (raw << 8) | np.int64(load8(a + t))
            bits, status = ibm_to_ieee(raw, w)
            if status != 0:
                if not to_null:
                    return r, E_RANGE
                bits = 0
            elif valid != 0:
                _set_bit(valid, i)
            if w == 4:
                store32(dst + i * 4, bits)
            else:
                store64(dst + i * 8, bits)
    return -1, 0


@_jit
def fwd_text(src, stride, r0, b0, b1, op, offs):
    """EBCDIC bytes -> UTF-8 through the code page's table, into chunk-local var data
    (as the C-string op does; compacted after the pass). Runs of 8 bytes whose characters
    are one UTF-8 byte each (letters, digits, spaces...) go two bytes at a time through
    the op's pair table (P3, made once per code page by the plan; without one, a byte
    table made here) and are stored as one word; the others character by character."""
    if op[P3] != 0:
        if (op[FLAGS] & (F_TRIM_RIGHT | F_TRIM_LEFT)) == 0 and op[WIDTH] >= 8 and b1 > b0:
            if _text_fixed(src, stride, r0, b0, b1, op, offs):
                return -1, 0
        _text_rows(src, stride, r0, b0, b1, op, offs, np.uint64(0))
        return -1, 0
    table = op[TABLE]
    single = np.empty(256, dtype=np.uint8)  # a byte's one UTF-8 byte, or 0x80
    for b in range(256):
        code = np.int64(load32(table + b * 4))
        single[b] = code & 0xFF if (code >> 24) == 1 else 0x80
    _text_rows(src, stride, r0, b0, b1, op, offs, single.ctypes.data)
    return -1, 0


@_jit
def text_stages(op):
    """Whether a forward text op writes a block's values to a stage (ELEM0 of the staged
    plan, see kernels.cpu.forward._stage_plan) and streams them to their place: the
    untrimmed columns :func:`_text_fixed` writes, whose block's values lie end to end."""
    return op[KIND] == K_TEXT and op[P3] != 0 and (op[FLAGS] & (F_TRIM_RIGHT | F_TRIM_LEFT)) == 0 and op[WIDTH] >= 8


@_jit
def _text_fixed(src, stride, r0, b0, b1, op, offs):
    """Rows [b0, b1) of an untrimmed text column of at least 8 bytes a value, assuming
    every character is one UTF-8 byte: each value a word at a time through the pair
    table (its last word the value's last 8 bytes, again where they overlap the word
    before), stored where it goes, and the offsets a multiple of the width. False if a
    character takes more than one byte (the caller writes the block again, character by
    character, over what this wrote: never shorter). With a stage (ELEM0, see
    :func:`text_stages`) the values go there and are streamed to their place once all
    are known to be one byte a character."""
    n, c, per, ow, pairs, stage = op[WIDTH], op[COUNT], op[P1], op[P2], op[P3], op[ELEM0]
    offsets = op[OFFSETS]
    pos = 0 if b0 == r0 else _offset_at(offsets, b0 * c, ow)
    place = op[DATA] + r0 * c * per + pos
    out = stage if stage != 0 else place
    last = n - 8
    high = np.uint64(0)
    for r in range(b0, b1):
        row = src + r * stride
        for k in range(c):
            s = row + offs[op[OFFS] + k]
            t = 0
            while t < last:
                word = _through_pairs(pairs, np.uint64(load64(s + t)))
                high |= word
                store64(out + t, word)
                t += 8
            word = _through_pairs(pairs, np.uint64(load64(s + last)))
            high |= word
            store64(out + last, word)
            out += n
    if high & np.uint64(0x8080808080808080):
        return False
    if stage != 0:
        _stream_copy(place, stage, (b1 - b0) * c * n)
    if b0 == 0:
        _set_offset(offsets, 0, ow, 0)
    e0 = b0 * c
    if ow == 4:  # (one loop per offset width: LLVM vectorises each)
        for i in range(e0 + 1, b1 * c + 1):
            store32(offsets + i * 4, pos + (i - e0) * n)
    else:
        for i in range(e0 + 1, b1 * c + 1):
            store64(offsets + i * 8, pos + (i - e0) * n)
    return True


@_inline
def _text8(single, pairs, s):
    """The 8 bytes at ``s`` translated, one little-endian word: through the pair table
    ``pairs`` (P3, 4 loads) if there is one, else the byte table ``single`` (8)."""
    if pairs == 0:
        return _single8(single, s)
    return _through_pairs(pairs, np.uint64(load64(s)))


@_inline
def _through_pairs(pairs, x):
    """The 8 bytes of word ``x`` through ``pairs``, a uint16[65536] table of two bytes at a
    time (the text ops' P3 both ways): four loads."""
    m = np.uint64(0xFFFF)
    word = np.uint64(load16(pairs + np.int64(x & m) * 2))
    word |= np.uint64(load16(pairs + np.int64((x >> np.uint64(16)) & m) * 2)) << np.uint64(16)
    word |= np.uint64(load16(pairs + np.int64((x >> np.uint64(32)) & m) * 2)) << np.uint64(32)
    return word | (np.uint64(load16(pairs + np.int64(x >> np.uint64(48)) * 2)) << np.uint64(48))


@_inline
def _through_pairs4(pairs, x):
    """The 4 bytes of the low half of ``x`` through ``pairs`` (see :func:`_through_pairs`):
    two loads."""
    m = np.uint64(0xFFFF)
    word = np.uint64(load16(pairs + np.int64(x & m) * 2))
    return word | (np.uint64(load16(pairs + np.int64((x >> np.uint64(16)) & m) * 2)) << np.uint64(16))


@_jit
def _single8(single, s):
    """The 8 bytes at ``s`` through the byte table ``single``, as one little-endian word
    (a byte with 0x80 set: a character of more than one UTF-8 byte)."""
    x = np.uint64(load64(s))
    word = np.uint64(0)
    for u in range(8):
        word |= np.uint64(load8(single + np.int64((x >> np.uint64(8 * u)) & np.uint64(0xFF)))) << np.uint64(8 * u)
    return word


@_jit
def _text_rows(src, stride, r0, b0, b1, op, offs, single):
    n, c, per, ow = op[WIDTH], op[COUNT], op[P1], op[P2]
    data, offsets, table, pairs = op[DATA] + r0 * c * per, op[OFFSETS], op[TABLE], op[P3]
    trim_r, trim_l = (op[FLAGS] & F_TRIM_RIGHT) != 0, (op[FLAGS] & F_TRIM_LEFT) != 0
    space = 0x20 if (op[FLAGS] & F_ASCII) != 0 else 0x40
    high = np.uint64(0x8080808080808080)
    if b0 == 0 and b1 > 0:
        _set_offset(offsets, 0, ow, 0)
    pos = 0 if b0 == r0 else _offset_at(offsets, b0 * c, ow)  # (then kept here, not read back)
    for r in range(b0, b1):
        for k in range(c):
            i = r * c + k
            s = src + r * stride + offs[op[OFFS] + k]
            first, end = 0, n
            if trim_r:
                while end > 0 and load8(s + end - 1) == space:
                    end -= 1
            if trim_l:
                while first < end and load8(s + first) == space:
                    first += 1
            out = data + pos
            t = first
            while t + 8 <= end:  # eight characters of one UTF-8 byte each: one store
                word = _text8(single, pairs, s + t)
                if word & high:
                    break
                store64(out + t - first, word)
                t += 8
            if end - first >= 8 and t < end and t + 8 > end:  # the last 1-7: the field's last 4 or 8 again
                if end - t <= 4 and pairs != 0:
                    word = _through_pairs4(pairs, np.uint64(load32(s + end - 4)))
                    if (word & high) == 0:
                        store32(out + end - 4 - first, word)
                        t = end
                else:
                    word = _text8(single, pairs, s + end - 8)
                    if (word & high) == 0:
                        store64(out + end - 8 - first, word)
                        t = end
            length = t - first  # (one UTF-8 byte per character so far)
            for v in range(t, end):
                code = np.int64(load32(table + np.int64(load8(s + v)) * 4))
                size = code >> 24
                if size == 1:
                    store8(out + length, code)
                elif size == 2:
                    store16(out + length, code)
                else:
                    store16(out + length, code)
                    store8(out + length + 2, code >> 16)
                length += size
            pos += length
            _set_offset(offsets, i + 1, ow, pos)


# --------------------------------------------------------------------------- SoA -> AoS


@_jit
def _column_magnitude(op, i):
    """``(null, negative, hi, lo)`` of element i of a decimal128 / int64 column."""
    src, outw, valid = op[DATA], op[P2], op[VALID]
    if valid != 0 and not _get_bit(valid, i):
        return True, False, np.uint64(0), np.uint64(0)
    if outw == 16:
        lo, hi = np.int64(load64(src + i * 16)), np.int64(load64(src + i * 16 + 8))
    else:
        lo = np.int64(load64(src + i * 8))
        hi = np.int64(-1) if lo < 0 else np.int64(0)
    negative, mh, ml = magnitude_128(hi, lo)
    return False, negative, mh, ml


@_jit
def _unscaled(hi, lo, pow10):
    """``(hi, lo) / 10**pow10`` if exact: ``(ok, hi, lo)`` (P scaling, PIC 9PP)."""
    for _ in range(pow10):
        hi, lo, rem = divmod_u128_small(hi, lo, 10)
        if rem != 0:
            return False, hi, lo
    return True, hi, lo


@_jit
def _write_digits_small(a, kind, w, digits, v, negative, positive, leading, separate, plus, minus):
    """Write magnitude ``v`` (< 10**18) as a packed or zoned field at ``a``: two digits per
    unsigned division by 100 (a multiply and a shift; no sign fix-ups)."""
    v = np.uint64(v)
    ten, hundred = np.uint64(10), np.uint64(100)
    if kind == K_PACKED:
        store8(a + w - 1, np.int64((v % ten) << np.uint64(4)) | pack_sign_nibble(negative, positive))
        v //= ten
        for t in range(w - 2, -1, -1):
            pair = v % hundred
            v //= hundred
            store8(a + t, np.int64(((pair // ten) << np.uint64(4)) | (pair % ten)))
        return
    d0 = 1 if separate and leading else 0
    t = digits - 1
    while t >= 1:
        pair = v % hundred
        v //= hundred
        store8(a + d0 + t, 0xF0 | np.int64(pair % ten))
        store8(a + d0 + t - 1, 0xF0 | np.int64(pair // ten))
        t -= 2
    if t == 0:
        store8(a + d0, 0xF0 | np.int64(v % ten))
    if separate:
        store8(a if leading else a + w - 1, minus if negative else plus)
    else:
        at = a + (0 if leading else digits - 1)
        store8(at, (pack_sign_nibble(negative, positive) << 4) | (load8(at) & 0xF))


@_jit
def _write_digits(a, kind, w, digits, hi, lo, negative, positive, leading, separate, plus, minus, groups):
    """Write magnitude ``(hi, lo)`` (below 10**digits) as a packed or zoned field at ``a``."""
    digit_groups(hi, lo, groups)
    if kind == K_PACKED:
        sign = pack_sign_nibble(negative, positive)
        for t in range(w):
            j_hi = 2 * (w - 1 - t)  # digit index (from the right) of the byte's high nibble
            if t == w - 1:
                store8(a + t, (digit_at(groups, 0) << 4) | sign)
            else:
                store8(a + t, (digit_at(groups, j_hi) << 4) | digit_at(groups, j_hi - 1))
        return
    d0 = 1 if separate and leading else 0
    for t in range(digits):
        store8(a + d0 + t, 0xF0 | digit_at(groups, digits - 1 - t))
    if separate:
        store8(a if leading else a + w - 1, minus if negative else plus)
    else:
        at = a + (0 if leading else digits - 1)
        store8(at, (pack_sign_nibble(negative, positive) << 4) | (load8(at) & 0xF))


@_jit
def rev_decimal(dst, itemsize, b0, b1, op, offs, kind):
    """decimal128 / int64 -> packed, zoned or binary (``kind``), range-checked.

    Packed fields of up to 15 digits, zoned of up to 16, binary ones, with no P scaling,
    are written a word at a time by a loop of their kind that only notes whether a value
    could not be written; a block with such a value is written again value by value
    (:func:`_rev_decimal_exact`), which names the first."""
    digits = op[P1]
    if op[P3] == 0:
        ok = False
        if kind == K_PACKED and digits <= 15:
            ok = _rev_decimal_words(dst, itemsize, b0, b1, op, offs, K_PACKED)
            if not ok:
                ok = _rev_decimal_short(dst, itemsize, b0, b1, op, offs, K_PACKED)
        elif kind == K_ZONED and digits <= 16 and (op[FLAGS] & F_ASCII) == 0:  # ASCII: the exact loop
            if (op[FLAGS] & (F_LEADING | F_SEPARATE)) == 0:
                ok = _rev_decimal_words(dst, itemsize, b0, b1, op, offs, K_ZONED)
            if not ok:
                ok = _rev_decimal_short(dst, itemsize, b0, b1, op, offs, K_ZONED)
        elif kind == K_BINARY:
            ok = _rev_decimal_short(dst, itemsize, b0, b1, op, offs, K_BINARY)
        if ok:
            return -1, 0
    return _rev_decimal_exact(dst, itemsize, b0, b1, op, offs, kind)


@_jit
def _rev_decimal_words(dst, itemsize, b0, b1, op, offs, kind):
    """:func:`rev_decimal` of rows [b0, b1) of packed fields of up to 8 bytes or zoned ones
    of up to 16 digits with the sign overpunched on the last (``kind``, a compile-time
    constant), where every field is followed by 8 bytes of its record at least and the
    block has no null: each field's bytes stored as one or two 8-byte words, the record's
    bytes after them read first and kept (no branch on the width). False if that does
    not apply or a value could not be written (the caller writes the block again)."""
    literally(kind)
    w, c, e0, valid = op[WIDTH], op[COUNT], op[ELEM0], op[VALID]
    reach = 8 if kind == K_PACKED else w - min(w, 8) + 8  # bytes each field's stores span
    for k in range(c):
        if offs[op[OFFS] + k] + reach > itemsize:
            return False
    if valid != 0:
        missing = 0
        for i in range(e0 + b0 * c, e0 + b1 * c):
            missing |= _get_bit(valid, i) ^ 1
        if missing != 0:
            return False
    if op[P2] == 16:
        bad = _rev_words_loop(dst, itemsize, b0, b1, op, offs, kind, 16)
    else:
        bad = _rev_words_loop(dst, itemsize, b0, b1, op, offs, kind, 8)
    return bad == np.uint64(0)


@_inline
def _rev_words_loop(dst, itemsize, b0, b1, op, offs, kind, outw):
    """The loop of :func:`_rev_decimal_words`: nonzero if a value could not be written."""
    w, c, digits, e0, src = op[WIDTH], op[COUNT], op[P1], op[ELEM0], op[DATA]
    signed = (op[FLAGS] & F_SIGNED) != 0
    positive = np.uint64(positive_sign(op[TABLE], signed))
    flip = positive ^ np.uint64(0xD)  # the positive nibble to D: a negative value's
    unsigned = np.uint64(0) if signed else np.uint64(1)
    small = digit_limit(digits)
    n_hi = w - min(w, 8) if kind == K_ZONED else 0  # zoned: the digits before the last 8
    n_lo = w - n_hi  # the bytes of the last word
    sh, sh_hi = np.uint64(64 - 8 * n_lo), np.uint64(64 - 8 * n_hi if n_hi > 0 else 0)
    ones = np.uint64(0xFFFFFFFFFFFFFFFF)
    keep = (ones << np.uint64(8 * n_lo)) if n_lo < 8 else np.uint64(0)  # the record's bytes after the field
    keep_hi = (ones << np.uint64(8 * n_hi)) if n_hi < 8 else np.uint64(0)
    e8 = np.uint64(100000000)
    bad = np.uint64(0)
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        for r in range(b0, b1):
            i = e0 + r * c + k
            lo_s = np.uint64(load64(src + i * outw))
            m = np.uint64(np.int64(lo_s) >> 63)
            if outw == 16:  # (a value that fits holds its sign in the high word)
                bad |= np.uint64(load64(src + i * 16 + 8)) ^ m
            v = (lo_s ^ m) - m
            neg = m & np.uint64(1)
            out = np.uint64(v >= small)
            bad |= out | (neg & unsigned)
            v &= out - np.uint64(1)  # (a value out of range: 0 here; the exact loop says so)
            sign = positive ^ (flip & m)
            hi8 = v // e8
            a = base + r * itemsize
            if kind == K_PACKED:
                y = np.uint64(
                    bswap64((((_bcd8(hi8) << np.uint64(32)) | _bcd8(v - hi8 * e8)) << np.uint64(4) | sign) << sh)
                )
            else:
                z = (_zoned8(v - hi8 * e8) & ~np.uint64(0xF0)) | (sign << np.uint64(4))
                y = np.uint64(bswap64(z << sh))
                if n_hi > 0:
                    y_hi = np.uint64(bswap64(_zoned8(hi8) << sh_hi))
                    store64(a, (np.uint64(load64(a)) & keep_hi) | y_hi)
                    a += n_hi
            store64(a, (np.uint64(load64(a)) & keep) | y)
    return bad


@_jit
def _store_be(a, w, x):
    """The low ``w`` (1 to 8) bytes of ``x`` at ``a``, big-endian: one to three stores."""
    y = np.uint64(bswap64(np.uint64(x) << np.uint64(64 - 8 * w)))  # the w bytes first, in order
    if w == 8:
        store64(a, y)
        return
    p = 0
    if w & 4:
        store32(a, y)
        y >>= np.uint64(32)
        p = 4
    if w & 2:
        store16(a + p, y)
        y >>= np.uint64(16)
        p += 2
    if w & 1:
        store8(a + p, y)


def _four_digit_tables():
    """Every number below 10**4 as its 4 digits: BCD nibbles (uint16) and zoned bytes
    F0-F9 (uint32), each a big-endian word (most significant digit on top)."""
    q = np.arange(10000, dtype=np.uint32)
    d3, d2, d1, d0 = q // 1000, q // 100 % 10, q // 10 % 10, q % 10
    bcd = (d3 << 12) | (d2 << 8) | (d1 << 4) | d0
    zoned = ((0xF0 | d3) << 24) | ((0xF0 | d2) << 16) | ((0xF0 | d1) << 8) | (0xF0 | d0)
    return bcd.astype(np.uint16), zoned.astype(np.uint32)


# (global arrays: Numba compiles them into the kernels as constants; 20 and 40 KiB, in cache)
_BCD4, _ZONED4 = _four_digit_tables()


@_jit
def _zoned8(y):
    """``y`` (below 10**8) as 8 zoned digit bytes F0-F9, a big-endian word."""
    y = np.uint64(y)
    a = y // np.uint64(10000)
    return (np.uint64(_ZONED4[a]) << np.uint64(32)) | np.uint64(_ZONED4[y - a * np.uint64(10000)])


@_jit
def _bcd8(y):
    """``y`` (below 10**8) as 8 BCD digit nibbles, a big-endian 32-bit word."""
    y = np.uint64(y)
    a = y // np.uint64(10000)
    return (np.uint64(_BCD4[a]) << np.uint64(16)) | np.uint64(_BCD4[y - a * np.uint64(10000)])


@_jit
def _binary_max(signed, w, digits, trunc_bin):
    """The largest magnitudes of a positive and of a negative value that a ``w``-byte
    binary field holds, as :func:`kernels.mainframe.binary_fits` decides it."""
    if trunc_bin or digits == 0:
        if signed:
            top = np.uint64(1) << np.uint64(8 * w - 1)
            return top - np.uint64(1), top
        full = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - 8 * w)
        return full, full  # (a negative value in an unsigned field is bad anyway)
    limit = digit_limit(digits)
    most = np.uint64(0xFFFFFFFFFFFFFFFF) if limit == np.uint64(0) else limit - np.uint64(1)
    return most, most


@_jit
def _rev_decimal_short(dst, itemsize, b0, b1, op, offs, kind):
    """:func:`rev_decimal` of rows [b0, b1) in a loop with no exit; False if a value could
    not be written (a null, out of range: the caller writes the block again, exactly).
    ``kind`` is a compile-time constant: one loop per kind, and in it one per output width
    and presence of a validity bitmap (constants there: no test of them in the loop)."""
    literally(kind)
    outw, checked = op[P2], op[VALID] != 0
    if outw == 16 and not checked:
        bad = _rev_short_loop(dst, itemsize, b0, b1, op, offs, kind, 16, False)
    elif outw == 16:
        bad = _rev_short_loop(dst, itemsize, b0, b1, op, offs, kind, 16, True)
    elif not checked:
        bad = _rev_short_loop(dst, itemsize, b0, b1, op, offs, kind, 8, False)
    else:
        bad = _rev_short_loop(dst, itemsize, b0, b1, op, offs, kind, 8, True)
    return bad == np.uint64(0)


@_inline
def _rev_short_loop(dst, itemsize, b0, b1, op, offs, kind, outw, checked):
    """The loop of :func:`_rev_decimal_short`: nonzero if a value could not be written."""
    w, c, digits, flags, e0 = op[WIDTH], op[COUNT], op[P1], op[FLAGS], op[ELEM0]
    src, valid = op[DATA], op[VALID]
    signed = (flags & F_SIGNED) != 0
    leading, separate = (flags & F_LEADING) != 0, (flags & F_SEPARATE) != 0
    plus, minus = op[SENT] & 0xFF, (op[SENT] >> 8) & 0xFF
    trunc_bin = (flags & F_TRUNC_BIN) != 0
    positive = positive_sign(op[TABLE], signed)
    unsigned = np.uint64(0) if signed else np.uint64(1)
    small = digit_limit(min(digits, 18)) if kind != K_BINARY else np.uint64(0)
    pos_max, neg_max = _binary_max(signed, w, digits, trunc_bin)  # (binary_fits, set up once)
    d0 = 1 if separate and leading else 0  # zoned: the first digit byte
    n_lo = min(digits, 8)
    n_hi = digits - n_lo
    over = -1 if separate else (d0 if leading else digits - 1)  # zoned: the overpunched byte
    trailing = not separate and not leading
    e8 = np.uint64(100000000)
    bad = np.uint64(0)
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        for r in range(b0, b1):
            i = e0 + r * c + k
            if checked:
                bad |= np.uint64(_get_bit(valid, i) ^ 1)
            lo_s = np.uint64(load64(src + i * outw))
            hi_s = np.uint64(load64(src + i * 16 + 8)) if outw == 16 else np.uint64(np.int64(lo_s) >> 63)
            m = np.uint64(np.int64(hi_s) >> 63)  # the magnitude without a branch: (x ^ m) - m
            lo = (lo_s ^ m) - m
            hi = (hi_s ^ m) + (m & np.uint64(lo_s == np.uint64(0)))
            nonzero = np.uint64((lo | hi) != np.uint64(0))
            neg = (m & np.uint64(1)) & nonzero  # zero is written positive
            negative = neg != np.uint64(0)
            bad |= neg & unsigned
            a = base + r * itemsize
            if kind == K_BINARY:
                bad |= np.uint64(hi != np.uint64(0)) | np.uint64(lo > (neg_max if negative else pos_max))
                _store_be(a, w, (~lo + np.uint64(1)) if negative else lo)
            else:
                out = np.uint64(hi != np.uint64(0)) | np.uint64(lo >= small)
                bad |= out
                v = lo & (out - np.uint64(1))  # (a value out of range: 0 here; the exact loop says so)
                sign = np.uint64(pack_sign_nibble(negative, positive))
                hi8 = v // e8
                if kind == K_PACKED:
                    bcd = (_bcd8(hi8) << np.uint64(32)) | _bcd8(v - hi8 * e8)
                    _store_be(a, w, (bcd << np.uint64(4)) | sign)
                else:
                    if n_hi > 0:
                        _store_be(a + d0, n_hi, _zoned8(hi8))
                    z = _zoned8(v - hi8 * e8)
                    if trailing:  # the sign overpunched on the last digit: set in the word stored
                        z = (z & ~np.uint64(0xF0)) | (sign << np.uint64(4))
                    _store_be(a + d0 + n_hi, n_lo, z)
                    if separate:
                        store8(a if leading else a + w - 1, minus if negative else plus)
                    elif not trailing:
                        store8(a + over, (sign << np.uint64(4)) | np.uint64(load8(a + over) & 0xF))
    return bad


@_jit
def _rev_decimal_exact(dst, itemsize, b0, b1, op, offs, kind):
    """Rows [b0, b1) of :func:`rev_decimal`, value by value: the first that cannot be
    written ends it."""
    w, c, digits, pow10, flags, e0 = op[WIDTH], op[COUNT], op[P1], op[P3], op[FLAGS], op[ELEM0]
    signed = (flags & F_SIGNED) != 0
    leading, separate = (flags & F_LEADING) != 0, (flags & F_SEPARATE) != 0
    plus, minus = op[SENT] & 0xFF, (op[SENT] >> 8) & 0xFF
    trunc_bin = (flags & F_TRUNC_BIN) != 0
    positive = positive_sign(op[TABLE], signed)  # the sign nibble of positive values
    ascii_zoned = kind == K_ZONED and (flags & F_ASCII) != 0
    if ascii_zoned:  # written as EBCDIC, then each byte made ASCII
        plus, minus = 0x4E, 0x60
    groups = np.zeros(5, dtype=np.int64)
    small = digit_limit(min(digits, 18)) if kind != K_BINARY else np.uint64(0)  # 10**digits, digits <= 18
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        for r in range(b0, b1):
            null, negative, hi, lo = _column_magnitude(op, e0 + r * c + k)
            if null:
                return r, E_NULL
            if pow10 > 0:
                ok, hi, lo = _unscaled(hi, lo, pow10)
                if not ok:
                    return r, E_INEXACT
            if hi == np.uint64(0) and lo == np.uint64(0):
                negative = False  # decimal -0 does not exist; zero is written positive
            if negative and not signed:
                return r, E_RANGE
            a = base + r * itemsize
            if kind == K_BINARY:
                if not binary_fits(hi, lo, negative, signed, w, digits, trunc_bin):
                    return r, E_RANGE
                v = (~lo + np.uint64(1)) if negative else lo
                for t in range(w):
                    store8(a + w - 1 - t, np.int64((v >> np.uint64(8 * t)) & np.uint64(0xFF)))
            elif digits <= 18:
                if hi != np.uint64(0) or lo >= small:
                    return r, E_RANGE
                _write_digits_small(
                    a, kind, w, digits, np.int64(lo), negative, positive, leading, separate, plus, minus
                )
            else:
                if not below_pow10(hi, lo, digits):
                    return r, E_RANGE
                _write_digits(a, kind, w, digits, hi, lo, negative, positive, leading, separate, plus, minus, groups)
            if ascii_zoned:
                _zoned_to_ascii(a, w)
    return -1, 0


@_jit
def rev_hfloat(dst, itemsize, b0, b1, op, offs):
    """float32 / float64 -> IBM hexadecimal float (see kernels.mainframe.ieee_to_ibm)."""
    w, c, src, e0, valid = op[WIDTH], op[COUNT], op[DATA], op[ELEM0], op[VALID]
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        for r in range(b0, b1):
            i = e0 + r * c + k
            if valid != 0 and not _get_bit(valid, i):
                return r, E_NULL
            bits = np.int64(load32(src + i * 4)) if w == 4 else np.int64(load64(src + i * 8))
            ibm, status = ieee_to_ibm(bits, w)
            if status != 0:
                return r, E_RANGE
            a = base + r * itemsize
            for t in range(w):
                store8(a + w - 1 - t, (ibm >> (8 * t)) & 0xFF)
    return -1, 0


@_jit
def rev_text(dst, itemsize, b0, b1, op, offs):
    """UTF-8 -> EBCDIC through the code page's int16[65536] table, padded with EBCDIC
    spaces (0x40; ASCII 0x20 with ``F_ASCII``); a character with no byte in the code page
    is E_RANGE. Runs of 8 ASCII characters go two at a time through the op's pair table
    (P3, made once per code page by the plan when every ASCII character has a byte in it;
    without one, a byte table made here) and are stored as one word."""
    if op[P3] != 0:  # the pair table, made once
        if op[WIDTH] >= 8 and b1 > b0 and _rev_text_fixed(dst, itemsize, b0, b1, op, offs):
            return -1, 0
        return _rev_text_rows(dst, itemsize, b0, b1, op, offs, np.int64(0), op[P3])
    table = op[TABLE]
    ascii = np.empty(128, dtype=np.uint8)
    every = True  # every ASCII character has a byte in the code page
    for cp in range(128):
        byte = np.int64(np.int16(load16(table + cp * 2)))
        every &= byte >= 0
        ascii[cp] = byte & 0xFF
    # (an int64 both ways: an address and a literal 0 would unify to a float64)
    at = np.int64(ascii.ctypes.data) if every else np.int64(0)
    return _rev_text_rows(dst, itemsize, b0, b1, op, offs, at, op[P3])


@_jit
def _rev_text_fixed(dst, itemsize, b0, b1, op, offs):
    """Rows [b0, b1) of a text column of at least 8 bytes a value, written if every
    value of the block is there (no null) and is as long as the field, in ASCII: each a
    word at a time through the pair table (its last word the value's last 8 bytes, again
    where they overlap the word before). False if one is not (the caller writes the block
    again, value by value, over what this wrote)."""
    n, c, data, offsets, e0, ow = op[WIDTH], op[COUNT], op[DATA], op[OFFSETS], op[ELEM0], op[P2]
    valid, pairs = op[VALID], op[P3]
    i0, i1 = e0 + b0 * c, e0 + b1 * c
    start = _offset_at(offsets, i0, ow)
    odd = np.uint64(0)
    if ow == 4:  # every value n bytes long: each offset where the first and the width put it
        for i in range(i0 + 1, i1 + 1):
            odd |= np.uint64(np.int64(np.int32(load32(offsets + i * 4))) != start + (i - i0) * n)
    else:
        for i in range(i0 + 1, i1 + 1):
            odd |= np.uint64(np.int64(load64(offsets + i * 8)) != start + (i - i0) * n)
    if valid != 0:
        for i in range(i0, i1):
            odd |= np.uint64(_get_bit(valid, i) ^ 1)
    if odd != np.uint64(0):
        return False
    s = data + start
    last = n - 8
    high = np.uint64(0)
    for r in range(b0, b1):
        row = dst + r * itemsize
        for k in range(c):
            out = row + offs[op[OFFS] + k]
            t = 0
            while t < last:
                x = np.uint64(load64(s + t))
                high |= x
                store64(out + t, _through_pairs(pairs, x))
                t += 8
            x = np.uint64(load64(s + last))
            high |= x
            store64(out + last, _through_pairs(pairs, x))
            s += n
    return (high & np.uint64(0x8080808080808080)) == np.uint64(0)


@_inline
def _back8(ascii, pairs, x):
    """The 8 ASCII characters of ``x`` in the code page, one word: through the pair table
    ``pairs`` (P3 of a text op on the way back, 4 loads) if there is one, else the byte
    table ``ascii`` (8)."""
    if pairs == 0:
        return _ascii8(ascii, x)
    return _through_pairs(pairs, x)


@_jit
def _ascii8(ascii, x):
    """The 8 ASCII characters of ``x`` through the code page's byte table ``ascii``."""
    word = np.uint64(0)
    for u in range(8):
        cp = np.int64((x >> np.uint64(8 * u)) & np.uint64(0x7F))
        word |= np.uint64(load8(ascii + cp)) << np.uint64(8 * u)
    return word


@_jit
def _rev_text_rows(dst, itemsize, b0, b1, op, offs, ascii, pairs):
    n, c, data, offsets, e0, ow = op[WIDTH], op[COUNT], op[DATA], op[OFFSETS], op[ELEM0], op[P2]
    valid, table, truncate = op[VALID], op[TABLE], (op[FLAGS] & F_TRUNCATE) != 0
    space = 0x20 if (op[FLAGS] & F_ASCII) != 0 else 0x40
    high, spaces = np.uint64(0x8080808080808080), np.uint64(space) * np.uint64(0x0101010101010101)
    for k in range(c):
        base = dst + offs[op[OFFS] + k]
        for r in range(b0, b1):
            i = e0 + r * c + k
            if valid != 0 and not _get_bit(valid, i):
                return r, E_NULL
            start = _offset_at(offsets, i, ow)
            length = _offset_at(offsets, i + 1, ow) - start
            s, out = data + start, base + r * itemsize
            t, m = 0, 0
            if ascii != 0 or pairs != 0:
                while t + 8 <= length and m + 8 <= n:  # eight ASCII characters: one store
                    x = np.uint64(load64(s + t))
                    if x & high:
                        break
                    store64(out + m, _back8(ascii, pairs, x))
                    t += 8
                    m += 8
                # the last 1-7 (after a loop that stopped on none that is not ASCII): the string's last 4 or 8 again
                if m == t and 0 < length - t < 8 and 8 <= length <= n:
                    if length - t <= 4 and pairs != 0:
                        x = np.uint64(load32(s + length - 4))
                        if (x & high) == 0:
                            store32(out + length - 4, _through_pairs4(pairs, x))
                            t = m = length
                    else:
                        x = np.uint64(load64(s + length - 8))
                        if (x & high) == 0:
                            store64(out + length - 8, _back8(ascii, pairs, x))
                            t = m = length
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
                if m >= n:
                    if not truncate:
                        return r, E_TOO_LONG
                    break
                byte = np.int64(-1) if cp > 0xFFFF else np.int64(np.int16(load16(table + cp * 2)))
                if byte < 0:
                    return r, E_RANGE  # no byte in the code page
                store8(out + m, byte)
                m += 1
            while m + 8 <= n:
                store64(out + m, spaces)
                m += 8
            while m < n:
                store8(out + m, space)
                m += 1
    return -1, 0
