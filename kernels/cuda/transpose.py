"""The main CUDA kernels, specialised per plan (:func:`specialised`), and their host functions
:func:`aos_to_soa`, :func:`soa_to_aos`, :func:`forward_async`, :func:`reverse_async`."""

import functools

import numpy as np
from numba import cuda, int32, int64, uint32, uint64

from ..plan import (
    COUNT,
    DATA,
    E_INVALID,
    E_NULL,
    E_RANGE,
    E_UTF,
    ELEM0,
    F_SIGNED,
    FLAGS,
    K_BINARY,
    K_BITS,
    K_BOOL,
    K_BYTES,
    K_CIVIL,
    K_COPY,
    K_CSTR,
    K_ENUM,
    K_HFLOAT,
    K_PACKED,
    K_SCALE,
    K_TEXT,
    K_UTF32,
    K_ZONED,
    KIND,
    N_NONE,
    NAT,
    NCOLS,
    NULLS,
    OFFS,
    OFFSETS,
    P1,
    P2,
    P3,
    SENT,
    STRING_KINDS,
    SWAP,
    TABLE,
    VALID,
    WIDTH,
)
from .device import (
    I64_MAX,
    M_VALIDITY,
    MAX_BLOCKS,
    MAX_TILE_BYTES,
    NO_FAULT,
    SCAN_THREADS,
    THREADS,
    TILE_BYTES,
    X_BOUND,
    X_INV,
    X_LIM,
    X_SHIFT,
    XCOLS,
    _bit,
    _dev,
    _fault,
    _get,
    _load,
    _mask,
    _put,
    _set_offset,
    _sign_extend,
    _store,
    _swap,
)
from .mainframe import (
    MAINFRAME_KINDS,
    copy_text,
    fwd_mainframe,
    rev_mainframe,
    rev_text,
    text_length,
    valid_mainframe,
)
from .strings import _copy_strings, _copy_strings_at, _scan_add, _scan_blocks, _scan_sums
from .tile import (
    _divmod32,
    _element,
    _forward_value,
    _fwd_enum_index,
    _fwd_time,
    _is_valid,
    _rev_string,
    _rev_time,
    _reverse_value,
    _string_length,
)

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
def tile_functions(mask, staged=True):
    """``(forward_tile, reverse_tile)``: the device functions that convert one tile of
    records, with only the code of the op kinds in ``mask`` (see :func:`specialised`).
    The main kernels and the record streams' gathered kernel
    (:mod:`kernels.cuda.gather`) stage their tiles each their own way and share these."""
    COPY = bool(mask & (1 << K_COPY))
    BYTES = bool(mask & (1 << K_BYTES))
    BOOL = bool(mask & (1 << K_BOOL))
    BITS = bool(mask & (1 << K_BITS))
    ENUM = bool(mask & (1 << K_ENUM))
    TIME = bool(mask & ((1 << K_SCALE) | (1 << K_CIVIL)))
    STRINGS = bool(mask & ((1 << K_CSTR) | (1 << K_UTF32)))
    MAINFRAME = bool(mask & MAINFRAME_KINDS)  # packed, zoned, binary, hfloat (kernels/cuda/mainframe.py)
    TEXT = bool(mask & (1 << K_TEXT))  # EBCDIC text (kernels/cuda/mainframe.py)
    BITMAP = BOOL or BITS
    VALIDITY = bool(mask & M_VALIDITY)
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
                            v = _get(words, wb, p, 1)
                            bit = v != 0
                            if kind == K_BOOL and v > 1:  # no bit holds it: it would come back as 1
                                _fault(err, r0 + _divmod32(e, c)[0], j, E_INVALID, nops)
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
            elif TEXT and kind == K_TEXT:
                ow = op[P2]
                e_next = tid
                while e_next < total:
                    e = e_next
                    e_next = IDX(e_next + nt)
                    i, _ = _element(op, offs, e, r0, slot)
                    if i == 0:
                        _set_offset(a32, a64, op[OFFSETS], 0, ow, int64(0))
                    _set_offset(a32, a64, op[OFFSETS], i + 1, ow, text_length(words, wb, op, offs, e, r0, slot, tables))
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
                        _store(
                            a8, a16, a32, a64, dst + i * outw, outw, _forward_value(words, wb, op, offs, e, r0, slot)
                        )
                    elif ENUM and kind == K_ENUM:
                        idx = _fwd_enum_index(_forward_value(words, wb, op, offs, e, r0, slot), op, tables)
                        _store(a8, a16, a32, a64, dst + i * 4, 4, idx)
                    elif TIME and (kind == K_SCALE or kind == K_CIVIL):
                        _fwd_time(a8, a16, a32, a64, words, wb, op, offs, e, r0, slot, err, j, nops)
                    elif MAINFRAME and (kind == K_PACKED or kind == K_ZONED or kind == K_BINARY or kind == K_HFLOAT):
                        fwd_mainframe(a8, a16, a32, a64, words, wb, op, offs, e, r0, slot, err, j, nops)
            if VALIDITY and op[VALID] != 0:
                b_next = tid
                while b_next < (total + 7) >> 3:
                    b = b_next
                    b_next = IDX(b_next + nt)
                    byte = 0
                    for t in range(min(8, total - 8 * b)):
                        if MAINFRAME and (kind == K_PACKED or kind == K_ZONED or kind == K_BINARY or kind == K_HFLOAT):
                            ok = valid_mainframe(words, wb, op, offs, 8 * b + t, r0, slot)
                        else:
                            ok = _is_valid(words, wb, op, offs, 8 * b + t, r0, slot)
                        if ok:
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
                    if nbits < 64 and (
                        _sign_extend(v, nbits) != v if (op[FLAGS] & F_SIGNED) != 0 else (v >> nbits) != 0
                    ):
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
                elif KC == K_TEXT:
                    rev_text(a8, a16, a32, a64, words, wb, op, i, p, r, err, j, nops, tables)
                elif KC == K_PACKED:  # and K_ZONED, K_BINARY, K_HFLOAT
                    rev_mainframe(a8, a16, a32, a64, words, wb, op, i, p, r, err, j, nops)
                else:  # K_CSTR and K_UTF32
                    _rev_string(a8, a16, a32, a64, words, wb, op, i, p, r, err, j, nops)

        return column

    rev_copy, rev_bytes, rev_bool = reverse_column(K_COPY), reverse_column(K_BYTES), reverse_column(K_BOOL)
    rev_bits, rev_enum = reverse_column(K_BITS), reverse_column(K_ENUM)
    rev_time, rev_string = reverse_column(K_SCALE), reverse_column(K_CSTR)
    rev_mf, rev_txt = reverse_column(K_PACKED), reverse_column(K_TEXT)

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
            elif MAINFRAME and (kind == K_PACKED or kind == K_ZONED or kind == K_BINARY or kind == K_HFLOAT):
                rev_mf(*args)
            elif TEXT and kind == K_TEXT:
                rev_txt(*args)

    return forward_tile, reverse_tile


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
    forward_tile, reverse_tile = tile_functions(mask, staged)
    STAGED = staged

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
        self.strings = [
            (j, cuda.to_device(np.ascontiguousarray(self.ops[j]), stream=stream))
            for j in range(self.nops)
            if self.ops[j, KIND] in STRING_KINDS
        ]


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
    kernel[blocks, THREADS, stream, shared](
        rec, n, stride, slot, rows, plan.d_ops, plan.d_offs, *_views(arena), plan.tables, err
    )


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


def forward_async(rec, stride, n, plan, arena, *, stream=0, fault_word=None, index=None):
    """Queue AoS -> SoA of ``n`` records on ``stream`` and return at once.

    The arguments are those of :func:`aos_to_soa`, with the plan already on the device
    (:class:`Plan`). Every kernel and copy goes on ``stream``, so chunks on other
    streams overlap with this one. ``fault_word``, a page-locked host int64 array of
    one element (``numba.cuda.pinned_array``), receives the fault word on the stream;
    without it the word is read after the wait. Returns a :class:`Pending`; its
    ``fault()`` waits for the stream.

    With ``index`` (device arrays ``(at, bmap, nul)``, see :mod:`kernels.cuda.gather`),
    ``rec`` is a record stream's words and record ``i`` is the one at byte ``at[i]``,
    packed to ``stride`` bytes by the byte map ``bmap``: the gathered kernel, in the
    same tile pass (records that a tile can stage; no K_TEXT).
    """
    if index is not None and any(plan.ops[j, KIND] == K_TEXT for j, _ in plan.strings):
        raise ValueError("EBCDIC text (K_TEXT) is not read through an index: gather the records first")
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
    if index is None:
        _launch("forward", rec, stride, n, plan, arena, err, stream)
    else:
        from .gather import launch_at

        launch_at(rec, index, n, stride, plan, views, err, stream)
    scratch = []
    for j, d_op in plan.strings:
        count = n * int(plan.ops[j, COUNT])
        scratch.append(_scan(views, plan.ops[j], count, stream))  # faulty strings were given length 0
        grid = max(1, min(-(-count // THREADS), MAX_BLOCKS))
        if index is not None:
            _copy_strings_at[grid, THREADS, stream](rec, index[0], index[1], n, stride, d_op, plan.d_offs, *views)
        elif plan.ops[j, KIND] == K_TEXT:
            copy_text[grid, THREADS, stream](rec, n, stride, d_op, plan.d_offs, *views, plan.tables)
        else:
            _copy_strings[grid, THREADS, stream](rec, plan.d_offs, plan.d_offs, n, stride, d_op, plan.d_offs, *views)
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
