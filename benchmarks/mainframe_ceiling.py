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
"""

import numba as nb
import numpy as np

from layouts.kernels._memory import bswap64, load8, load64, store32, store64

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
