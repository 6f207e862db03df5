"""Record streams on the GPU: the records of one type gathered from the stream through
their byte offsets into packed records in device memory, which the main transpose
kernel (:mod:`kernels.cuda.transpose`) then takes as it takes any records.

The stream goes to the device once; the scan that finds the offsets stays on the CPU
(one pass over the bytes, see docs/streams.md). Each thread builds whole 4-byte words
of the packed records (consecutive threads, consecutive words: the stores are
coalesced), each byte taken from its record through a byte map: the byte of the record
it copies, 0 (the widening of an odd-width integer), or a byte of the record's offset
(the ``_offset`` column). One extra pass in device memory, at its bandwidth, instead of
a transpose that reads through the index (not done: see docs/streams.md, Not yet).
"""

import numpy as np
from numba import cuda, int64, uint32

from .device import MAX_BLOCKS, THREADS

__all__ = ["gather_records", "byte_map", "KERNELS", "THREADS"]

ZERO = -1  # a byte map entry: the byte is 0; -2 - k: byte k of the record's offset


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
    ``bmap`` (device int32, from :func:`byte_map`). The caller has checked that every
    record lies inside ``buf``. Queued on the default stream."""
    n = offsets.shape[0]
    nwords = -(-n * itemsize // 4)
    if nwords:
        blocks = max(1, min(-(-nwords // THREADS), MAX_BLOCKS))
        _gather_words[blocks, THREADS](buf, offsets, bmap, n, itemsize, out)


def KERNELS():  # noqa: N802 - the name kernels/ptx.py looks for (--also)
    """The kernel of this module with the argument types :func:`gather_records` passes."""
    from numba import types as t

    return {
        "stream_gather": (_gather_words, (t.uint8[::1], t.int64[::1], t.int32[::1], t.int64, t.int64, t.uint32[::1]))
    }
