"""The arena: where every column buffer of an SoA lies in one allocation.

An :class:`Arena` places each leaf's buffers (validity, offsets, values) at a
64-byte-aligned offset of one allocation, for a number of records; it holds offsets
only, never memory, so the same arena describes host memory and device memory (the
backend, :mod:`layouts._backends`, owns the bytes). :class:`ArenaUse` is what the SoAs
made over one arena's memory share while ``to_soa(out=...)`` hands it on.
"""

import gc
import threading
import weakref

import numpy as np
import pyarrow as pa

from ._errors import LayoutError
from ._plan import _I32_MAX, _VAR, ALIGN, arrow_width, has_time_nulls, var_bytes

__all__ = ["Arena", "ArenaUse"]


class Arena:
    """Where each leaf's buffers go in one allocation, for ``capacity`` records.

    Parameters
    ----------
    layout : Layout
    capacity : int
        Records the arena can hold.
    nullable : frozenset of str
        Leaves that get a validity bitmap (sentinel nulls); datetime leaves always do.
    """

    def __init__(self, layout, capacity, nullable=frozenset()):
        self.layout, self.capacity, self.nullable = layout, capacity, frozenset(nullable)
        self._widths = None
        self.buffers = []  # per leaf: dict of name -> (offset, size)
        self.offset_width = []
        pos = 0

        def put(size):
            nonlocal pos
            start = pos
            pos += -(-size // ALIGN) * ALIGN
            return start, size

        for f in layout.fields:
            n = capacity * f.count
            bufs = {}
            if has_time_nulls(f) or f.name in self.nullable:
                bufs["validity"] = put(-(-n // 8))
            ow = 0
            if f.kind in _VAR:
                ow = 8 if n * var_bytes(f) > _I32_MAX else 4  # (the chunks write at worst-case positions)
                bufs["offsets"] = put((n + 1) * ow)
                bufs["data"] = put(n * var_bytes(f))
            elif arrow_width(f) == 0:  # bit-packed booleans
                bufs["data"] = put(-(-n // 8))
            else:
                bufs["data"] = put(n * arrow_width(f))
            self.buffers.append(bufs)
            self.offset_width.append(ow)
        self.nbytes = pos

    def arrow_type(self, i):
        """Arrow type of leaf i's elements here (large_* where offsets need 64 bits)."""
        t = self.layout.fields[i].arrow_type
        if self.offset_width[i] == 8:
            return pa.large_string() if t == pa.string() else pa.large_binary()
        return t

    def allocate(self):
        """A new uint8 array of ``nbytes`` whose first byte is 64-byte aligned."""
        raw = np.empty(self.nbytes + ALIGN, dtype=np.uint8)
        skip = -raw.ctypes.data % ALIGN
        return raw[skip : skip + self.nbytes]

    def used(self, memory, n):
        """Per leaf, ``{buffer name: bytes}`` that the first n records use of each buffer
        of ``memory`` (host bytes the forward kernels wrote): string data ends where
        the last offset says."""
        if self._widths is None:  # elements per record, and bytes per element: 0 bit-packed, None var-length
            self._widths = [
                (f.count, None if ow else arrow_width(f)) for f, ow in zip(self.layout.fields, self.offset_width)
            ]
        out = []
        for bufs, ow, (per, width) in zip(self.buffers, self.offset_width, self._widths):
            count = n * per
            sizes = {"validity": -(-count // 8)} if "validity" in bufs else {}
            if width is None:
                sizes["offsets"] = (count + 1) * ow
                at = bufs["offsets"][0] + count * ow
                sizes["data"] = int.from_bytes(memory[at : at + ow], "little", signed=True)
            else:
                sizes["data"] = count * width if width else -(-count // 8)
            out.append(sizes)
        return out

    def zero_padding(self, memory, used):
        """Zero each buffer of ``memory`` from the end of its ``used`` bytes to the next
        64-byte boundary: Arrow writers may write a buffer's bytes up to there (pyarrow's
        IPC writer does), and they would otherwise be stale heap or earlier records."""
        for bufs, sizes in zip(self.buffers, used):
            for name, (start, _) in bufs.items():
                end = start + sizes[name]
                if end % ALIGN:
                    memory[end : end + (-end % ALIGN)] = 0


class ArenaUse:
    """What the SoAs made over one arena's memory share (``to_soa(out=...)`` hands the
    memory from one to the next): the generation, bumped each time the memory is written
    again, so that an older SoA refuses to read it; and the exports (pyarrow objects
    made by ``to_arrow`` and the like) still alive, which that memory must not change
    under: reusing it is refused while there are any.

    A lock makes "no export is alive, so bump the generation" (:meth:`reuse`) and "the
    generation is current, so add an export" (:meth:`export`) one step each: an export
    made in another thread while the arena is being reused either is refused or blocks
    the reuse, never shows the memory changing under it."""

    def __init__(self):
        self.generation = 0
        self.failed_generation = -1  # the generation whose write over the memory raised, if the last one did
        self.exports = weakref.WeakSet()
        self.lock = threading.Lock()

    def live_exports(self):
        """Exports still alive (after a garbage collection, if any seemed to be)."""
        if len(self.exports):
            gc.collect()
        return len(self.exports)

    def reuse(self):
        """Bump the generation for a write over the memory, or raise LayoutError while
        an export of it is alive."""
        with self.lock:
            live = self.live_exports()
            if live:
                raise LayoutError(
                    f"out= is still exported: {live} export(s) of its arena (to_arrow(), "
                    f"to_record_batch(), __arrow_c_stream__, a column's to_arrow()...) are alive, and writing "
                    f"other records over that memory would change them under their users; drop them first "
                    f"(del table), or pass out=None for a new arena"
                )
            self.generation += 1  # from here on, SoAs made earlier over this memory refuse to read it

    def failed(self):
        """Note that the write of the current generation raised: it returned no SoA, and
        the memory holds part of its records."""
        with self.lock:
            self.failed_generation = self.generation

    def export(self, generation, token, refuse):
        """Add ``token`` (an export) if ``generation`` is still current, else call ``refuse()``."""
        with self.lock:
            if generation != self.generation:
                refuse()
            self.exports.add(token)
