"""CPU backend: AoS <-> SoA in one pass over the records, with Numba.

The records are cut into one chunk per thread (chunk starts are multiples of 64 rows,
so no two threads share a byte of a bitmap). Inside a chunk, rows go in blocks of
about 16 KiB: a block is read from memory once, and every column's values for those
rows are written while the block is still in cache. Byte swaps, bit-packing of
booleans, sentinel nulls, time-unit scaling and string trimming happen inside that
pass. Variable-length strings are written per chunk at a worst-case position and
moved together afterwards (a pass over the string bytes only, not the records).

The way back assembles a block of records in a buffer that stays in cache (its padding
zeroed once per thread, not per block), prefetching the next block's column values,
and copies it out in one sequential pass. Outputs of STREAM_BYTES and more, both ways,
leave the staging buffer by streaming stores, which do not read the lines they write
(a plain store does: twice the memory traffic). See docs/performance.md.

Host functions (:mod:`kernels.cpu.host`): :func:`aos_to_soa` and :func:`soa_to_aos`. Both run a copy plan (see
:mod:`kernels.plan`) and return ``None`` or the first fault as ``(row, op, code)``.
The inner functions are compiled ahead of time (the wheel carries them, see
:mod:`kernels._cache`) or once per machine, and cached on disk by the content of their
sources: the plan is data, so a new layout costs no compilation either.
:func:`precompile` loads or compiles them; :func:`missing` tells which would compile.

Modules: ``memory`` (loads, stores and copies at raw addresses), ``forward`` (AoS -> SoA
per op kind, and the chunk kernel), ``reverse`` (SoA -> AoS), ``host`` (the host
functions and the kernels compiled ahead of time); the threads are :mod:`kernels.threads`.
"""

from ..threads import default_threads
from .host import aos_to_soa, missing, precompile, soa_to_aos

__all__ = ["aos_to_soa", "soa_to_aos", "default_threads", "precompile", "missing"]
