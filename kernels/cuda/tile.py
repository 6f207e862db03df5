"""One tile of records, per op kind: the forward (AoS -> SoA) and reverse (SoA -> AoS)
element transforms the main kernels of :mod:`kernels.cuda.transpose` call."""

from numba import int32, int64, uint32, uint64

from ..plan import (
    COUNT,
    DATA,
    E_INEXACT,
    E_NUL,
    E_RANGE,
    E_TOO_LONG,
    E_UTF,
    F_DENSE,
    F_SIGNED,
    F_TRUNCATE,
    F_UTF8,
    FLAGS,
    K_BITS,
    K_CIVIL,
    K_CSTR,
    K_SCALE,
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
    WIDTH,
)
from .device import (
    I32_MAX,
    I32_MIN,
    X_BOUND,
    X_INV,
    X_LIM,
    X_SHIFT,
    _bit,
    _civil_from_days,
    _days_from_civil,
    _dev,
    _fault,
    _get,
    _is_nan,
    _load,
    _mask,
    _offset_at,
    _put,
    _shr,
    _sign_extend,
    _store,
    _swap,
    _utf8_lead,
    _utf8_length,
    _utf8_start,
    _utf8_whole,
)

# ------------------------------------------------------------- AoS -> SoA, one tile


@_dev
def _divmod32(a, b):
    """``divmod`` of two int64 in [0, 2**32): a 32-bit unsigned division, several times
    cheaper in registers and instructions than the signed 64-bit one."""
    ua, ub = uint32(a), uint32(b)
    q = ua // ub
    return int64(q), int64(ua - q * ub)


@_dev
def _element(op, offs, e, r0, slot):
    """(element index in the column, byte of the element in the tile) of local element e."""
    c = op[COUNT]
    q, k = _divmod32(e, c)
    return r0 * c + e, q * slot + offs[uint64(op[OFFS] + k)]


@_dev
def _forward_value(words, wb, op, offs, e, r0, slot):
    """The element's native value (raw bits) for K_COPY, K_BITS and K_ENUM words."""
    _, p = _element(op, offs, e, r0, slot)
    w = op[WIDTH]
    v = _get(words, wb, p, w)
    if op[SWAP] != 0:
        v = _swap(v, w)
    if op[KIND] == K_BITS:
        shift, nbits = op[P1], op[P2]
        u = v << (64 - shift - nbits)
        v = (u >> (64 - nbits)) if (op[FLAGS] & F_SIGNED) != 0 else _shr(u, 64 - nbits)
    return v


@_dev
def _is_valid(words, wb, op, offs, e, r0, slot):
    """Whether local element e of a column with a validity bitmap is not null."""
    _, p = _element(op, offs, e, r0, slot)
    w = op[WIDTH]
    if op[KIND] == K_SCALE or op[KIND] == K_CIVIL:
        v = _get(words, wb, p, 8)
        return (_swap(v, 8) if op[SWAP] != 0 else v) != NAT
    v = _forward_value(words, wb, op, offs, e, r0, slot)
    if op[NULLS] == N_BITS:
        return v != op[SENT]
    return not _is_nan(v, w)


@_dev
def _fwd_time(a8, a16, a32, a64, words, wb, op, offs, e, r0, slot, err, j, nops):
    i, p = _element(op, offs, e, r0, slot)
    c, dst, f, ow = op[COUNT], op[DATA], op[P1], op[P2]
    v = _get(words, wb, p, 8)
    if op[SWAP] != 0:
        v = _swap(v, 8)
    r = r0 + _divmod32(e, c)[0]
    if v == NAT:
        _store(a8, a16, a32, a64, dst + i * ow, ow, int64(0))
        return
    if op[KIND] == K_CIVIL:
        if v > (int64(1) << 40) or v < -(int64(1) << 40):
            _fault(err, r, j, E_RANGE, nops)
            return
        months = v * f
        res = _days_from_civil(1970 + months // 12, months % 12 + 1, int64(1))
    else:
        lim = op[X_LIM]
        if v > lim or v < -lim:
            _fault(err, r, j, E_RANGE, nops)
            return
        res = v * f
    if ow == 4 and (res < I32_MIN or res > I32_MAX):
        _fault(err, r, j, E_RANGE, nops)
        return
    _store(a8, a16, a32, a64, dst + i * ow, ow, res)


@_dev
def _fwd_enum_index(v, op, tables):
    w, size, lo = op[WIDTH], op[P2], op[P1]
    v = _sign_extend(v, 8 * w) if (op[FLAGS] & F_SIGNED) != 0 else v & _mask(8 * w)
    t0 = op[TABLE]
    if (op[FLAGS] & F_DENSE) != 0:
        j = v - lo
        return tables[uint64(t0 + j)] if 0 <= j < size else int64(-1)
    a, b = int64(0), size
    while a < b:
        mid = (a + b) >> 1
        if tables[uint64(t0 + mid)] < v:
            a = mid + 1
        else:
            b = mid
    return a if a < size and tables[uint64(t0 + a)] == v else int64(-1)


@_dev
def _string_length(words, wb, op, offs, e, r0, slot):
    """UTF-8 bytes of one S<n>/U<n> element after trimming; -1 if not valid text."""
    _, p = _element(op, offs, e, r0, slot)
    n = op[WIDTH]
    if op[KIND] == K_CSTR:
        length = 0
        while length < n and _get(words, wb, p + length, 1) != 0:
            length += 1
        if (op[FLAGS] & F_UTF8) != 0 and not _utf8_valid(words, wb, p, length):
            return -1
        return length
    ncp = n // 4
    while ncp > 0 and _get(words, wb, p + (ncp - 1) * 4, 4) == 0:
        ncp -= 1
    length = 0
    for t in range(ncp):
        cp = _get(words, wb, p + t * 4, 4)
        if op[SWAP] != 0:
            cp = _swap(cp, 4)
        bytes_ = _utf8_length(cp)
        if bytes_ == 0:
            return -1
        length += bytes_
    return length


@_dev
def _utf8_valid(words, wb, p, n):
    i = 0
    while i < n:
        b = _get(words, wb, p + i, 1)
        if b < 0x80:
            i += 1
            continue
        need, lo, hi = _utf8_lead(b)
        if need < 0 or i + need >= n:
            return False
        c1 = _get(words, wb, p + i + 1, 1)
        if c1 < lo or c1 > hi:
            return False
        for t in range(2, need + 1):
            ct = _get(words, wb, p + i + t, 1)
            if ct < 0x80 or ct > 0xBF:
                return False
        i += need + 1
    return True


# ------------------------------------------------------------- SoA -> AoS, one tile


@_dev
def _reverse_value(a8, a16, a32, a64, op, i):
    """Element i of a K_BITS/K_ENUM column as int64 (sign-extended when F_SIGNED)."""
    outw, data = op[P3], op[DATA]
    if outw == 0:
        return _bit(a8, data, i)
    v = _load(a8, a16, a32, a64, data + i * outw, outw)
    return _sign_extend(v, 8 * outw) if (op[FLAGS] & F_SIGNED) != 0 else v


@_dev
def _has_zero_byte(v, m):
    """Whether one of the low ``m`` bytes (1 to 8) of ``v`` is zero."""
    q = int32(0)
    while q < m:
        if ((v >> (8 * q)) & 0xFF) == 0:
            return True
        q = int32(q + 1)
    return False


@_dev
def _rev_string(a8, a16, a32, a64, words, wb, op, i, p, r, err, j, nops):
    """OR string element i into the tile at byte p: its bytes (K_CSTR) or its code
    points as UTF-32 (K_UTF32). Positions advance as pointers, not counts: fewer values
    are live in the loops."""
    start = _offset_at(a32, a64, op[OFFSETS], i, op[P2])
    length = _offset_at(a32, a64, op[OFFSETS], i + 1, op[P2]) - start
    s = op[DATA] + start
    if op[KIND] == K_CSTR:
        if length > op[WIDTH]:
            if (op[FLAGS] & F_TRUNCATE) == 0:
                _fault(err, r, j, E_TOO_LONG, nops)
                return
            length = op[WIDTH]
        t = int32(0)
        while t < length:
            m = min(8, length - t)
            v = _load(a8, a16, a32, a64, s + t, m)
            if _has_zero_byte(v, m):  # a C string ends at its first NUL: the rest would be lost
                _fault(err, r, j, E_NUL, nops)
                return
            _put(words, wb, p + t, m, v)
            t = int32(t + 8)
        return
    end, out = s + length, p
    while s < end:
        cp, need = _utf8_start(int64(a8[uint64(s)]))
        if need < 0 or s + need >= end:
            _fault(err, r, j, E_UTF, nops)
            return
        u = int32(1)
        while u <= need:
            cb = int64(a8[uint64(s + u)])
            if cb & 0xC0 != 0x80:
                _fault(err, r, j, E_UTF, nops)
                return
            cp = (cp << 6) | (cb & 0x3F)
            u = int32(u + 1)
        if not _utf8_whole(cp, need):
            _fault(err, r, j, E_UTF, nops)
            return
        s += need + 1
        if out - p >= op[WIDTH]:  # no room for another code point
            if (op[FLAGS] & F_TRUNCATE) == 0:
                _fault(err, r, j, E_TOO_LONG, nops)
            return
        _put(words, wb, out, 4, _swap(cp, 4) if op[SWAP] != 0 else cp)
        out += 4


@_dev
def _mulmod64(a, b):
    """``a * b`` modulo 2**64 of two uint64, from 32-bit halves: no intermediate
    overflows (the simulator checks)."""
    m, h = uint64(0xFFFFFFFF), uint64(32)
    al, bl = a & m, b & m
    lo = al * bl
    hi = ((lo >> h) + (((a >> h) * bl) & m) + ((al * (b >> h)) & m)) & m
    return (hi << h) | (lo & m)


@_dev
def _exact_quotient(v, op):
    """(whether the int64 v is a multiple of a K_SCALE row's P1, v // P1 if so), by the
    multiplicative inverse of P1's odd part (Granlund and Montgomery): no division."""
    neg = v < 0
    n = uint64(-(v + 1)) + uint64(1) if neg else uint64(v)  # |v|, also for -2**63
    low = (uint64(1) << uint64(op[X_SHIFT])) - uint64(1)
    if (n & low) != uint64(0):
        return False, v
    k = _mulmod64(n >> uint64(op[X_SHIFT]), uint64(op[X_INV]))
    if k > uint64(op[X_BOUND]):
        return False, v
    return True, (-int64(k - uint64(1)) - 1 if neg else int64(k))


@_dev
def _rev_time(a8, a16, a32, a64, op, i, r, err, j, nops):
    f, ow = op[P1], op[P2]
    v = _load(a8, a16, a32, a64, op[DATA] + i * ow, ow)
    if ow == 4:
        v = _sign_extend(v, 32)
    if op[KIND] == K_CIVIL:
        y, m, d = _civil_from_days(v)
        if d != 1 or (f == 12 and m != 1):
            _fault(err, r, j, E_INEXACT, nops)
            return False, v
        months = (y - 1970) * 12 + m - 1
        return True, (months // 12 if f == 12 else months)  # a constant divisor: no division
    exact, v = _exact_quotient(v, op)
    if not exact:
        _fault(err, r, j, E_INEXACT, nops)
        return False, v
    if v == NAT:
        _fault(err, r, j, E_RANGE, nops)
        return False, v
    return True, v
