"""Record streams on the CPU: the boundary scan, and gather/scatter by an index of offsets.

A framed stream (a length field in every record, or a fixed size) is walked once by
:func:`scan`: it finds each record's byte offset, length and type (the tag field looked
up in a sorted table), checking every length against the bytes left before it moves on,
so a damaged stream stops with a status and the offset, never a loop or a read past
the end. Each type's records are then transposed straight from the stream through
their offsets by :func:`aos_to_soa_at` (kernels/cpu/gather.py: blocks of rows gathered
in cache, no dense copy) and written back by :func:`soa_to_aos_at`; :func:`gather`
(a dense copy) is left for one-row tables and error reports.
:func:`gather_tails` copies the bytes beyond the fixed part into one binary column;
:func:`scatter_tails` is its way back; :func:`tail_views` instead describes each tail where
it lies, as the 16-byte views of an Arrow ``binary_view`` column (no byte copied).

All functions are compiled once and cached on disk by content (kernels/_cache.py); they
take only NumPy arrays and integers, and import nothing of ``layouts``.
"""

import numpy as np

from ._cache import jit
from ._memory import bswap16, bswap32, load8, load16, load32, load64, prefetch, store8, store32, store64, stream_fence
from .cpu.gather import (
    E_LENGTH,
    E_TAG,
    E_TEXT_NUL,
    E_WIDE,
    WINDOW_BYTES,
    _type_rows,
    aos_to_soa_at,
    aos_to_soa_types,
    soa_to_aos_at,
    types_plan,
)  # the transpose through an index
from .cpu.host import aos_to_soa  # fixed-size records one after another: the strided transpose
from .cpu.memory import _memcpy, _stream_copy  # copies of raw bytes, 8 at a time; by streaming stores
from .plan import NCOLS
from .threads import chunk_starts, run_chunks

__all__ = [
    "scan",
    "scan_grouped",
    "group",
    "gather",
    "gather_all",
    "aos_to_soa",
    "aos_to_soa_at",
    "aos_to_soa_types",
    "place_grouped",
    "soa_to_aos_at",
    "E_TEXT_NUL",
    "E_WIDE",
    "E_LENGTH",
    "E_TAG",
    "first_nul",
    "tiles",
    "gather_tails",
    "tail_views",
    "scatter",
    "scatter_tails",
    "put_uint",
    "arith",
    "arith_threaded",
    "OK",
    "FULL",
    "SHORT_PREFIX",
    "PAST_END",
    "TOO_SMALL",
    "UNKNOWN_TAG",
    "SHORT_RECORD",
]

_jit = jit(nogil=True)  # numba.njit, cached on disk by the kernels' content (kernels/_cache.py)

# scan statuses
OK = 0
FULL = 1  # the output arrays are full: call again from ``pos`` with room
SHORT_PREFIX = 2  # fewer bytes left than the length/tag fields need (a truncated record)
PAST_END = 3  # the length runs past the end of the section
TOO_SMALL = 4  # the length is smaller than the fields that framing reads (zero included)
UNKNOWN_TAG = 5  # a tag value with no record type (unknown="error")
SHORT_RECORD = 6  # a record shorter than its type's fields


@_jit
def _get_uint(buf, pos, size, big):
    """The unsigned integer of ``size`` (1..8) bytes at ``buf[pos]`` (the caller has
    checked that they lie inside ``buf``): the common widths by one load and a byte
    swap, the scan reading one or two of them per record."""
    addr = buf.ctypes.data + pos
    if size == 1:
        return np.uint64(load8(addr))
    if size == 2:
        v = load16(addr)
        return np.uint64(bswap16(v) if big else v)
    if size == 4:
        w = load32(addr)
        return np.uint64(bswap32(w) if big else w)
    v = np.uint64(0)
    if big:
        for k in range(size):
            v = (v << np.uint64(8)) | np.uint64(load8(addr + k))
    else:
        for k in range(size - 1, -1, -1):
            v = (v << np.uint64(8)) | np.uint64(load8(addr + k))
    return v


@_jit
def arith(out, start, step):
    """``out[i] = start + i * step``: the offsets of fixed-size records one after another,
    written where they are to stay (no temporary array)."""
    for i in range(out.shape[0]):
        out[i] = start + i * step


@_jit
def _arith_rows(out, start, r0, r1, step, err, stop):
    """Rows ``r0..r1`` of :func:`arith_threaded` (one chunk of a call), through a view
    that starts at ``r0``: its index counts from 0, which LLVM vectorizes (``out[i]``
    from ``r0`` it did not, at 2.5 times the time)."""
    part = out[r0:r1]
    first = start + r0 * step
    for i in range(part.shape[0]):
        part[i] = first + i * step


def arith_threaded(out, start, step, *, threads=None):
    """:func:`arith` in chunks on the kernels' thread pool (each thread writes, and first
    touches, its own part of ``out``)."""
    n = out.shape[0]
    if n:
        run_chunks(_arith_rows, chunk_starts(n, 8, threads), (out, np.int64(start), np.int64(step)), (out,))


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


SCAN, COUNT, PLACE, PROBE = 0, 1, 2, 3  # what _walk does with each record


@_jit
def _walk(mode, buf, pos, end, count, fr, per_type, stop_at, offsets, lengths, types):
    """The common case of :func:`scan` (fixed sizes, or a 1-, 2- or 4-byte length
    counted in bytes; no tag, or a 1- or 2-byte one looked up in ``direct``), the framing
    ``fr`` being ``(len_off, len_size, len_big, base, min_len, tag_off, tag_size, tag_big,
    direct, type_min, type_max)``: records
    walked with one load per field, for as long as every one is whole, of a known type
    and at least its fields (and at most ``type_max[t]`` bytes). It stops, returning
    ``(pos, count)``, at the first record that is anything else, which :func:`scan`
    then takes as it takes every record: the statuses are its own.

    ``mode``: ``SCAN`` stores each record's offset, length and type at ``count`` (while
    there is room) and raises ``per_type[t]`` to its longest record; ``COUNT`` counts
    each type's records in ``per_type``; ``PLACE`` stores each record's offset at
    ``offsets[per_type[t]]`` and moves that on, stopping at ``stop_at[t]``; ``PROBE``
    only walks, at most ``len(offsets)`` records."""
    len_off, len_size, len_big, base, min_len, tag_off, tag_size, tag_big, direct, type_min, type_max = fr
    cap = offsets.shape[0] if mode == SCAN or mode == PROBE else np.int64(2**62)
    addr = buf.ctypes.data
    if (mode == COUNT or mode == PLACE) and len_size == 2 and len_big and tag_size == 1:
        pos, count = _walk_be16_tag8(mode == PLACE, addr, pos, end, count, fr, per_type, stop_at, offsets, end)
    need = len_off + len_size
    while pos < end and count < cap:
        left = end - pos
        if left < need:
            break
        at = addr + pos + len_off
        if len_size == 0:  # fixed-size records
            n = base
        elif len_size == 2:
            v = load16(at)
            n = np.int64(bswap16(v) if len_big else v) + base
        elif len_size == 1:
            n = np.int64(load8(at)) + base
        else:
            w = load32(at)
            n = np.int64(bswap32(w) if len_big else w) + base
        if n > left or n < min_len or n <= 0:
            break
        t = 0
        if tag_size == 1:
            t = direct[load8(addr + pos + tag_off)]
        elif tag_size == 2:
            k = load16(addr + pos + tag_off)
            t = direct[bswap16(k) if tag_big else k]
        if not _known(t, n, type_min, type_max):
            break
        if mode == SCAN:
            offsets[count] = pos
            lengths[count] = n
            types[count] = t
            if n > per_type[t]:
                per_type[t] = n
        elif (mode == COUNT or mode == PLACE) and not _counted(mode == PLACE, t, pos, per_type, stop_at, offsets):
            break
        count += 1
        pos += n
    return pos, count


SCAN_AHEAD = 16384  # bytes of the stream asked for ahead of the record being read (_walk_long)


@_jit
def _walk_long(buf, pos, end, count, len_off, len_big, base, min_len, type_min0, offsets, lengths, types, longest):
    """:func:`scan`'s walk of untagged records framed by a 4-byte length in bytes (pcap's
    packet headers): each record's place depends on the length before it, so a walk over
    long records waits for memory at every one (the hardware sees no pattern in the
    addresses). Here the stream's lines ``SCAN_AHEAD`` bytes ahead are asked for as it
    goes, so the reads overlap. It stops, as :func:`_walk` does, at the first record that
    is not whole or is shorter than its fields, which :func:`scan` then takes (with its
    own status)."""
    addr = buf.ctypes.data
    cap = offsets.shape[0]
    last = end - (len_off + 4)  # the last record start whose length field is inside
    ahead = pos - pos % 64
    while pos <= last and count < cap:
        stop = min(pos + SCAN_AHEAD, end)
        while ahead < stop:
            prefetch(addr + ahead)
            ahead += 64
        w = load32(addr + pos + len_off)
        n = np.int64(bswap32(w) if len_big else w) + base
        if n > end - pos or n < min_len or n <= 0 or n < type_min0:
            break
        offsets[count] = pos
        lengths[count] = n
        types[count] = 0
        if n > longest[0]:
            longest[0] = n
        count += 1
        pos += n
    return pos, count


@_jit
def _walk_be16_tag8(place, addr, pos, end, count, fr, per_type, stop_at, offsets, until):
    """:func:`_walk`'s ``COUNT`` (``place`` False) or ``PLACE`` of the commonest framing,
    a 2-byte big-endian length and a 1-byte tag (ITCH), with no branch on the framing
    in the loop, of the records that start before ``until`` (each checked against the
    part's ``end``). It stops, as ``_walk`` would, at the first record that is anything
    else, and ``_walk`` goes on from there (and stops at it with its own status)."""
    len_off, base, min_len, tag_off, direct, type_min, type_max = fr[0], fr[3], fr[4], fr[5], fr[8], fr[9], fr[10]
    last = end - (len_off + 2)  # the last record start whose length field is inside
    while pos <= last and pos < until:
        n = np.int64(bswap16(load16(addr + pos + len_off))) + base
        if n > end - pos or n < min_len or n <= 0:
            break
        t = direct[load8(addr + pos + tag_off)]
        if not _known(t, n, type_min, type_max) or not _counted(place, t, pos, per_type, stop_at, offsets):
            break
        count += 1
        pos += n
    return pos, count


@_jit
def _known(t, n, type_min, type_max):
    """Whether type ``t`` (-1: an unknown tag) is a type and ``n`` bytes one of its sizes."""
    return t >= 0 and t < type_min.shape[0] and n >= type_min[t] and n <= type_max[t]


@_jit
def _counted(place, t, pos, per_type, stop_at, offsets):
    """``COUNT`` (``place`` False) or ``PLACE`` the record at ``pos`` of type ``t``; False
    where its type's places are all taken (the bytes changed since they were counted)."""
    j = per_type[t]
    if place:
        if j >= stop_at[t]:
            return False
        offsets[j] = pos
    per_type[t] = j + 1
    return True


@_jit
def _plain(len_size, unit, tag_size, direct):
    """Whether :func:`_walk` takes a section of these framing parameters."""
    if not (len_size == 0 or len_size == 1 or len_size == 2 or len_size == 4) or unit != 1:
        return False
    return tag_size == 0 or (tag_size <= 2 and direct.shape[0] == 1 << (8 * tag_size))


@_jit
def _resync(buf, pos, end, fr, k):
    """The first byte from ``pos`` (within 64 KiB) where ``k`` records in a row (or all
    up to ``end``) are whole, known and exactly their types' sizes: most likely a record
    boundary, which the walk from before it confirms or refutes (-1: none found)."""
    probe = np.zeros(k, np.int64)
    none = np.zeros(0, np.int64)
    counts = np.zeros(fr[9].shape[0], np.int64)
    for p in range(pos, min(end, pos + 65536)):
        q, c = _walk(PROBE, buf, p, end, 0, fr, counts, none, probe, none, np.zeros(0, np.int32))
        if c == k or q == end:
            return p
    return -1


LANES = 4  # parts of a section one thread walks side by side (scan_grouped)


@_jit
def _lanes_be16_tag8(place, addr, i, parts, until, fr, per_type, stop_at, offsets, reached):
    """Parts ``i .. i + LANES`` of :func:`_walk_lanes` walked in step from where their rows
    of ``reached`` say (position, records walked), one record of each per round
    (:func:`_walk_be16_tag8`'s checks and counting, :func:`_lane`), for as long as every
    lane's next record starts before its ``until`` and goes on: each record's place
    depends on the length before it, so one walk waits for every load; independent walks
    overlap their waits. Where each stopped goes back to ``reached`` (the caller's walk
    goes on from there). Written out for ``LANES`` = 4 with each lane's place in a
    variable of its own, and the arrays passed to :func:`_lane` as addresses: lanes kept
    in an array went through memory at every record (a store, then a load, on the
    chain), and were slower than one walk. Arrays laid out otherwise than ``_lane``
    reads them (int32 by tag; int64 by type, rows of the same length) leave all of it
    to the caller's walk."""
    len_off, base, min_len, tag_off, ntypes = fr[0], fr[3], fr[4], fr[5], fr[9].shape[0]
    if (
        fr[8].strides[0] != 4
        or fr[9].strides[0] != 8
        or fr[10].strides[0] != 8
        or per_type.strides[1] != 8
        or stop_at.strides[1] != 8
        or stop_at.strides[0] != per_type.strides[0]
        or offsets.strides[0] != 8
    ):
        return
    direct, tmin, tmax = fr[8].ctypes.data, fr[9].ctypes.data, fr[10].ctypes.data
    row = per_type.strides[0]
    cur, lim, out = per_type.ctypes.data + row * i, stop_at.ctypes.data + row * i, offsets.ctypes.data
    p0, p1, p2, p3 = reached[i, 0], reached[i + 1, 0], reached[i + 2, 0], reached[i + 3, 0]
    w0, w1, w2, w3 = reached[i, 1], reached[i + 1, 1], reached[i + 2, 1], reached[i + 3, 1]
    e0, e1, e2, e3 = parts[i + 1], parts[i + 2], parts[i + 3], parts[i + 4]
    u0, u1, u2, u3 = until[0], until[1], until[2], until[3]
    fixed = (addr, len_off, base, min_len, tag_off, direct, tmin, tmax, ntypes, out)
    while True:
        q = _lane(place, p0, e0, u0, fixed, cur, lim)
        if q < 0:
            break
        p0, w0 = q, w0 + 1
        q = _lane(place, p1, e1, u1, fixed, cur + row, lim + row)
        if q < 0:
            break
        p1, w1 = q, w1 + 1
        q = _lane(place, p2, e2, u2, fixed, cur + 2 * row, lim + 2 * row)
        if q < 0:
            break
        p2, w2 = q, w2 + 1
        q = _lane(place, p3, e3, u3, fixed, cur + 3 * row, lim + 3 * row)
        if q < 0:
            break
        p3, w3 = q, w3 + 1
    reached[i, 0], reached[i, 1] = p0, w0
    reached[i + 1, 0], reached[i + 1, 1] = p1, w1
    reached[i + 2, 0], reached[i + 2, 1] = p2, w2
    reached[i + 3, 0], reached[i + 3, 1] = p3, w3


@_jit
def _lane(place, p, e, u, fixed, cur, lim):
    """One record of a lane of :func:`_lanes_be16_tag8`: the record at ``p`` (its part
    ending at ``e``; none from ``u`` on) counted, or placed, in the lane's row of cursors at address ``cur``
    (and of ``stop_at`` at ``lim``); returns where the next starts, or -1 where this one
    stops the walk (:func:`_walk_be16_tag8`'s checks). Addresses only, no arrays: no
    reference counted per call."""
    addr, len_off, base, min_len, tag_off, direct, tmin, tmax, ntypes, out = fixed
    if p >= u or p > e - (len_off + 2):
        return -1
    n = np.int64(bswap16(load16(addr + p + len_off))) + base
    if n > e - p or n < min_len or n <= 0:
        return -1
    t = np.int64(np.int32(load32(direct + 4 * np.int64(load8(addr + p + tag_off)))))
    if t < 0 or t >= ntypes or n < np.int64(load64(tmin + 8 * t)) or n > np.int64(load64(tmax + 8 * t)):
        return -1
    j = np.int64(load64(cur + 8 * t))
    if place:
        if j >= np.int64(load64(lim + 8 * t)):
            return -1
        store64(out + 8 * j, p)
    store64(cur + 8 * t, j + 1)
    return p + n


@_jit
def _walk_lanes(mode, buf, i0, i1, fr, parts, per_type, stop_at, offsets, reached, err, stop):
    """Parts ``i0 .. i1`` of :func:`scan_grouped`'s walk (bytes ``parts[i] .. parts[i + 1]``,
    each from a record boundary) on one of the kernels' threads: ``COUNT`` into part
    ``i``'s row of ``per_type``, or ``PLACE`` from its row of cursors up to its row of
    ``stop_at``; where each part stopped and how many records it walked go to its row of
    ``reached``. Four parts of the commonest framing (ITCH's) are walked side by side
    (:func:`_lanes_be16_tag8`), then each on its own (:func:`_walk`) from where it got."""
    none = np.zeros(0, np.int64)
    for i in range(i0, i1):
        reached[i, 0], reached[i, 1] = parts[i], 0
    if i1 - i0 == LANES and fr[1] == 2 and fr[2] and fr[6] == 1 and (mode == COUNT or mode == PLACE):
        until = parts[i0 + 1 : i1 + 1].copy()
        _lanes_be16_tag8(mode == PLACE, buf.ctypes.data, i0, parts, until, fr, per_type, stop_at, offsets, reached)
    for i in range(i0, i1):
        pos, count = _walk(
            mode,
            buf,
            reached[i, 0],
            parts[i + 1],
            reached[i, 1],
            fr,
            per_type[i],
            stop_at[i],
            offsets,
            none,
            np.zeros(0, np.int32),
        )
        reached[i, 0], reached[i, 1] = pos, count


SPLIT_BYTES = 1 << 22  # a section at least this long is walked in parts (LANES per thread)


def scan_grouped(buf, start, end, fr, unit, *, threads=None, place=True, empty=np.empty):
    """The index of a section whose records are all whole, of a known type and exactly
    ``type_min[t] .. type_max[t]`` bytes, already grouped by type (what :func:`scan` then
    :func:`group` give, in stream order within each type): two walks, one counting each
    type's records, one storing each offset at its place, and no other index. ``fr``:
    the framing as :func:`_walk` takes it; ``unit``: the length field's unit. Returns
    ``(offsets, bounds)`` as :func:`group` does, or None where any record is otherwise
    (or the bytes changed between the walks): the caller then scans the usual way,
    which finds and names what it is.

    A long section is walked in ``LANES`` parts per thread, each thread's side by side
    (:func:`_walk_lanes`): every part after the first from the first byte after its
    share's start where 16 records in a row fit (:func:`_resync`); each part's walk must
    end exactly where the next starts, else the section is walked again as one part.

    ``place`` False, for the commonest framing (ITCH's: :func:`deferrable`): only the
    first walk, and :class:`Counted` back instead of the offsets; :func:`place_grouped`
    then walks again, converting the records as it places them.

    ``empty(n, dtype)`` makes the offsets' array (the caller's allocator: its memory
    becomes the types' ``_offset`` columns)."""
    if not _plain(fr[1], unit, fr[6], fr[8]):
        return None
    from .threads import default_threads

    tries = [np.array([start, end], np.int64)]
    k = LANES * (default_threads() if threads is None else threads)
    if end - start >= SPLIT_BYTES and k > 1:
        cuts = [start]
        for j in range(1, k):
            b = _resync(buf, start + (end - start) * j // k, end, fr, 16)
            if b <= cuts[-1]:
                break
            cuts.append(b)
        if len(cuts) == k:
            tries.insert(0, np.array(cuts + [end], np.int64))
    for parts in tries:
        got = _grouped(buf, parts, fr, place or not deferrable(fr, unit), empty)
        if got is not None or len(parts) == 2:
            return got
    return None


def deferrable(fr, unit):
    """Whether :func:`place_grouped` walks sections of this framing (a 2-byte big-endian
    length in bytes and a 1-byte tag: ITCH's)."""
    return fr[1] == 2 and bool(fr[2]) and unit == 1 and fr[6] == 1 and fr[8].shape[0] == 256


class Counted:
    """A section counted by :func:`scan_grouped` (``place=False``), its records not yet
    placed: ``parts`` (the walk's parts, record boundaries), ``lanes`` (the parts of each
    thread), ``cursor`` and ``stop_at`` (part, type: the places of its records of that
    type in ``offsets``), ``offsets`` (to be filled by :func:`place_grouped`), ``bounds``."""

    __slots__ = ("parts", "lanes", "cursor", "stop_at", "offsets", "bounds", "counts")

    def __init__(self, parts, lanes, cursor, stop_at, offsets, bounds, counts):
        self.parts, self.lanes, self.cursor, self.stop_at = parts, lanes, cursor, stop_at
        self.offsets, self.bounds, self.counts = offsets, bounds, counts


def _grouped(buf, parts, fr, place=True, empty=np.empty):
    """:func:`scan_grouped` in ``len(parts) - 1`` parts (``LANES`` a thread), or None."""
    k, ntypes = parts.shape[0] - 1, fr[9].shape[0]
    counts = np.zeros((k, ntypes), np.int64)
    reached = np.zeros((k, 2), np.int64)
    none = np.zeros(0, np.int64)
    lanes = np.array(list(range(0, k, LANES)) + [k], np.int64)  # the parts of each thread
    run_chunks(_walk_lanes, lanes, (COUNT, buf, fr, parts, counts, counts, none, reached), (buf,))
    if (reached[:, 0] != parts[1:]).any():
        return None
    count = int(reached[:, 1].sum())
    bounds = np.zeros(ntypes + 3, np.int64)
    np.cumsum(counts.sum(axis=0), out=bounds[2 : ntypes + 2])
    bounds[ntypes + 2] = count
    cursor = bounds[1 : ntypes + 1] + np.cumsum(counts, axis=0) - counts  # (part, type): its first place
    stop_at = cursor + counts
    offsets = empty(count, np.int64)
    if not place:
        return Counted(parts, lanes, cursor, stop_at, offsets, bounds, counts)
    reached[:] = 0
    run_chunks(_walk_lanes, lanes, (PLACE, buf, fr, parts, cursor, stop_at, offsets, reached), (buf, offsets))
    if (reached[:, 0] != parts[1:]).any() or (reached[:, 1] != counts.sum(axis=1)).any():
        return None
    return offsets, bounds


@_jit
def _place_lanes(buf, offsets, i0, i1, parts, fr, cursor, stop_at, kinds, plan, window, redo, reached, err, stop):
    """Parts ``i0 .. i1`` of a :class:`Counted` section on one of the kernels' threads, a
    window of ``window`` bytes at a time: the window's records placed (their offsets
    stored at their places, :func:`_walk_be16_tag8`), then those of each type ``t`` with
    ``kinds[t] >= 0`` converted by type ``kinds[t]`` of ``plan`` (:func:`_type_rows`)
    while the window is in cache: the stream is read from memory once for the second walk
    and every transpose. ``LANES`` parts are placed side by side first
    (:func:`_place_side_by_side`); each part then goes on alone from where that left it.
    Where each part stopped and how many records it placed go to its row of ``reached``."""
    addr = buf.ctypes.data
    ntypes = cursor.shape[1]
    for i in range(i0, i1):
        reached[i, 0], reached[i, 1] = parts[i], 0
    if i1 - i0 == LANES:
        _place_side_by_side(addr, offsets, i0, parts, fr, cursor, stop_at, kinds, plan, window, redo, reached, stop)
    before = np.empty(ntypes, np.int64)
    for i in range(i0, i1):
        pos, e, walked = reached[i, 0], parts[i + 1], reached[i, 1]
        row, lim = cursor[i], stop_at[i]
        while pos < e and stop[0] == 0:
            w1 = min(pos + window, e)
            for t in range(ntypes):
                before[t] = row[t]
            q, k = _walk_be16_tag8(True, addr, pos, e, 0, fr, row, lim, offsets, w1)
            walked += k
            for t in range(ntypes):
                if kinds[t] >= 0 and row[t] > before[t]:
                    _type_rows(addr, offsets, kinds[t], before[t], row[t], plan, redo)
            pos = q
            if q < w1:
                break
        reached[i, 0], reached[i, 1] = pos, walked


@_jit
def _place_side_by_side(addr, offsets, i, parts, fr, cursor, stop_at, kinds, plan, window, redo, reached, stop):
    """Parts ``i .. i + LANES`` of :func:`_place_lanes` placed side by side, from and to
    their rows of ``reached``: in each round ``window / LANES`` bytes of every part
    walked in step (:func:`_lanes_be16_tag8`, each lane's last records alone), then the
    records of each type placed in every part converted while the round's bytes are in
    cache. Stops at the first record a part cannot place (the caller's walk goes on from
    there, and stops at it again)."""
    ntypes = cursor.shape[1]
    until = np.empty(LANES, np.int64)
    before = np.empty((LANES, ntypes), np.int64)
    step = max(window // LANES, 1)
    going = True
    while going and stop[0] == 0:
        live = False
        for k in range(LANES):
            until[k] = min(reached[i + k, 0] + step, parts[i + k + 1])
            live = live or reached[i + k, 0] < until[k]
            for t in range(ntypes):
                before[k, t] = cursor[i + k, t]
        if not live:
            break
        _lanes_be16_tag8(True, addr, i, parts, until, fr, cursor, stop_at, offsets, reached)
        for k in range(LANES):
            pos = reached[i + k, 0]
            if pos < until[k]:
                q, c = _walk_be16_tag8(
                    True, addr, pos, parts[i + k + 1], 0, fr, cursor[i + k], stop_at[i + k], offsets, until[k]
                )
                reached[i + k, 0], reached[i + k, 1] = q, reached[i + k, 1] + c
                if q < until[k]:
                    going = False
        for k in range(LANES):
            for t in range(ntypes):
                if kinds[t] >= 0 and cursor[i + k, t] > before[k, t]:
                    _type_rows(addr, offsets, kinds[t], before[k, t], cursor[i + k, t], plan, redo)


def place_grouped(buf, counted, fr, items, kinds, *, window=WINDOW_BYTES, owners=None):
    """The second walk of a :class:`Counted` section, each record's offset stored at its
    place in ``counted.offsets``, with the transposes of the types ``items`` describes
    (as :func:`aos_to_soa_types` takes them; ``kinds[k]``: the section's type number of
    ``items[k]``) done window by window as it goes (:func:`_place_lanes`). Returns one
    bool per item (converted, as :func:`aos_to_soa_types`), or None where the walk did
    not find what the count found (the bytes changed between the walks): nothing of it
    may be used, the caller scans the section again the usual way."""
    c = counted
    tag_types = fr[8]  # (tag byte -> type: the walk reads each record's tag, so a type of one value holds it)
    values = [int(v[0]) if len(v) == 1 else -1 for v in (np.flatnonzero(tag_types == t) for t in kinds)]
    which, plan = types_plan(items, (fr[5], values))
    ntypes = c.cursor.shape[1]
    of_type = np.full(ntypes, -1, np.int64)
    for f, k in enumerate(which):
        of_type[kinds[k]] = f
    if plan is None:  # no type to convert here: the walk alone (a plan of no types)
        z, i2 = np.zeros(0, np.int64), np.zeros((0, NCOLS), np.int64)
        plan = (
            np.zeros((0, 2), np.int64),
            i2,
            np.zeros(1, np.int64),
            z,
            np.zeros(0, np.uint64),
            i2,
            np.zeros(1, np.int64),
            z,
            z,
        )
    redo = np.zeros(max(len(which), 1), np.uint8)
    reached = np.zeros((c.parts.shape[0] - 1, 2), np.int64)
    cursor = c.cursor.copy()
    run_chunks(
        _place_lanes,
        c.lanes,
        (buf, c.offsets, c.parts, fr, cursor, c.stop_at, of_type, plan, np.int64(window), redo, reached),
        (owners, buf, c.offsets),
    )
    if (reached[:, 0] != c.parts[1:]).any() or (reached[:, 1] != c.counts.sum(axis=1)).any():
        return None
    done = [False] * len(items)
    for f, k in enumerate(which):
        done[k] = not redo[f]
    return done


@_jit
def scan(
    buf,
    pos,
    end,
    count,
    limit,
    len_off,
    len_size,
    len_big,
    unit,
    base,
    min_len,
    tag_off,
    tag_size,
    tag_big,
    tag_values,
    tag_types,
    direct,
    unknown,
    type_min,
    offsets,
    lengths,
    types,
    longest,
):
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
    (``SHORT_RECORD``) there, before the records after it are cut. ``longest[t]`` is
    raised to the longest record of type ``t`` written (a section without tails whose
    records are no longer than their types' fields needs no lengths after). Returns ``(status, pos, count)``: ``pos`` is where the scan stopped
    (the offending record's offset on an error).
    """
    cap = offsets.shape[0]
    need = len_off + len_size  # to read the length; the tag is checked against the length
    ntypes = tag_values.shape[0]
    if limit < 0 and len_size == 4 and unit == 1 and tag_size == 0 and type_min.shape[0] == 1 == longest.shape[0]:
        pos, count = _walk_long(
            buf, pos, end, count, len_off, len_big, base, min_len, type_min[0], offsets, lengths, types, longest
        )
    if limit < 0 and _plain(len_size, unit, tag_size, direct):
        longer = np.full(type_min.shape[0], np.int64(2**62))  # (no most: the checks after the scan's)
        fr = (len_off, len_size, len_big, base, min_len, tag_off, tag_size, tag_big, direct, type_min, longer)
        pos, count = _walk(SCAN, buf, pos, end, count, fr, longest, longest, offsets, lengths, types)
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
            if room < 0 or value > np.uint64(room if unit == 1 else room // unit):  # (no division per record)
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
        if 0 <= t < longest.shape[0] and n > longest[t]:
            longest[t] = n
        count += 1
        pos += n
    return OK, pos, count


@_jit
def _group_count(types, counts, r0, r1, starts, err, stop):
    """Records ``r0..r1`` (one chunk of :func:`group`) counted by type in their chunk's
    row of ``counts`` (column ``t + 1`` for type ``t``)."""
    row = counts[np.searchsorted(starts, r0)]
    for i in range(r0, r1):
        row[types[i] + 1] += 1


@_jit
def _group_place(types, fill, r0, r1, starts, offsets, lengths, g_offsets, g_lengths, with_lengths, err, stop):
    """Records ``r0..r1`` to their places: the next of their type in their chunk's row of
    ``fill`` (where the chunk's records of each type start); their lengths too with
    ``with_lengths``."""
    row = fill[np.searchsorted(starts, r0)]
    for i in range(r0, r1):
        k = types[i] + 1
        j = row[k]
        g_offsets[j] = offsets[i]
        if with_lengths:
            g_lengths[j] = lengths[i]
        row[k] = j + 1


def group(types, ntypes, offsets, lengths, g_offsets, g_lengths, *, threads=None):
    """Records grouped by type, in stream order within each (a counting sort): type
    ``t`` (-1 for skipped records, which go first) gets ``bounds[t + 1]..bounds[t + 2]``
    of ``g_offsets``/``g_lengths`` (``g_lengths`` None: the offsets only). Returns
    ``bounds`` (``ntypes + 2`` entries + 1).

    Two passes over chunks of the records on the kernels' thread pool: each chunk counts
    its records of each type, then places them after those of the same type in the
    chunks before it (so the order within a type is the stream's)."""
    n = types.shape[0]
    starts = chunk_starts(n, 20, threads)  # (20 bytes of index a record: offset, length, type)
    counts = np.zeros((max(starts.shape[0] - 1, 1), ntypes + 2), np.int64)
    owners = (types, offsets, lengths, g_offsets, g_lengths)
    if n:
        run_chunks(_group_count, starts, (types, counts, starts), owners)
    bounds = np.zeros(ntypes + 3, np.int64)
    np.cumsum(counts.sum(axis=0), out=bounds[1:])
    fill = bounds[:-1] + np.cumsum(counts, axis=0) - counts  # (chunk, type + 1): where its records go
    with_lengths = g_lengths is not None
    if not with_lengths:
        g_lengths = np.empty(0, np.int64)
    if n:
        run_chunks(
            _group_place, starts, (types, fill, starts, offsets, lengths, g_offsets, g_lengths, with_lengths), owners
        )
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
def tiles(keys, sizes, start):
    """Whether pieces ``[keys[i], keys[i] + sizes[i])`` lie one after another from
    ``start`` with no gap or overlap, in some order: then each piece's place is its key
    (a stream written back as it was read), found without sorting. True when every size
    is positive, the keys are distinct, one is ``start``, all lie before ``start + the
    sizes' sum`` (E), and each piece ends at another's key or at E. (Sorted, key ``j``'s
    size is at least the distance to the next key, and those distances add up to the
    sizes' sum: so each is exactly that.) A bit per byte of the range marks the keys."""
    n = keys.shape[0]
    total = np.int64(0)
    for i in range(n):
        if sizes[i] <= 0 or total > (1 << 62):
            return False
        total += sizes[i]
    if n == 0:
        return True
    bits = np.zeros((total >> 6) + 1, np.uint64)
    for i in range(n):
        k = keys[i] - start
        if k < 0 or k >= total:
            return False
        w, b = k >> 6, np.uint64(1) << np.uint64(k & 63)
        if bits[w] & b:
            return False
        bits[w] |= b
    if not bits[0] & np.uint64(1):
        return False
    for i in range(n):
        e = keys[i] - start + sizes[i]
        if e != total and (e > total or not (bits[e >> 6] >> np.uint64(e & 63)) & np.uint64(1)):
            return False
    return True


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
def _tails_rows(buf, data, r0, r1, offsets, starts, ends, err, stop):
    """Tails ``r0..r1`` of :func:`gather_tails` (one chunk of a call): long ones by
    streaming stores (written once, never read back here), short ones a word at a time."""
    base, out = buf.ctypes.data, data.ctypes.data
    prev = ends[r0 - 1] if r0 > 0 else np.int64(0)
    for i in range(r0, r1):
        if (i & 1023) == 0 and stop[0] != 0:
            return
        e = ends[i]
        if e - prev >= 256:
            _stream_copy(out + prev, base + offsets[i] + starts[i], e - prev)
        else:
            _memcpy(out + prev, base + offsets[i] + starts[i], e - prev)
        prev = e
    stream_fence()


def gather_tails(buf, offsets, starts, ends, data, *, threads=None):
    """Copy ``buf[offsets[i] + ...]`` tails into ``data``: record ``i``'s tail is
    ``ends[i] - ends[i-1]`` bytes (``ends[-1]`` is 0) from ``offsets[i] + starts[i]``.
    Chunks of the records go to the kernels' thread pool (at least a MiB of tails each).
    The caller has checked that every tail lies inside ``buf`` and ``data``."""
    n = offsets.shape[0]
    if not n:
        return
    mean = max(1, int(ends[-1]) // n)
    run_chunks(_tails_rows, chunk_starts(n, mean, threads), (buf, data, offsets, starts, ends), (buf, data))


VIEW_INLINE = 12  # an Arrow binary_view value of at most this many bytes lives in its view
VIEW_AHEAD = 16  # rows ahead whose first tail line is prefetched


@_jit
def _views_rows(buf, views, r0, r1, offsets, starts, sizes, step, err, stop):
    """Views ``r0..r1`` of :func:`tail_views` (one chunk of a call)."""
    base, out = buf.ctypes.data, views.ctypes.data
    ahead = min(r1, r0 + VIEW_AHEAD)
    for i in range(r0, ahead):
        prefetch(base + offsets[i] + starts[i])
    for i in range(r0, r1):
        if (i & 4095) == 0 and stop[0] != 0:
            return
        if i + VIEW_AHEAD < r1:  # each value's first bytes: loads of lines far apart, asked for early
            prefetch(base + offsets[i + VIEW_AHEAD] + starts[i + VIEW_AHEAD])
        at = offsets[i] + starts[i]
        n = sizes[i]
        v = out + 16 * i
        store32(v, np.uint32(n))
        if n > VIEW_INLINE:
            k = at // step
            store32(v + 4, load32(base + at))  # the value's first 4 bytes
            store32(v + 8, np.uint32(k))  # the data buffer
            store32(v + 12, np.uint32(at - k * step))  # where the value starts in it
        else:
            store32(v + 4, np.uint32(0))  # every byte of a view is defined: the rest zeros
            store64(v + 8, np.uint64(0))
            if n >= 8:  # two overlapping loads: the first 8 bytes, the last 4
                store64(v + 4, load64(base + at))
                store32(v + n, load32(base + at + n - 4))
            elif n >= 4:
                store32(v + 4, load32(base + at))
                store32(v + n, load32(base + at + n - 4))
            else:
                for j in range(n):
                    store8(v + 4 + j, load8(base + at + j))


def tail_views(buf, offsets, starts, sizes, views, step, *, threads=None):
    """The Arrow ``binary_view`` views of tails in ``buf``: record ``i``'s tail is
    ``sizes[i]`` bytes from ``offsets[i] + starts[i]``; its view (16 bytes of ``views``,
    uint8 of ``16 * len(offsets)``) holds its length and either the bytes themselves (at
    most 12, zero-padded) or its first 4 bytes, its data buffer ``k = start // step`` and
    its offset ``start - k * step`` there (data buffer ``k`` being ``buf[k * step:]``).
    Chunks of the records go to the kernels' thread pool. The caller has checked that
    every tail lies inside ``buf`` and inside its data buffer's int32 offsets."""
    n = offsets.shape[0]
    if not n:
        return
    run_chunks(_views_rows, chunk_starts(n, 40, threads), (buf, views, offsets, starts, sizes, step), (buf, views))


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
