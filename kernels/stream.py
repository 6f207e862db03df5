"""Record streams on the CPU: the boundary scan, and gather/scatter by an index of offsets.

A framed stream (a length field in every record, or a fixed size) is walked once by
:func:`scan`: it finds each record's byte offset, length and type (the tag field looked
up in a sorted table), checking every length against the bytes left before it moves on,
so a damaged stream stops with a status and the offset, never a loop or a read past
the end. :func:`gather` then copies each type's fixed part into a dense record buffer
(one copy, read through the offsets), which the one-pass AoS -> SoA transpose takes;
:func:`gather_tails` copies the bytes beyond the fixed part into one binary column.
:func:`scatter` and :func:`scatter_tails` are the way back.

All functions are compiled once and cached on disk (``nogil=True, cache=True``); they
take only NumPy arrays and integers, and import nothing of ``layouts``.
"""

import numpy as np
from numba import njit

from . import cpu
from ._memory import bswap16, bswap32, bswap64, load8, load16, load32, load64, prefetch
from ._memory import store8, store16, store32, store64, stream_fence
from .cpu import _memcpy  # the transpose's copy of raw bytes, 8 at a time
from .cpu import (BLOCK_BYTES, ROW_ALIGN, STAGE_RECORD_MAX, STREAM_BYTES, _forward_block, _prefetch_columns,
                  _reverse_block, _stage_plan, _unstage, _value_width)
from .plan import COUNT, DATA, K_CSTR, K_UTF32, KIND, OFFSETS, P2, VALID

__all__ = ["scan", "group", "gather", "gather_all", "aos_to_soa_at", "soa_to_aos_at", "E_TEXT_NUL", "E_WIDE", "first_nul", "gather_tails", "scatter", "scatter_tails", "put_uint",
           "OK", "FULL", "SHORT_PREFIX", "PAST_END", "TOO_SMALL", "UNKNOWN_TAG", "SHORT_RECORD"]

_jit = njit(nogil=True, cache=True)

# scan statuses
OK = 0
FULL = 1           # the output arrays are full: call again from ``pos`` with room
SHORT_PREFIX = 2   # fewer bytes left than the length/tag fields need (a truncated record)
PAST_END = 3       # the length runs past the end of the section
TOO_SMALL = 4      # the length is smaller than the fields that framing reads (zero included)
UNKNOWN_TAG = 5    # a tag value with no record type (unknown="error")
SHORT_RECORD = 6   # a record shorter than its type's fields

# the fault code of :func:`aos_to_soa_at` for a NUL byte in a text field (op -1); the
# transpose's own codes (kernels/plan.py E_*) are small integers
E_TEXT_NUL = 100
E_WIDE = 101  # soa_to_aos_at: a value does not fit the narrower field it goes back to (op -1)
PREFETCH_ROWS = 16  # records of one type are asked for this many ahead of the one copied


@_jit
def _get_uint(buf, pos, size, big):
    """The unsigned integer of ``size`` (1..8) bytes at ``buf[pos]``."""
    v = np.uint64(0)
    if big:
        for k in range(size):
            v = (v << np.uint64(8)) | np.uint64(buf[pos + k])
    else:
        for k in range(size - 1, -1, -1):
            v = (v << np.uint64(8)) | np.uint64(buf[pos + k])
    return v


@_jit
def put_uint(buf, pos, size, big, value):
    """Write ``value`` as an unsigned integer of ``size`` bytes at ``buf[pos]``."""
    v = np.uint64(value)
    if big:
        for k in range(size - 1, -1, -1):
            buf[pos + k] = np.uint8(v & np.uint64(0xFF))
            v = v >> np.uint64(8)
    else:
        for k in range(size):
            buf[pos + k] = np.uint8(v & np.uint64(0xFF))
            v = v >> np.uint64(8)


@_jit
def scan(buf, pos, end, count, limit, len_off, len_size, len_big, unit, base, min_len,
         tag_off, tag_size, tag_big, tag_values, tag_types, direct, unknown, type_min, offsets, lengths, types):
    """Walk records from ``pos`` to ``end`` (exclusive) of ``buf`` (uint8).

    A record's length is ``base`` when ``len_size`` is 0 (fixed size), else
    ``value * unit + base`` with ``value`` the unsigned ``len_size``-byte field at
    ``len_off`` in the record. It must fit before ``end`` and be at least ``min_len``
    (which covers the length and tag fields: the tag is read only inside the record).
    The type is 0 without a tag (``tag_size`` 0); else the tag value is looked up in
    ``tag_values`` (sorted), giving ``tag_types``; an unknown value is an error
    (``unknown`` 0), skipped (1: type -1) or kept (2: type ``len(tag_types)``).
    Records are written from index ``count`` on, at most ``limit`` of them in all
    (-1: no limit). A record of type ``t`` shorter than ``type_min[t]`` stops the scan
    (``SHORT_RECORD``) there, before the records after it are cut. Returns ``(status, pos, count)``: ``pos`` is where the scan stopped
    (the offending record's offset on an error).
    """
    cap = offsets.shape[0]
    need = len_off + len_size  # to read the length; the tag is checked against the length
    ntypes = tag_values.shape[0]
    while pos < end:
        if limit >= 0 and count >= limit:
            return OK, pos, count
        if count >= cap:
            return FULL, pos, count
        left = end - pos
        if left < need:
            return SHORT_PREFIX, pos, count
        if len_size == 0:
            n = base
            if n > left:
                return PAST_END, pos, count
        else:
            value = _get_uint(buf, pos + len_off, len_size, len_big)
            room = left - base
            if room < 0 or value > np.uint64(room // unit):
                return PAST_END, pos, count
            n = np.int64(value) * unit + base
        if n < min_len or n <= 0:
            return TOO_SMALL, pos, count
        t = 0
        if tag_size > 0:
            key = np.int64(_get_uint(buf, pos + tag_off, tag_size, tag_big))
            found = -1
            if direct.shape[0] > 0:
                found = direct[key]
            else:
                lo, hi = 0, ntypes
                while lo < hi:
                    mid = (lo + hi) // 2
                    if tag_values[mid] < key:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < ntypes and tag_values[lo] == key:
                    found = tag_types[lo]
            if found >= 0:
                t = found
            elif unknown == 0:
                return UNKNOWN_TAG, pos, count
            elif unknown == 1:
                t = -1
            else:
                t = ntypes
        if 0 <= t < type_min.shape[0] and n < type_min[t]:
            return SHORT_RECORD, pos, count
        offsets[count] = pos
        lengths[count] = n
        types[count] = t
        count += 1
        pos += n
    return OK, pos, count


@_jit
def group(types, ntypes, offsets, lengths, g_offsets, g_lengths):
    """Records grouped by type, in stream order within each (a counting sort): type
    ``t`` (-1 for skipped records, which go first) gets ``bounds[t + 1]..bounds[t + 2]``
    of ``g_offsets``/``g_lengths``. Returns ``bounds`` (``ntypes + 2`` entries + 1)."""
    bounds = np.zeros(ntypes + 3, np.int64)
    for i in range(types.shape[0]):
        bounds[types[i] + 2] += 1
    for t in range(1, ntypes + 3):
        bounds[t] += bounds[t - 1]
    fill = bounds.copy()
    for i in range(types.shape[0]):
        j = fill[types[i] + 1]
        g_offsets[j] = offsets[i]
        g_lengths[j] = lengths[i]
        fill[types[i] + 1] = j + 1
    return bounds


@_jit
def gather(buf, offsets, run_src, run_dst, run_len, dense, itemsize, offset_at):
    """Copy each record's fixed part into ``dense`` (uint8, ``len(offsets) * itemsize``):
    run ``r`` copies ``run_len[r]`` bytes from ``offsets[i] + run_src[r]`` to
    ``i * itemsize + run_dst[r]``; with ``offset_at`` >= 0 the record's offset is
    stored there as a little-endian int64. The caller has checked that every run lies
    inside its record and every record inside ``buf``."""
    nruns = run_src.shape[0]
    base = buf.ctypes.data
    out = dense.ctypes.data
    for i in range(offsets.shape[0]):
        src = base + offsets[i]
        dst = out + i * itemsize
        for r in range(nruns):
            _memcpy(dst + run_dst[r], src + run_src[r], run_len[r])
        if offset_at >= 0:
            put_uint(dense, i * itemsize + offset_at, 8, False, np.uint64(offsets[i]))


@_jit
def gather_all(buf, offsets, types, dense_addr, itemsize, offset_at, run_start, run_src, run_dst, run_len):
    """:func:`gather` for every type in one pass over the stream, in stream order: record
    ``i`` of type ``t = types[i]`` (skipped when outside ``0..len(dense_addr)``) goes to
    the next record of type ``t``'s dense buffer at address ``dense_addr[t]`` (records of
    ``itemsize[t]`` bytes), by its runs ``run_start[t] .. run_start[t + 1]``; with
    ``offset_at[t]`` >= 0 its offset is stored there (little-endian int64). The caller
    has checked every record against its type's size and keeps the buffers alive."""
    ntypes = dense_addr.shape[0]
    cursor = np.zeros(ntypes, np.int64)
    base = buf.ctypes.data
    for i in range(offsets.shape[0]):
        t = types[i]
        if t < 0 or t >= ntypes:
            continue
        dst = dense_addr[t] + cursor[t] * itemsize[t]
        src = base + offsets[i]
        for r in range(run_start[t], run_start[t + 1]):
            _memcpy(dst + run_dst[r], src + run_src[r], run_len[r])
        if offset_at[t] >= 0:
            v = np.uint64(offsets[i])
            for k in range(8):
                store8(dst + offset_at[t] + k, np.uint8(v & np.uint64(0xFF)))
                v = v >> np.uint64(8)
        cursor[t] += 1


@_jit
def first_nul(dense, itemsize, starts, widths):
    """The first record (of ``len(dense) // itemsize``) with a zero byte in one of the
    byte ranges ``starts[f] .. + widths[f]``, or -1."""
    n = dense.shape[0] // itemsize
    for i in range(n):
        base = i * itemsize
        for f in range(starts.shape[0]):
            for k in range(widths[f]):
                if dense[base + starts[f] + k] == 0:
                    return i
    return -1


@_jit
def gather_tails(buf, offsets, starts, ends, data):
    """Copy ``buf[offsets[i] + ...]`` tails into ``data``: record ``i``'s tail is
    ``ends[i] - ends[i-1]`` bytes (``ends[-1]`` is 0) from ``offsets[i] + starts[i]``."""
    prev = np.int64(0)
    base = buf.ctypes.data
    out = data.ctypes.data
    for i in range(offsets.shape[0]):
        e = ends[i]
        _memcpy(out + prev, base + offsets[i] + starts[i], e - prev)
        prev = e


@_jit
def scatter(dense, itemsize, positions, run_src, run_dst, run_len, zero_off, zero_len, out):
    """The mirror of :func:`gather`: record ``i`` of ``dense`` goes to ``out`` at
    ``positions[i]`` (``run_dst`` is now the place in the dense record, ``run_src``
    in the stream's record). Bytes ``zero_off[z] .. + zero_len[z]`` of each dense
    record are the widening of a narrow field and must be zero. Returns -1, or the
    first record whose value does not fit its field."""
    nruns = run_src.shape[0]
    nzero = zero_off.shape[0]
    src = dense.ctypes.data
    dst = out.ctypes.data
    for i in range(positions.shape[0]):
        d = i * itemsize
        for z in range(nzero):
            for k in range(zero_len[z]):
                if dense[d + zero_off[z] + k] != 0:
                    return i
        p = positions[i]
        for r in range(nruns):
            _memcpy(dst + p + run_src[r], src + d + run_dst[r], run_len[r])
    return -1


@_jit
def scatter_tails(offsets, data, positions, starts, out):
    """Tail ``i`` (``data[offsets[i]:offsets[i+1]]``) goes to ``positions[i] + starts[i]``."""
    src = data.ctypes.data
    dst = out.ctypes.data
    for i in range(positions.shape[0]):
        a = offsets[i]
        _memcpy(dst + positions[i] + starts[i], src + a, offsets[i + 1] - a)


@_jit
def put_fields(out, positions, at, size, big, values):
    """Write ``values[i]`` as a ``size``-byte unsigned integer at ``positions[i] + at``."""
    for i in range(positions.shape[0]):
        put_uint(out, positions[i] + at, size, big, values[i])


# ------------------------------------------------ the transpose, reading through an index


@_jit
def _copy_run(dst, src, n):
    """Copy ``n`` (>= 1) bytes with as few loads and stores as the width allows: words,
    the last one overlapping the one before it rather than a loop of single bytes.
    Nothing outside ``dst .. dst + n`` is written."""
    if n >= 8:
        i = 0
        while i + 8 < n:
            store64(dst + i, load64(src + i))
            i += 8
        store64(dst + n - 8, load64(src + n - 8))
    elif n >= 4:
        store32(dst, load32(src))
        store32(dst + n - 4, load32(src + n - 4))
    elif n >= 2:
        store16(dst, load16(src))
        store16(dst + n - 2, load16(src + n - 2))
    elif n == 1:
        store8(dst, load8(src))


@_jit
def _gather_rows(base, offsets, b0, b1, run_src, run_dst, run_len, offset_at, rows, itemsize):
    """Records ``offsets[b0:b1]`` (byte offsets from ``base``) into ``rows`` (address),
    packed at ``itemsize`` bytes: the runs of each, and its offset (int64) at
    ``offset_at`` when that is >= 0. Bytes no run writes are left as they are."""
    nruns = run_src.shape[0]
    last = 0  # the last byte any run reads, from the record's start
    for r in range(nruns):
        last = max(last, run_src[r] + run_len[r] - 1)
    ahead = min(b1 + PREFETCH_ROWS, offsets.shape[0])
    for i in range(b0, min(b0 + PREFETCH_ROWS, ahead)):
        prefetch(base + offsets[i])
        prefetch(base + offsets[i] + last)
    for i in range(b0, b1):
        if i + PREFETCH_ROWS < ahead:  # records are scattered: the hardware does not foresee them
            prefetch(base + offsets[i + PREFETCH_ROWS])
            prefetch(base + offsets[i + PREFETCH_ROWS] + last)
        dst = rows + (i - b0) * itemsize
        src = base + offsets[i]
        for r in range(nruns):
            _copy_run(dst + run_dst[r], src + run_src[r], run_len[r])
        if offset_at >= 0:
            store64(dst + offset_at, offsets[i])


@_jit
def _first_nul_rows(rows, itemsize, n, nul_at, nul_len):
    """The first of ``n`` packed rows at ``rows`` with a zero byte in one of the byte
    ranges ``nul_at[f] .. + nul_len[f]``, or -1."""
    for i in range(n):
        row = rows + i * itemsize
        for f in range(nul_at.shape[0]):
            for k in range(nul_len[f]):
                if load8(row + nul_at[f] + k) == 0:
                    return i
    return -1


@_jit
def _forward_rows_at(buf, itemsize, r0, r1, offsets, run_src, run_dst, run_len, offset_at, nul_at, nul_len, ops,
                     offs, stream, err, stop):
    """:func:`kernels.cpu._forward_rows` for records found through ``offsets`` (byte
    offsets into ``buf``) instead of at ``src + row * stride``: each block of rows is
    gathered (by the runs of the record's plan) into a packed row buffer that stays in
    cache, checked for NULs in its text fields, and goes through the same per-op block
    kernel as contiguous records. No dense copy of the records is made."""
    block = max(ROW_ALIGN, (BLOCK_BYTES // itemsize) // ROW_ALIGN * ROW_ALIGN)
    at, size = _stage_plan(ops, min(block, r1 - r0))
    stage = np.empty(size if stream else 0, dtype=np.uint8)
    rows = np.zeros(max(min(block, r1 - r0), 1) * itemsize, dtype=np.uint8)  # the bytes no run writes stay 0
    _forward_blocks_at(buf, itemsize, r0, r1, offsets, run_src, run_dst, run_len, offset_at, nul_at, nul_len, ops,
                       offs, block, stream, at, stage, rows, ops.copy(), err, stop)


@_jit
def _forward_blocks_at(buf, itemsize, r0, r1, offsets, run_src, run_dst, run_len, offset_at, nul_at, nul_len, ops,
                       offs, block, stream, at, stage, rows, staged, err, stop):
    base = stage.ctypes.data
    src, packed = buf.ctypes.data, rows.ctypes.data
    b0 = r0
    while b0 < r1:
        if stop[0] != 0:
            break
        b1 = min(b0 + block, r1)
        _gather_rows(src, offsets, b0, b1, run_src, run_dst, run_len, offset_at, packed, itemsize)
        if nul_at.shape[0] > 0:
            bad = _first_nul_rows(packed, itemsize, b1 - b0, nul_at, nul_len)
            if bad >= 0:
                err[0], err[1], err[2] = b0 + bad, -1, E_TEXT_NUL
                break
        if stream:
            for j in range(ops.shape[0]):
                w, c = _value_width(ops[j]), ops[j, COUNT]
                if at[j, 0] >= 0:
                    staged[j, DATA] = base + at[j, 0] - (b0 * c * w if w else b0 * c // 8)
                if at[j, 1] >= 0:
                    staged[j, VALID] = base + at[j, 1] - b0 * c // 8
        # row r of this block is at packed + (r - b0) * itemsize
        if _forward_block(packed - b0 * itemsize, itemsize, r0, b0, b1, staged, offs, err) != 0:
            break
        if stream:
            for j in range(ops.shape[0]):
                w, c = _value_width(ops[j]), ops[j, COUNT]
                if at[j, 0] >= 0:
                    _unstage(ops[j, DATA], base + at[j, 0], b0 * c, b1 * c, w)
                if at[j, 1] >= 0:
                    _unstage(ops[j, VALID], base + at[j, 1], b0 * c, b1 * c, 0)
        b0 = b1
    if stream:
        stream_fence()


def aos_to_soa_at(buf, offsets, itemsize, runs, offset_at, nul, ops, offs, *, threads=None, owners=None):
    """:func:`kernels.cpu.aos_to_soa` of the records at ``buf[offsets[i]:]`` (uint8
    ``buf``, int64 ``offsets``), each read by ``runs`` (``(k, 3)`` int64: source offset
    in the record, destination in the packed record of ``itemsize`` bytes, length) with
    its offset stored at ``offset_at`` (-1: not stored); ``nul`` (``(m, 2)`` int64:
    start, length in the packed record) are text fields that must hold no zero byte.

    The caller has checked that every run of every record lies inside ``buf``. Chunks
    of the index go to the kernels' thread pool. Returns ``None`` or the first fault
    ``(row, op, code)``: ``(row, -1, E_TEXT_NUL)`` for a NUL byte in a text field.
    """
    n = offsets.shape[0]
    starts = cpu._chunk_starts(n, itemsize, threads)
    stream = n * itemsize >= STREAM_BYTES and itemsize <= STAGE_RECORD_MAX
    args = (buf, itemsize, offsets, runs[:, 0].copy(), runs[:, 1].copy(), runs[:, 2].copy(), offset_at,
            nul[:, 0].copy(), nul[:, 1].copy(), ops, offs, stream)
    fault = cpu._run_chunks(_forward_rows_at, starts, args, (owners, buf, offsets))
    if fault is None:
        for j in range(ops.shape[0]):
            if ops[j, KIND] in (K_CSTR, K_UTF32):
                if n:
                    cpu._compact_strings(ops[j], starts)
                else:  # no row wrote it: an empty column's one offset is 0
                    cpu._set_offset(ops[j, OFFSETS], 0, ops[j, P2], 0)
    return fault


# --------------------------------------------- the way back, writing through an index


@_jit
def _put_word(addr, size, big, value):
    """``value`` as an unsigned integer of ``size`` (1..8) bytes at ``addr``."""
    if size == 1:
        store8(addr, value)
    elif size == 2:
        store16(addr, bswap16(value) if big else value)
    elif size == 4:
        store32(addr, bswap32(value) if big else value)
    elif size == 8:
        store64(addr, bswap64(value) if big else value)
    else:
        v = np.uint64(value)
        for k in range(size):
            shift = np.uint64(8 * (size - 1 - k) if big else 8 * k)
            store8(addr + k, (v >> shift) & np.uint64(0xFF))


@_jit
def _scatter_rows(rows, itemsize, b0, b1, positions, run_src, run_dst, run_len, zero_off, zero_len, frame, lengths,
                  out):
    """Packed rows ``b0..b1`` (at ``rows``) to ``out + positions[i]`` by the runs, with
    the length field (``lengths[i]``) and the tag that ``frame`` describes: ``(length
    at, size, big, tag at, size, big, tag value)``, a size of 0 for none. Returns -1,
    or the first row with a non-zero byte in a widened field's extra bytes."""
    nruns, nzero = run_src.shape[0], zero_off.shape[0]
    len_at, len_size, len_big = frame[0], frame[1], frame[2] != 0
    tag_at, tag_size, tag_big, tag = frame[3], frame[4], frame[5] != 0, np.uint64(frame[6])
    for i in range(b0, b1):
        src = rows + (i - b0) * itemsize
        for z in range(nzero):
            for k in range(zero_len[z]):
                if load8(src + zero_off[z] + k) != 0:
                    return i
        dst = out + positions[i]
        for r in range(nruns):
            _copy_run(dst + run_src[r], src + run_dst[r], run_len[r])
        if len_size > 0:
            _put_word(dst + len_at, len_size, len_big, np.uint64(lengths[i]))
        if tag_size > 0:
            _put_word(dst + tag_at, tag_size, tag_big, tag)
    return -1


@_jit
def _reverse_rows_at(out, itemsize, r0, r1, positions, run_src, run_dst, run_len, zero_off, zero_len, frame, lengths,
                     ops, offs, err, stop):
    """:func:`kernels.cpu._reverse_rows` for records that go to ``out`` at
    ``positions`` (byte offsets) instead of one after another: each block of rows is
    assembled from the columns in a packed row buffer that stays in cache, then its
    fields, length and tag are stored at their places. No dense copy is made."""
    block = max(ROW_ALIGN, (BLOCK_BYTES // itemsize) // ROW_ALIGN * ROW_ALIGN)
    rows = np.zeros(max(min(block, r1 - r0), 1) * itemsize, dtype=np.uint8)  # padding stays 0 (see _reverse_rows)
    _reverse_blocks_at(out, itemsize, r0, r1, positions, run_src, run_dst, run_len, zero_off, zero_len, frame,
                       lengths, ops, offs, block, rows, err, stop)


@_jit
def _reverse_blocks_at(out, itemsize, r0, r1, positions, run_src, run_dst, run_len, zero_off, zero_len, frame,
                       lengths, ops, offs, block, rows, err, stop):
    packed, dst = rows.ctypes.data, out.ctypes.data
    b0 = r0
    while b0 < r1:
        if stop[0] != 0:
            break
        b1 = min(b0 + block, r1)
        _prefetch_columns(ops, b1, min(b1 + block, r1))
        if _reverse_block(packed - b0 * itemsize, itemsize, b0, b1, ops, offs, err) != 0:
            break
        bad = _scatter_rows(packed, itemsize, b0, b1, positions, run_src, run_dst, run_len, zero_off, zero_len,
                            frame, lengths, dst)
        if bad >= 0:
            err[0], err[1], err[2] = bad, -1, E_WIDE
            break
        b0 = b1


def soa_to_aos_at(out, positions, itemsize, runs, zeros, frame, lengths, ops, offs, *, threads=None, owners=None):
    """The mirror of :func:`aos_to_soa_at`: record ``i``, assembled from the columns
    (``ops``) as a packed record of ``itemsize`` bytes, goes to ``out`` (uint8) at
    ``positions[i]`` by ``runs`` (``(k, 3)``: place in the stream's record, in the packed
    one, length); ``zeros`` (``(m, 2)``: start, length in the packed record) are the
    extra bytes of widened fields, which must be zero; ``frame`` (7 int64, see
    :func:`_scatter_rows`) the length field, with ``lengths[i]`` its value, and the tag.

    The caller has checked that every record lies inside ``out``. Returns ``None`` or
    the first fault ``(row, op, code)``; ``(row, -1, E_WIDE)`` for a value too wide.
    """
    n = positions.shape[0]
    starts = cpu._chunk_starts(n, itemsize, threads)
    args = (out, itemsize, positions, runs[:, 0].copy(), runs[:, 1].copy(), runs[:, 2].copy(), zeros[:, 0].copy(),
            zeros[:, 1].copy(), frame, lengths, ops, offs)
    return cpu._run_chunks(_reverse_rows_at, starts, args, (owners, out, positions, lengths))
