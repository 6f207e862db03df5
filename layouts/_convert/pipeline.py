"""The CPU pipeline of a conversion: records -> Arrow and Arrow -> records, chunk by chunk.

Records -> Arrow: chunk k+1 is read ahead (:mod:`.sources`) while chunk k converts into
one of two reused arenas and the writer thread hands chunk k-1 to pyarrow's writer
(:class:`Pipeline`). Arrow -> records: part k+1 is read or decoded, checked and its pages
read in by a thread while part k goes through ``SoA.to_aos`` into one of two record
buffers and part k-1 is appended to the output. With ``device="cuda"`` the chunks take
the GPU path (:mod:`.gpu`) through the same pipeline.
"""

import os

import numpy as np

from .._aos import AoS
from .._errors import ConversionError
from .._files import input_name
from .._soa import SoA
from . import gpu
from .positions import later_values, record_position, rows_named, whole_input
from .readahead import Handoff, ReadAhead, closing_after, wait_out
from .sinks import ArrowSink, RecordsSink
from .sources import arrow_batches, cut_batches, records_chunks, touch_columns

__all__ = ["records_to_arrow", "arrow_to_records", "Pipeline"]


def records_to_arrow(src, layout, out, options):
    """Convert the records of ``src`` into Arrow batches written to ``out`` (see
    :func:`layouts.convert`); returns ``(records, bytes of records)``."""
    itemsize, progress = layout.itemsize, options.progress
    with (
        records_chunks(src, layout, options) as (chunks, total, name),
        Pipeline(
            ArrowSink(out, options.format, options.compression), options.overlap, slots=gpu.slots(options)
        ) as pipe,
    ):
        if gpu.chosen(options):
            gpu.forward(chunks, layout, options, pipe, name, total)
        else:
            for aos in chunks:
                first = pipe.records
                with record_position(layout, first, name, options.offset):
                    soa = aos.to_soa(
                        nulls=options.nulls, threads=options.threads, device=options.device, out=pipe.arena(len(aos))
                    )
                pipe.write(soa)
                if progress is not None:
                    progress(pipe.records, pipe.records * itemsize, total)
        if pipe.records == 0:  # no records: an empty file with the schema
            pipe.write(AoS(b"", layout).to_soa(nulls=options.nulls, out=pipe.arena(0)))
    return pipe.records, pipe.records * itemsize


def arrow_to_records(src, layout, out, options):
    """Convert a Parquet or Arrow IPC ``src`` into records appended to ``out`` (after the
    header); returns ``(records, bytes of records)``."""
    rows, overlap, progress = options.rows(layout), options.overlap, options.progress
    name = os.fspath(src) if isinstance(src, (str, os.PathLike)) else input_name(src)

    def check(part):
        return SoA.from_arrow(
            part,
            layout,
            fill=options.fill,
            truncate=options.truncate,
            cast=options.cast,
            time_unit=options.time_unit,
            extra=options.extra,
        )

    def bound(parts):  # each part checked (buffers, offsets) and cast for the layout, its pages read
        first = 0
        for where, part in parts:
            with rows_named(name, first, part.num_rows, where):
                try:
                    soa = check(part)
                except ConversionError as err:
                    raise whole_input(err, parts, first + part.num_rows, check) from err
            if overlap:
                touch_columns(soa)
            yield soa
            first += part.num_rows

    # three parts ahead of the one converting: pyarrow decodes Parquet and reads files without the GIL
    parts = ReadAhead(bound(cut_batches(arrow_batches(src, rows, name), rows)), ahead=3, overlap=overlap)

    def report():
        if progress is not None:
            progress(pipe.records, pipe.records * layout.itemsize, None)

    with Pipeline(RecordsSink(out), overlap, slots=gpu.slots(options)) as pipe, closing_after(parts.close):
        if gpu.chosen(options):
            gpu.reverse(iter(parts), layout, options, pipe, name, report)
        else:
            buffers = [None] * pipe.nslots
            each = iter(parts)  # (one iterator: later_values takes the parts after a failed one from it)
            for soa in each:
                n, slot = len(soa), pipe.take()
                if buffers[slot] is None:
                    buffers[slot] = np.empty(rows, dtype=layout.dtype)
                records = buffers[slot][:n]
                try:
                    with rows_named(name, pipe.records, n):
                        soa.to_aos(out=records, threads=options.threads, device=options.device)
                except ConversionError as err:
                    raise later_values(err, each, name, pipe.records, n) from None
                pipe.put(slot, memoryview(records.view(np.uint8)).cast("B")[: n * layout.itemsize], n)
                report()
    return pipe.records, pipe.records * layout.itemsize


class Pipeline:
    """Hands converted chunks to a sink (pyarrow's writer, or the records file), in the
    thread of a :class:`~.readahead.Handoff` when ``overlap`` is set: chunk k is written
    while chunk k+1 converts. ``slots`` sets of buffers take turns (two on the CPU; three
    pinned buffer sets on the GPU, where one chunk is written, one converts and one is
    queued): a slot is handed out again only once what was put from it is written."""

    def __init__(self, sink, overlap, slots=2):
        self.sink, self.records, self.overlap = sink, 0, overlap
        self.handoff = Handoff(slots, "layouts-writer")
        self.nslots, self.abandoned = slots, False
        self.kept = [None] * slots  # per slot: the SoA whose arena the CPU path reuses
        self.current = None

    def take(self):
        """A slot whose last chunk is written (waits for the writer): its buffers may
        be filled again."""
        return self.handoff.take()

    def put(self, slot, item, records):
        """Write ``item`` (what the sink takes: a record batch, or record bytes), which
        holds ``records`` records in the buffers of ``slot``."""
        self.records += records
        if self.handoff.thread is None:
            self.sink.write(item)
            self.handoff.release(slot)
        else:
            self.handoff.put(slot, item)

    def arena(self, n):
        """An SoA to reuse for the next chunk of n records (None: allocate one)."""
        self.current = self.take()
        soa = self.kept[self.current]
        return soa if soa is not None and soa.parts().arena.capacity >= n else None

    def write(self, soa):
        """Write a chunk converted into (or in place of) the arena :meth:`arena` gave."""
        slot, self.current = self.current, None
        self.kept[slot] = soa  # the slot's own arena, or a new, larger one
        self.put(slot, soa.to_record_batch(), len(soa))

    def _write(self, handoff):
        """The writer thread: each chunk put, in order, unless the output is abandoned."""
        while True:
            slot, data = handoff.get()
            if slot is None:
                return
            if not handoff.stopping:
                self.sink.write(data)
            del data  # nothing here may keep the slot's buffers exported once it is free
            handoff.release(slot)

    def __enter__(self):
        if self.overlap:
            self.handoff.start(self._write)
        return self

    def __exit__(self, kind, value, tb):
        error = None
        if self.handoff.thread is not None:
            self.abandoned = kind is not None  # an error or Ctrl-C: what is queued is not written
            hold = wait_out(self._stop_writer)
            error = self.handoff.error
            if kind is None and error is None:
                try:
                    hold.deliver()  # a Ctrl-C while the last chunks were written: the output is dropped
                except BaseException:
                    self._close_quietly()
                    raise
        if kind is None and error is None:
            self.sink.close()
            return False
        self._close_quietly()
        if kind is None:
            raise error
        return False

    def _close_quietly(self):
        """An error or Ctrl-C (here, or in the writer) is on its way and the output is dropped: it is the
        one to report, not what finishing a file cut short says."""
        try:
            self.sink.close()
        except Exception:  # noqa: BLE001 - the sink's handles are closed either way
            pass

    def _stop_writer(self):
        """Tell the writer thread to end, after what is queued (or at once when the output is
        abandoned), and wait for it: it may be writing a chunk whose buffers go once this
        returns. Ctrl-C is held by the caller."""
        self.handoff.stop(abandon=self.abandoned)
