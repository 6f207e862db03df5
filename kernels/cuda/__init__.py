"""CUDA backend: AoS <-> SoA on an NVIDIA GPU, with Numba CUDA, driven by the same copy
plan as :mod:`kernels.cpu`.

One thread block converts one *tile* of records at a time (a multiple of 32 rows):

1. **Stage.** The tile's record bytes are read as 4-byte words, consecutive threads
   reading consecutive words (coalesced, aligned, whatever the itemsize and the field
   alignment; packed records too), into shared memory. Where the record is a whole
   number of words and that number is even, each record's slot gets one spare word, so
   the slot stride is odd and threads reading the same field of consecutive records hit
   different banks.
2. **Scatter.** For each column, consecutive threads take consecutive elements, so the
   stores into the column are coalesced. Byte swaps, bit-field extraction, enum lookups,
   time-unit scaling and sentinel nulls happen here; booleans and validity bitmaps are
   built one output byte (8 rows) per thread, so no two threads share a byte.
3. **Strings.** The same pass trims each ``S<n>``/``U<n>`` value and writes its length
   (UTF-8 checked); a scan turns lengths into Arrow offsets; a third kernel copies the
   bytes to their offsets.

SoA -> AoS is the mirror: the tile is cleared, every column's elements are merged into
it with shared-memory atomic ORs (bit-fields sharing a container word need no
read-modify-write), then the tile leaves as whole words, coalesced. Records larger than
the shared-memory budget are converted in place in global memory the same way.

Addresses in the plan are byte offsets into the arena (``DATA``, ``VALID``,
``OFFSETS``) and element offsets into one int64 ``tables`` array (``TABLE``). Faults
are reported as the smallest ``(row, op)`` with a fault, packed into one int64 that
every thread lowers with an atomic min. The device copy of the plan
(:func:`device_ops`) has four more columns, computed on the host, so that no kernel
divides by a time scale factor: a 64-bit division is a subroutine call on the GPU, and
the registers live across it count against the whole kernel
(``docs/gpu-kernels.md``).

Host functions: :func:`aos_to_soa` and :func:`soa_to_aos`, like the CPU module's, each
taking a CUDA stream; :func:`forward_async` and :func:`reverse_async` queue a conversion on a
stream with the plan already on the device (:class:`Plan`) and return without waiting, for pipelines
that overlap transfers of one chunk with the conversion of another.
The cuDF bridge (:mod:`layouts._cuda.cudf`) has small kernels of its own here, with host
functions of the same shape: :func:`bits_to_bits` (a bitmap realigned),
:func:`bits_to_bytes` and :func:`bytes_to_bits` (Arrow's packed booleans and cuDF's
bytes), :func:`codes_with_nulls` (-1 under nulls) and :func:`offsets_check` /
:func:`offsets_rebase` (string offsets taken from cuDF).
Kernels are compiled once per argument types (a plan is data, so every layout shares
them) and run under ``NUMBA_ENABLE_CUDASIM=1`` without a GPU. Imported only when used.

Modules: ``device`` (device functions and launch constants), ``tile`` (per-op element
transforms of one tile), ``transpose`` (the specialised main kernels and their host
functions), ``strings`` (offsets scan and string copy), ``arrow`` (the cuDF bridge's kernels),
``gather`` (record streams: the forward kernel staging its tiles through an index of
record offsets, :func:`forward_async` with ``index=``).
"""

from ..plan import K_TEXT
from .arrow import (
    _bits_to_bits,
    _bits_to_bytes,
    _bytes_to_bits,
    _codes_with_nulls,
    _offsets_check,
    _offsets_rebase,
    bits_to_bits,
    bits_to_bytes,
    bytes_to_bits,
    codes_with_nulls,
    offsets_check,
    offsets_rebase,
)
from .device import ALL_KINDS, M_VALIDITY, MAX_BLOCKS, SCAN_THREADS, SIMULATED, THREADS
from .mainframe import MAINFRAME_KINDS, copy_text
from .strings import _copy_strings, _scan_add, _scan_blocks, _scan_sums
from .transpose import (
    Pending,
    Plan,
    aos_to_soa,
    device_ops,
    forward_async,
    kinds_of,
    launcher,
    reverse_async,
    soa_to_aos,
    specialised,
    tile_shape,
)

__all__ = [
    "aos_to_soa",
    "soa_to_aos",
    "forward_async",
    "reverse_async",
    "Plan",
    "Pending",
    "launcher",
    "tile_shape",
    "KERNELS",
    "bits_to_bits",
    "bits_to_bytes",
    "bytes_to_bits",
    "codes_with_nulls",
    "offsets_check",
    "offsets_rebase",
    "kinds_of",
    "specialised",
    "device_ops",
    "THREADS",
    "SCAN_THREADS",
    "SIMULATED",
    "MAX_BLOCKS",
    "ALL_KINDS",
]


def _signatures():
    """Argument types of every kernel as the host functions launch them."""
    from numba import types as t

    u8, u16, u32, i32, i64 = t.uint8[::1], t.uint16[::1], t.uint32[::1], t.int32[::1], t.int64[::1]
    arena = (u8, u16, u32, i64)
    tile = (u32, t.int64, t.int64, t.int64, t.int64, t.int64[:, ::1], i64, *arena, i64, i64)
    forward, reverse = specialised(ALL_KINDS)
    mf_forward, mf_reverse = specialised(MAINFRAME_KINDS | 1 << K_TEXT | M_VALIDITY)  # a COBOL record: no C kinds
    return {
        "forward": (forward, tile),
        "reverse": (reverse, tile),
        "forward[mainframe]": (mf_forward, tile),
        "reverse[mainframe]": (mf_reverse, tile),
        "scan_blocks": (_scan_blocks, (u32, i64, t.int64, t.int64, t.int64, i64)),
        "scan_sums": (_scan_sums, (i64,)),
        "scan_add": (_scan_add, (u32, i64, t.int64, t.int64, t.int64, i64, t.int64)),
        "copy_strings": (_copy_strings, (u32, i64, i64, t.int64, t.int64, i64, i64, *arena)),
        "copy_text": (copy_text, (u32, t.int64, t.int64, i64, i64, *arena, i64)),
        "bits_to_bits": (_bits_to_bits, (u8, t.int64, t.int64, t.int64, u8)),
        "bits_to_bytes": (_bits_to_bytes, (u8, t.int64, t.int64, t.int64, u8)),
        "bytes_to_bits": (_bytes_to_bits, (u8, t.int64, u8)),
        "codes_with_nulls": (_codes_with_nulls, (i32, u8, t.int64, t.int64, i32)),
        "offsets_check[int32]": (_offsets_check, (i32, t.int64, t.int64, t.int64, i64)),
        "offsets_check[int64]": (_offsets_check, (i64, t.int64, t.int64, t.int64, i64)),
        "offsets_rebase[int32]": (_offsets_rebase, (i32, t.int64, t.int64)),
        "offsets_rebase[int64]": (_offsets_rebase, (i64, t.int64, t.int64)),
    }


KERNELS = _signatures
"""Every kernel of this module with its argument types (the PTX compile test walks this)."""
