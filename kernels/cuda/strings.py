"""Strings on the GPU: the scan that turns lengths into Arrow offsets and the copy of the
trimmed bytes to their offsets."""

from numba import cuda, int64

from ..plan import (
    COUNT,
    DATA,
    K_CSTR,
    KIND,
    OFFS,
    OFFSETS,
    P2,
    SWAP,
    WIDTH,
)
from .device import _dev, _get, _offset_at, _set_offset, _swap


@cuda.jit
def _scan_blocks(a32, a64, offsets, ow, count, sums):
    """Inclusive scan of ``count`` values after the first offset, one run of blockDim
    values per block; each block's total goes to sums."""
    buf = cuda.shared.array(1024, dtype=int64)
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    i = cuda.blockIdx.x * nt + tid
    buf[tid] = _offset_at(a32, a64, offsets, i + 1, ow) if i < count else int64(0)
    cuda.syncthreads()
    step = 1
    while step < nt:
        add = buf[tid - step] if tid >= step else int64(0)
        cuda.syncthreads()
        buf[tid] += add
        cuda.syncthreads()
        step *= 2
    if i < count:
        _set_offset(a32, a64, offsets, i + 1, ow, buf[tid])
    if tid == nt - 1:
        sums[cuda.blockIdx.x] = buf[tid]


@cuda.jit
def _scan_sums(sums):
    """Exclusive scan of the block totals, in place (one thread: a few thousand values)."""
    if cuda.grid(1) == 0:
        total = int64(0)
        for b in range(sums.shape[0]):
            v = sums[b]
            sums[b] = total
            total += v


@cuda.jit
def _scan_add(a32, a64, offsets, ow, count, sums, nt_scan):
    i = cuda.grid(1)
    if i < count:
        before = sums[i // nt_scan]
        if before != 0:
            _set_offset(a32, a64, offsets, i + 1, ow, _offset_at(a32, a64, offsets, i + 1, ow) + before)


@_dev
def _copy_string(rec, p, i, op, per_n, ow, a8, a32, a64):
    """String element ``i``, whose bytes start at byte ``p`` of ``rec``, to its offset
    (``per_n``, ``ow``: the op's WIDTH and P2, read once per thread)."""
    start = _offset_at(a32, a64, op[OFFSETS], i, ow)
    length = _offset_at(a32, a64, op[OFFSETS], i + 1, ow) - start
    pos = op[DATA] + start
    if op[KIND] == K_CSTR:
        for t in range(length):
            a8[pos + t] = _get(rec, 0, p + t, 1)
        return
    out = 0
    t = 0
    while out < length and t < per_n // 4:
        cp = _get(rec, 0, p + t * 4, 4)
        if op[SWAP] != 0:
            cp = _swap(cp, 4)
        t += 1
        if cp < 0x80:
            a8[pos + out] = cp
            out += 1
        elif cp < 0x800:
            a8[pos + out] = 0xC0 | (cp >> 6)
            a8[pos + out + 1] = 0x80 | (cp & 0x3F)
            out += 2
        elif cp < 0x10000:
            a8[pos + out] = 0xE0 | (cp >> 12)
            a8[pos + out + 1] = 0x80 | ((cp >> 6) & 0x3F)
            a8[pos + out + 2] = 0x80 | (cp & 0x3F)
            out += 3
        else:
            a8[pos + out] = 0xF0 | (cp >> 18)
            a8[pos + out + 1] = 0x80 | ((cp >> 12) & 0x3F)
            a8[pos + out + 2] = 0x80 | ((cp >> 6) & 0x3F)
            a8[pos + out + 3] = 0x80 | (cp & 0x3F)
            out += 4


def _string_copier(indexed):
    """The kernel that writes each trimmed S<n>/U<n> element at its final offset, one
    element a thread, for records at ``r * stride`` (``indexed`` False; ``at`` and
    ``bmap`` unused) or read through an index (record streams, :mod:`kernels.cuda.gather`):
    element i of record r then starts at byte ``at[r] + bmap[its byte in the packed
    record]`` of the stream (the host has checked that each string's bytes are one run of
    the stream). ``indexed`` is a constant of the compiled kernel."""

    @cuda.jit
    def copy(rec, at, bmap, n, stride, op, offs, a8, a16, a32, a64):
        c, per_n, ow = op[COUNT], op[WIDTH], op[P2]
        i_next = cuda.grid(1)
        while i_next < n * c:
            i = i_next
            i_next += cuda.gridsize(1)
            r = i // c
            k = offs[op[OFFS] + i % c]
            p = at[r] + bmap[k] if indexed else r * stride + k
            _copy_string(rec, p, i, op, per_n, ow, a8, a32, a64)

    return copy


_copy_strings = _string_copier(False)
_copy_strings_at = _string_copier(True)
