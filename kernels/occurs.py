"""Records as long as their ``OCCURS DEPENDING ON`` counts make them (Cobrix's
``variable_size_occurs``), on the CPU: each record spread out to the record type's
maximum layout, and back.

A record type is a small program (built by ``layouts._occurs``), one row per step, in
the order of the bytes:

* ``COPY  off size``: ``size`` bytes at ``off`` of the maximum layout (relative to the
  element being read: the record, or an element of a table);
* ``TABLE off stride max count body``: a table at ``off`` whose elements are ``stride``
  bytes apart in the maximum layout, ``count`` the row of ``counts`` that says how many
  elements the record holds (or -1: always ``max``), then ``body`` rows, the program of
  one element.

``counts`` rows say where a count is and how to read it: ``kind`` (``C_DIGITS``: text
digits, ``C_ZONED``: zoned digits with the field's sign (overpunched or separate, flags
``CF_SIGNED``, ``CF_LEADING``, ``CF_SEPARATE``), ``C_PACKED``, ``C_BINARY``, ``C_MAPPED``: text looked up among
``keys``), whether its offset is relative to the innermost table element being read
(``rel`` 1) or to the record (0), its offset and width in the maximum layout, flags, and
for ``C_MAPPED`` the first key and the number of keys (each ``width`` bytes in ``keys``,
its count in ``key_counts``).

The count of a table is read from the maximum-layout record being built, where the
count's bytes already are (a count comes before its table). Every count is checked
against ``0..max`` and every copy against the bytes left, so damaged data stops with a
status, the record and the byte offset, never a read past the end or a loop.

Compiled once and cached on disk by content (kernels/_cache.py); NumPy arrays and integers only.
"""

import numpy as np

from ._cache import jit
from .cpu.memory import _memcpy  # the transpose's copy of raw bytes, 8 at a time
from .mainframe import ascii_zoned_byte, packed_sign, zoned_overpunch

_jit = jit(nogil=True)  # numba.njit, cached on disk by the kernels' content (kernels/_cache.py)

OP_COPY, OP_TABLE = 0, 1
C_DIGITS, C_PACKED, C_BINARY, C_MAPPED, C_ZONED = 0, 1, 2, 3, 4
CF_ASCII, CF_SIGNED, CF_LEADING, CF_SEPARATE = 1, 2, 4, 8

OK = 0
S_SHORT = 1  # the data ends inside a record
S_COUNT = 2  # a count outside 0..max
S_BAD_COUNT = 3  # a count's bytes are no number (or no key of the mapping)
S_DEEP = 4  # tables nested deeper than the stack

DEPTH = 16
M_SPREAD, M_SHRINK, M_MEASURE = 0, 1, 2


@_jit
def read_count(rec, base, row, counts, keys, key_counts):
    """``(ok, value)`` of count ``row`` in the maximum-layout record ``rec`` (``base``: the
    start of the innermost element being read)."""
    kind, rel, off, width, flags = counts[row, 0], counts[row, 1], counts[row, 2], counts[row, 3], counts[row, 4]
    at = off + (base if rel else 0)
    if kind == C_MAPPED:
        k0, nk = counts[row, 5], counts[row, 6]
        for k in range(k0, k0 + nk):
            same = True
            for t in range(width):
                if keys[k * width + t] != rec[at + t]:
                    same = False
                    break
            if same:
                return True, np.int64(key_counts[k])
        return False, np.int64(0)
    if kind == C_BINARY:
        v = np.int64(0)
        for t in range(width):
            v = (v << 8) | np.int64(rec[at + t])
        if (flags & CF_SIGNED) != 0 and width < 8 and (v >> (8 * width - 1)) & 1:
            v -= np.int64(1) << (8 * width)
        return True, v
    if kind == C_PACKED:
        v = np.int64(0)
        for t in range(width):
            b = np.int64(rec[at + t])
            hi, lo = b >> 4, b & 0xF
            if hi > 9:
                return False, np.int64(0)
            v = v * 10 + hi
            if t < width - 1:
                if lo > 9:
                    return False, np.int64(0)
                v = v * 10 + lo
            else:
                sign = packed_sign(lo, True)  # A, C, E, F positive; B, D negative
                if sign == 0:
                    return False, np.int64(0)
                v = v * sign
        return True, v
    if kind == C_ZONED:  # as the zoned decoder reads it: an overpunched or a separate sign
        ascii_ = (flags & CF_ASCII) != 0
        leading, separate = (flags & CF_LEADING) != 0, (flags & CF_SEPARATE) != 0
        d0, d1 = 0, width
        negative = False
        if separate:
            sb = np.int64(rec[at if leading else at + width - 1])
            if ascii_:
                sb = ascii_zoned_byte(sb)
            if sb == 0x60:
                negative = True
            elif sb != 0x4E:
                return False, np.int64(0)
            if leading:
                d0 = 1
            else:
                d1 = width - 1
        over = -1 if separate else (d0 if leading else d1 - 1)
        v = np.int64(0)
        for t in range(d0, d1):
            b = np.int64(rec[at + t])
            if ascii_:
                b = ascii_zoned_byte(b)
            if t == over and (flags & CF_SIGNED) != 0:  # (an unsigned count: plain digits only)
                d, sign = zoned_overpunch(b, True)
                if d < 0:
                    return False, np.int64(0)
                negative = sign < 0
            elif b < 0xF0 or b > 0xF9:
                return False, np.int64(0)
            else:
                d = b - 0xF0
            v = v * 10 + d
        return True, -v if negative else v
    zone = 0x30 if (flags & CF_ASCII) != 0 else 0xF0
    v = np.int64(0)
    for t in range(width):
        b = np.int64(rec[at + t])
        if b < zone or b > zone + 9:
            return False, np.int64(0)
        v = v * 10 + (b - zone)
    return True, v


@_jit
def walk(data, out, pos, end, rec, prog, counts, keys, key_counts, mode, stack):
    """One record: from ``data[pos:end]`` into the maximum-layout record ``rec``
    (``M_SPREAD``), from ``rec`` into ``out`` at ``pos`` (``M_SHRINK``, the way back:
    ``out`` has the room :func:`measure` found), or only its length (``M_MEASURE``). Returns ``(status, bytes of the record, count row, byte offset of the fault)``."""
    n = prog.shape[0]
    # the stack of open tables (``stack``: int64[6, DEPTH], the caller's, reused): first body
    # row, end row, table base, stride, element, count
    s_body, s_end, s_base, s_stride, s_k, s_n = stack[0], stack[1], stack[2], stack[3], stack[4], stack[5]
    depth = 0
    base = np.int64(0)
    at = pos
    pc = 0
    while True:
        if depth > 0 and pc == s_end[depth - 1]:  # an element done: the next, or the table done
            d = depth - 1
            s_k[d] += 1
            if s_k[d] < s_n[d]:
                base = s_base[d] + s_k[d] * s_stride[d]
                pc = s_body[d]
                continue
            depth -= 1
            base = s_base[depth - 1] + s_k[depth - 1] * s_stride[depth - 1] if depth > 0 else np.int64(0)
            pc = s_end[d]
            continue
        if pc >= n:
            break
        op = prog[pc, 0]
        if op == OP_COPY:
            off, size = prog[pc, 1], prog[pc, 2]
            if mode == M_SPREAD:
                if at + size > end:
                    return S_SHORT, at - pos, -1, at
                _memcpy(rec.ctypes.data + base + off, data.ctypes.data + at, size)  # (8 bytes a step)
            elif mode == M_SHRINK:
                _memcpy(out.ctypes.data + at, rec.ctypes.data + base + off, size)
            at += size
            pc += 1
            continue
        off, stride, most, row, body = prog[pc, 1], prog[pc, 2], prog[pc, 3], prog[pc, 4], prog[pc, 5]
        count = most
        if row >= 0:
            ok, count = read_count(rec, base, row, counts, keys, key_counts)
            if not ok:
                return S_BAD_COUNT, at - pos, row, at
            if count < 0 or count > most:
                return S_COUNT, at - pos, row, at
        if count == 0:
            pc += 1 + body
            continue
        if depth == DEPTH:
            return S_DEEP, at - pos, row, at
        s_body[depth], s_end[depth] = pc + 1, pc + 1 + body
        s_base[depth], s_stride[depth], s_k[depth], s_n[depth] = base + off, stride, 0, count
        depth += 1
        base = base + off
        pc += 1
    return OK, at - pos, -1, at


@_jit
def scan(data, start, end, size, template, prog, counts, keys, key_counts, limit):
    """The records of ``data[start:end]`` back to back: ``(status, starts, lengths, count
    row, fault byte)``, at most ``limit`` records (-1: all); each record spread into one
    scratch record (from ``template``) to read its counts."""
    stack = np.empty((6, DEPTH), np.int64)
    room = 1024
    starts = np.empty(room, np.int64)
    lengths = np.empty(room, np.int64)
    rec = np.empty(size, np.uint8)
    n = 0
    at = start
    while at < end and (limit < 0 or n < limit):
        _memcpy(rec.ctypes.data, template.ctypes.data, size)
        status, length, row, fault = walk(data, rec, at, end, rec, prog, counts, keys, key_counts, M_SPREAD, stack)
        if status != OK:
            return status, starts[:n], lengths[:n], row, fault
        if length == 0:  # a record of no bytes would never end the loop
            return S_SHORT, starts[:n], lengths[:n], -1, at
        if n == room:
            room *= 2
            starts = np.resize(starts, room)
            lengths = np.resize(lengths, room)
        starts[n], lengths[n] = at, length
        n += 1
        at += length
    return OK, starts[:n], lengths[:n], -1, at


@_jit
def check_framed(data, starts, lengths, size, template, prog, counts, keys, key_counts):
    """Records whose places the framing gave (RDW bodies): ``(record, status, length its
    counts make it, count row, fault byte)`` of the first whose counts do not make it
    exactly its length, or ``(-1, OK, 0, -1, 0)``."""
    stack = np.empty((6, DEPTH), np.int64)
    rec = np.empty(size, np.uint8)
    for i in range(starts.shape[0]):
        _memcpy(rec.ctypes.data, template.ctypes.data, size)
        end = starts[i] + lengths[i]
        status, length, row, fault = walk(
            data, rec, starts[i], end, rec, prog, counts, keys, key_counts, M_SPREAD, stack
        )
        if status != OK or length != lengths[i]:
            return i, status, length, row, fault
    return -1, OK, 0, -1, 0


@_jit
def spread(data, starts, lengths, records, template, prog, counts, keys, key_counts):
    """Each record (found by :func:`scan`) into its row of ``records`` (maximum layout),
    the bytes it does not hold from ``template``."""
    stack = np.empty((6, DEPTH), np.int64)
    for i in range(starts.shape[0]):
        _memcpy(records[i].ctypes.data, template.ctypes.data, template.shape[0])
        walk(
            data,
            records[i],
            starts[i],
            starts[i] + lengths[i],
            records[i],
            prog,
            counts,
            keys,
            key_counts,
            M_SPREAD,
            stack,
        )


@_jit
def measure(records, prog, counts, keys, key_counts):
    """The way back, first pass: ``(status, lengths, count row, record)``: the bytes of
    each maximum-layout record cut to its counts."""
    stack = np.empty((6, DEPTH), np.int64)
    n = records.shape[0]
    lengths = np.empty(n, np.int64)
    nothing = np.empty(0, np.uint8)
    for i in range(n):
        status, length, row, _ = walk(
            nothing, nothing, 0, 0, records[i], prog, counts, keys, key_counts, M_MEASURE, stack
        )
        if status != OK:
            return status, lengths[:i], row, i
        lengths[i] = length
    return OK, lengths, -1, -1


@_jit
def shrink(records, lengths, out, prog, counts, keys, key_counts):
    """The way back: each maximum-layout record cut to its counts, back to back in ``out``
    (``lengths`` from :func:`measure`)."""
    stack = np.empty((6, DEPTH), np.int64)
    at = np.int64(0)
    for i in range(records.shape[0]):
        walk(out, out, at, at + lengths[i], records[i], prog, counts, keys, key_counts, M_SHRINK, stack)
        at += lengths[i]


@_jit
def _place(data, at, end, rec, prog, counts, keys, key_counts, places, elements):
    """One record of a one-level program (every table's body one copy of its whole
    element): into ``places[pc]`` the byte of ``data`` where top-level row ``pc`` starts,
    into ``elements[pc]`` its elements (a copy: 1; a table: its count). The rows' bytes go
    to ``rec`` (maximum layout) as they are read, for the counts read after them.
    Returns ``(status, bytes of the record)``."""
    n = prog.shape[0]
    pos = at
    pc = 0
    while pc < n:
        off = prog[pc, 1]
        if prog[pc, 0] == OP_COPY:
            size = prog[pc, 2]
            if pos + size > end:
                return S_SHORT, pos - at
            _memcpy(rec.ctypes.data + off, data.ctypes.data + pos, size)
            places[pc], elements[pc] = pos, 1
            pos += size
            pc += 1
            continue
        stride, most, row, body = prog[pc, 2], prog[pc, 3], prog[pc, 4], prog[pc, 5]
        count = most
        if row >= 0:
            ok, count = read_count(rec, 0, row, counts, keys, key_counts)
            if not ok:
                return S_BAD_COUNT, pos - at
            if count < 0 or count > most:
                return S_COUNT, pos - at
        if pos + count * stride > end:
            return S_SHORT, pos - at
        places[pc], elements[pc] = pos, count
        pos += count * stride
        pc += 1 + body
    return OK, pos - at


@_jit
def scan_places(data, start, end, size, prog, counts, keys, key_counts):
    """The records of ``data[start:end]`` back to back, in one pass, for a one-level
    program (see :func:`_place`): ``(status, starts, lengths, places, elements)``, the
    last two ``[record, program row]``; a status other than OK stops it (the caller reads
    the data again the exact way, which names the fault)."""
    rows = prog.shape[0]
    room = 1024
    starts = np.empty(room, np.int64)
    lengths = np.empty(room, np.int64)
    places = np.empty((room, rows), np.int64)
    elements = np.empty((room, rows), np.int64)
    rec = np.zeros(size, np.uint8)
    n = 0
    at = start
    while at < end:
        if n == room:
            room *= 2
            starts = np.resize(starts, room)
            lengths = np.resize(lengths, room)
            more = np.empty((room, rows), np.int64)
            more[:n] = places[:n]
            places = more
            more = np.empty((room, rows), np.int64)
            more[:n] = elements[:n]
            elements = more
        status, length = _place(data, at, end, rec, prog, counts, keys, key_counts, places[n], elements[n])
        if status != OK or length == 0:
            return S_SHORT if status == OK else status, starts[:n], lengths[:n], places[:n], elements[:n]
        starts[n], lengths[n] = at, length
        n += 1
        at += length
    return OK, starts[:n], lengths[:n], places[:n], elements[:n]


@_jit
def framed_places(data, starts, lengths, size, prog, counts, keys, key_counts):
    """:func:`scan_places` of records whose places the framing gave: each must be exactly
    as long as its counts make it. ``(status, places, elements)``."""
    n, rows = starts.shape[0], prog.shape[0]
    places = np.empty((n, rows), np.int64)
    elements = np.empty((n, rows), np.int64)
    rec = np.zeros(size, np.uint8)
    for i in range(n):
        status, length = _place(
            data, starts[i], starts[i] + lengths[i], rec, prog, counts, keys, key_counts, places[i], elements[i]
        )
        if status != OK or length != lengths[i]:
            return S_SHORT if status == OK else status, places, elements
    return OK, places, elements
