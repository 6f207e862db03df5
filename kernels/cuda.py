"""CUDA backend: AoS <-> SoA on an NVIDIA GPU, with Numba CUDA, driven by the same copy
plan as :mod:`kernels.cpu`.

One thread block converts one *tile* of records at a time (a multiple of 32 rows):

1. **Stage.** The tile's record bytes are read as 4-byte words, consecutive threads
   reading consecutive words (coalesced, aligned, whatever the itemsize and the field
   alignment; packed records too), into shared memory. Where the record is a whole
   number of words and that number is even, each record's slot gets one spare word, so
   the slot stride is odd and threads reading the same field of consecutive records hit
   different banks.
2. **Scatter.** For each column, consecutive threads take consecutive elements, so the
   stores into the column are coalesced. Byte swaps, bit-field extraction, enum lookups,
   time-unit scaling and sentinel nulls happen here; booleans and validity bitmaps are
   built one output byte (8 rows) per thread, so no two threads share a byte.
3. **Strings.** The same pass trims each ``S<n>``/``U<n>`` value and writes its length
   (UTF-8 checked); a scan turns lengths into Arrow offsets; a third kernel copies the
   bytes to their offsets.

SoA -> AoS is the mirror: the tile is cleared, every column's elements are merged into
it with shared-memory atomic ORs (bit-fields sharing a container word need no
read-modify-write), then the tile leaves as whole words, coalesced. Records larger than
the shared-memory budget are converted in place in global memory the same way.

Addresses in the plan are byte offsets into the arena (``DATA``, ``VALID``,
``OFFSETS``) and element offsets into one int64 ``tables`` array (``TABLE``). Faults
are reported as the smallest ``(row, op)`` with a fault, packed into one int64 that
every thread lowers with an atomic min. The device copy of the plan
(:func:`device_ops`) has four more columns, computed on the host, so that no kernel
divides by a time scale factor: a 64-bit division is a subroutine call on the GPU, and
the registers live across it count against the whole kernel
(``docs/gpu-kernels.md``).

Host functions: :func:`aos_to_soa` and :func:`soa_to_aos`, like the CPU module's, each
taking a CUDA stream; :func:`forward_async` and :func:`reverse_async` queue a conversion on a
stream with the plan already on the device (:class:`Plan`) and return without waiting, for pipelines
that overlap transfers of one chunk with the conversion of another.
The cuDF bridge (:mod:`layouts._cuda.cudf`) has small kernels of its own here, with host
functions of the same shape: :func:`bits_to_bits` (a bitmap realigned),
:func:`bits_to_bytes` and :func:`bytes_to_bits` (Arrow's packed booleans and cuDF's
bytes), :func:`codes_with_nulls` (-1 under nulls) and :func:`offsets_check` /
:func:`offsets_rebase` (string offsets taken from cuDF).
Kernels are compiled once per argument types (a plan is data, so every layout shares
them) and run under ``NUMBA_ENABLE_CUDASIM=1`` without a GPU. Imported only when used.
"""

import functools
import os

import numpy as np
from numba import cuda, int32, int64, uint32, uint64

from . import _scalar
from .plan import (
    COUNT, DATA, E_INEXACT, E_NUL, E_NULL, E_RANGE, E_TOO_LONG, E_UTF, ELEM0, F_DENSE, F_SIGNED, F_TRUNCATE,
    F_UTF8, FLAGS, K_BITS, K_BOOL, K_BYTES, K_CIVIL, K_COPY, K_CSTR, K_ENUM, K_SCALE, K_UTF32, KIND,
    N_BITS, N_NONE, NAT, NCOLS, NULLS, OFFS, OFFSETS, P1, P2, P3, SENT, SWAP, TABLE, VALID, WIDTH,
)

__all__ = ["aos_to_soa", "soa_to_aos", "forward_async", "reverse_async", "Plan", "Pending", "launcher", "tile_shape",
           "KERNELS", "bits_to_bits", "bits_to_bytes", "bytes_to_bits", "codes_with_nulls", "offsets_check",
           "offsets_rebase"]

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
THREADS = 32 if SIMULATED else 256  # the simulator runs each thread as a Python thread
SCAN_THREADS = 32 if SIMULATED else 1024
TILE_BYTES = 16 * 1024  # shared memory per block: several blocks fit on one SM
MAX_TILE_BYTES = 48 * 1024  # the default per-block limit; larger records skip staging
MAX_BLOCKS = 65535
NO_FAULT = 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MAX = 2**63 - 1
M_VALIDITY = 1 << 16  # kinds_of: some op has a validity bitmap
ALL_KINDS = (1 << (K_ENUM + 1)) - 1 | M_VALIDITY

# Columns the device copy of a plan has after those of kernels.plan, filled by Plan on the
# host for K_SCALE rows: with them no 64-bit division runs on the GPU (one is a call to a
# subroutine there, and the registers live across it count against the whole kernel).
X_LIM = NCOLS  # I64_MAX // P1: the largest count that scales up without overflow
X_SHIFT = NCOLS + 1  # trailing zero bits of P1
X_INV = NCOLS + 2  # the inverse of P1's odd part modulo 2**64 (raw bits)
X_BOUND = NCOLS + 3  # (2**64 - 1) // P1's odd part (raw bits): the largest exact quotient
XCOLS = NCOLS + 4

_dev = cuda.jit(device=True)


# --------------------------------------------------------------------------- helpers


@_dev
def _mask(nbits):
    """The low ``nbits`` bits set (all 64 when nbits >= 64)."""
    if nbits >= 64:
        return int64(-1)
    return ~(int64(-1) << nbits)  # no 2**63 - 1 overflow (the simulator checks)


@_dev
def _shr(v, k):
    """Logical right shift of an int64 by 0 <= k < 64."""
    return (v >> k) & _mask(64 - k)


@_dev
def _get(words, wb, p, w):
    """The ``w`` (1..8) bytes at byte ``p`` of the words from word ``wb`` on, as int64
    raw bits (the first byte lowest)."""
    q = wb + (p >> 2)
    s = (p & 3) * 8
    v = int64(words[uint64(q)]) >> s
    got = 32 - s
    if got < 8 * w:
        v |= int64(words[uint64(q + 1)]) << got
        got += 32
        if got < 8 * w:
            v |= int64(words[uint64(q + 2)]) << got
    return v & _mask(8 * w)


@_dev
def _put(words, wb, p, w, v):
    """OR the low ``w`` (1..8) bytes of v into the words at byte ``p`` (atomically): at
    most three words, unrolled."""
    v = v & _mask(8 * w)
    q = wb + (p >> 2)
    s = (p & 3) * 8
    part = (v << s) & 0xFFFFFFFF
    if part != 0:
        cuda.atomic.or_(words, q, uint32(part))
    if 8 * w + s > 32:
        part = _shr(v, 32 - s) & 0xFFFFFFFF
        if part != 0:
            cuda.atomic.or_(words, q + 1, uint32(part))
        if 8 * w + s > 64:
            part = _shr(v, 64 - s) & 0xFFFFFFFF
            if part != 0:
                cuda.atomic.or_(words, q + 2, uint32(part))


@_dev
def _swap(v, w):
    """Reverse the order of the low ``w`` (1..8) bytes of v: all eight bytes swapped
    with constant shifts and masks, then the w wanted ones shifted down (no loop)."""
    v = ((v >> 8) & 0x00FF00FF00FF00FF) | ((v & 0x00FF00FF00FF00FF) << 8)
    v = ((v >> 16) & 0x0000FFFF0000FFFF) | ((v & 0x0000FFFF0000FFFF) << 16)
    v = ((v >> 32) & 0xFFFFFFFF) | (v << 32)
    return _shr(v, 64 - 8 * w)


@_dev
def _sign_extend(v, nbits):
    if nbits >= 64:
        return v
    v = v & _mask(nbits)
    if (v >> (nbits - 1)) & 1:
        v |= int64(-1) << nbits
    return v


@_dev
def _load(a8, a16, a32, a64, addr, w):
    """``w`` (1, 2, 4, 8, or any width for unaligned bytes) bytes of the arena at a byte
    address, as int64 raw bits."""
    if w == 8 and addr & 7 == 0:
        return int64(a64[uint64(addr >> 3)])
    if w == 4 and addr & 3 == 0:
        return int64(a32[uint64(addr >> 2)])
    if w == 2 and addr & 1 == 0:
        return int64(a16[uint64(addr >> 1)])
    if w == 1:
        return int64(a8[uint64(addr)])
    return _get(a32, 0, addr, w)  # unaligned (string bytes): the words holding them, no loop


@_dev
def _store(a8, a16, a32, a64, addr, w, v):
    if w == 8 and addr & 7 == 0:
        a64[uint64(addr >> 3)] = v
    elif w == 4 and addr & 3 == 0:
        a32[uint64(addr >> 2)] = v & 0xFFFFFFFF
    elif w == 2 and addr & 1 == 0:
        a16[uint64(addr >> 1)] = v & 0xFFFF
    elif w == 1:
        a8[uint64(addr)] = v & 0xFF
    else:  # unaligned: byte by byte
        k = int64(0)
        while k < w:
            a8[uint64(addr + k)] = v & 0xFF
            v >>= 8
            k += 1


@_dev
def _bit(a8, bitmap, i):
    return (int64(a8[uint64(bitmap + (i >> 3))]) >> (i & 7)) & 1


@_dev
def _is_nan(bits, width):
    if width == 8:
        e, m = int64(0x7FF0000000000000), int64(0x000FFFFFFFFFFFFF)
    elif width == 4:
        e, m = int64(0x7F800000), int64(0x007FFFFF)
    else:
        e, m = int64(0x7C00), int64(0x03FF)
    return (bits & e) == e and (bits & m) != 0


@_dev
def _fault(err, row, j, code, nops):
    cuda.atomic.min(err, 0, (int64(row) * nops + j) * 8 + code)


_days_from_civil = _dev(_scalar.days_from_civil)
_civil_from_days = _dev(_scalar.civil_from_days)
_utf8_lead = _dev(_scalar.utf8_lead)
_utf8_start = _dev(_scalar.utf8_start)


@_dev
def _offset_at(a32, a64, offsets, i, ow):
    if ow == 8:
        return int64(a64[uint64((offsets >> 3) + i)])
    v = int64(a32[uint64((offsets >> 2) + i)])
    return v - (int64(1) << 32) if v >= 2**31 else v


@_dev
def _set_offset(a32, a64, offsets, i, ow, v):
    if ow == 8:
        a64[uint64((offsets >> 3) + i)] = v
    else:
        a32[uint64((offsets >> 2) + i)] = v & 0xFFFFFFFF


@_dev
def _utf8_length(cp):
    """Bytes of the UTF-8 encoding of a code point; 0 if it has none."""
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 0 if 0xD800 <= cp <= 0xDFFF else 3
    return 4 if cp <= 0x10FFFF else 0


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


# ------------------------------------------------------------------------- kernels


@_dev
def _slot_word(i, stride, slot):
    """Shared-memory word of the tile's i-th record word (spare word per slot if padded)."""
    if slot == stride:
        return i
    q, k = _divmod32(i, stride >> 2)
    return q * (slot >> 2) + k


@_dev
def _tile_byte32(q, slot, off):
    """Byte ``off`` of record ``q`` of a staged tile (under 48 KiB: 32-bit arithmetic)."""
    return int32(uint32(q) * uint32(slot) + uint32(off))


@_dev
def _tile_byte64(q, slot, off):
    """Byte ``off`` of record ``q`` of an unstaged tile (records of any size)."""
    return int64(q) * slot + off


def kinds_of(ops):
    """The kind mask of a plan: bit ``1 << kind`` for each op kind it has, and
    ``M_VALIDITY`` if an op has a validity bitmap. It picks the main kernels' variant."""
    mask = 0
    for j in range(ops.shape[0]):
        mask |= 1 << int(ops[j, KIND])
        if ops[j, VALID] != 0:
            mask |= M_VALIDITY
    return mask


@functools.lru_cache(maxsize=None)
def specialised(mask, staged=True):
    """``(forward, reverse)``: the main kernels compiled with only the code of the op
    kinds in ``mask`` (see :func:`kinds_of`; a plan with other kinds is not theirs to
    run), staging tiles in shared memory or (``staged=False``, records too large to
    stage) working in global memory.

    The plan stays data: one variant serves every layout with the same kinds (a
    fixed-width record of numbers, bytes and booleans, say), so a new layout seldom
    costs a compilation. Code a plan cannot reach is not in the kernel, and the
    registers it would hold are free: more blocks fit on a multiprocessor.
    """
    COPY = bool(mask & (1 << K_COPY))
    BYTES = bool(mask & (1 << K_BYTES))
    BOOL = bool(mask & (1 << K_BOOL))
    BITS = bool(mask & (1 << K_BITS))
    ENUM = bool(mask & (1 << K_ENUM))
    TIME = bool(mask & ((1 << K_SCALE) | (1 << K_CIVIL)))
    STRINGS = bool(mask & ((1 << K_CSTR) | (1 << K_UTF32)))
    BITMAP = BOOL or BITS
    VALIDITY = bool(mask & M_VALIDITY)
    STAGED = staged
    # Indices within a tile: 32-bit where the tile is staged (under 48 KiB), so the loops
    # carry half the registers; 64-bit for unstaged records, which may be of any size.
    IDX = int32 if staged else int64
    _tile_byte = _tile_byte32 if staged else _tile_byte64

    @_dev
    def forward_tile(words, wb, slot, r0, r1, ops, offs, a8, a16, a32, a64, tables, err):
        """Scatter records [r0, r1) from their bytes (``words`` from word ``wb``, one record
        every ``slot`` bytes) into the columns."""
        tid, nt = cuda.threadIdx.x, cuda.blockDim.x
        nops = ops.shape[0]
        for j in range(nops):
            op = ops[j]
            kind, w, c, dst = op[KIND], op[WIDTH], op[COUNT], op[DATA]
            total = IDX((r1 - r0) * c)  # elements of the tile
            e0 = r0 * c  # a multiple of 8: tiles start at multiples of 32 rows
            if BITMAP and (kind == K_BOOL or (kind == K_BITS and op[P3] == 0)):
                b_next = tid  # one output byte per thread
                while b_next < (total + 7) >> 3:
                    b = b_next
                    b_next = IDX(b_next + nt)
                    byte = 0
                    for t in range(min(8, total - 8 * b)):
                        e = 8 * b + t
                        if kind == K_BOOL or not BITS:
                            _, p = _element(op, offs, e, r0, slot)
                            bit = _get(words, wb, p, 1) != 0
                        else:
                            bit = _forward_value(words, wb, op, offs, e, r0, slot) != 0
                        if bit:
                            byte |= 1 << t
                    a8[uint64(dst + (e0 >> 3) + b)] = byte
            elif STRINGS and (kind == K_CSTR or kind == K_UTF32):
                ow = op[P2]
                e_next = tid
                while e_next < total:
                    e = e_next
                    e_next = IDX(e_next + nt)
                    i, _ = _element(op, offs, e, r0, slot)
                    length = _string_length(words, wb, op, offs, e, r0, slot)
                    if length < 0:
                        _fault(err, r0 + _divmod32(e, c)[0], j, E_UTF, nops)
                        length = 0
                    if i == 0:
                        _set_offset(a32, a64, op[OFFSETS], 0, ow, int64(0))
                    _set_offset(a32, a64, op[OFFSETS], i + 1, ow, length)  # a length until the scan
            else:
                e_next = tid
                while e_next < total:
                    e = e_next
                    e_next = IDX(e_next + nt)
                    i, p = _element(op, offs, e, r0, slot)
                    if COPY and kind == K_COPY:
                        _store(a8, a16, a32, a64, dst + i * w, w, _forward_value(words, wb, op, offs, e, r0, slot))
                    elif BYTES and kind == K_BYTES:
                        piece = 8 if w & 7 == 0 else (4 if w & 3 == 0 else (2 if w & 1 == 0 else 1))
                        q_next = 0
                        while q_next < w:
                            q = q_next
                            q_next += piece
                            _store(a8, a16, a32, a64, dst + i * w + q, piece, _get(words, wb, p + q, piece))
                    elif BITS and kind == K_BITS:
                        outw = op[P3]
                        _store(a8, a16, a32, a64, dst + i * outw, outw, _forward_value(words, wb, op, offs, e, r0, slot))
                    elif ENUM and kind == K_ENUM:
                        idx = _fwd_enum_index(_forward_value(words, wb, op, offs, e, r0, slot), op, tables)
                        _store(a8, a16, a32, a64, dst + i * 4, 4, idx)
                    elif TIME:
                        _fwd_time(a8, a16, a32, a64, words, wb, op, offs, e, r0, slot, err, j, nops)
            if VALIDITY and op[VALID] != 0:
                b_next = tid
                while b_next < (total + 7) >> 3:
                    b = b_next
                    b_next = IDX(b_next + nt)
                    byte = 0
                    for t in range(min(8, total - 8 * b)):
                        if _is_valid(words, wb, op, offs, 8 * b + t, r0, slot):
                            byte |= 1 << t
                    a8[uint64(op[VALID] + (e0 >> 3) + b)] = byte



    def reverse_column(KC):
        """The element loop of one op kind (``KC``, a constant: one loop per kind, each
        holding only its own live values)."""

        @_dev
        def column(words, wb, slot, r0, r1, op, j, nops, offs, a8, a16, a32, a64, tables, err):
            tid, nt = cuda.threadIdx.x, cuda.blockDim.x
            w, c, valid, data = op[WIDTH], op[COUNT], op[VALID], op[DATA]
            fillable = (KC == K_COPY or KC == K_BITS or KC == K_ENUM) and op[NULLS] != N_NONE
            i0 = op[ELEM0] + r0 * c  # the column's element of the tile's first element
            total = IDX((r1 - r0) * c)
            e_next = tid
            while e_next < total:
                e = e_next
                e_next = IDX(e_next + nt)
                q, k = _divmod32(e, c)
                r = r0 + q
                i = i0 + e
                p = _tile_byte(q, slot, offs[uint64(op[OFFS] + k)])
                null = VALIDITY and valid != 0 and _bit(a8, valid, i) == 0
                if null and not fillable and not (KC == K_SCALE or KC == K_CIVIL):
                    _fault(err, r, j, E_NULL, nops)
                    continue
                if KC == K_COPY:
                    v = op[SENT] if null else _load(a8, a16, a32, a64, data + i * w, w)
                    _put(words, wb, p, w, _swap(v, w) if op[SWAP] != 0 else v)
                elif KC == K_BYTES:
                    piece = 8 if w & 7 == 0 else (4 if w & 3 == 0 else (2 if w & 1 == 0 else 1))
                    q_next = 0
                    while q_next < w:
                        q = q_next
                        q_next += piece
                        _put(words, wb, p + q, piece, _load(a8, a16, a32, a64, data + i * w + q, piece))
                elif KC == K_BOOL:
                    _put(words, wb, p, 1, _bit(a8, data, i))
                elif KC == K_BITS:
                    shift, nbits = op[P1], op[P2]
                    v = op[SENT] if null else _reverse_value(a8, a16, a32, a64, op, i)
                    if nbits < 64 and (_sign_extend(v, nbits) != v if (op[FLAGS] & F_SIGNED) != 0
                                       else (v >> nbits) != 0):
                        _fault(err, r, j, E_RANGE, nops)  # does not fit in nbits
                        continue
                    v = (v & _mask(nbits)) << shift
                    _put(words, wb, p, w, _swap(v, w) if op[SWAP] != 0 else v)
                elif KC == K_ENUM:
                    if null:
                        v = op[SENT]  # the fill value, already an enum value
                    else:
                        idx = _reverse_value(a8, a16, a32, a64, op, i)
                        if idx < 0 or idx >= op[P2]:
                            _fault(err, r, j, E_RANGE, nops)
                            continue
                        v = tables[uint64(op[TABLE] + idx)]
                    _put(words, wb, p, w, _swap(v, w) if op[SWAP] != 0 else v)
                elif KC == K_SCALE:  # and K_CIVIL
                    v = int64(NAT)
                    if not null:
                        ok, v = _rev_time(a8, a16, a32, a64, op, i, r, err, j, nops)
                        if not ok:
                            continue
                    _put(words, wb, p, 8, _swap(v, 8) if op[SWAP] != 0 else v)
                else:  # K_CSTR and K_UTF32
                    _rev_string(a8, a16, a32, a64, words, wb, op, i, p, r, err, j, nops)

        return column

    rev_copy, rev_bytes, rev_bool = reverse_column(K_COPY), reverse_column(K_BYTES), reverse_column(K_BOOL)
    rev_bits, rev_enum = reverse_column(K_BITS), reverse_column(K_ENUM)
    rev_time, rev_string = reverse_column(K_SCALE), reverse_column(K_CSTR)

    @_dev
    def reverse_tile(words, wb, slot, r0, r1, ops, offs, a8, a16, a32, a64, tables, err):
        """Merge every column's elements of records [r0, r1) into the cleared tile."""
        nops = ops.shape[0]
        for j in range(nops):
            op = ops[j]
            kind = op[KIND]
            args = (words, wb, slot, r0, r1, op, j, nops, offs, a8, a16, a32, a64, tables, err)
            if COPY and kind == K_COPY:
                rev_copy(*args)
            elif BYTES and kind == K_BYTES:
                rev_bytes(*args)
            elif BOOL and kind == K_BOOL:
                rev_bool(*args)
            elif BITS and kind == K_BITS:
                rev_bits(*args)
            elif ENUM and kind == K_ENUM:
                rev_enum(*args)
            elif TIME and (kind == K_SCALE or kind == K_CIVIL):
                rev_time(*args)
            elif STRINGS and (kind == K_CSTR or kind == K_UTF32):
                rev_string(*args)

    @cuda.jit
    def forward(rec, n, stride, slot, rows, ops, offs, a8, a16, a32, a64, tables, err):
        tile = cuda.shared.array(0, dtype=uint32)
        tid, nt = cuda.threadIdx.x, cuda.blockDim.x
        r0 = int64(cuda.blockIdx.x) * rows  # tiles go to blocks in turn: no tile count, no division
        while r0 < n:
            r1 = min(r0 + rows, n)
            g0 = (r0 * stride) >> 2
            if STAGED:  # under 48 KiB a tile: 32-bit word indices
                words = int32(((r1 - r0) * stride + 3) >> 2)
                w_next = tid
                while w_next < words:
                    tile[_slot_word(w_next, stride, slot)] = rec[uint64(g0 + w_next)]
                    w_next = int32(w_next + nt)
                cuda.syncthreads()
                forward_tile(tile, 0, slot, r0, r1, ops, offs, a8, a16, a32, a64, tables, err)
                cuda.syncthreads()
            else:
                forward_tile(rec, g0, stride, r0, r1, ops, offs, a8, a16, a32, a64, tables, err)
            r0 += int64(cuda.gridDim.x) * rows

    @cuda.jit
    def reverse(rec, n, stride, slot, rows, ops, offs, a8, a16, a32, a64, tables, err):
        tile = cuda.shared.array(0, dtype=uint32)
        tid, nt = cuda.threadIdx.x, cuda.blockDim.x
        r0 = int64(cuda.blockIdx.x) * rows
        while r0 < n:
            r1 = min(r0 + rows, n)
            g0 = (r0 * stride) >> 2
            if STAGED:
                cleared = int32(((r1 - r0) * slot + 3) >> 2)
                w_next = tid
                while w_next < cleared:
                    tile[w_next] = 0
                    w_next = int32(w_next + nt)
                cuda.syncthreads()
                reverse_tile(tile, 0, slot, r0, r1, ops, offs, a8, a16, a32, a64, tables, err)
                cuda.syncthreads()
                words = int32(((r1 - r0) * stride + 3) >> 2)
                w_next = tid
                while w_next < words:
                    rec[uint64(g0 + w_next)] = tile[_slot_word(w_next, stride, slot)]
                    w_next = int32(w_next + nt)
                cuda.syncthreads()
            else:
                nwords = ((r1 - r0) * stride + 3) >> 2
                i_next = tid
                while i_next < nwords:
                    i = i_next
                    i_next += nt
                    rec[uint64(g0 + i)] = 0
                cuda.syncthreads()
                reverse_tile(rec, g0, stride, r0, r1, ops, offs, a8, a16, a32, a64, tables, err)
                cuda.syncthreads()
            r0 += int64(cuda.gridDim.x) * rows

    return forward, reverse


@cuda.jit
def _scan_blocks(a32, a64, offsets, ow, count, sums):
    """Inclusive scan of ``count`` values after the first offset, one run of blockDim
    values per block; each block's total goes to sums."""
    buf = cuda.shared.array(1024, dtype=int64)
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    i = cuda.blockIdx.x * nt + tid
    buf[tid] = _offset_at(a32, a64, offsets, i + 1, ow) if i < count else int64(0)
    cuda.syncthreads()
    step = 1
    while step < nt:
        add = buf[tid - step] if tid >= step else int64(0)
        cuda.syncthreads()
        buf[tid] += add
        cuda.syncthreads()
        step *= 2
    if i < count:
        _set_offset(a32, a64, offsets, i + 1, ow, buf[tid])
    if tid == nt - 1:
        sums[cuda.blockIdx.x] = buf[tid]


@cuda.jit
def _scan_sums(sums):
    """Exclusive scan of the block totals, in place (one thread: a few thousand values)."""
    if cuda.grid(1) == 0:
        total = int64(0)
        for b in range(sums.shape[0]):
            v = sums[b]
            sums[b] = total
            total += v


@cuda.jit
def _scan_add(a32, a64, offsets, ow, count, sums, nt_scan):
    i = cuda.grid(1)
    if i < count:
        before = sums[i // nt_scan]
        if before != 0:
            _set_offset(a32, a64, offsets, i + 1, ow, _offset_at(a32, a64, offsets, i + 1, ow) + before)


@cuda.jit
def _copy_strings(rec, n, stride, op, offs, a8, a16, a32, a64):
    """Write each trimmed S<n>/U<n> element at its final offset, one element a thread."""
    c, per_n, ow = op[COUNT], op[WIDTH], op[P2]
    i_next = cuda.grid(1)
    while i_next < n * c:
        i = i_next
        i_next += cuda.gridsize(1)
        r = i // c
        p = r * stride + offs[op[OFFS] + i % c]
        start = _offset_at(a32, a64, op[OFFSETS], i, ow)
        length = _offset_at(a32, a64, op[OFFSETS], i + 1, ow) - start
        pos = op[DATA] + start
        if op[KIND] == K_CSTR:
            for t in range(length):
                a8[pos + t] = _get(rec, 0, p + t, 1)
            continue
        out = 0
        t = 0
        while out < length and t < per_n // 4:
            cp = _get(rec, 0, p + t * 4, 4)
            if op[SWAP] != 0:
                cp = _swap(cp, 4)
            t += 1
            if cp < 0x80:
                a8[pos + out] = cp
                out += 1
            elif cp < 0x800:
                a8[pos + out] = 0xC0 | (cp >> 6)
                a8[pos + out + 1] = 0x80 | (cp & 0x3F)
                out += 2
            elif cp < 0x10000:
                a8[pos + out] = 0xE0 | (cp >> 12)
                a8[pos + out + 1] = 0x80 | ((cp >> 6) & 0x3F)
                a8[pos + out + 2] = 0x80 | (cp & 0x3F)
                out += 3
            else:
                a8[pos + out] = 0xF0 | (cp >> 18)
                a8[pos + out + 1] = 0x80 | ((cp >> 12) & 0x3F)
                a8[pos + out + 2] = 0x80 | ((cp >> 6) & 0x3F)
                a8[pos + out + 3] = 0x80 | (cp & 0x3F)
                out += 4


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


def _signatures():
    """Argument types of every kernel as the host functions launch them."""
    from numba import types as t

    u8, u16, u32, i32, i64 = t.uint8[::1], t.uint16[::1], t.uint32[::1], t.int32[::1], t.int64[::1]
    arena = (u8, u16, u32, i64)
    tile = (u32, t.int64, t.int64, t.int64, t.int64, t.int64[:, ::1], i64, *arena, i64, i64)
    forward, reverse = specialised(ALL_KINDS)
    return {
        "forward": (forward, tile),
        "reverse": (reverse, tile),
        "scan_blocks": (_scan_blocks, (u32, i64, t.int64, t.int64, t.int64, i64)),
        "scan_sums": (_scan_sums, (i64,)),
        "scan_add": (_scan_add, (u32, i64, t.int64, t.int64, t.int64, i64, t.int64)),
        "copy_strings": (_copy_strings, (u32, t.int64, t.int64, i64, i64, *arena)),
        "bits_to_bits": (_bits_to_bits, (u8, t.int64, t.int64, t.int64, u8)),
        "bits_to_bytes": (_bits_to_bytes, (u8, t.int64, t.int64, t.int64, u8)),
        "bytes_to_bits": (_bytes_to_bits, (u8, t.int64, u8)),
        "codes_with_nulls": (_codes_with_nulls, (i32, u8, t.int64, t.int64, i32)),
        "offsets_check[int32]": (_offsets_check, (i32, t.int64, t.int64, t.int64, i64)),
        "offsets_check[int64]": (_offsets_check, (i64, t.int64, t.int64, t.int64, i64)),
        "offsets_rebase[int32]": (_offsets_rebase, (i32, t.int64, t.int64)),
        "offsets_rebase[int64]": (_offsets_rebase, (i64, t.int64, t.int64)),
    }


KERNELS = _signatures
"""Every kernel of this module with its argument types (the PTX compile test walks this)."""


# --------------------------------------------------------------------- host side


def tile_shape(stride):
    """(rows per tile, bytes per record slot in shared memory, staged) for a stride."""
    words = stride // 4
    slot = stride + 4 if stride % 4 == 0 and words % 2 == 0 else stride
    rows = max(32, (TILE_BYTES // slot) // 32 * 32)
    if rows * slot + 8 > MAX_TILE_BYTES:
        return 32, stride, False
    return rows, slot, True


def _views(arena):
    return arena.view(np.uint8), arena.view(np.uint16), arena.view(np.uint32), arena.view(np.int64)


_NO_FAULT = np.array([NO_FAULT], dtype=np.int64)


def _raw(u):
    """A uint64 value as the int64 of the same bits."""
    return u - 2**64 if u >= 2**63 else u


def device_ops(ops):
    """The plan as the main kernels read it: the columns of :mod:`kernels.plan`, then
    ``X_LIM``, ``X_SHIFT``, ``X_INV`` and ``X_BOUND`` for the K_SCALE rows (the constants
    that replace divisions by the scale factor P1)."""
    out = np.zeros((ops.shape[0], XCOLS), dtype=np.int64)
    out[:, :NCOLS] = ops
    for j in range(ops.shape[0]):
        f = int(ops[j, P1])
        if ops[j, KIND] == K_SCALE and f > 0:
            shift = (f & -f).bit_length() - 1
            odd = f >> shift
            out[j, X_LIM] = I64_MAX // f
            out[j, X_SHIFT] = shift
            out[j, X_INV] = _raw(pow(odd, -1, 2**64))
            out[j, X_BOUND] = _raw((2**64 - 1) // odd)
    return out


class Plan:
    """A copy plan on the device, uploaded once and reused by every launch over the
    same arena placement (the chunks of a streaming conversion share one).

    Parameters
    ----------
    ops, offs : numpy.ndarray
        The copy plan, with ``DATA``/``VALID``/``OFFSETS`` as byte offsets in the arena
        and ``TABLE`` as element offsets in ``tables``.
    tables : device array of int64
        The enum lookup tables the plan points into (may be empty).
    stream : numba.cuda stream, optional
        Where the upload is queued (default: the default stream).

    The device copy of ``ops`` is :func:`device_ops` of it (the scale factors'
    constants added); ``ops`` itself stays as given.
    """

    def __init__(self, ops, offs, tables, stream=0):
        self.ops = np.ascontiguousarray(ops)
        self.nops = self.ops.shape[0]
        self.kinds = kinds_of(self.ops)
        self.h_ops = device_ops(self.ops)  # kept: the upload may still read it
        self.d_ops = cuda.to_device(self.h_ops, stream=stream)
        self.d_offs = cuda.to_device(np.ascontiguousarray(offs), stream=stream)
        self.tables = tables
        self.strings = [(j, cuda.to_device(np.ascontiguousarray(self.ops[j]), stream=stream))
                        for j in range(self.nops) if self.ops[j, KIND] in (K_CSTR, K_UTF32)]


class Pending:
    """Kernels queued on a stream. :meth:`fault` waits for them and returns None or
    ``(row, op, code)`` of the first value that could not be converted.

    With ``host`` (a page-locked int64 array of one element) the fault word is copied
    back on the same stream, without waiting; otherwise it is read after the wait."""

    def __init__(self, stream, nops, err=None, host=None, keep=()):
        self.stream, self.nops, self.err, self.host = stream, nops, err, host
        self.keep = keep  # device scratch the queued kernels use: freed only after the wait
        if err is not None and host is not None:
            err.copy_to_host(host, stream=stream)

    def fault(self):
        if self.stream:
            self.stream.synchronize()
        else:
            cuda.synchronize()
        if self.err is None:
            return None
        key = int((self.host if self.host is not None else self.err.copy_to_host())[0])
        if key == NO_FAULT:
            return None
        code = key % 8
        row, op = divmod(key // 8, self.nops)
        return row, op, code


def _scan(arena_views, op_row, count, stream):
    """Turn the lengths after the first offset into offsets (inclusive scan in place)."""
    _, _, a32, a64 = arena_views
    ow, offsets = int(op_row[P2]), int(op_row[OFFSETS])
    nt = SCAN_THREADS
    nblocks = max(1, -(-count // nt))
    sums = cuda.device_array(nblocks, dtype=np.int64, stream=stream)
    _scan_blocks[nblocks, nt, stream](a32, a64, offsets, ow, count, sums)
    _scan_sums[1, 1, stream](sums)
    _scan_add[nblocks, nt, stream](a32, a64, offsets, ow, count, sums, nt)
    return sums  # the caller keeps it until the stream is done (a pool may reuse it at once)


def _launch(direction, rec, stride, n, plan, arena, err, stream):
    """Queue the main kernel of ``direction`` (``"forward"`` or ``"reverse"``)."""
    rows, slot, staged = tile_shape(stride)
    kernel = specialised(plan.kinds, staged)[0 if direction == "forward" else 1]
    shared = rows * slot + 8 if staged else 0
    blocks = max(1, min(-(-n // rows), MAX_BLOCKS))
    kernel[blocks, THREADS, stream, shared](rec, n, stride, slot, rows, plan.d_ops, plan.d_offs,
                                            *_views(arena), plan.tables, err)


def launcher(direction, rec, stride, n, ops, offs, arena, tables):
    """``(launch, err)``: ``launch()`` runs the main kernel of ``direction``
    (``"forward"`` or ``"reverse"``) on the default stream without waiting, ``err`` is
    its fault word. The arguments are those of :func:`aos_to_soa`; the benchmarks time
    ``launch`` alone with CUDA events."""
    plan = Plan(ops, offs, tables)
    err = cuda.to_device(_NO_FAULT)

    def launch():
        _launch(direction, rec, stride, n, plan, arena, err, 0)

    return launch, err


def forward_async(rec, stride, n, plan, arena, *, stream=0, fault_word=None):
    """Queue AoS -> SoA of ``n`` records on ``stream`` and return at once.

    The arguments are those of :func:`aos_to_soa`, with the plan already on the device
    (:class:`Plan`). Every kernel and copy goes on ``stream``, so chunks on other
    streams overlap with this one. ``fault_word``, a page-locked host int64 array of
    one element (``numba.cuda.pinned_array``), receives the fault word on the stream;
    without it the word is read after the wait. Returns a :class:`Pending`; its
    ``fault()`` waits for the stream.
    """
    views = _views(arena)
    if n == 0:  # no thread runs: an empty string column's one offset is set here
        for j, _ in plan.strings:
            ow = int(plan.ops[j, P2])
            zero = np.zeros(1, dtype=np.int64 if ow == 8 else np.uint32)
            start = int(plan.ops[j, OFFSETS]) // ow
            (views[3] if ow == 8 else views[2])[start : start + 1].copy_to_device(zero, stream=stream)
        return Pending(stream, plan.nops)
    err = cuda.device_array(1, dtype=np.int64, stream=stream)
    err.copy_to_device(_NO_FAULT, stream=stream)
    _launch("forward", rec, stride, n, plan, arena, err, stream)
    scratch = []
    for j, d_op in plan.strings:
        count = n * int(plan.ops[j, COUNT])
        scratch.append(_scan(views, plan.ops[j], count, stream))  # faulty strings were given length 0
        _copy_strings[max(1, min(-(-count // THREADS), MAX_BLOCKS)), THREADS, stream](
            rec, n, stride, d_op, plan.d_offs, *views)
    return Pending(stream, plan.nops, err, fault_word, keep=scratch)


def aos_to_soa(rec, stride, n, ops, offs, arena, tables, *, stream=0):
    """Scatter ``n`` records into the columns of a device arena.

    Parameters
    ----------
    rec : device array of uint32
        The record bytes as words: at least ``ceil(n * stride / 4)`` of them, the
        first record at word 0.
    stride : int
        Bytes from one record to the next.
    ops, offs : numpy.ndarray
        The copy plan, with ``DATA``/``VALID``/``OFFSETS`` as byte offsets in the arena
        and ``TABLE`` as element offsets in ``tables``.
    arena : device array of uint8
        Where the columns go (64-byte aligned).
    tables : device array of int64
        The enum lookup tables the plan points into (may be empty).
    stream : numba.cuda stream, optional
        Where the work is queued; the call waits for it.

    Returns
    -------
    None, or ``(row, op, code)`` of the first value that could not be converted.
    """
    plan = Plan(ops, offs, tables, stream)
    return forward_async(rec, stride, n, plan, arena, stream=stream).fault()


def reverse_async(rec, itemsize, n, plan, arena, *, stream=0, fault_word=None):
    """Queue SoA -> AoS of ``n`` records on ``stream`` and return at once; the mirror
    of :func:`forward_async` (the arguments of :func:`soa_to_aos`, the plan on the
    device). Returns a :class:`Pending`."""
    if n == 0:
        return Pending(stream, plan.nops)
    err = cuda.device_array(1, dtype=np.int64, stream=stream)
    err.copy_to_device(_NO_FAULT, stream=stream)
    _launch("reverse", rec, itemsize, n, plan, arena, err, stream)
    return Pending(stream, plan.nops, err, fault_word)


def soa_to_aos(rec, itemsize, n, ops, offs, arena, tables, *, stream=0):
    """Gather ``n`` records into ``rec`` (device uint32 words, at least
    ``ceil(n * itemsize / 4)``) from the columns of a device arena.

    Padding bytes come out as zeros. Returns ``None`` or ``(row, op, code)`` of the
    first value that could not be written; waits for ``stream``.
    """
    return reverse_async(rec, itemsize, n, Plan(ops, offs, tables, stream), arena, stream=stream).fault()


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
