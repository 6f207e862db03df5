"""Record streams on the GPU: the main transpose reading records through an index of
byte offsets instead of a stride, in the same tile pass.

The stream goes to the device once; the scan that finds the offsets stays on the CPU
(one pass over the bytes, see docs/streams.md). The gathered forward kernel
(:func:`forward_at`) stages each tile from the stream itself: word ``w`` of the tile's
packed records is built from the bytes of the records at ``at[r0 + q]``, each byte
through the type's byte map (:func:`byte_map`: the byte of the record it copies, 0 for
the widening of an odd-width integer, or a byte of the record's offset for the
``_offset`` column). Everything after staging is the plain transpose's
(:func:`kernels.cuda.transpose.tile_functions`), and the strings' copy reads through the
same index (:func:`kernels.cuda.strings._copy_strings_at`). Text fields are checked for
NUL bytes on the staged tile (fault code ``E_NUL`` on op 0, which the forward transpose
never reports otherwise).

Records too large to stage (a tile of 32 of them over the shared-memory limit, see
:func:`kernels.cuda.transpose.tile_shape`) are gathered instead into packed records in
device memory by :func:`gather_records`, which the unstaged transpose then reads.
"""

import functools

import numpy as np
from numba import cuda, int32, int64, uint32, uint64

from ..plan import COUNT, E_NUL, K_CSTR, K_UTF32, KIND, OFFS, WIDTH
from .device import MAX_BLOCKS, THREADS, _dev, _fault, _get
from .tile import _divmod32
from .transpose import _slot_word, tile_functions, tile_shape

__all__ = [
    "gather_records",
    "byte_map",
    "forward_at",
    "check_index",
    "check_strings",
    "stageable",
    "KERNELS",
    "LAUNCHES",
    "THREADS",
]

ZERO = -1  # a byte map entry: the byte is 0; -2 - k: byte k of the record's offset


@_dev
def _mapped_byte(rec, at, bmap, row, k):
    """Byte ``k`` of the packed record of ``row``, through the byte map."""
    m = bmap[uint64(k)]
    if m >= 0:
        return uint32(_get(rec, 0, at[uint64(row)] + m, 1))
    if m == ZERO:
        return uint32(0)
    return uint32((at[uint64(row)] >> (8 * (-2 - m))) & 0xFF)


@_dev
def _gathered_word(rec, at, bmap, r0, count, w, stride):
    """Word ``w`` of the packed records ``r0 .. r0 + count`` of a tile (bytes past the
    last record: 0). A tile is under 48 KiB: 32-bit division."""
    q, k = _divmod32(int64(w) * 4, stride)
    v = uint32(0)
    for t in range(4):
        if q < count:
            v |= _mapped_byte(rec, at, bmap, r0 + q, k) << uint32(8 * t)
            k += 1
            if k == stride:
                k = 0
                q += 1
    return v


@functools.lru_cache(maxsize=None)
def forward_at(mask):
    """The gathered forward kernel for the op kinds in ``mask``
    (:func:`kernels.cuda.transpose.kinds_of`): the staged main kernel with the tile
    staged through the index (``at``, ``bmap``) and the text ranges of ``nul`` (pairs
    of byte offset and width in the packed record) checked for NUL bytes."""
    forward_tile = tile_functions(mask, True)[0]

    @cuda.jit
    def forward(rec, at, bmap, nul, n, stride, slot, rows, ops, offs, a8, a16, a32, a64, tables, err):
        tile = cuda.shared.array(0, dtype=uint32)
        tid, nt = cuda.threadIdx.x, cuda.blockDim.x
        nops = ops.shape[0]
        nn = int32(nul.shape[0] >> 1)
        r0 = int64(cuda.blockIdx.x) * rows
        while r0 < n:
            r1 = min(r0 + rows, n)
            count = int32(r1 - r0)
            words = int32((count * stride + 3) >> 2)
            w_next = tid
            while w_next < words:
                tile[_slot_word(w_next, stride, slot)] = _gathered_word(rec, at, bmap, r0, count, w_next, stride)
                w_next = int32(w_next + nt)
            cuda.syncthreads()
            e_next = tid
            while e_next < count * nn:  # text fields: no NUL byte
                q, f = _divmod32(e_next, nn)
                e_next = int32(e_next + nt)
                p = int32(q * slot + nul[uint64(2 * f)])
                end = int32(p + nul[uint64(2 * f + 1)])
                while p < end:
                    if _get(tile, 0, p, 1) == 0:
                        _fault(err, r0 + q, 0, E_NUL, nops)
                        break
                    p = int32(p + 1)
            forward_tile(tile, 0, slot, r0, r1, ops, offs, a8, a16, a32, a64, tables, err)
            cuda.syncthreads()
            r0 += int64(cuda.gridDim.x) * rows

    return forward


def stageable(itemsize):
    """Whether a tile of records of ``itemsize`` bytes fits in shared memory: the
    gathered kernel's case; larger records go through :func:`gather_records`."""
    return tile_shape(itemsize)[2]


def check_index(offsets, nbytes, bmap):
    """Raise ValueError unless every byte the byte map reads of every record at
    ``offsets`` lies inside a stream of ``nbytes`` bytes: what the kernels dereference,
    checked before they run."""
    reads = np.asarray(bmap)[np.asarray(bmap) >= 0]
    if not len(offsets) or not len(reads):
        return
    lo, hi = int(np.min(offsets)), int(np.max(offsets))
    if lo < 0 or hi + int(reads.max()) >= nbytes:
        raise ValueError(
            f"record offsets {lo}..{hi} with bytes up to {int(reads.max())} past each do not lie "
            f"inside the stream's {nbytes} bytes"
        )


def check_strings(ops, offs, bmap):
    """Raise ValueError unless each string element of the plan (``ops``, ``offs``) is one
    run of the stream's bytes in the byte map: :func:`kernels.cuda.strings._copy_strings_at`
    copies it from its first byte on."""
    for j in range(ops.shape[0]):
        if ops[j, KIND] not in (K_CSTR, K_UTF32):
            continue
        width = int(ops[j, WIDTH])
        for k in range(int(ops[j, COUNT])):
            at = int(offs[int(ops[j, OFFS]) + k])
            run = bmap[at : at + width]
            if len(run) != width or run[0] < 0 or np.any(run != run[0] + np.arange(width)):
                raise ValueError(f"string op {j} element {k} (bytes {at}..{at + width}) is not one run of the stream")


def launch_at(rec, index, n, stride, plan, views, err, stream):
    """Queue the gathered forward kernel (``index``: device ``at``, ``bmap``, ``nul``)."""
    at, bmap, nul = index
    rows, slot, staged = tile_shape(stride)
    if not staged:
        raise ValueError(f"records of {stride} bytes are too large to stage: gather them first (gather_records)")
    blocks = max(1, min(-(-n // rows), MAX_BLOCKS))
    forward_at(plan.kinds)[blocks, THREADS, stream, rows * slot + 8](
        rec, at, bmap, nul, n, stride, slot, rows, plan.d_ops, plan.d_offs, *views, plan.tables, err
    )


@cuda.jit
def _gather_words(buf, offsets, bmap, n, itemsize, out):
    """Word ``w`` of ``n`` packed records of ``itemsize`` bytes (``out``, uint32), from
    the records at ``buf[offsets[row]:]`` through ``bmap`` (one entry per packed byte)."""
    total = int64(n) * itemsize
    nwords = (total + 3) >> 2
    w_next = cuda.grid(1)
    while w_next < nwords:
        w = w_next
        w_next += cuda.gridsize(1)
        b0 = w * 4
        row = b0 // itemsize  # one 64-bit division a word; the next bytes step along
        at = b0 - row * itemsize
        v = uint32(0)
        for k in range(4):
            if b0 + k >= total:
                break
            m = bmap[at]
            if m >= 0:
                x = uint32(buf[offsets[row] + m])
            elif m == ZERO:
                x = uint32(0)
            else:
                x = uint32((offsets[row] >> (8 * (-2 - m))) & 0xFF)
            v |= x << uint32(8 * k)
            at += 1
            if at == itemsize:
                at = 0
                row += 1
        out[w] = v


def byte_map(itemsize, runs, offset_at):
    """The byte map of a record plan: ``runs`` (``(k, 3)``: source offset in the record,
    place in the packed record, length), the record's offset stored at ``offset_at``
    (-1: not stored); every other byte 0."""
    bmap = np.full(max(itemsize, 1), ZERO, np.int32)
    for src, dst, length in np.asarray(runs, np.int64).reshape(-1, 3):
        bmap[dst : dst + length] = np.arange(src, src + length, dtype=np.int32)
    if offset_at >= 0:
        bmap[offset_at : offset_at + 8] = -2 - np.arange(8, dtype=np.int32)
    return bmap


def gather_records(buf, offsets, itemsize, bmap, out):
    """Fill ``out`` (device uint32 words, at least ``ceil(len(offsets) * itemsize / 4)``)
    with the packed records at ``offsets`` (device int64) of ``buf`` (device uint8) by
    ``bmap`` (device int32, from :func:`byte_map`): for records too large to stage. The
    caller has checked that every record lies inside ``buf`` (:func:`check_index`).
    Queued on the default stream."""
    n = offsets.shape[0]
    nwords = -(-n * itemsize // 4)
    if nwords:
        blocks = max(1, min(-(-nwords // THREADS), MAX_BLOCKS))
        _gather_words[blocks, THREADS](buf, offsets, bmap, n, itemsize, out)


def LAUNCHES():  # noqa: N802 - the name kernels/ptx.py looks for (--also)
    """Threads per block and dynamic shared memory of this module's kernels as their host
    functions launch them (the gathered kernel: the tile of a 48-byte record, as
    kernels/ptx.py gives the main kernels)."""
    rows, slot, _ = tile_shape(48)
    tile = (THREADS, rows * slot + 8)
    return {
        "forward_at": tile,
        "forward_at[stream]": tile,
        "copy_strings_at": (THREADS, 0),
        "stream_gather": (THREADS, 0),
    }


def KERNELS():  # noqa: N802 - the name kernels/ptx.py looks for (--also)
    """The kernels of this module with the argument types their host functions pass:
    the gathered forward kernel for the kinds of the ITCH and pcap types (copies, fixed
    bytes, C strings; and all kinds), the strings' copy through the index, and the
    gather of records too large to stage."""
    from numba import types as t

    from ..plan import K_BYTES, K_COPY, K_CSTR
    from .device import ALL_KINDS
    from .strings import _copy_strings_at

    u8, u16, u32, i32, i64 = t.uint8[::1], t.uint16[::1], t.uint32[::1], t.int32[::1], t.int64[::1]
    arena = (u8, u16, u32, i64)
    at = (u32, i64, i32, i64, t.int64, t.int64, t.int64, t.int64, t.int64[:, ::1], i64, *arena, i64, i64)
    stream = (1 << K_COPY) | (1 << K_BYTES) | (1 << K_CSTR)
    return {
        "forward_at": (forward_at(ALL_KINDS), at),
        "forward_at[stream]": (forward_at(stream), at),
        "copy_strings_at": (_copy_strings_at, (u32, i64, i32, t.int64, t.int64, i64, i64, *arena)),
        "stream_gather": (_gather_words, (u8, i64, i32, t.int64, t.int64, u32)),
    }
