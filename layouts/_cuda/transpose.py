"""The converter's GPU slots: chunks of a streaming conversion through the GPU.

A :class:`ForwardSlot` (records -> Arrow) and a :class:`ReverseSlot` (Arrow -> records)
each own a CUDA stream, page-locked host buffers and a device arena (see
:mod:`layouts._cuda.arena`), reused chunk after chunk; with two or more slots taking
turns, the transfers of one chunk run while another converts. Whole-container
conversions and moves are the CUDA backend's (:mod:`layouts._backends.cuda`). This
module builds host SoAs, so it sits above the containers in the layers contract, and
it reads an SoA only through :meth:`layouts.SoA.parts`. Imported only when data goes
to a GPU.
"""

import numpy as np

from .._arena import Arena
from .._faults import forward_error
from .._plan import forward_ops, reverse_ops
from .._soa import every_reverse_error, soa_over_arena
from . import device as _device
from .arena import HEAD, Span, device_tables, packing, word_bytes

__all__ = ["ForwardSlot", "ReverseSlot", "HEAD", "Span", "packing"]


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
        kc = _device.kernels()
        self.layout, self.rows, self.nulls = layout, rows, dict(nulls)
        self.stream = nb.stream()
        self.arena = Arena(layout, rows, frozenset(nulls))
        nbytes = rows * layout.itemsize
        self.records_in = _device.pinned_empty(word_bytes(nbytes))
        self.records = _device.empty(nbytes)
        self.memory = _device.empty(HEAD + self.arena.nbytes)
        self.arena_out = _device.pinned_empty(self.memory.shape[0])  # the whole allocation comes back
        self.fault_word = nb.pinned_array(1, dtype=np.int64)
        ops, offs, keep = forward_ops(self.arena, HEAD, nulls)
        self.plan = kc.Plan(ops, offs, device_tables(ops, keep), self.stream)
        self.pending, self.n = None, 0

    def submit(self, records):
        """Queue the conversion of ``records`` (host, up to ``rows`` of the layout)."""
        n, nbytes = len(records), len(records) * self.layout.itemsize
        if n > self.rows:
            raise ValueError(f"a chunk of {n} records does not fit a slot of {self.rows}")
        raw = records.view(np.uint8).reshape(-1) if n else np.empty(0, np.uint8)
        self.records_in[:nbytes] = raw  # the read: page faults of a mapped file happen here
        words = word_bytes(nbytes)
        if nbytes:
            self.records[:words].copy_to_device(self.records_in[:words], stream=self.stream)
        rec = self.records[:words].view(np.uint32)
        self.pending = _device.kernels().forward_async(
            rec, self.layout.itemsize, n, self.plan, self.memory, stream=self.stream, fault_word=self.fault_word
        )
        self.memory.copy_to_host(self.arena_out, stream=self.stream)
        self.n = n

    def finish(self):
        """Wait for the chunk :meth:`submit` queued; a host SoA over the arena copy."""
        fault, self.pending = self.pending.fault(), None
        n, layout = self.n, self.layout
        records = self.records_in[: n * layout.itemsize].view(layout.dtype)
        if fault is not None:
            raise forward_error(layout, records, fault)
        memory = self.arena_out[HEAD : HEAD + self.arena.nbytes]
        return soa_over_arena(layout, n, self.arena, memory, self.nulls, lambda: records)


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
        words = word_bytes(nbytes)
        if self.records is None or self.records.shape[0] < words:
            self.records = _device.empty(words)
            self.records_out = _device.pinned_empty(self.records.shape[0])

    def submit(self, soa):
        """Queue the writing of a host SoA's records (checked by ``SoA.from_arrow``)."""
        layout, n, parts = self.layout, len(soa), soa.parts()
        copies, packed, columns = packing(parts.columns)
        nbytes = n * layout.itemsize
        self._room(packed, nbytes)
        for raw, at in copies:
            self.columns_in[at : at + raw.size] = raw
        self.memory[:packed].copy_to_device(self.columns_in[:packed], stream=self.stream)
        ops, offs, keep = reverse_ops(layout, columns, parts.fills, parts.truncate)
        kc = _device.kernels()
        plan = kc.Plan(ops, offs, device_tables(ops, keep, self.stream), self.stream)
        words = self.records[: word_bytes(nbytes)]
        self.pending = kc.reverse_async(
            words.view(np.uint32), layout.itemsize, n, plan, self.memory, stream=self.stream, fault_word=self.fault_word
        )
        words.copy_to_host(self.records_out[: words.shape[0]], stream=self.stream)
        self.soa, self.plan = soa, plan  # both must outlive the queued work

    def finish(self):
        """Wait for the chunk :meth:`submit` queued; its records (host uint8, pinned)."""
        fault, self.pending = self.pending.fault(), None
        soa, self.soa, self.plan = self.soa, None, None
        if fault is not None:
            parts = soa.parts()
            raise every_reverse_error(self.layout, parts.columns, parts.fills, parts.truncate, len(soa), fault)
        return self.records_out[: len(soa) * self.layout.itemsize]
