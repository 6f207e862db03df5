"""The sign each packed or zoned value holds, and that sign put back (``signs="keep"``).

A packed decimal's last nibble, or the zone of a zoned decimal's overpunched byte, is one
of six valid signs: A, C, E, F positive, B, D negative (IBM's decimal instructions take
all six; COBOL writes C, D and F). The transpose reads the value whatever its sign; the
way back writes one sign per value, the field's rule: D for a value below zero, else the
field's positive sign (C in a signed field, F in an unsigned one, or ``Encoding.positive``).
Values whose sign is not the rule's (a C among F, A, B, E, a negative zero) come back
with another byte unless their sign is kept: :func:`read_signs` finds them (a pass over
the records), :func:`write_signs` puts their signs back into records the way back wrote.

The per-value functions are ``register_jitable``: the CPU functions here and the CUDA
kernels of :mod:`kernels.cuda.signs` run the same code. ``buf`` is the records as a flat
uint8 array, ``a`` the byte where the value starts; ``zoned`` is False for packed,
``leading`` and ``ascii_`` are the zoned field's sign position and character set
(``ascii_``: overpunched ASCII, ``{``/``A``-``I`` for C, ``}``/``J``-``R`` for D, plain
digits for F; it has no A, B or E). ``zoned`` is an integer: 0 packed, 1 zoned with an
overpunched sign, ``SEPARATE`` (2) zoned with a separate sign byte (``+``/``-``, at the
value's first byte with ``leading``, else its last): its only sign the way back does not
write is the ``-`` of a negative zero, read and kept as D (13).
"""

import numpy as np
from numba.extending import register_jitable

from ._cache import jit
from .mainframe import ascii_zoned_byte, packed_sign, zoned_ascii_byte

_jit = jit(nogil=True)  # numba.njit, cached on disk by the kernels' content (kernels/_cache.py)

SEPARATE = 2  # ``zoned``: a separate sign byte


@register_jitable
def separate_sign(buf, a, width, leading, ascii_):
    """The sign of a separate-sign value: C for ``+``, D for ``-`` (ASCII or EBCDIC), else 0."""
    b = np.int64(buf[a if leading else a + width - 1])
    if b == (0x2B if ascii_ else 0x4E):
        return 0xC
    if b == (0x2D if ascii_ else 0x60):
        return 0xD
    return 0


@register_jitable
def held_sign(buf, a, width, zoned, leading, ascii_):
    """The sign nibble (packed) or zone (zoned) of the value at ``buf[a:a + width]`` (a
    separate sign: C or D, 0 if its byte is neither ``+`` nor ``-``)."""
    if zoned == SEPARATE:
        return separate_sign(buf, a, width, leading, ascii_)
    if not zoned:
        return np.int64(buf[a + width - 1]) & 0xF
    b = np.int64(buf[a if leading else a + width - 1])
    if ascii_:
        b = ascii_zoned_byte(b)
    return b >> 4


@register_jitable
def magnitude_zero(buf, a, width, zoned, ascii_, leading):
    """Whether every digit of the value at ``buf[a:a + width]`` is 0."""
    if zoned == SEPARATE:
        d0 = a + 1 if leading else a
        for t in range(d0, d0 + width - 1):
            if (np.int64(buf[t]) & 0xF) != 0:
                return False
        return True
    if not zoned:
        for t in range(width - 1):
            if buf[a + t] != 0:
                return False
        return (np.int64(buf[a + width - 1]) >> 4) == 0
    for t in range(width):
        b = np.int64(buf[a + t])
        if ascii_:
            b = ascii_zoned_byte(b)
        if (b & 0xF) != 0:
            return False
    return True


@register_jitable
def rule_sign(code, zero, positive):
    """The sign the way back writes for a value read with sign ``code``: D for a negative
    value other than zero, else the field's ``positive`` sign."""
    if (code == 0xB or code == 0xD) and not zero:
        return 0xD
    return positive


@register_jitable
def sign_fits(kept, written, zero, signed, ascii_):
    """Whether sign ``kept`` may stand for ``written`` (the rule's sign of the value just
    written): a valid sign of the field with the value's sign, or a negative sign on zero."""
    if kept < 0xA or kept > 0xF:
        return False
    if ascii_ and kept != 0xC and kept != 0xD and kept != 0xF:
        return False  # overpunched ASCII has no A, B or E
    minus = kept == 0xB or kept == 0xD
    if minus and not signed:
        return False
    if written == 0xD:
        return minus
    return zero or not minus


@register_jitable
def set_sign(buf, a, width, zoned, leading, ascii_, kept):
    """Sign ``kept`` into the value at ``buf[a:a + width]``."""
    if zoned == SEPARATE:  # (only D is kept: a minus sign)
        buf[a if leading else a + width - 1] = 0x2D if ascii_ else 0x60
        return
    if not zoned:
        at = a + width - 1
        buf[at] = (np.int64(buf[at]) & 0xF0) | kept
        return
    at = a if leading else a + width - 1
    b = np.int64(buf[at])
    if ascii_:
        b = ascii_zoned_byte(b)
    b = (kept << 4) | (b & 0xF)
    buf[at] = zoned_ascii_byte(b) if ascii_ else b


@register_jitable
def read_sign_at(buf, a, width, zoned, leading, ascii_, signed, positive):
    """The sign of the value at ``a`` if the way back would write another, else 0 (also for
    bytes that hold no valid sign: an invalid value made null keeps nothing)."""
    code = held_sign(buf, a, width, zoned, leading, ascii_)
    if zoned == SEPARATE:  # the way back writes + or -: only a negative zero's - is not its own
        if code == 0xD and magnitude_zero(buf, a, width, zoned, ascii_, leading):
            return code
        return 0
    if packed_sign(code, signed) == 0:
        return 0
    zero = magnitude_zero(buf, a, width, zoned, ascii_, leading)
    if code == rule_sign(code, zero, positive):
        return 0
    return code


@register_jitable
def write_sign_at(buf, a, width, zoned, leading, ascii_, signed, kept):
    """Sign ``kept`` (0: none kept) put into the value the way back wrote at ``a``; False if
    it cannot stand for the value's sign (:func:`sign_fits`)."""
    if kept == 0:
        return True
    written = held_sign(buf, a, width, zoned, leading, ascii_)
    zero = magnitude_zero(buf, a, width, zoned, ascii_, leading)
    if zoned == SEPARATE:  # D on a zero (negative zero) is the only sign a separate one keeps
        if kept != 0xD or not zero or not signed:
            return False
        set_sign(buf, a, width, zoned, leading, ascii_, kept)
        return True
    if not sign_fits(kept, written, zero, signed, ascii_):
        return False
    set_sign(buf, a, width, zoned, leading, ascii_, kept)
    return True


@_jit
def read_signs(buf, stride, n, offs, width, zoned, leading, ascii_, signed, positive, out):
    """``out[r, k]``: the sign of element ``k`` (at ``offs[k]``) of record ``r`` where the way
    back would write another sign, else 0."""
    for r in range(n):
        for k in range(offs.shape[0]):
            out[r, k] = read_sign_at(buf, r * stride + offs[k], width, zoned, leading, ascii_, signed, positive)


@_jit
def write_signs(buf, stride, n, offs, width, zoned, leading, ascii_, signed, kept):
    """The signs ``kept[r, k]`` (0: none) into the records the way back wrote; the first
    element ``r * len(offs) + k`` whose kept sign does not fit its value, or -1. Elements
    before it are written, after it not: the caller drops the records."""
    c = offs.shape[0]
    for r in range(n):
        for k in range(c):
            if not write_sign_at(buf, r * stride + offs[k], width, zoned, leading, ascii_, signed, kept[r, k]):
                return r * c + k
    return -1
