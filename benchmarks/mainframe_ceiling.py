"""A ceiling probe for :mod:`benchmarks.mainframe`: its 55-byte record decoded by one
Numba loop written by hand for this record alone, every field's offset, width and kind a
constant, the fields decoded one after another per record (the library's kernels take any
layout, column by column).

It writes what the library writes (UTF-8 text with int32 offsets, decimal128 values) and
checks every field against the library's table before it is timed, but it is no
converter: it checks no value (the bits that say a value is invalid are computed, not
acted on) and treats the text as ASCII, which this record's is. So its speed is an upper
bound of what scalar code that takes a layout at run time can reach on the machine, the
ratio :mod:`benchmarks.mainframe` reports it next to.

:class:`VectorCeiling` is the second probe (issue 27's last goal: records -> Arrow and back
at >= 0.3x ``np.copyto``): the same record decoded, and encoded back, one FIELD at a time
over a block of records, in loops that LLVM turns into vector code (AVX2/AVX-512 on a
host build: no branch, no call, simple indexing; the bits of an invalid value OR-ed into
one flag per block, checked after the loop):

* a packed or zoned field: a big-endian word gathered per record (``vpgatherqq``), its
  digits by SWAR multiply-adds, its sign and bad nibbles into the block's flag; binary:
  a 4-byte gather and a byte swap; all written as decimal128 (interleaved stores);
* text: the block's bytes staged contiguously (a scalar copy loop), then mapped one byte
  lane each (32 a ``ymm``) by arithmetic for the EBCDIC upper-case letters, digits and
  space, with a per-block flag: a block holding any other byte goes through the byte
  table instead (:func:`_text_table`);
* the way back: decimal128 -> |value| (checked: high word = the low one's sign, below
  10**digits), split by 10**8 through a double (no 64-bit division in vector code),
  digits by SWAR multiply-shifts, into per-field staging words; text ASCII -> EBCDIC by
  arithmetic (the same flag, a table for the rest); a scalar loop (raw addresses, which
  LLVM leaves scalar: no scatter) then assembles each record from the staged words.

It checks every value both ways before it is timed (:meth:`VectorCeiling.check`) and
:meth:`VectorCeiling.vector_instructions` counts the vector instructions in its compiled
code. Like the scalar probe it is no converter: it reports a flagged block (``bad``),
does not find the record in it, and handles text of one byte per character only (the
way back: fixed-width strings only; otherwise it raises).
"""

import re

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from layouts.kernels._memory import bswap32, bswap64, load8, load32, load64, store8, store32, store64

U = np.uint64
_SIGN_OK, _SIGN_NEG = U(0xF400), U(0x2800)  # nibbles A-F valid; B, D negative


@nb.njit(inline="always")
def _be(a, w):
    return U(bswap64(load64(a))) >> U(64 - 8 * w)


@nb.njit(inline="always")
def _digits(d):
    m8, m16, m32 = U(0x0F0F0F0F0F0F0F0F), U(0x00FF00FF00FF00FF), U(0x0000FFFF0000FFFF)
    b = ((d >> U(4)) & m8) * U(10) + (d & m8)
    h = ((b >> U(8)) & m16) * U(100) + (b & m16)
    q = ((h >> U(16)) & m32) * U(10000) + (h & m32)
    return (q >> U(32)) * U(100000000) + (q & U(0xFFFFFFFF))


@nb.njit(inline="always")
def _packed(x, bad):
    sign, d = x & U(0xF), x >> U(4)
    six = U(0x0666666666666666)
    bad |= ((d + six) ^ d ^ six) & U(0x1111111111111110)
    bad |= ((_SIGN_OK >> sign) & U(1)) ^ U(1)
    m = U(0) - ((_SIGN_NEG >> sign) & U(1))
    return (_digits(d) ^ m) - m, bad


@nb.njit(inline="always")
def _text8(table, x):
    w = U(0)
    for u in range(8):
        w |= U(load8(table + np.int64((x >> U(8 * u)) & U(0xFF)))) << U(8 * u)
    return w


@nb.njit(inline="always")
def _decimal(dst, r, v):
    store64(dst + 16 * r, v)
    store64(dst + 16 * r + 8, U(np.int64(v) >> np.int64(63)))


@nb.njit(nogil=True)
def _rows(src, r0, r1, table, name, name_off, amt, qty, zn, cnt, city, city_off):
    bad, high = U(0), U(0)
    for r in range(r0, r1):
        a = src + r * 55
        w0, w1, w2 = _text8(table, U(load64(a))), _text8(table, U(load64(a + 8))), _text8(table, U(load64(a + 12)))
        high |= w0 | w1 | w2
        store64(name + r * 20, w0)
        store64(name + r * 20 + 8, w1)
        store64(name + r * 20 + 12, w2)
        store32(name_off + 4 * (r + 1), (r + 1) * 20)
        v, bad = _packed(_be(a + 20, 6), bad)
        _decimal(amt, r, v)
        v, bad = _packed(_be(a + 26, 4), bad)
        _decimal(qty, r, v)
        x_lo, x_hi = _be(a + 31, 8), U(load8(a + 30))  # zoned S9(7)V99: 9 bytes, the sign over the last
        zone = (x_lo >> U(4)) & U(0xF)
        bad |= ((_SIGN_OK >> zone) & U(1)) ^ U(1)
        xl = x_lo | U(0xF0)
        d = xl & U(0x0F0F0F0F0F0F0F0F)
        zones = U(0xF0F0F0F0F0F0F0F0)
        bad |= ((xl & zones) ^ zones) | ((d + U(0x0606060606060606)) & zones) | ((x_hi & U(0xF0)) ^ U(0xF0))
        b = ((d >> U(8)) & U(0x00FF00FF00FF00FF)) * U(10) + (d & U(0x00FF00FF00FF00FF))
        q = ((b >> U(16)) & U(0x0000FFFF0000FFFF)) * U(100) + (b & U(0x0000FFFF0000FFFF))
        v = (q >> U(32)) * U(10000) + (q & U(0xFFFFFFFF)) + (x_hi & U(0xF)) * U(100000000)
        m = U(0) - ((_SIGN_NEG >> zone) & U(1))
        _decimal(zn, r, (v ^ m) - m)
        _decimal(cnt, r, U(np.int64(np.int32(np.uint32(_be(a + 39, 4))))))
        w0, w1 = _text8(table, U(load64(a + 43))), _text8(table, U(load64(a + 47)))
        high |= w0 | w1
        store64(city + r * 12, w0)
        store64(city + r * 12 + 4, w1)
        store32(city_off + 4 * (r + 1), (r + 1) * 12)
    return bad, high


class Ceiling:
    """The probe's output buffers for ``recs`` (records of benchmarks.mainframe.DTYPE),
    reused by every call, as ``out=`` reuses the library's arena."""

    def __init__(self, recs):
        n = len(recs)
        self.n = n
        self.src = np.concatenate([recs.view(np.uint8).reshape(-1), np.zeros(16, np.uint8)])  # (8-byte loads)
        self.table = np.frombuffer(bytes(range(256)).decode("cp037").encode("latin-1", "replace"), np.uint8).copy()
        self.outs = [
            np.zeros(20 * n + 8, np.uint8),
            np.zeros(n + 1, np.int32),
            *(np.zeros(2 * n, np.uint64) for _ in range(4)),
            np.zeros(12 * n + 8, np.uint8),
            np.zeros(n + 1, np.int32),
        ]
        self.ptrs = [o.ctypes.data for o in self.outs]

    def run(self, r0=0, r1=None):
        return _rows(self.src.ctypes.data, r0, self.n if r1 is None else r1, self.table.ctypes.data, *self.ptrs)

    def check(self, table):
        """Every value equals the library's (``table``: the same records' Arrow table)."""
        name, _, amt, qty, zn, cnt, city, _ = self.outs
        n = self.n
        for buf, col in ((amt, "AMT"), (qty, "QTY"), (zn, "ZN"), (cnt, "CNT")):
            want = table.column(col).combine_chunks()
            got = np.frombuffer(want.buffers()[1], np.uint64, 2 * n)
            if not (buf == got).all():
                raise AssertionError(f"the ceiling probe's {col} differs from the library's")
        for buf, col, w in ((name, "NAME", 20), (city, "CITY", 12)):
            if bytes(buf[: w * n]) != "".join(table.column(col).to_pylist()).encode("latin-1"):
                raise AssertionError(f"the ceiling probe's {col} differs from the library's")


# ----------------------------------------------------------------- the vector probe

u8 = np.uint8
BLOCK = 512  # records a block: its staged text and words stay in the L1/L2 cache
ALL = 255
# the parts of each way (bits of ``parts``): timed alone by ``python -m benchmarks.mainframe_ceiling``
FORWARD_PARTS = {
    "text: staged (a scalar copy)": 1,
    "text: staged + EBCDIC -> ASCII (32 bytes)": 3,  # (the map alone would see zeros: the table)
    "text: offsets": 4,
    "AMT packed 6 bytes": 8,
    "QTY packed 4 bytes": 16,
    "ZN zoned 9 bytes": 32,
    "CNT binary 4 bytes": 64,
}
BACK_PARTS = {
    "text: widths checked": 1,
    "text: ASCII -> EBCDIC (32 bytes)": 2,
    "AMT packed 6 bytes": 8,
    "QTY packed 4 bytes": 16,
    "ZN zoned 9 bytes": 32,
    "CNT binary 4 bytes": 64,
    "records assembled (a scalar loop)": 128,
}
VECTOR_OPS = ("zmm", "ymm", "vpgatherqq", "vpgatherqd", "vpmullq", "vpshufb", "vcvtuqq2pd", "vpscatter")


def _array_access(bits):
    """Unaligned load/store of a ``bits`` integer at byte ``i`` of a NumPy array: a GEP
    from the array's data pointer, which LLVM's vectorizer can analyse (it leaves loops
    over raw ``inttoptr`` addresses, the library's accessors, scalar: "cannot identify
    array bounds")."""
    utype = getattr(types, f"uint{bits}")
    llty = ir.IntType(bits)

    def address(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        p = builder.gep(builder.bitcast(data, ir.IntType(8).as_pointer()), [args[1]], inbounds=True)
        return builder.bitcast(p, llty.as_pointer())

    @intrinsic
    def ld(typingctx, arr, i):
        def codegen(context, builder, sig, args):
            return builder.load(address(context, builder, sig, args), align=1)

        return utype(arr, i), codegen

    @intrinsic
    def st(typingctx, arr, i, v):
        def codegen(context, builder, sig, args):
            value = context.cast(builder, args[2], sig.args[2], utype)
            builder.store(value, address(context, builder, sig, args), align=1)
            return context.get_dummy_value()

        return types.void(arr, i, v), codegen

    return ld, st


ld8, st8 = _array_access(8)
ld32, st32 = _array_access(32)
ld64, st64 = _array_access(64)


@nb.njit(inline="always")
def _sel(c, a, b):
    """``a if c else b`` for uint8, as byte-lane arithmetic (no branch, no widening)."""
    m = u8(u8(0) - u8(c))
    return u8((a & m) | (b & ~m))


@nb.njit(inline="always")
def _decimal128(out, r, v):
    st64(out, 16 * r, v)
    st64(out, 16 * r + 8, U(np.int64(v) >> np.int64(63)))


@nb.njit(inline="always")
def _packed_col(src, b0, b1, out, off, width):
    bad = U(0)
    six = U(0x0666666666666666)
    digits = U(0x1111111111111110) >> U(64 - 8 * width)
    for r in range(b0, b1):
        x = U(bswap64(ld64(src, r * 55 + off))) >> U(64 - 8 * width)
        sign, d = x & U(0xF), x >> U(4)
        bad |= (((d + six) ^ d ^ six) & digits) | (((_SIGN_OK >> sign) & U(1)) ^ U(1))
        m = U(0) - ((_SIGN_NEG >> sign) & U(1))
        _decimal128(out, r, (_digits(d) ^ m) - m)
    return bad


@nb.njit(inline="always")
def _zoned_col(src, b0, b1, out, off):  # S9(7)V99: 9 bytes, the sign over the last
    bad = U(0)
    zones = U(0xF0F0F0F0F0F0F0F0)
    for r in range(b0, b1):
        x_lo, x_hi = U(bswap64(ld64(src, r * 55 + off + 1))), U(ld8(src, r * 55 + off))
        zone = (x_lo >> U(4)) & U(0xF)
        xl = x_lo | U(0xF0)
        d = xl & U(0x0F0F0F0F0F0F0F0F)
        bad |= (((_SIGN_OK >> zone) & U(1)) ^ U(1)) | ((xl & zones) ^ zones)
        bad |= (
            ((d + U(0x0606060606060606)) & zones) | ((x_hi & U(0xF0)) ^ U(0xF0)) | (((x_hi & U(0xF)) + U(6)) & U(0x10))
        )
        b = ((d >> U(8)) & U(0x00FF00FF00FF00FF)) * U(10) + (d & U(0x00FF00FF00FF00FF))
        q = ((b >> U(16)) & U(0x0000FFFF0000FFFF)) * U(100) + (b & U(0x0000FFFF0000FFFF))
        v = (q >> U(32)) * U(10000) + (q & U(0xFFFFFFFF)) + (x_hi & U(0xF)) * U(100000000)
        m = U(0) - ((_SIGN_NEG >> zone) & U(1))
        _decimal128(out, r, (v ^ m) - m)
    return bad


@nb.njit(inline="always")
def _binary4_col(src, b0, b1, out, off):
    for r in range(b0, b1):
        _decimal128(out, r, U(np.int64(np.int32(bswap32(ld32(src, r * 55 + off))))))


@nb.njit(inline="always")
def _e2a(stage, dst, d0, count):
    """EBCDIC (cp037) upper-case letters, digits and space -> ASCII, one byte lane each;
    nonzero: a byte outside them (the block then goes through the table)."""
    odd = u8(0)
    for i in range(count):
        b = ld8(stage, i)
        h, lo = u8(b >> u8(4)), u8(b & u8(15))
        c, d, e, f = h == u8(0xC), h == u8(0xD), h == u8(0xE), h == u8(0xF)
        delta = _sel(c, u8(0x80), _sel(d, u8(0x87), _sel(e, u8(0x8F), _sel(f, u8(0xC0), u8(0x20)))))
        ok = u8(u8(c | d) & u8(u8(lo - u8(1)) < u8(9))) | u8(u8(e) & u8(u8(lo - u8(2)) < u8(8)))
        ok = ok | u8(u8(f) & u8(lo < u8(10))) | u8(b == u8(0x40))
        st8(dst, d0 + i, u8(b - delta))
        odd = u8(odd | u8(ok ^ u8(1)))
    return odd


@nb.njit(inline="always")
def _a2e(src, s0, stage, count):
    """The inverse of :func:`_e2a` (ASCII upper-case letters, digits, space -> cp037)."""
    odd = u8(0)
    for i in range(count):
        b = ld8(src, s0 + i)
        d1, d2 = u8(b - u8(0x41)) < u8(9), u8(b - u8(0x4A)) < u8(9)
        d3, d4 = u8(b - u8(0x53)) < u8(8), u8(b - u8(0x30)) < u8(10)
        delta = _sel(d1, u8(0x80), _sel(d2, u8(0x87), _sel(d3, u8(0x8F), _sel(d4, u8(0xC0), u8(0x20)))))
        st8(stage, i, u8(b + delta))
        odd = u8(odd | u8(u8(d1 | d2 | d3 | d4 | (b == u8(0x20))) ^ u8(1)))
    return odd


@nb.njit(inline="always")
def _text_table(src, dst, d0, count, table):
    """The fallback of a block with a byte :func:`_e2a`/:func:`_a2e` does not map."""
    for i in range(count):
        st8(dst, d0 + i, table[ld8(src, i)])


@nb.njit(inline="always")
def _offsets(off, b0, b1, w):
    for r in range(b0, b1):
        st32(off, 4 * (r + 1), (r + 1) * w)


@nb.njit(nogil=True)
def _vrows(src, r0, r1, table, parts, name, name_off, amt, qty, zn, cnt, city, city_off):
    sn, sc = np.zeros(20 * BLOCK + 8, np.uint8), np.zeros(12 * BLOCK + 8, np.uint8)
    bad = U(0)
    for b0 in range(r0, r1, BLOCK):
        b1 = min(b0 + BLOCK, r1)
        if parts & 1:
            for r in range(b0, b1):  # the block's text, staged contiguously
                a, i = r * 55, r - b0
                st64(sn, 20 * i, ld64(src, a))
                st64(sn, 20 * i + 8, ld64(src, a + 8))
                st32(sn, 20 * i + 16, ld32(src, a + 16))
                st64(sc, 12 * i, ld64(src, a + 43))
                st32(sc, 12 * i + 8, ld32(src, a + 51))
        if parts & 2:
            if _e2a(sn, name, 20 * b0, 20 * (b1 - b0)):
                _text_table(sn, name, 20 * b0, 20 * (b1 - b0), table)
            if _e2a(sc, city, 12 * b0, 12 * (b1 - b0)):
                _text_table(sc, city, 12 * b0, 12 * (b1 - b0), table)
        if parts & 4:
            _offsets(name_off, b0, b1, 20)
            _offsets(city_off, b0, b1, 12)
        if parts & 8:
            bad |= _packed_col(src, b0, b1, amt, 20, 6)
        if parts & 16:
            bad |= _packed_col(src, b0, b1, qty, 26, 4)
        if parts & 32:
            bad |= _zoned_col(src, b0, b1, zn, 30)
        if parts & 64:
            _binary4_col(src, b0, b1, cnt, 39)
    return bad


@nb.njit(inline="always")
def _digit_bytes(r):
    """r < 10**8 -> its 8 decimal digits one a byte, the first in the top byte (SWAR: the
    quotients by 10**4, 100 and 10 as multiply-shifts, exact in these ranges)."""
    r = r & U(0xFFFFFFFF)  # (no bits lost: tells LLVM that a 32 x 32-bit multiply will do)
    hi4 = (r * U(109951163)) >> U(40)
    x = (hi4 << U(32)) | (r - hi4 * U(10000))
    q = ((x * U(5243)) >> U(19)) & U(0x0000007F0000007F)
    y = (q << U(16)) | (x - q * U(100))
    t = ((y * U(103)) >> U(10)) & U(0x000F000F000F000F)
    return (t << U(8)) | (y - t * U(10))


@nb.njit(inline="always")
def _bcd8(r):
    """r < 10**8 -> its 8 decimal digits as nibbles, the last digit lowest."""
    z = _digit_bytes(r)
    z = (z | (z >> U(4))) & U(0x00FF00FF00FF00FF)
    z = (z | (z >> U(8))) & U(0x0000FFFF0000FFFF)
    return (z | (z >> U(16))) & U(0xFFFFFFFF)


@nb.njit(inline="always")
def _bcd3(q):
    """q < 1000 -> its 3 decimal digits as nibbles."""
    h = (q * U(41)) >> U(12)
    x = q - h * U(100)
    t = (x * U(103)) >> U(10)
    return (h << U(8)) | (t << U(4)) | (x - t * U(10))


@nb.njit(inline="always")
def _split8(a):
    """a < 10**11 -> (a // 10**8, a % 10**8): 10**8 = 2**8 * 390625, and x // 390625 for
    x < 2**29 is (x * 720575941) >> 48 (exact there); both multiplies 32 x 32 bits."""
    q = (((a >> U(8)) & U(0x1FFFFFFF)) * U(720575941)) >> U(48)
    return q, a - q * U(100000000)


@nb.njit(inline="always")
def _magnitude(dec, r, limit):
    """|value| of decimal128 ``r``, its sign bit and the bits that say it is no valid value
    of the field (a high word not the low one's sign, or not below ``limit``)."""
    lo, hi = ld64(dec, 16 * r), ld64(dec, 16 * r + 8)
    neg = lo >> U(63)
    m = U(0) - neg
    a = (lo ^ m) + neg
    return a, neg, (hi ^ m) | U(a >= limit)


@nb.njit(inline="always")
def _packed_back(stage, b0, b1, dec, width, digits):
    bad, limit = U(0), U(10**digits)
    for r in range(b0, b1):
        a, neg, b = _magnitude(dec, r, limit)
        bad |= b
        a = a * U(a < limit)  # (an invalid value: any bytes, the block is flagged)
        if digits <= 8:  # (a constant: one of the two is compiled)
            nib = (_bcd8(a) << U(4)) | (U(0xC) + neg)
        else:  # up to 11 digits
            q, rem = _split8(a)
            nib = (_bcd3(q) << U(36)) | (_bcd8(rem) << U(4)) | (U(0xC) + neg)
        st64(stage, 8 * (r - b0), bswap64(nib << U(64 - 8 * width)))
    return bad


@nb.njit(inline="always")
def _zoned_back(stage_lo, stage_hi, b0, b1, dec):  # S9(7)V99: 9 digits, the sign over the last
    bad, limit = U(0), U(10**9)
    for r in range(b0, b1):
        a, neg, b = _magnitude(dec, r, limit)
        bad |= b
        q, rem = _split8(a * U(a < limit))
        z = _digit_bytes(rem) | U(0xF0F0F0F0F0F0F000) | ((U(0xC) + neg) << U(4))
        st64(stage_lo, 8 * (r - b0), bswap64(z))
        st64(stage_hi, 8 * (r - b0), U(0xF0) | q)
    return bad


@nb.njit(inline="always")
def _binary4_back(stage, b0, b1, dec):
    bad = U(0)
    for r in range(b0, b1):
        lo, hi = ld64(dec, 16 * r), ld64(dec, 16 * r + 8)
        bad |= (hi ^ (U(0) - (lo >> U(63)))) | ((lo + U(0x80000000)) >> U(32))
        st64(stage, 8 * (r - b0), U(bswap32(np.uint32(lo & U(0xFFFFFFFF)))))
    return bad


@nb.njit(inline="always")
def _widths(offs, b0, b1, w):
    odd = U(0)
    for r in range(b0, b1):
        odd |= U(np.int64(ld32(offs, 4 * (r + 1))) - np.int64(ld32(offs, 4 * r)) != w)
    return odd


@nb.njit(nogil=True)
def _vback(dst, r0, r1, table, parts, name, name_off, amt, qty, zn, cnt, city, city_off):
    sn, sc = np.zeros(20 * BLOCK + 8, np.uint8), np.zeros(12 * BLOCK + 8, np.uint8)
    cols = np.zeros((5, 8 * BLOCK), np.uint8)
    s_amt, s_qty, s_zlo, s_zhi, s_cnt = cols[0], cols[1], cols[2], cols[3], cols[4]
    d, n, c = dst.ctypes.data, sn.ctypes.data, sc.ctypes.data
    p_amt, p_qty, p_zlo, p_zhi, p_cnt = (
        s_amt.ctypes.data,
        s_qty.ctypes.data,
        s_zlo.ctypes.data,
        s_zhi.ctypes.data,
        s_cnt.ctypes.data,
    )
    bad = U(0)
    for b0 in range(r0, r1, BLOCK):
        b1 = min(b0 + BLOCK, r1)
        if parts & 1 and _widths(name_off, b0, b1, 20) | _widths(city_off, b0, b1, 12):
            raise ValueError("the vector probe's way back takes fixed-width text only")
        if parts & 2:
            if _a2e(name, 20 * b0, sn, 20 * (b1 - b0)):
                _text_table(name[20 * b0 :], sn, 0, 20 * (b1 - b0), table)
            if _a2e(city, 12 * b0, sc, 12 * (b1 - b0)):
                _text_table(city[12 * b0 :], sc, 0, 12 * (b1 - b0), table)
        if parts & 8:
            bad |= _packed_back(s_amt, b0, b1, amt, 6, 11)
        if parts & 16:
            bad |= _packed_back(s_qty, b0, b1, qty, 4, 7)
        if parts & 32:
            bad |= _zoned_back(s_zlo, s_zhi, b0, b1, zn)
        if parts & 64:
            bad |= _binary4_back(s_cnt, b0, b1, cnt)
        if parts & 128:
            for r in range(b0, b1):  # raw addresses: LLVM leaves this loop scalar (no scatter)
                a, i = d + r * 55, r - b0
                store64(a, load64(n + 20 * i))
                store64(a + 8, load64(n + 20 * i + 8))
                store32(a + 16, load32(n + 20 * i + 16))
                store64(a + 20, load64(p_amt + 8 * i))  # (its last 2 bytes: QTY's, stored next)
                store32(a + 26, load32(p_qty + 8 * i))
                store8(a + 30, load8(p_zhi + 8 * i))
                store64(a + 31, load64(p_zlo + 8 * i))
                store32(a + 39, load32(p_cnt + 8 * i))
                store64(a + 43, load64(c + 12 * i))
                store32(a + 51, load32(c + 12 * i + 8))
    return bad


def _padded(buf, extra=16):
    return np.concatenate([np.frombuffer(buf, np.uint8), np.zeros(extra, np.uint8)])


class VectorCeiling:
    """The vector probe's buffers for ``recs`` (records of benchmarks.mainframe.DTYPE):
    the forward outputs (reused by every :meth:`run`), and for :meth:`run_back` the
    library's Arrow columns of the same records (``table``) and a reused record buffer."""

    def __init__(self, recs, table, src=None):
        n = len(recs)
        self.n = n
        self.recs = recs
        # the records with 16 bytes after them (8-byte loads), as Ceiling.src: shared if given
        self.src = _padded(recs.view(np.uint8).reshape(-1)) if src is None else src
        cp037 = bytes(range(256)).decode("cp037")
        self.table = np.frombuffer(cp037.encode("latin-1", "replace"), np.uint8).copy()
        back = np.full(256, 0x6F, np.uint8)  # (cp037 '?')
        for e, ch in enumerate(cp037):
            if ord(ch) < 256:
                back[ord(ch)] = e
        self.back_table = back
        self.outs = [np.zeros(k, np.uint8) for k in (20 * n + 8, 4 * (n + 1), *(16 * n,) * 4, 12 * n + 8, 4 * (n + 1))]
        cols = [table.column(name).combine_chunks() for name in ("NAME", "AMT", "QTY", "ZN", "CNT", "CITY")]
        if any(c.offset for c in cols):
            raise ValueError("the vector probe takes unsliced columns")
        name, amt, qty, zn, cnt, city = cols  # (read in place: the way back loads no byte past them)
        self.ins = [np.frombuffer(name.buffers()[2], np.uint8), np.frombuffer(name.buffers()[1], np.uint8)]
        self.ins += [np.frombuffer(c.buffers()[1], np.uint8) for c in (amt, qty, zn, cnt)]
        self.ins += [np.frombuffer(city.buffers()[2], np.uint8), np.frombuffer(city.buffers()[1], np.uint8)]
        self.dst = np.zeros(n * 55 + 16, np.uint8)

    def run(self, r0=0, r1=None, parts=ALL):
        """Records -> Arrow; nonzero: a block holds an invalid value. ``parts``: the
        FORWARD_PARTS done (all of them but to time them one by one)."""
        return _vrows(self.src, r0, self.n if r1 is None else r1, self.table, parts, *self.outs)

    def run_back(self, r0=0, r1=None, parts=ALL):
        """Arrow -> records; nonzero: a block holds a value its field cannot hold.
        ``parts``: the BACK_PARTS done."""
        return _vback(self.dst, r0, self.n if r1 is None else r1, self.back_table, parts, *self.ins)

    def check(self, table):
        """Both ways: every value equals the library's (``table``: the same records' Arrow
        table), and the records made back are byte-identical to ``recs``."""
        n = self.n
        if self.run() or self.run_back():
            raise AssertionError("the vector probe flagged valid records")
        name, offs, amt, qty, zn, cnt, city, _ = self.outs
        for buf, col in ((amt, "AMT"), (qty, "QTY"), (zn, "ZN"), (cnt, "CNT")):
            want = np.frombuffer(table.column(col).combine_chunks().buffers()[1], np.uint8, 16 * n)
            if not (buf == want).all():
                raise AssertionError(f"the vector probe's {col} differs from the library's")
        for buf, col, w in ((name, "NAME", 20), (city, "CITY", 12)):
            if bytes(buf[: w * n]) != "".join(table.column(col).to_pylist()).encode("latin-1"):
                raise AssertionError(f"the vector probe's {col} differs from the library's")
        if not (offs.view(np.int32) == np.arange(n + 1, dtype=np.int32) * 20).all():
            raise AssertionError("the vector probe's NAME offsets differ from the library's")
        if self.dst[: 55 * n].tobytes() != self.recs.tobytes():
            raise AssertionError("the vector probe's way back changed the records")

    @staticmethod
    def vector_instructions():
        """How many of each vector instruction (:data:`VECTOR_OPS`) the compiled code of
        each way holds (its first signature; compiled by a first :meth:`run`)."""
        return {
            fn.__name__: {op: len(re.findall(op, fn.inspect_asm(fn.signatures[0]))) for op in VECTOR_OPS}
            for fn in (_vrows, _vback)
        }


def main(argv=None):
    """The vector probe's cost part by part: ns of CPU a record on one thread, records
    that fit the caches (the memory's cost left out), against the scalar probe."""
    import argparse
    import os
    import time

    import layouts as lo

    from .mainframe import DTYPE, ENCODINGS, records

    p = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=8192)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    n = args.records
    repeat = max(1, 1_600_000 // n)
    recs = records(n)
    table = lo.AoS(recs, lo.Layout.from_dtype(DTYPE, encodings=ENCODINGS)).to_soa(threads=1).to_arrow()
    vector, scalar = VectorCeiling(recs, table), Ceiling(recs)
    vector.check(table)
    scalar.run()
    scalar.check(table)
    cases = {f"records -> Arrow: {k}": (vector.run, bit) for k, bit in FORWARD_PARTS.items()}
    cases["records -> Arrow: all"] = (vector.run, ALL)
    cases.update({f"Arrow -> records: {k}": (vector.run_back, bit) for k, bit in BACK_PARTS.items()})
    cases["Arrow -> records: all"] = (vector.run_back, ALL)
    cases["scalar probe, records -> Arrow"] = (lambda r0, r1, parts: scalar.run(r0, r1), ALL)
    load = os.getloadavg()
    cpu = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (fn, parts) in cases.items():
            t0 = time.process_time()
            for _ in range(repeat):
                fn(0, n, parts)
            cpu[name].append((time.process_time() - t0) / repeat / n * 1e9)
    print(f"{n} records ({n * 55 / 1e6:.2f} MB), {args.rounds} rounds of {repeat} runs, one thread, ns of CPU a record")
    print(f"  load average (1, 5, 15 min): before {load}, after {os.getloadavg()}")
    print(
        f"  NUMBA_CPU_NAME={os.environ.get('NUMBA_CPU_NAME')} NUMBA_CPU_FEATURES={os.environ.get('NUMBA_CPU_FEATURES')}"
    )
    for name, t in cpu.items():
        print(f"  {name:<50} {np.median(t):6.2f}  ({min(t):.2f}-{max(t):.2f})")
    print(f"  vector instructions: {VectorCeiling.vector_instructions()}")


if __name__ == "__main__":
    main()
