"""The transpose reading records through an index of byte offsets, and the way back
writing them through one: the row address of a record is ``base + offsets[i]``
instead of ``src + i * stride``. Used by record streams (:mod:`kernels.stream`), whose
records of one type lie scattered through the stream among those of other types.

Each block of rows is gathered (the runs of the record's plan: its fields, odd-width
integers widened, its offset stored) into a packed row buffer that stays in cache, with
the next rows prefetched (they are scattered: the hardware does not foresee them); the
ordinary per-op block kernel (:func:`kernels.cpu.forward._forward_block`) then runs on
it, with the output staging and the threads of the plain transpose. No dense copy of
the records is made. The way back assembles a block of packed rows from the columns
(:func:`kernels.cpu.reverse._reverse_block`) and stores each at its position, with its
length field and tag, in the same pass.

Compiled with the other CPU kernels (content-keyed disk cache, kernels/_cache.py).
"""

import numpy as np

from .._memory import (
    bswap16,
    bswap32,
    bswap64,
    load8,
    load16,
    load32,
    load64,
    prefetch,
    store8,
    store16,
    store32,
    store64,
    stream_fence,
)
from ..plan import (
    COUNT,
    DATA,
    ELEM0,
    K_COPY,
    K_CSTR,
    KIND,
    N_NONE,
    NULLS,
    OFFS,
    OFFSETS,
    P1,
    P2,
    P3,
    STRING_KINDS,
    SWAP,
    TABLE,
    VALID,
    WIDTH,
)
from ..threads import MIN_CHUNK_BYTES, ROW_ALIGN, chunk_starts, default_threads, run_chunks
from .forward import _compact_strings, _forward_block, _fwd_string, _stage_block, _stage_plan, _unstage_block
from .memory import BLOCK_BYTES, STAGE_RECORD_MAX, STREAM_BYTES, _jit, _offset_at, _set_offset
from .reverse import _prefetch_columns, _rev_string, _reverse_block

__all__ = [
    "aos_to_soa_at",
    "aos_to_soa_types",
    "types_plan",
    "soa_to_aos_at",
    "E_TEXT_NUL",
    "E_WIDE",
    "E_LENGTH",
    "E_TAG",
]

# fault codes (op -1); the transpose's own codes (kernels/plan.py E_*) are small integers
E_TEXT_NUL = 100  # aos_to_soa_at: a NUL byte in a text field
E_WIDE = 101  # soa_to_aos_at: a value does not fit the narrower field it goes back to
E_LENGTH = 102  # soa_to_aos_at: a field under the length field holds another value than the record's length
E_TAG = 103  # soa_to_aos_at: a field under the tag holds another value than the type's tag
PREFETCH_ROWS = 16  # records of one type are asked for this many ahead of the one copied


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


ONES = np.uint64(0x0101010101010101)
HIGHS = np.uint64(0x8080808080808080)


@_jit
def _bytes_seen(addr, n):
    """``(any zero byte, any byte >= 0x80)`` among the ``n`` (>= 1) bytes at ``addr``, a
    word at a time (the last word overlapping the one before it, as :func:`_copy_run`
    reads): the zero test is the exact one, ``(v - 0x01..01) & ~v & 0x80..80``."""
    zero, high = np.uint64(0), np.uint64(0)
    if n >= 8:
        i = 0
        while i + 8 < n:
            v = np.uint64(load64(addr + i))
            zero |= (v - ONES) & ~v & HIGHS
            high |= v
            i += 8
        v = np.uint64(load64(addr + n - 8))
        zero |= (v - ONES) & ~v & HIGHS
        high |= v
    else:
        for k in range(n):
            v = np.uint64(load8(addr + k))
            zero |= np.uint64(0x80) if v == 0 else np.uint64(0)
            high |= v
    return zero != 0, (high & HIGHS) != 0


@_jit
def _first_nul_rows(rows, itemsize, n, nul_at, nul_len):
    """The first of ``n`` packed rows at ``rows`` with a zero byte in one of the byte
    ranges ``nul_at[f] .. + nul_len[f]``, or -1."""
    for i in range(n):
        row = rows + i * itemsize
        for f in range(nul_at.shape[0]):
            if nul_len[f] > 0 and _bytes_seen(row + nul_at[f], nul_len[f])[0]:
                return i
    return -1


@_jit
def _plain_text(src, itemsize, b0, b1, op, offs):
    """Whether every value of rows ``b0..b1`` of one ``S<n>`` text op is ``n`` bytes of
    plain ASCII (no NUL, no byte >= 0x80): valid UTF-8 as it is, nothing to trim, and no
    NUL for the text check to report. A value of up to 8 bytes is read as one word
    (the bytes after it, in the row or the rows buffer's 8 bytes of slack, masked to
    0x01); longer ones a word at a time (:func:`_bytes_seen`)."""
    n, at = op[WIDTH], offs[op[OFFS]]
    if n > 8:
        for r in range(b0, b1):
            zero, high = _bytes_seen(src + r * itemsize + at, n)
            if zero or high:
                return False
        return True
    mask = ~np.uint64(0) >> np.uint64(64 - 8 * n)
    fill = ONES & ~mask
    zero, high = np.uint64(0), np.uint64(0)
    for r in range(b0, b1):
        v = (np.uint64(load64(src + r * itemsize + at)) & mask) | fill
        zero |= (v - ONES) & ~v & HIGHS
        high |= v
    return zero == 0 and (high & HIGHS) == 0


@_jit
def _copy_text(src, itemsize, r0, b0, b1, op, offs):
    """:func:`kernels.cpu.forward._fwd_string` for one ``S<n>`` text value per record of
    rows ``b0..b1``, which :func:`_plain_text` found plain: the values are copied with
    one load and store each (a word at a time past 8 bytes) and the offsets step by
    ``n``, the same buffers the general kernel writes."""
    n, ow, at = op[WIDTH], op[P2], offs[op[OFFS]]
    data, offsets = op[DATA] + r0 * op[P1], op[OFFSETS]
    pos = np.int64(0) if b0 == r0 else _offset_at(offsets, b0, ow)
    if b0 == 0:
        _set_offset(offsets, 0, ow, 0)
    out = data + pos - b0 * n  # value r goes to out + r * n
    first = src + at
    if n == 1:
        for r in range(b0, b1):
            store8(out + r, load8(first + r * itemsize))
    elif n == 2:
        for r in range(b0, b1):
            store16(out + r * 2, load16(first + r * itemsize))
    elif n == 4:
        for r in range(b0, b1):
            store32(out + r * 4, load32(first + r * itemsize))
    elif n == 8:
        for r in range(b0, b1):
            store64(out + r * 8, load64(first + r * itemsize))
    else:
        for r in range(b0, b1):
            _copy_run(out + r * n, first + r * itemsize, n)
    _step_offsets(offsets, ow, pos - b0 * n, n, b0, b1)


@_jit
def _step_offsets(offsets, ow, step, n, b0, b1):
    """Offsets ``r + 1`` of rows ``b0..b1`` of values of ``n`` bytes each: ``step + (r + 1) * n``."""
    if ow == 4:
        for r in range(b0, b1):
            store32(offsets + (r + 1) * 4, step + (r + 1) * n)
    else:
        for r in range(b0, b1):
            store64(offsets + (r + 1) * 8, step + (r + 1) * n)


# --------------------------------------------- the direct kernel: fields read in place through the index

DIRECT_ROWS = 256  # rows of one block of the direct kernel (its records stay in cache between the ops)


@_jit
def _text_values(base, offsets, b0, b1, n, at, out, last):
    """Bytes ``at .. at + n`` of the records at ``base + offsets[r]`` (exactly those bytes
    read), rows ``b0..b1``, copied to ``out + r * n``, checking as it copies that they are
    plain ASCII (:func:`_plain_text`'s test). Returns False where a value is not.
    ``last >= 0``: the records ``PREFETCH_ROWS`` ahead are prefetched (up to their byte
    ``last``). The caller has checked ``b0 .. b1`` against ``offsets``."""
    first = base + at
    ix = offsets.ctypes.data  # (offset r read as load64(ix + 8 * r): no negative-index fix-up per value)
    ahead = offsets.shape[0]
    if last >= 0:
        for i in range(b0, min(b0 + PREFETCH_ROWS, ahead)):
            prefetch(base + offsets[i])
            prefetch(base + offsets[i] + last)
    zero, high = np.uint64(0), np.uint64(0)
    if n == 1 or n == 2 or n == 4 or n == 8:
        mask = ~np.uint64(0) >> np.uint64(64 - 8 * n)
        fill = ONES & ~mask
        for r in range(b0, b1):
            if last >= 0 and r + PREFETCH_ROWS < ahead:  # scattered records: the hardware does not foresee them
                prefetch(base + offsets[r + PREFETCH_ROWS])
                prefetch(base + offsets[r + PREFETCH_ROWS] + last)
            a = first + np.int64(load64(ix + 8 * r))
            if n == 8:
                w = np.uint64(load64(a))
                store64(out + r * 8, w)
            elif n == 4:
                w = np.uint64(load32(a))
                store32(out + r * 4, w)
            elif n == 2:
                w = np.uint64(load16(a))
                store16(out + r * 2, w)
            else:
                w = np.uint64(load8(a))
                store8(out + r, w)
            v = (w & mask) | fill
            zero |= (v - ONES) & ~v & HIGHS
            high |= v
        return zero == 0 and (high & HIGHS) == 0
    for r in range(b0, b1):
        a = first + np.int64(load64(ix + 8 * r))
        z, h = _bytes_seen(a, n)
        if z or h:
            return False
        _copy_run(out + r * n, a, n)
    return True


@_jit
def _copy_text_at(base, offsets, r0, b0, b1, op, at, last):
    """:func:`_copy_text` of one ``S<n>`` value per record read in place (bytes ``at ..
    at + n`` of the records at ``base + offsets[r]``, exactly those bytes read), checking
    as it copies that they are plain ASCII (:func:`_text_values`). Returns False where a
    value is not: the block's rows must then be written the general way, over what this
    wrote. ``last >= 0``: the records ``PREFETCH_ROWS`` ahead are prefetched (up to their
    byte ``last``)."""
    n, ow = op[WIDTH], op[P2]
    data, offs = op[DATA] + r0 * op[P1], op[OFFSETS]
    pos = np.int64(0) if b0 == r0 else _offset_at(offs, b0, ow)
    if b0 == 0:
        _set_offset(offs, 0, ow, 0)
    if not _text_values(base, offsets, b0, b1, n, at, data + pos - b0 * n, last):  # (value r at out + r * n)
        return False
    _step_offsets(offs, ow, pos - b0 * n, n, b0, b1)
    return True


@_jit
def _copy_at(base, offsets, b0, b1, op, at, keep):
    """A fixed-width op (K_COPY of one value of 1, 2, 4 or 8 bytes, no nulls) read in
    place: the word at byte ``at`` of each record at ``base + offsets[r]``, its bytes
    outside ``keep`` cleared (those of a widened field that the packed record leaves 0),
    byte-swapped where the op says, stored at row ``r`` of the column. ``at < 0``: the
    record's offset itself (the ``_offset`` column). The caller has checked ``b0 .. b1``
    against ``offsets``."""
    w, dst, swap = op[WIDTH], op[DATA], op[SWAP] != 0
    ix = offsets.ctypes.data  # (offset r read as load64(ix + 8 * r): no negative-index fix-up per value)
    if at < 0:
        for r in range(b0, b1):
            store64(dst + r * 8, load64(ix + 8 * r))
        return
    first = base + at
    if w == 8:
        full = keep == np.uint64(0xFFFFFFFFFFFFFFFF)
        if swap and full:
            for r in range(b0, b1):
                store64(dst + r * 8, bswap64(load64(first + np.int64(load64(ix + 8 * r)))))
        elif swap:
            for r in range(b0, b1):
                store64(dst + r * 8, bswap64(np.uint64(load64(first + np.int64(load64(ix + 8 * r)))) & keep))
        elif full:
            for r in range(b0, b1):
                store64(dst + r * 8, load64(first + np.int64(load64(ix + 8 * r))))
        else:
            for r in range(b0, b1):
                store64(dst + r * 8, np.uint64(load64(first + np.int64(load64(ix + 8 * r)))) & keep)
    elif w == 4:
        k4 = np.uint32(keep)
        if swap:
            for r in range(b0, b1):
                store32(dst + r * 4, bswap32(np.uint32(load32(first + np.int64(load64(ix + 8 * r)))) & k4))
        else:
            for r in range(b0, b1):
                store32(dst + r * 4, np.uint32(load32(first + np.int64(load64(ix + 8 * r)))) & k4)
    elif w == 2:
        k2 = np.uint16(keep)
        if swap:
            for r in range(b0, b1):
                store16(dst + r * 2, bswap16(np.uint16(load16(first + np.int64(load64(ix + 8 * r)))) & k2))
        else:
            for r in range(b0, b1):
                store16(dst + r * 2, np.uint16(load16(first + np.int64(load64(ix + 8 * r)))) & k2)
    else:
        for r in range(b0, b1):
            store8(dst + r, load8(first + np.int64(load64(ix + 8 * r))))


@_jit
def _direct_rows_at(buf, itemsize, r0, r1, offsets, direct, plan, stream, err, stop):
    """:func:`_forward_rows_at` for a plan :func:`direct_plan` accepts: each block of
    rows is converted an op at a time straight from the records in the stream (the
    first pass, a text copy that checks its values are plain ASCII, prefetches them;
    the rest find them in cache), with no packed rows; with ``stream``, the fixed-width
    values through the stage and streaming stores, as there. A block whose text is not
    all plain ASCII goes the gathered way (:func:`_gathered_block`, with ``plan`` as
    there: the NUL check, UTF-8, trimming and their faults as there). ``direct`` is
    ``(at, keep, last)``: where op ``j`` (``ops`` then ``texts``) is read in the record
    and the bytes kept (:func:`_copy_at`), and the last byte read of a record."""
    ops = plan[7]
    block = min(DIRECT_ROWS, r1 - r0)
    stage_at, size = _stage_plan(ops, block)
    stage = np.empty(size if stream else 0, dtype=np.uint8)
    rows = np.zeros(max(block, 1) * itemsize + 8, dtype=np.uint8)  # a block that goes the gathered way
    # (the arrays made here, used there: no early exit in the function that owns them)
    _direct_blocks_at(
        buf, itemsize, r0, r1, offsets, direct, plan, stream, stage_at, stage, rows, ops.copy(), err, stop
    )


@_jit
def _direct_blocks_at(buf, itemsize, r0, r1, offsets, direct, plan, stream, stage_at, stage, rows, staged, err, stop):
    at, keep, last = direct
    ops, texts = plan[7], plan[9]
    src, base, packed = buf.ctypes.data, stage.ctypes.data, rows.ctypes.data
    nops, ntexts = ops.shape[0], texts.shape[0]
    b0 = r0
    while b0 < r1:
        if stop[0] != 0:
            break
        b1 = min(b0 + DIRECT_ROWS, r1)
        if ntexts == 0:  # (else the first text pass prefetches the records)
            for r in range(b0, b1):
                prefetch(src + offsets[r])
        plain = True
        for t in range(ntexts):
            if not _copy_text_at(src, offsets, r0, b0, b1, texts[t], at[nops + t], last if t == 0 else -1):
                plain = False
                break
        if stream:
            _stage_block(ops, staged, stage_at, base, b0)
        if plain:
            for j in range(nops):
                _copy_at(src, offsets, b0, b1, staged[j], at[j], keep[j])
        elif not _gathered_block(src, offsets, itemsize, r0, b0, b1, plan, staged, packed, err):
            break
        if stream:
            _unstage_block(ops, stage_at, base, b0, b1)
        b0 = b1
    if stream:
        stream_fence()


def direct_plan(ops, offs, runs, offset_at, nul, text):
    """Where the direct kernel reads each op (``ops[~text]`` then ``ops[text]``) in a
    record: ``(at, keep, last)`` (see :func:`_direct_rows_at`), or None where the plan has
    anything else than fixed-width values of 1, 2, 4 or 8 bytes with no nulls, the
    ``_offset`` column and plain ``S<n>`` text, all NUL-checked text fields being text
    ops. A field the packed record widens (its uncovered bytes 0) is read as a word from
    the bytes of the record around it, the others cleared, only where that word lies
    inside the bytes the runs read (those the caller checked lie in the stream)."""
    if not len(runs) or (len(nul) and not _nul_is_text(ops, offs, nul, text)):
        return None
    lo = int(runs[:, 0].min())
    hi = int((runs[:, 0] + runs[:, 2]).max())
    order = [*np.flatnonzero(~text), *np.flatnonzero(text)]
    at = np.zeros(len(order), np.int64)
    keep = np.zeros(len(order), np.uint64)
    for i, j in enumerate(order):
        op = ops[j]
        p, w = int(offs[op[OFFS]]), int(op[WIDTH])
        if op[COUNT] != 1 or op[VALID] != 0 or op[NULLS] != N_NONE:
            return None
        over = [
            (int(s), int(d), int(n)) for s, d, n in runs.tolist() if d < p + w and d + n > p
        ]  # the runs writing bytes of the field
        if text[j]:
            if op[KIND] != K_CSTR or len(over) != 1 or over[0][1] > p or over[0][1] + over[0][2] < p + w:
                return None
            at[i] = over[0][0] + p - over[0][1]
            continue
        if op[KIND] != K_COPY or w not in (1, 2, 4, 8):
            return None
        if not over:
            if p != offset_at or w != 8:
                return None
            at[i] = -1  # the record's offset
            continue
        if len(over) != 1:
            return None
        s, d, n = over[0]
        k0, k1 = max(d, p) - p, min(d + n, p + w) - p  # the field's bytes the run writes
        start = s + (p + k0 - d) - k0  # the record byte under the field's first byte
        if start < lo or start + w > hi:
            return None
        at[i] = start
        keep[i] = np.uint64(sum(0xFF << (8 * b) for b in range(k0, k1)))
    return at, keep, hi - 1


# --------------------------------------------- every type of a stream in one pass, window by window

WINDOW_BYTES = 1 << 18  # bytes of the stream whose records of every type are converted before the next


@_jit
def _text_rows_at(base, offsets, b0, b1, op, at):
    """:func:`_copy_text_at` with each value at its final place (row ``r`` at ``r * n``, its
    offset ``(r + 1) * n``): rows of one type may be converted in any order, by any
    thread, with no compaction after. Returns False where a value is not plain ASCII
    (the type must then be converted the general way, over what this wrote)."""
    n, ow = op[WIDTH], op[P2]
    if b0 == 0:
        _set_offset(op[OFFSETS], 0, ow, 0)
    if not _text_values(base, offsets, b0, b1, n, at, op[DATA], -1):
        return False
    _step_offsets(op[OFFSETS], ow, 0, n, b0, b1)
    return True


@_jit
def _text_rows_byte(b0, b1, op, v):
    """:func:`_text_rows_at` of an ``S1`` field that holds ``v`` (plain ASCII) in every
    record of the type (its tag, which the walk that placed the records read): the
    values and offsets written with no load from the records."""
    ow, data = op[P2], op[DATA]
    if b0 == 0:
        _set_offset(op[OFFSETS], 0, ow, 0)
    for r in range(b0, b1):
        store8(data + r, np.uint8(v))
    _step_offsets(op[OFFSETS], ow, 0, 1, b0, b1)


@_jit
def _type_rows(src, offsets, f, g0, g1, plan, redo):
    """Rows ``offsets[g0:g1]`` of type ``f`` of a plan of :func:`types_plan` converted an
    op at a time straight from the stream at ``src`` (:func:`_copy_at`,
    :func:`_text_rows_at`); a value that is not plain ASCII marks the type in ``redo``
    (it is then converted the general way, over what this wrote)."""
    rows, ops, op_start, op_at, op_keep, texts, text_start, text_at, text_byte = plan
    if g1 <= g0 or redo[f] != 0:
        return
    o = offsets[rows[f, 0] : rows[f, 1]]  # (row r of the type's table is o[r])
    b0, b1 = g0 - rows[f, 0], g1 - rows[f, 0]
    for j in range(text_start[f], text_start[f + 1]):
        if text_byte[j] >= 0:
            _text_rows_byte(b0, b1, texts[j], text_byte[j])
        elif not _text_rows_at(src, o, b0, b1, texts[j], text_at[j]):
            redo[f] = 1
            return
    for j in range(op_start[f], op_start[f + 1]):
        if op_at[j] >= -1:
            _copy_at(src, o, b0, b1, ops[j], op_at[j], op_keep[j])


@_jit
def _types_part(buf, offsets, p0, p1, plan, window, redo, err, stop):
    """Records starting in bytes ``p0..p1`` of the stream, of every type of ``plan``
    (:func:`types_plan`), on one of the kernels' threads: a window of ``window`` bytes at a
    time, each type's records in it converted (:func:`_type_rows`) while the window is in
    cache, so the stream is read from memory once for all types. Type ``f``'s records are
    ``offsets[rows[f, 0]:rows[f, 1]]``, in stream order."""
    src = buf.ctypes.data
    rows = plan[0]
    ntypes = rows.shape[0]
    cur = np.empty(ntypes, np.int64)  # each type's next row (in ``offsets``)
    for f in range(ntypes):
        lo, hi = rows[f, 0], rows[f, 1]
        while hi > lo:  # the first at or after p0 (a binary search)
            mid = (lo + hi) // 2
            if offsets[mid] < p0:
                lo = mid + 1
            else:
                hi = mid
        cur[f] = lo
    w0 = p0
    while w0 < p1:
        if stop[0] != 0:
            return
        w1 = min(w0 + window, p1)
        for f in range(ntypes):
            g0, end = cur[f], rows[f, 1]
            if g0 >= end or offsets[g0] >= w1:
                continue
            g1 = g0 + 1
            while g1 < end and offsets[g1] < w1:
                g1 += 1
            cur[f] = g1
            _type_rows(src, offsets, f, g0, g1, plan, redo)
        w0 = w1


_READS: dict = {}  # _direct_read's answers
_READS_MAX = 4096


def _direct_read(ops, offs, runs, offset_at, nul):
    """``(text, direct_plan(...))`` of one type's plan for :func:`types_plan` (None in
    place of the second where the direct kernel does not read it, strings of another
    width than their field's included: their values do not lie at ``row * width``).
    Remembered by what it depends on, the ops without their addresses (which change
    with every call's memory), the offsets table, the runs, ``offset_at`` and the NUL
    checks: worked out each time, the 23 ITCH types' took a third of a 1 MB read."""
    static = ops.copy()
    static[:, [DATA, OFFSETS, TABLE, P3]] = 0
    static[:, VALID] = static[:, VALID] != 0
    key = (static.tobytes(), ops.shape[0], offs.tobytes(), runs.tobytes(), int(offset_at), nul.tobytes())
    got = _READS.get(key)
    if got is None:
        text, _ = _texts(ops)
        read = None
        if not ((ops[text][:, P1] != ops[text][:, WIDTH]) | (ops[text][:, COUNT] != 1)).any():
            read = direct_plan(ops, offs, runs, offset_at, nul, text)
        if len(_READS) >= _READS_MAX:
            _READS.clear()
        got = _READS[key] = (text, read)
    return got


def types_plan(items, tags=None):
    """The plan of :func:`_type_rows` for the types of ``items`` that it converts:
    ``(which, plan)``, ``which`` the positions in ``items`` of those types, ``plan`` None
    where there are none. ``items`` as :func:`aos_to_soa_types` takes them.

    ``tags``: ``(at, values)``, where the records' 1-byte tag lies in them and, per item,
    the one tag value all its records hold (-1: not known to be one): an ``S1`` text
    field at the tag's byte is then written as that value, not read from every record
    (:func:`_text_rows_byte`), where the value is plain ASCII."""
    rows, op_rows, op_at, op_keep, op_start = [], [], [], [], [0]
    text_rows, text_at, text_start, text_byte, which = [], [], [0], [], []
    for k, (lo, hi, ops, offs, runs, offset_at, nul, own) in enumerate(items):
        if hi <= lo:
            continue
        text, read = _direct_read(ops, offs, runs, offset_at, nul)
        if read is None:
            continue
        at, keep, _ = read
        m = int((~text).sum())
        at = at.copy()
        if own:
            at[:m][at[:m] == -1] = -2  # (the _offset column: the caller's index itself)
        which.append(k)
        rows.append((lo, hi))
        op_rows.append(ops[~text])
        op_at.append(at[:m])
        op_keep.append(keep[:m])
        op_start.append(op_start[-1] + m)
        text_rows.append(ops[text])
        text_at.append(at[m:])
        text_start.append(text_start[-1] + len(at) - m)
        byte = np.full(len(at) - m, -1, np.int64)
        if tags is not None and 0 < tags[1][k] < 0x80:
            byte[(at[m:] == tags[0]) & (ops[text][:, WIDTH] == 1)] = tags[1][k]
        text_byte.append(byte)
    if not which:
        return which, None
    ncols = items[which[0]][2].shape[1]

    def cat(parts, dtype, shape):
        return np.concatenate(parts).astype(dtype).reshape(shape)

    plan = (
        np.array(rows, np.int64).reshape(-1, 2),
        cat(op_rows, np.int64, (-1, ncols)),
        np.array(op_start, np.int64),
        cat(op_at, np.int64, -1),
        cat(op_keep, np.uint64, -1),
        cat(text_rows, np.int64, (-1, ncols)),
        np.array(text_start, np.int64),
        cat(text_at, np.int64, -1),
        cat(text_byte, np.int64, -1),
    )
    return which, plan


def aos_to_soa_types(buf, offsets, start, end, items, *, threads=None, window=WINDOW_BYTES, owners=None):
    """:func:`aos_to_soa_at` of several record types of one stream in one call, window by
    window of the stream (:func:`_types_part`): ``offsets`` (int64) holds each type's
    records in stream order, all of them starting in bytes ``start..end`` of ``buf``;
    ``items`` are, per type, ``(row_lo, row_hi, ops, offs, runs, offset_at, nul, own)``
    as :func:`aos_to_soa_at` takes them (``own``: the ``_offset`` column is not
    written, the caller makes it of ``offsets`` itself). Returns one bool per type:
    True where it is converted; False where its plan is not one :func:`direct_plan`
    reads in place (or its text values are not all plain ASCII, or its strings are not
    one value of the field's width a record): the caller converts it by
    :func:`aos_to_soa_at`, which raises what there is to raise. The caller has checked
    that every run of every record lies inside ``buf``."""
    done = [False] * len(items)
    which, plan = types_plan(items)
    if plan is None:
        return done
    threads = default_threads() if threads is None else threads
    parts = max(1, min(threads, (end - start) // MIN_CHUNK_BYTES))
    bounds = np.array([start + (end - start) * i // parts for i in range(parts)] + [end], np.int64)
    redo = np.zeros(len(which), np.uint8)
    run_chunks(_types_part, bounds, (buf, offsets, plan, np.int64(window), redo), (owners, buf, offsets))
    for i, k in enumerate(which):
        done[k] = not redo[i]
    return done


def _nul_is_text(ops, offs, nul, text):
    """Whether the NUL-checked ranges are exactly the text ops' values."""
    values = sorted((int(offs[o[OFFS]]), int(o[WIDTH])) for o in ops[text])
    return sorted(map(tuple, nul.tolist())) == values


def _texts(ops):
    """(mask of the ops of one ``S<n>`` string per record, the plan's op number of each of
    the other ops and then of those): the kernels below take the strings apart, for
    their plain-ASCII fast path."""
    text = (ops[:, KIND] == K_CSTR) & (ops[:, COUNT] == 1)
    return text, np.concatenate([np.flatnonzero(~text), np.flatnonzero(text)]).astype(np.int64)


@_jit
def _rev_text(dst, itemsize, b0, b1, op, offs):
    """:func:`kernels.cpu.reverse._rev_string` for a string column going back to one
    ``S<n>`` field per record when rows ``b0..b1`` are all valid, all ``n`` bytes long and
    hold no NUL (the general kernel would copy them whole, with no padding): a word at a
    time. Returns False, having written nothing, for any other block."""
    n, data, offsets, e0, ow = op[WIDTH], op[DATA], op[OFFSETS], op[ELEM0], op[P2]
    if op[VALID] != 0 or b1 <= b0:
        return False
    first = _offset_at(offsets, e0 + b0, ow)
    pos = first
    for r in range(b0, b1):
        nxt = _offset_at(offsets, e0 + r + 1, ow)
        if nxt - pos != n:
            return False
        pos = nxt
    if _bytes_seen(data + first, pos - first)[0]:
        return False
    out = dst + offs[op[OFFS]]
    for r in range(b0, b1):
        _copy_run(out + r * itemsize, data + first + (r - b0) * n, n)
    return True


@_jit
def _forward_rows_at(buf, itemsize, r0, r1, offsets, plan, stream, err, stop):
    """:func:`kernels.cpu.forward._forward_rows` for records found through ``offsets`` (byte
    offsets into ``buf``) instead of at ``src + row * stride``: each block of rows is
    gathered (by the runs of the record's plan) into a packed row buffer that stays in
    cache, checked for NULs in its text fields, and goes through the same per-op block
    kernel as contiguous records (:func:`_gathered_block`). No dense copy of the records
    is made.

    ``plan`` is ``(run_src, run_dst, run_len, offset_at, nul_at, nul_len, nul_text, ops,
    which, texts, offs)``: ``texts`` (ops of one ``S<n>`` string per record) are copied by
    :func:`_copy_text` where a block's values are plain ASCII (:func:`_plain_text`), else
    by the general string kernel; ``ops`` are the others, ``which`` the plan's number of
    each of ``ops`` then ``texts`` (for the fault's op). ``nul_text`` (1): the NUL-checked
    ranges are exactly the text ops' fields, so a block whose text is plain needs no
    separate NUL check."""
    ops = plan[7]
    block = max(ROW_ALIGN, (BLOCK_BYTES // itemsize) // ROW_ALIGN * ROW_ALIGN)
    at, size = _stage_plan(ops, min(block, r1 - r0))
    stage = np.empty(size if stream else 0, dtype=np.uint8)
    # the bytes no run writes stay 0; 8 bytes of slack for _plain_text's word loads
    rows = np.zeros(max(min(block, r1 - r0), 1) * itemsize + 8, dtype=np.uint8)
    _forward_blocks_at(buf, itemsize, r0, r1, offsets, plan, block, stream, at, stage, rows, ops.copy(), err, stop)


@_jit
def _forward_blocks_at(buf, itemsize, r0, r1, offsets, plan, block, stream, at, stage, rows, staged, err, stop):
    ops = plan[7]
    base = stage.ctypes.data
    src, packed = buf.ctypes.data, rows.ctypes.data
    b0 = r0
    while b0 < r1:
        if stop[0] != 0:
            break
        b1 = min(b0 + block, r1)
        if stream:
            _stage_block(ops, staged, at, base, b0)
        if not _gathered_block(src, offsets, itemsize, r0, b0, b1, plan, staged, packed, err):
            break
        if stream:
            _unstage_block(ops, at, base, b0, b1)
        b0 = b1
    if stream:
        stream_fence()


@_jit
def _gathered_block(src, offsets, itemsize, r0, b0, b1, plan, staged, packed, err):
    """Rows ``b0..b1`` of the chunk from ``r0``: gathered into the packed rows at
    ``packed``, checked for NULs in their text fields, and through the per-op block
    kernel (``staged``: the plan's ops, or their staged copy) and the text kernels.
    ``plan`` as :func:`_forward_rows_at` takes it. Returns False at a fault (``err`` set)."""
    run_src, run_dst, run_len, offset_at, nul_at, nul_len, nul_text, ops, which, texts, offs = plan
    _gather_rows(src, offsets, b0, b1, run_src, run_dst, run_len, offset_at, packed, itemsize)
    # row r of this block is at packed + (r - b0) * itemsize
    rows_at = packed - b0 * itemsize
    plain = True
    for t in range(texts.shape[0]):
        if not _plain_text(rows_at, itemsize, b0, b1, texts[t], offs):
            plain = False
            break
    if nul_at.shape[0] > 0 and not (plain and nul_text):
        bad = _first_nul_rows(packed, itemsize, b1 - b0, nul_at, nul_len)
        if bad >= 0:
            err[0], err[1], err[2] = b0 + bad, -1, E_TEXT_NUL
            return False
    if _forward_block(rows_at, itemsize, r0, b0, b1, staged, offs, err) != 0:
        err[1] = which[err[1]]
        return False
    for t in range(texts.shape[0]):
        if plain or _plain_text(rows_at, itemsize, b0, b1, texts[t], offs):
            _copy_text(rows_at, itemsize, r0, b0, b1, texts[t], offs)
        else:
            row, code = _fwd_string(rows_at, itemsize, r0, b0, b1, texts[t], offs)
            if code != 0:
                err[0], err[1], err[2] = row, which[ops.shape[0] + t], code
                return False
    return True


def aos_to_soa_at(buf, offsets, itemsize, runs, offset_at, nul, ops, offs, *, threads=None, owners=None, direct=True):
    """:func:`kernels.cpu.aos_to_soa` of the records at ``buf[offsets[i]:]`` (uint8
    ``buf``, int64 ``offsets``), each read by ``runs`` (``(k, 3)`` int64: source offset
    in the record, destination in the packed record of ``itemsize`` bytes, length) with
    its offset stored at ``offset_at`` (-1: not stored); ``nul`` (``(m, 2)`` int64:
    start, length in the packed record) are text fields that must hold no zero byte.

    The caller has checked that every run of every record lies inside ``buf``. Chunks
    of the index go to the kernels' thread pool. A plan of fixed-width values, the
    ``_offset`` column and plain text (:func:`direct_plan`) is read in place, an op at a
    time per block of rows (:func:`_direct_rows_at`); ``direct=False``, or any other
    plan, gathers each block into packed rows first (:func:`_forward_rows_at`).
    Returns ``None`` or the first fault ``(row, op, code)``: ``(row, -1, E_TEXT_NUL)`` for a NUL byte in a text field.
    """
    n = offsets.shape[0]
    starts = chunk_starts(n, itemsize, threads)
    stream = n * itemsize >= STREAM_BYTES and itemsize <= STAGE_RECORD_MAX
    text, which = _texts(ops)
    # the NUL-checked ranges are the text ops' values: a plain block needs no NUL check
    nul_text = 1 if _nul_is_text(ops, offs, nul, text) else 0
    runs_nul = (runs[:, 0].copy(), runs[:, 1].copy(), runs[:, 2].copy(), offset_at, nul[:, 0].copy(), nul[:, 1].copy())
    plan = (*runs_nul, nul_text, ops[~text], which, ops[text], offs)
    read = direct_plan(ops, offs, runs, offset_at, nul, text) if direct else None
    if read is not None:
        fault = run_chunks(
            _direct_rows_at, starts, (buf, itemsize, offsets, read, plan, stream), (owners, buf, offsets)
        )
    else:
        fault = run_chunks(_forward_rows_at, starts, (buf, itemsize, offsets, plan, stream), (owners, buf, offsets))
    if fault is None:
        for j in range(ops.shape[0]):
            if ops[j, KIND] in STRING_KINDS:
                if n:
                    _compact_strings(ops[j], starts, stream)
                else:  # no row wrote it: an empty column's one offset is 0
                    _set_offset(ops[j, OFFSETS], 0, ops[j, P2], 0)
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
def _get_word(addr, size, big):
    """The unsigned integer of ``size`` (1..8) bytes at ``addr`` (the mirror of _put_word)."""
    v = np.uint64(0)
    for k in range(size):
        b = np.uint64(load8(addr + (k if big else size - 1 - k)))
        v = (v << np.uint64(8)) | b
    return v


@_jit
def _scatter_rows(
    rows, itemsize, b0, b1, positions, run_src, run_dst, run_len, zero_off, zero_len, frame, lengths, out
):
    """Packed rows ``b0..b1`` (at ``rows``) to ``out + positions[i]`` by the runs, with
    the length field (``lengths[i]``) and the tag that ``frame`` describes: ``(length
    at, size, big, tag at, size, big, tag value, check length, check tag)``, a size of
    0 for none. When a field of the record lies under the length field or the tag
    (``check``: 1), the value the field put there must be the one the framing stores:
    an edited column is an error, never overwritten. Returns ``(-1, 0)``, or the first
    bad row and its code: ``E_WIDE`` (a non-zero byte in a widened field's extra bytes),
    ``E_LENGTH`` or ``E_TAG``."""
    nruns, nzero = run_src.shape[0], zero_off.shape[0]
    len_at, len_size, len_big = frame[0], frame[1], frame[2] != 0
    tag_at, tag_size, tag_big, tag = frame[3], frame[4], frame[5] != 0, np.uint64(frame[6])
    check_len, check_tag = frame[7] != 0, frame[8] != 0
    for i in range(b0, b1):
        src = rows + (i - b0) * itemsize
        for z in range(nzero):
            for k in range(zero_len[z]):
                if load8(src + zero_off[z] + k) != 0:
                    return i, E_WIDE
        dst = out + positions[i]
        for r in range(nruns):
            _copy_run(dst + run_src[r], src + run_dst[r], run_len[r])
        if len_size > 0:
            if check_len and _get_word(dst + len_at, len_size, len_big) != np.uint64(lengths[i]):
                return i, E_LENGTH
            _put_word(dst + len_at, len_size, len_big, np.uint64(lengths[i]))
        if tag_size > 0:
            if check_tag and _get_word(dst + tag_at, tag_size, tag_big) != tag:
                return i, E_TAG
            _put_word(dst + tag_at, tag_size, tag_big, tag)
    return -1, 0


@_jit
def _reverse_rows_at(
    out,
    itemsize,
    r0,
    r1,
    positions,
    run_src,
    run_dst,
    run_len,
    zero_off,
    zero_len,
    frame,
    lengths,
    ops,
    which,
    texts,
    offs,
    err,
    stop,
):
    """:func:`kernels.cpu.reverse._reverse_rows` for records that go to ``out`` at
    ``positions`` (byte offsets) instead of one after another: each block of rows is
    assembled from the columns in a packed row buffer that stays in cache, then its
    fields, length and tag are stored at their places. No dense copy is made."""
    block = max(ROW_ALIGN, (BLOCK_BYTES // itemsize) // ROW_ALIGN * ROW_ALIGN)
    rows = np.zeros(max(min(block, r1 - r0), 1) * itemsize, dtype=np.uint8)  # padding stays 0 (see _reverse_rows)
    _reverse_blocks_at(
        out,
        itemsize,
        r0,
        r1,
        positions,
        run_src,
        run_dst,
        run_len,
        zero_off,
        zero_len,
        frame,
        lengths,
        ops,
        which,
        texts,
        offs,
        block,
        rows,
        err,
        stop,
    )


@_jit
def _reverse_blocks_at(
    out,
    itemsize,
    r0,
    r1,
    positions,
    run_src,
    run_dst,
    run_len,
    zero_off,
    zero_len,
    frame,
    lengths,
    ops,
    which,
    texts,
    offs,
    block,
    rows,
    err,
    stop,
):
    packed, dst = rows.ctypes.data, out.ctypes.data
    b0 = r0
    while b0 < r1:
        if stop[0] != 0:
            break
        b1 = min(b0 + block, r1)
        _prefetch_columns(ops, b1, min(b1 + block, r1))
        rows_at = packed - b0 * itemsize
        if _reverse_block(rows_at, itemsize, b0, b1, ops, offs, err) != 0:
            err[1] = which[err[1]]
            break
        code = 0
        for t in range(texts.shape[0]):
            if not _rev_text(rows_at, itemsize, b0, b1, texts[t], offs):
                row, code = _rev_string(rows_at, itemsize, b0, b1, texts[t], offs)
                if code != 0:
                    err[0], err[1], err[2] = row, which[ops.shape[0] + t], code
                    break
        if code != 0:
            break
        bad, code = _scatter_rows(
            packed, itemsize, b0, b1, positions, run_src, run_dst, run_len, zero_off, zero_len, frame, lengths, dst
        )
        if bad >= 0:
            err[0], err[1], err[2] = bad, -1, code
            break
        b0 = b1


def soa_to_aos_at(out, positions, itemsize, runs, zeros, frame, lengths, ops, offs, *, threads=None, owners=None):
    """The mirror of :func:`aos_to_soa_at`: record ``i``, assembled from the columns
    (``ops``) as a packed record of ``itemsize`` bytes, goes to ``out`` (uint8) at
    ``positions[i]`` by ``runs`` (``(k, 3)``: place in the stream's record, in the packed
    one, length); ``zeros`` (``(m, 2)``: start, length in the packed record) are the
    extra bytes of widened fields, which must be zero; ``frame`` (9 int64, see
    :func:`_scatter_rows`) the length field, with ``lengths[i]`` its value, and the tag.

    The caller has checked that every record lies inside ``out``. Returns ``None`` or
    the first fault ``(row, op, code)``; ``(row, -1, E_WIDE)`` for a value too wide,
    ``(row, -1, E_LENGTH)`` / ``(row, -1, E_TAG)`` for a field under the length field or
    the tag that holds another value than the framing's.
    """
    n = positions.shape[0]
    starts = chunk_starts(n, itemsize, threads)
    text, which = _texts(ops)
    args = (
        out,
        itemsize,
        positions,
        runs[:, 0].copy(),
        runs[:, 1].copy(),
        runs[:, 2].copy(),
        zeros[:, 0].copy(),
        zeros[:, 1].copy(),
        frame,
        lengths,
        ops[~text],
        which,
        ops[text],
        offs,
    )
    return run_chunks(_reverse_rows_at, starts, args, (owners, out, positions, lengths))
