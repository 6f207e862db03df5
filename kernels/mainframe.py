"""Mainframe field values, one value at a time: packed and zoned decimals, big-endian
binary integers, IBM hexadecimal floats, EBCDIC text.

Written once, compiled by both backends: every function here is
``numba.extending.register_jitable``, so a CPU kernel (``numba.njit``) and a CUDA kernel
(``numba.cuda.jit``) call the same code. The functions take and return plain integers
(bytes, digits, raw bits); each backend's kernel does its own loads and stores, and
loops over the bytes of a field calling these. Nothing here touches memory.

128-bit values (``decimal128``) travel as two 64-bit halves ``(hi, lo)`` of their two's
complement bits, ``lo`` as an unsigned 64-bit integer; the arithmetic splits 64-bit
words into 32-bit halves, which both targets do without 128-bit support.

Status codes (returned next to a value): ``OK`` (0) or one of the ``plan.E_*`` codes
the kernels report; see :mod:`kernels.plan`.
"""

import numpy as np
from numba.extending import register_jitable

M32 = 0xFFFFFFFF
POW10_18 = 10**18
POW10_9 = 10**9

# Sign nibbles (packed) and zones (zoned): C positive, D negative, F unsigned (positive), the
# signs COBOL writes; A and E (positive) and B (negative) are valid too, as IBM's decimal
# instructions take them (z/Architecture Principles of Operation, "Decimal Instructions").
SIGN_C, SIGN_D, SIGN_F = 0xC, 0xD, 0xF
SIGN_B = 0xB


# ----------------------------------------------------------------- 128-bit integers


@register_jitable
def mul_add_u128(hi, lo, m, a):
    """``(hi, lo) * m + a`` for unsigned 128-bit ``(hi, lo)``, ``m`` and ``a`` below 2**63
    (wraps modulo 2**128; callers keep below 10**38)."""
    hi, lo, m, a = np.uint64(hi), np.uint64(lo), np.uint64(m), np.uint64(a)
    mask = np.uint64(M32)
    s32 = np.uint64(32)
    l0, l1 = lo & mask, lo >> s32
    m0, m1 = m & mask, m >> s32
    p0, p1, p2, p3 = l0 * m0, l0 * m1, l1 * m0, l1 * m1
    mid = (p0 >> s32) + (p1 & mask) + (p2 & mask)
    low = (p0 & mask) | (mid << s32)
    high = hi * m + p3 + (p1 >> s32) + (p2 >> s32) + (mid >> s32)
    out = low + a
    if out < a:
        high += np.uint64(1)
    return high, out


@register_jitable
def neg_u128(hi, lo):
    """Two's complement negation of ``(hi, lo)``."""
    hi, lo = ~np.uint64(hi), ~np.uint64(lo)
    lo += np.uint64(1)
    if lo == np.uint64(0):
        hi += np.uint64(1)
    return hi, lo


@register_jitable
def divmod_u128_1e9(hi, lo):
    """``(hi, lo) // 10**9`` and the remainder."""
    return divmod_u128_small(hi, lo, POW10_9)


@register_jitable
def divmod_u128_small(hi, lo, divisor):
    """``(hi, lo) // divisor`` and the remainder, for ``divisor`` below 2**32, by 32-bit
    long division (no 128-bit divide on either target)."""
    hi, lo = np.uint64(hi), np.uint64(lo)
    mask, s32, d = np.uint64(M32), np.uint64(32), np.uint64(divisor)
    rem = np.uint64(0)
    q3 = ((rem << s32) | (hi >> s32)) // d
    rem = ((rem << s32) | (hi >> s32)) % d
    q2 = ((rem << s32) | (hi & mask)) // d
    rem = ((rem << s32) | (hi & mask)) % d
    q1 = ((rem << s32) | (lo >> s32)) // d
    rem = ((rem << s32) | (lo >> s32)) % d
    q0 = ((rem << s32) | (lo & mask)) // d
    rem = ((rem << s32) | (lo & mask)) % d
    return (q3 << s32) | q2, (q1 << s32) | q0, np.int64(rem)


@register_jitable
def below_pow10(hi, lo, digits):
    """Whether unsigned ``(hi, lo)`` is below ``10**digits`` (``digits`` 0 to 38)."""
    lim_hi, lim_lo = np.uint64(0), np.uint64(1)
    for _ in range(digits):
        lim_hi, lim_lo = mul_add_u128(lim_hi, lim_lo, 10, 0)
    hi, lo = np.uint64(hi), np.uint64(lo)
    return hi < lim_hi or (hi == lim_hi and lo < lim_lo)


@register_jitable
def digit_groups(hi, lo, groups):
    """Split unsigned ``(hi, lo)`` into base-10**9 groups, least significant first, into
    ``groups`` (an int64 array of 5: up to 45 digits)."""
    for g in range(5):
        hi, lo, rem = divmod_u128_1e9(hi, lo)
        groups[g] = rem


# ----------------------------------------------------------------- decimals


@register_jitable
def packed_digit_ok(nibble):
    return nibble <= 9


@register_jitable
def packed_sign(nibble, signed):
    """Sign of a packed (or zoned overpunch) sign nibble: +1 (A, C, E, F), -1 (B, D,
    signed fields only), 0 (invalid: 0-9, or B, D in an unsigned field)."""
    if nibble < 0xA:
        return 0
    if nibble == SIGN_B or nibble == SIGN_D:
        return -1 if signed else 0
    return 1


@register_jitable
def sign_nibble(nibble, signed):
    """``(valid, negative)`` of a sign nibble or zone, as :func:`packed_sign` reads it,
    without a branch (a run of values of random signs mispredicts none)."""
    minus = (nibble == SIGN_B) | (nibble == SIGN_D)
    negative = minus & signed
    return (nibble >= 0xA) & (negative | (not minus)), negative


@register_jitable
def digits_of_nibbles(d):
    """The value of the (up to 16) decimal digit nibbles of ``d`` (uint64, most significant
    nibble first), by halves: bytes, 16-bit lanes, 32-bit lanes (SWAR; no loop)."""
    d = np.uint64(d)
    m8, m16, m32 = np.uint64(0x0F0F0F0F0F0F0F0F), np.uint64(0x00FF00FF00FF00FF), np.uint64(0x0000FFFF0000FFFF)
    b = ((d >> np.uint64(4)) & m8) * np.uint64(10) + (d & m8)
    h = ((b >> np.uint64(8)) & m16) * np.uint64(100) + (b & m16)
    q = ((h >> np.uint64(16)) & m32) * np.uint64(10000) + (h & m32)
    return (q >> np.uint64(32)) * np.uint64(100000000) + (q & np.uint64(0xFFFFFFFF))


@register_jitable
def packed_word(x, width, digits, signed):
    """``(status, negative, magnitude)`` of a packed decimal of ``width`` <= 8 bytes given as
    the big-endian word ``x`` (its bytes right-aligned): every nibble checked at once."""
    x = np.uint64(x)
    d = x >> np.uint64(4)  # the 2 * width - 1 digit nibbles
    six = np.uint64(0x0666666666666666)
    carries = (d + six) ^ d ^ six  # a digit nibble above 9 carries into the nibble above it
    bad = carries & np.uint64(0x1111111111111110)  # the carries into nibble boundaries only
    if digits % 2 == 0:
        bad |= d >> np.uint64(4 * (2 * width - 2))  # an even digit count's padding nibble is 0
    valid, negative = sign_nibble(np.int64(x & np.uint64(0xF)), signed)
    if bad != np.uint64(0) or not valid:
        return 7, False, np.uint64(0)  # plan.E_INVALID
    return 0, negative, digits_of_nibbles(d)


@register_jitable
def zoned_word(x, n):
    """``(bad, value)`` of ``n`` (0 to 8) zoned digit bytes F0-F9, right-aligned in the
    big-endian word ``x``: every zone and digit checked at once, the digits by SWAR."""
    x = np.uint64(x)
    if n == 0:
        return False, np.uint64(0)
    mask = np.uint64(0xFFFFFFFFFFFFFFFF) if n >= 8 else (np.uint64(1) << np.uint64(8 * n)) - np.uint64(1)
    zones, m4 = np.uint64(0xF0F0F0F0F0F0F0F0), np.uint64(0x0F0F0F0F0F0F0F0F)
    d = x & m4
    bad = (((x & zones) ^ zones) | ((d + np.uint64(0x0606060606060606)) & zones)) & mask  # zone F, digit <= 9
    m16, m32 = np.uint64(0x00FF00FF00FF00FF), np.uint64(0x0000FFFF0000FFFF)
    b = ((d >> np.uint64(8)) & m16) * np.uint64(10) + (d & m16)
    q = ((b >> np.uint64(16)) & m32) * np.uint64(100) + (b & m32)
    return bad != np.uint64(0), (q >> np.uint64(32)) * np.uint64(10000) + (q & np.uint64(0xFFFFFFFF))


@register_jitable
def zoned_digit(byte):
    """The digit of a zoned byte ``F0``-``F9``, or -1."""
    if byte >= 0xF0 and byte <= 0xF9:
        return byte - 0xF0
    return -1


@register_jitable
def zoned_overpunch(byte, signed):
    """``(digit, sign)`` of the byte that carries an overpunched sign: zone A, C, E, F
    positive, B, D negative (signed fields only); ``(-1, 0)`` if invalid."""
    zone, digit = byte >> 4, byte & 0xF
    sign = packed_sign(zone, signed)
    if digit > 9 or sign == 0:
        return -1, 0
    return digit, sign


@register_jitable
def ascii_zoned_byte(b):
    """The EBCDIC zoned byte of an ASCII one (``F_ASCII``): '0'-'9' F0-F9; overpunched
    signs '{', 'A'-'I' C0-C9 (positive) and '}', 'J'-'R' D0-D9 (negative); '+' 4E, '-' 60;
    anything else 00, which no zoned check accepts."""
    if b >= 0x30 and b <= 0x39:
        return 0xF0 | (b - 0x30)
    if b >= 0x41 and b <= 0x49:
        return 0xC0 | (b - 0x40)
    if b >= 0x4A and b <= 0x52:
        return 0xD0 | (b - 0x49)
    if b == 0x7B:
        return 0xC0
    if b == 0x7D:
        return 0xD0
    if b == 0x2B:
        return 0x4E
    if b == 0x2D:
        return 0x60
    return 0


@register_jitable
def zoned_ascii_byte(b):
    """The ASCII byte of an EBCDIC zoned one: the inverse of :func:`ascii_zoned_byte`."""
    zone, d = b >> 4, b & 0xF
    if zone == 0xF:
        return 0x30 | d
    if zone == 0xC:
        return 0x7B if d == 0 else 0x40 + d
    if zone == 0xD:
        return 0x7D if d == 0 else 0x49 + d
    if b == 0x4E:
        return 0x2B
    if b == 0x60:
        return 0x2D
    return b


@register_jitable
def fold_chunk(hi, lo, chunk, chunk_digits):
    """``(hi, lo) * 10**chunk_digits + chunk``: digits gathered in an int64 chunk (at most
    18) folded into the 128-bit accumulator."""
    scale = np.int64(1)
    for _ in range(chunk_digits):
        scale *= 10
    return mul_add_u128(hi, lo, scale, chunk)


@register_jitable
def signed_128(hi, lo, sign):
    """Two's complement ``(hi, lo)`` as signed int64 halves of the magnitude with ``sign``."""
    if sign < 0:
        hi, lo = neg_u128(hi, lo)
    return np.int64(hi), np.int64(lo)


@register_jitable
def magnitude_128(hi, lo):
    """``(negative, mag_hi, mag_lo)`` of a decimal128's two's complement halves."""
    neg = np.int64(hi) < 0
    if neg:
        mh, ml = neg_u128(hi, lo)
        return True, mh, ml
    return False, np.uint64(hi), np.uint64(lo)


@register_jitable
def digit_at(groups, i):
    """Decimal digit ``i`` (0: least significant) of the groups of :func:`digit_groups`."""
    g = groups[i // 9]
    for _ in range(i % 9):
        g //= 10
    return g % 10


@register_jitable
def pack_sign_nibble(negative, positive):
    """The sign nibble (or zone) the way back writes: D for a negative value, else
    ``positive``: the field's (``Encoding.positive``, by default C in a signed field and F
    in an unsigned one; see docs/mainframe.md, "Field kinds")."""
    return SIGN_D if negative else positive


@register_jitable
def positive_sign(chosen, signed):
    """The positive sign nibble of a field: ``chosen`` (0xC or 0xF) or, for 0, C when
    signed and F when not."""
    if chosen != 0:
        return chosen
    return SIGN_C if signed else SIGN_F


# ----------------------------------------------------------------- binary


@register_jitable
def binary_value(raw, width, signed):
    """A big-endian integer of ``width`` bytes, already gathered into ``raw`` (its
    bytes in order, most significant first, as the low bytes of an int64), as int64
    (signed) or its unsigned bits (unsigned 8-byte values >= 2**63 come back negative:
    callers read them as uint64)."""
    if signed and width < 8:
        shift = np.int64(64 - 8 * width)
        return (np.int64(raw) << shift) >> shift
    return np.int64(raw)


@register_jitable
def digit_limit(digits):
    """10**digits as uint64 for 1-19 digits; 0 (no limit) otherwise: a limit of 20 or more
    digits holds every 8-byte value."""
    if digits <= 0 or digits >= 20:
        return np.uint64(0)
    lim = np.uint64(1)
    for _ in range(digits):
        lim *= np.uint64(10)
    return lim


@register_jitable
def binary_fits(hi, lo, negative, signed, w, digits, trunc_bin):
    """Whether magnitude ``(hi, lo)`` with its sign fits a ``w``-byte binary field: the
    PICTURE's digits (``TRUNC(STD)``) or the width's whole range (``trunc_bin``, digits 0)."""
    if hi != np.uint64(0):
        return False
    if trunc_bin or digits == 0:
        if signed:
            return lo <= (np.uint64(1) << np.uint64(8 * w - 1)) - np.uint64(0 if negative else 1)
        return w == 8 or lo < (np.uint64(1) << np.uint64(8 * w))
    limit = digit_limit(digits)
    return limit == np.uint64(0) or lo < limit


# ----------------------------------------------------------------- IBM hex floats


@register_jitable
def _top_bit(v):
    """Position of the highest set bit of unsigned ``v`` (> 0)."""
    v = np.uint64(v)
    p = 0
    while (v >> np.uint64(p + 1)) != np.uint64(0):
        p += 1
    return p


@register_jitable
def _round_shift(v, k):
    """``v >> k`` rounded to nearest, ties to even (``v`` unsigned, ``k`` >= 0)."""
    v = np.uint64(v)
    if k <= 0:
        return v
    if k >= 64:
        return np.uint64(0)
    kk = np.uint64(k)
    q = v >> kk
    rest = v & ((np.uint64(1) << kk) - np.uint64(1))
    half = np.uint64(1) << np.uint64(k - 1)
    if rest > half or (rest == half and (q & np.uint64(1)) != np.uint64(0)):
        q += np.uint64(1)
    return q


@register_jitable
def ibm_to_ieee(bits, width):
    """IBM hexadecimal float bits (4 or 8 bytes, as an int64 of the big-endian value)
    to IEEE bits: ``(ieee, status)``, float32 bits for width 4, float64 for 8.

    Exact where the IEEE type holds the value (every short value in float32's range;
    long values with at most 53 significant bits); otherwise rounded to nearest, ties to
    even. Short values above float32's largest are ``E_RANGE`` (status 1); below its
    smallest subnormal they round to zero. Zero fractions give zero of the sign bit."""
    b = np.uint64(bits)
    if width == 4:
        sign = (b >> np.uint64(31)) & np.uint64(1)
        e = np.int64((b >> np.uint64(24)) & np.uint64(0x7F))
        f = b & np.uint64(0xFFFFFF)
        fbits, mbits, bias, emax = 24, 23, 127, 255
    else:
        sign = (b >> np.uint64(63)) & np.uint64(1)
        e = np.int64((b >> np.uint64(56)) & np.uint64(0x7F))
        f = b & np.uint64(0xFFFFFFFFFFFFFF)
        fbits, mbits, bias, emax = 56, 52, 1023, 2047
    top = np.uint64(width * 8 - 1)
    if f == np.uint64(0):
        return np.int64(sign << top), 0
    p = _top_bit(f)
    exp = p + 4 * e - 256 - fbits + bias  # biased exponent of the leading bit
    if exp >= 1:
        if p > mbits:
            m = _round_shift(f, p - mbits)
            if m >> np.uint64(mbits + 1):  # rounding carried into a new bit
                m >>= np.uint64(1)
                exp += 1
        else:
            m = f << np.uint64(mbits - p)
        if exp >= emax:
            return np.int64(0), 1
        frac = m & ((np.uint64(1) << np.uint64(mbits)) - np.uint64(1))
        return np.int64((sign << top) | (np.uint64(exp) << np.uint64(mbits)) | frac), 0
    # subnormal: the value is f * 2**(p - mbits + exp - 1 - p) in units of the smallest subnormal
    shift = (p - mbits) + (1 - exp)  # bits of f below the smallest subnormal
    m = _round_shift(f, shift) if shift >= 0 else f << np.uint64(-shift)
    return np.int64((sign << top) | m), 0  # a carry into bit mbits makes it the smallest normal: correct


@register_jitable
def ieee_to_ibm(bits, width):
    """IEEE bits (float32 for width 4, float64 for 8) to IBM hexadecimal float bits:
    ``(ibm, status)``. float32 -> short rounds to nearest even (a hex fraction of 24
    bits holds 21 to 24 significant bits); float64 -> long is exact. NaN and infinities
    (IBM has neither) and float64 values beyond IBM's largest are ``E_RANGE`` (status 1),
    but for 2**252, which IBM's largest long values read as: it gives IBM's largest;
    float64 values below IBM's smallest normal are written unnormalized with exponent 0,
    rounded to nearest even (to zero at the end). Zeros keep their sign bit."""
    b = np.uint64(bits)
    if width == 4:
        sign = (b >> np.uint64(31)) & np.uint64(1)
        exp = np.int64((b >> np.uint64(23)) & np.uint64(0xFF))
        m = b & np.uint64(0x7FFFFF)
        mbits, bias, emax, fbits = 23, 127, 255, 24
    else:
        sign = (b >> np.uint64(63)) & np.uint64(1)
        exp = np.int64((b >> np.uint64(52)) & np.uint64(0x7FF))
        m = b & np.uint64(0xFFFFFFFFFFFFF)
        mbits, bias, emax, fbits = 52, 1023, 2047, 56
    top = np.uint64(width * 8 - 1)
    if exp == emax:
        return np.int64(0), 1
    if exp == 0 and m == np.uint64(0):
        return np.int64(sign << top), 0
    if exp == 0:
        exp = 1  # subnormal: no hidden bit
    else:
        m |= np.uint64(1) << np.uint64(mbits)
    b2 = exp - bias - mbits  # value = m * 2**b2
    p = _top_bit(m)
    q = p + b2 + 260  # = 4 * e + (t - (fbits - 4)), t the position of the fraction's top bit
    e = q >> 2
    t = fbits - 4 + (q & 3)
    if width == 8 and e == 128 and (q & 3) == 0 and m == np.uint64(1) << np.uint64(p):
        # 2**252: the float64 that IBM's largest longs (7FFF...F, and FFFF...F) read as; their
        # way back, so that every long read comes back (no other float64 is nearer to them)
        return np.int64((sign << top) | np.uint64(0x7FFFFFFFFFFFFFFF)), 0
    if e > 127:
        return np.int64(0), 1
    if e < 0:  # below the smallest normal: exponent 0, unnormalized
        t -= -4 * e
        e = 0
    if t >= p:
        f = m << np.uint64(t - p)
    else:
        f = _round_shift(m, p - t)
    if f >> np.uint64(fbits):  # rounding carried out of the fraction: one hex digit up
        f >>= np.uint64(4)
        e += 1
        if e > 127:
            return np.int64(0), 1
    return np.int64((sign << top) | (np.uint64(e) << np.uint64(fbits)) | f), 0
