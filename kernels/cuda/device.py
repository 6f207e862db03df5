"""Device functions every CUDA kernel is made of: word access, byte swaps, faults, string
offsets (the shared value transforms come from :mod:`kernels.values`), and the launch constants."""

import os

from numba import cuda, int64, uint32, uint64

from .. import values
from ..plan import (
    K_ENUM,
    NCOLS,
)

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


_mask = _dev(values.mask)


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


_sign_extend = _dev(values.sign_extend)


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


_is_nan = _dev(values.is_nan)


@_dev
def _fault(err, row, j, code, nops):
    cuda.atomic.min(err, 0, (int64(row) * nops + j) * 8 + code)


_days_from_civil = _dev(values.days_from_civil)
_civil_from_days = _dev(values.civil_from_days)
_utf8_lead = _dev(values.utf8_lead)
_utf8_start = _dev(values.utf8_start)
_utf8_whole = _dev(values.utf8_whole)


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


_utf8_length = _dev(values.utf8_length)
