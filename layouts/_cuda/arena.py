"""A device arena: how an SoA's column buffers lie in one device allocation.

A device SoA keeps every column buffer in one device allocation; its
:class:`ColumnBuffers` hold :class:`~layouts._plan.Span` objects whose address is the
byte offset in that allocation (on the host, a Span's address is the host address).
The buffers start at byte ``HEAD``, since address 0 means "no buffer" in a copy plan. :func:`packing` places host Arrow columns into such
an allocation; :func:`device_tables` puts a plan's enum tables on the device.
"""

import numpy as np

from .._plan import ALIGN, ColumnBuffers, Span
from ..kernels import plan as P
from . import device as _device

__all__ = ["HEAD", "Span", "device_tables", "packing", "spans", "word_bytes"]

HEAD = ALIGN


def device_tables(ops, keep, stream=0):
    """Copy the enum tables the plan points at into one device int64 array (on
    ``stream``) and make the plan's TABLE entries element offsets into it."""
    rows = [j for j in range(ops.shape[0]) if ops[j, P.KIND] in (P.K_ENUM, P.K_TEXT)]  # (text: code page tables)
    parts, pos = [np.zeros(1, np.int64)], 1
    for j, table in zip(rows, keep[: len(rows)], strict=True):  # (the tables lead keep: _plan's ops)
        assert isinstance(table, np.ndarray), type(table)
        ops[j, P.TABLE] = pos
        parts.append(table)
        pos += len(table)
    return _device.cuda().to_device(np.concatenate(parts), stream=stream)


def word_bytes(nbytes):
    """``nbytes`` rounded up to whole 4-byte words, at least one: the kernels see
    records as uint32 words."""
    return max(4, -(-nbytes // 4) * 4)


def spans(arena, i, n, dictionary):
    """Leaf i of an :class:`layouts._arena.Arena` placed after ``HEAD`` as Span buffers
    (every buffer whole: the device arena is not cut to the records used)."""
    f = arena.layout.fields[i]

    def span(name):
        spec = arena.buffers[i].get(name)
        return None if spec is None else Span(HEAD + spec[0], spec[1])

    return ColumnBuffers(
        arena.arrow_type(i), n * f.count, span("validity"), span("offsets"), span("data"), 0, f.kind, dictionary
    )


def packing(columns):
    """How host Arrow columns go into one device arena, each buffer cut to the elements
    its column uses (a slice of a large batch moves only its own bytes) and placed at a
    64-byte-aligned offset after ``HEAD``.

    Returns ``(copies, nbytes, device_columns)``: ``copies`` is a list of ``(uint8
    array, position)`` to copy into the arena, ``device_columns`` the columns as
    :class:`Span` buffers. A column's offset becomes its start within its first
    validity byte; string offsets are rebased to the bytes copied.
    """
    copies, pos = [], HEAD

    def place(raw):
        nonlocal pos
        copies.append((raw, pos))
        at, pos = pos, pos + -(-raw.size // ALIGN) * ALIGN
        return Span(at, raw.size)

    out = []
    for c in columns:
        first, validity, ends, data = c.used()
        validity = None if validity is None else place(validity)
        offsets = None
        if ends is not None:
            lo = ends[0]
            offsets = place((ends - lo).view(np.uint8) if lo else ends.view(np.uint8))
        data = None if data is None else place(data)
        out.append(ColumnBuffers(c.type, c.length, validity, offsets, data, c.offset - first, c.kind, c.dictionary))
    return copies, pos, out
