"""AoS and SoA on a GPU: conversions with :mod:`kernels.cuda`, moves between host and
device, and the per-column device exports (``__cuda_array_interface__``, DLPack).

A device SoA keeps every column buffer in one device allocation (its arena); its
:class:`ColumnBuffers` hold :class:`Span` objects (byte offset and size in the arena)
instead of Arrow buffers. The buffers start at byte ``HEAD`` of the allocation, since
address 0 means "no buffer" in a copy plan. Imported only when data goes to a GPU.
"""

import numpy as np
import pyarrow as pa

from ..kernels import plan as P

from . import device as _device
from .._backends import kernels_for
from .._faults import forward_error, reverse_error
from .._plan import ALIGN, Arena, ColumnBuffers, claimed, forward_ops, reverse_ops

__all__ = ["Span", "forward", "reverse", "soa_to_host", "soa_to_device", "column_interface", "ForwardSlot",
           "ReverseSlot", "packing"]

HEAD = ALIGN


class Span:
    """A buffer inside a device arena: ``address`` is its byte offset there."""

    __slots__ = ("address", "size")

    def __init__(self, address, size):
        self.address, self.size = address, size


def _device_tables(ops, keep, stream=0):
    """Copy the enum tables the plan points at into one device int64 array (on
    ``stream``) and make the plan's TABLE entries element offsets into it."""
    rows = [j for j in range(ops.shape[0]) if ops[j, P.KIND] in (P.K_ENUM, P.K_TEXT)]  # (text: code page tables)
    parts, pos = [np.zeros(1, np.int64)], 1
    for j, table in zip(rows, keep):
        ops[j, P.TABLE] = pos
        parts.append(table)
        pos += len(table)
    return _device.cuda().to_device(np.concatenate(parts), stream=stream)


def forward(aos, nulls, out=None):
    """AoS -> SoA on the GPU for records already in device memory."""
    from .._aos import _enum_dictionary, _reusable
    from .._soa import SoA

    layout, n = aos.layout, len(aos)
    use, writes = None, ()
    if out is None:
        arena = Arena(layout, n, frozenset(nulls))
        memory = _device.empty(HEAD + arena.nbytes)
    else:
        arena, memory = _reusable(out, layout, n, frozenset(nulls), "cuda")
        use, writes = out._use, [_span_of(memory, "out= (the device arena of the SoA passed)")]
    with claimed("AoS.to_soa", writes, [_span_of(aos.array, "the records being converted")]):
        if use is not None:
            use.reuse()  # from here on, SoAs made earlier over this memory refuse to read it
        ops, offs, keep = forward_ops(arena, HEAD, nulls)
        tables = _device_tables(ops, keep)
        rec = _device.words(aos.array, n * layout.itemsize)
        fault = kernels_for("cuda").aos_to_soa(rec, layout.itemsize, n, ops, offs, memory, tables)
        if fault is not None:
            raise forward_error(layout, aos.to_device("cpu").array, fault)
        dictionaries = {}
        for i, f in enumerate(layout.fields):
            if f.kind == "enum":
                start, size = arena.buffers[i]["data"]
                start += HEAD
                idx = _device.to_host(memory[start:], size).view(np.int32)[: n * f.count]
                names, changed = _enum_dictionary(f, idx, lambda: aos.to_device("cpu").array)
                if changed:
                    memory[start : start + idx.nbytes].copy_to_device(idx.view(np.uint8))
                dictionaries[i] = names
    columns = [_spans(arena, i, n, dictionaries.get(i)) for i in range(len(layout.fields))]
    soa = SoA(layout, n, columns, fills=nulls, arena=arena, memory=memory, device="cuda")
    if use is not None:
        soa._use, soa._generation = use, use.generation
    return soa


def _span_of(dev, what):
    """``(space, first, end, what)`` of a 1-D device byte array, for :func:`claimed`."""
    first = _device.pointer(dev)
    return "cuda", first, first + dev.shape[0] * dev.dtype.itemsize, what


def _word_bytes(nbytes):
    """``nbytes`` rounded up to whole 4-byte words, at least one: the kernels see
    records as uint32 words."""
    return max(4, -(-nbytes // 4) * 4)


class ForwardSlot:
    """Everything one chunk of a streaming conversion needs on its way through the GPU,
    allocated once and reused chunk after chunk: a CUDA stream, page-locked host buffers
    for the records in and the arena out, the device records and arena, and the copy
    plan on the device.

    :meth:`submit` queues a chunk (host copy into the pinned buffer, host-to-device
    copy, kernels, device-to-host copy of the arena, all on the slot's stream) and
    returns at once; :meth:`finish` waits for it and returns a host SoA over the
    pinned arena copy. With two or more slots taking turns, the transfers of one chunk
    run while another converts.
    """

    def __init__(self, layout, rows, nulls):
        nb = _device.cuda()
        kc = kernels_for("cuda")
        self.layout, self.rows, self.nulls = layout, rows, dict(nulls)
        self.stream = nb.stream()
        self.arena = Arena(layout, rows, frozenset(nulls))
        nbytes = rows * layout.itemsize
        self.records_in = _device.pinned_empty(_word_bytes(nbytes))
        self.records = _device.empty(nbytes)
        self.memory = _device.empty(HEAD + self.arena.nbytes)
        self.arena_out = _device.pinned_empty(self.memory.shape[0])  # the whole allocation comes back
        self.fault_word = nb.pinned_array(1, dtype=np.int64)
        ops, offs, keep = forward_ops(self.arena, HEAD, nulls)
        self.plan = kc.Plan(ops, offs, _device_tables(ops, keep), self.stream)
        self.pending, self.n = None, 0

    def submit(self, records):
        """Queue the conversion of ``records`` (host, up to ``rows`` of the layout)."""
        n, nbytes = len(records), len(records) * self.layout.itemsize
        if n > self.rows:
            raise ValueError(f"a chunk of {n} records does not fit a slot of {self.rows}")
        raw = records.view(np.uint8).reshape(-1) if n else np.empty(0, np.uint8)
        self.records_in[:nbytes] = raw  # the read: page faults of a mapped file happen here
        words = _word_bytes(nbytes)
        if nbytes:
            self.records[:words].copy_to_device(self.records_in[:words], stream=self.stream)
        rec = self.records[:words].view(np.uint32)
        self.pending = kernels_for("cuda").forward_async(rec, self.layout.itemsize, n, self.plan, self.memory,
                                                         stream=self.stream, fault_word=self.fault_word)
        self.memory.copy_to_host(self.arena_out, stream=self.stream)
        self.n = n

    def finish(self):
        """Wait for the chunk :meth:`submit` queued; a host SoA over the arena copy."""
        from .._aos import soa_over_arena

        fault, self.pending = self.pending.fault(), None
        n, layout = self.n, self.layout
        records = self.records_in[: n * layout.itemsize].view(layout.dtype)
        if fault is not None:
            raise forward_error(layout, records, fault)
        memory = self.arena_out[HEAD : HEAD + self.arena.nbytes]
        return soa_over_arena(layout, n, self.arena, memory, self.nulls, records)


class ReverseSlot:
    """The mirror of :class:`ForwardSlot` for Arrow -> records: :meth:`submit` packs a
    chunk's host columns into a pinned buffer (:func:`packing`) and queues the
    host-to-device copy, the kernel and the device-to-host copy of the records on the
    slot's stream; :meth:`finish` waits and returns the records (a view of a pinned
    buffer). Buffers grow to the largest chunk seen."""

    def __init__(self, layout):
        nb = _device.cuda()
        self.layout, self.stream = layout, nb.stream()
        self.fault_word = nb.pinned_array(1, dtype=np.int64)
        self.columns_in = self.memory = self.records = self.records_out = None
        self.pending, self.soa = None, None

    def _room(self, packed, nbytes):
        if self.memory is None or self.memory.shape[0] < packed:
            self.columns_in = _device.pinned_empty(packed)
            self.memory = _device.empty(packed)
        words = _word_bytes(nbytes)
        if self.records is None or self.records.shape[0] < words:
            self.records = _device.empty(words)
            self.records_out = _device.pinned_empty(self.records.shape[0])

    def submit(self, soa):
        """Queue the writing of a host SoA's records (checked by ``SoA.from_arrow``)."""
        layout, n = self.layout, len(soa)
        copies, packed, columns = packing(soa._columns)
        nbytes = n * layout.itemsize
        self._room(packed, nbytes)
        for raw, at in copies:
            self.columns_in[at : at + raw.size] = raw
        self.memory[:packed].copy_to_device(self.columns_in[:packed], stream=self.stream)
        ops, offs, keep = reverse_ops(layout, columns, soa._fills, soa._truncate)
        kc = kernels_for("cuda")
        plan = kc.Plan(ops, offs, _device_tables(ops, keep, self.stream), self.stream)
        words = self.records[: _word_bytes(nbytes)]
        self.pending = kc.reverse_async(words.view(np.uint32), layout.itemsize, n, plan, self.memory,
                                        stream=self.stream, fault_word=self.fault_word)
        words.copy_to_host(self.records_out[: words.shape[0]], stream=self.stream)
        self.soa, self.plan = soa, plan  # both must outlive the queued work

    def finish(self):
        """Wait for the chunk :meth:`submit` queued; its records (host uint8, pinned)."""
        fault, self.pending = self.pending.fault(), None
        soa, self.soa, self.plan = self.soa, None, None
        if fault is not None:
            raise reverse_error(self.layout, soa._columns, fault)
        return self.records_out[: len(soa) * self.layout.itemsize]


def _spans(arena, i, n, dictionary):
    f = arena.layout.fields[i]

    def span(name):
        spec = arena.buffers[i].get(name)
        return None if spec is None else Span(HEAD + spec[0], spec[1])

    return ColumnBuffers(arena.arrow_type(i), n * f.count, span("validity"), span("offsets"),
                         span("data"), 0, f.kind, dictionary)


def reverse(soa):
    """SoA -> AoS on the GPU: records in a new device allocation."""
    from .._aos import AoS

    layout, n = soa.layout, len(soa)
    with claimed("SoA.to_aos", (), soa._reads("cuda")):
        soa._current("to_aos")
        ops, offs, keep = reverse_ops(layout, soa._columns, soa._fills, soa._truncate)
        tables = _device_tables(ops, keep)
        nbytes = n * layout.itemsize
        out = _device.empty(nbytes)
        fault = kernels_for("cuda").soa_to_aos(out.view(np.uint32), layout.itemsize, n, ops, offs, soa._memory,
                                               tables)
        if fault is not None:
            raise reverse_error(layout, soa_to_host(soa)._columns, fault)
    return AoS(out[:nbytes], layout)


def soa_to_host(soa):
    """Copy a device SoA's arena to host memory in one transfer; columns view it."""
    from .._soa import SoA

    mem = soa._memory
    raw = np.empty(mem.shape[0] + ALIGN, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGN
    with claimed("SoA.to_device('cpu')", (), soa._reads("cuda")):
        soa._current("to_device")
        host = _device.to_host(mem, out=raw[skip : skip + mem.shape[0]])

    def buf(span):
        return None if span is None else pa.py_buffer(host[span.address : span.address + span.size])

    columns = [ColumnBuffers(c.type, c.length, buf(c.validity), buf(c.offsets), buf(c.data), c.offset,
                             c.kind, c.dictionary) for c in soa._columns]
    return SoA(soa.layout, len(soa), columns, fills=soa._fills, truncate=soa._truncate,
               arena=soa._arena, memory=host[HEAD:] if soa._arena is not None else None)


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


def soa_to_device(soa):
    """Copy a host SoA to one device arena (one transfer). An SoA made by ``to_soa``
    goes as it is; columns borrowed from Arrow are packed (:func:`packing`)."""
    from .._soa import SoA

    if soa._memory is not None:  # the arena goes as it is, straight after the head
        size = soa._memory.nbytes
        memory = _device.empty(HEAD + size)
        with claimed("SoA.to_device('cuda')", (), soa._reads()):
            soa._current("to_device")
            if size:
                memory[HEAD : HEAD + size].copy_to_device(soa._memory)
        base = soa._memory.ctypes.data - HEAD

        def span(b):
            return None if b is None else Span(b.address - base, b.size)

        columns = [ColumnBuffers(c.type, c.length, span(c.validity), span(c.offsets), span(c.data), c.offset,
                                 c.kind, c.dictionary) for c in soa._columns]
    else:
        copies, nbytes, columns = packing(soa._columns)
        host = np.zeros(nbytes, dtype=np.uint8)
        for raw, at in copies:
            host[at : at + raw.size] = raw
        memory = _device.to_device(host)
    return SoA(soa.layout, len(soa), columns, fills=soa._fills, truncate=soa._truncate,
               arena=soa._arena, memory=memory, device="cuda")


def column_interface(column):
    """``__cuda_array_interface__`` (version 3) of a device column of fixed-width values."""
    dt = column._view_dtype()
    b = column._buffers
    if dt is None:
        raise AttributeError(
            f"column {column.name!r} is {b.type} in Arrow (bit-packed, date32 or var-length), which has "
            f"no __cuda_array_interface__; use soa.to_cudf() or soa.__arrow_c_device_array__()")
    if dt.kind in "mM":
        dt = np.dtype("<i8")  # CuPy and Numba take the counts; the unit is the Arrow type's
    ptr = _device.pointer(column._soa._memory) + b.data.address + b.offset * dt.itemsize
    return {"shape": (len(column),) + column.field.shape, "typestr": dt.str, "descr": [("", dt.str)],
            "data": (ptr, False), "strides": None, "version": 3, "stream": None}


def dlpack_device():
    if _device.simulated():
        return (2, 0)
    return (2, _device.cuda().get_current_device().id)  # kDLCUDA
