"""Where the converted chunks go: :class:`ArrowSink` (Parquet, Feather, Arrow IPC file or
stream) and :class:`RecordsSink` (records appended after the header), both writing into
the output :func:`layouts._files.open_output` made; a failure to write names the
destination, the bytes written and the fix (:func:`writing`).
"""

import errno
import os
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from .._files import BlockReservation

__all__ = ["ArrowSink", "RecordsSink", "write_header", "writing"]


@contextmanager
def writing(out):
    """An error writing the output ``out`` (:func:`layouts._files.open_output`) names the
    destination, the bytes written so far and, for a full disk, what to do. A reader
    that closed its end of a pipe is a :class:`BrokenPipeError` (a command exits quietly)."""
    try:
        yield
    except OSError as err:
        done = out.written()
        if err.errno == errno.EPIPE:
            raise BrokenPipeError(
                errno.EPIPE, f"writing {out.name}: its reader closed it after {done:,} bytes of output"
            ) from err
        reason = os.strerror(err.errno) if err.errno else str(err)
        hint = "; free space there or write elsewhere" if err.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        left = "what was written stays written" if out.stream else "the destination was left as it was"
        raise OSError(
            err.errno, f"writing {out.name} failed after {done:,} bytes of output: {reason}{hint} ({left})"
        ) from err


_METADATA = 1 << 16  # reserved per batch beyond its buffers: IPC message and padding, Parquet pages


class ArrowSink:
    """Record batches into Parquet (a row group each) or Arrow IPC (a batch each); the
    writer opens on the first batch, which gives the schema. The file's blocks are
    reserved a batch ahead (:class:`BlockReservation`): records -> Arrow IPC from the
    page cache ran 1.13-1.20x faster with it (``python -m benchmarks.block_reservation``)."""

    def __init__(self, out, fmt, compression):
        self.out, self.fmt, self.compression = out, fmt, compression
        self.writer = self.file = self.blocks = None
        self.dictionaries = _Dictionaries()

    def write(self, batch):
        with writing(self.out):
            if self.file is None:
                # a file: pyarrow's own file on it (its writes need no Python); a stream: through the
                # counting wrapper, whose position pyarrow keeps itself (nothing seeks)
                out = self.out
                self.file = (
                    pa.OSFile(out.native_path, "wb")
                    if out.native_path is not None
                    else pa.PythonFile(out.file, mode="w")
                )
                self.writer = _writer(self.file, self.fmt, batch.schema, self.compression)
                self.blocks = BlockReservation(out.fd) if out.fd is not None else None
            if self.blocks is not None:
                self.blocks.ahead(batch.nbytes + _METADATA)
            if self.fmt == "parquet":
                self.writer.write_batch(batch, row_group_size=max(batch.num_rows, 1))  # an empty input: an empty file
            else:
                self.writer.write_batch(self.dictionaries.extend(batch))

    def close(self):
        """Finish the file; its handles are closed (and dropped) even when that fails."""
        writer, file, blocks = self.writer, self.file, self.blocks
        self.writer = self.file = self.blocks = None
        if file is None:
            return
        with writing(self.out):
            try:
                if writer is not None:
                    writer.close()
            finally:
                try:
                    file.close()
                finally:
                    if blocks is not None:
                        blocks.close()


class _Dictionaries:
    """One growing dictionary per dictionary column (C enums) of an IPC output.

    Each chunk's enum dictionary is the enumerator names, then the values with no
    enumerator that the chunk holds. An IPC file allows no dictionary replacement, so a
    batch whose dictionary is not a prefix of the one written so far is re-indexed into
    that dictionary extended by its new entries; pyarrow writes the extension as a
    dictionary delta. Columns inside sub-arrays and nested records are handled too."""

    def __init__(self):
        self.known = {}  # column path -> (entries written, {entry: index})

    def extend(self, batch):
        columns = [self._column(col, (i,)) for i, col in enumerate(batch.columns)]
        if all(a is b for a, b in zip(columns, batch.columns)):
            return batch
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema)

    def _column(self, arr, key):
        t = arr.type
        if pa.types.is_dictionary(t):
            return self._dictionary(arr, key)
        if pa.types.is_fixed_size_list(t):
            size = t.list_size
            values = arr.values.slice(arr.offset * size, len(arr) * size)
            new = self._column(values, key + (0,))
            if new is values:
                return arr
            return pa.FixedSizeListArray.from_arrays(new, type=t, mask=arr.is_null() if arr.null_count else None)
        if pa.types.is_struct(t):
            children = [arr.field(i) for i in range(t.num_fields)]
            new = [self._column(c, key + (i,)) for i, c in enumerate(children)]
            if all(a is b for a, b in zip(new, children)):
                return arr
            return pa.StructArray.from_arrays(new, fields=list(t), mask=arr.is_null() if arr.null_count else None)
        return arr

    def _dictionary(self, arr, key):
        entries = arr.dictionary.to_pylist()
        if key not in self.known:
            self.known[key] = (entries, {v: k for k, v in enumerate(entries)})
            return arr
        seen, index = self.known[key]
        if entries == seen:
            return arr
        indices = arr.indices
        if entries != seen[: len(entries)]:  # new entries, or the same ones in another order
            for v in entries:
                if v not in index:
                    index[v] = len(seen)
                    seen.append(v)
            indices = pa.array(np.array([index[v] for v in entries], dtype=np.int32)).take(indices)
        return pa.DictionaryArray.from_arrays(indices, pa.array(seen, type=arr.dictionary.type))


class RecordsSink:
    """Record bytes appended to a file. No blocks are reserved ahead here: in trial runs
    it gained nothing from the page cache and, reading the input from the disk, it
    halved the speed (the reservation waited behind the input's reads)."""

    def __init__(self, out):
        self.out = out
        self.file = out.records_file()

    def write(self, data):
        with writing(self.out):
            self.file.write(data)

    def close(self):
        file, self.file = self.file, None
        if file is not None:
            with writing(self.out):
                file.close()


def _writer(file, fmt, schema, compression):
    """pyarrow's writer for ``fmt`` into ``file`` (a pyarrow file, left open)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        codec = "snappy" if compression is None else compression
        return pq.ParquetWriter(file, schema, compression=codec)
    codec = ("lz4" if fmt == "feather" else None) if compression is None else compression
    codec = None if codec in ("none", "uncompressed") else codec
    options = pa.ipc.IpcWriteOptions(compression=codec, emit_dictionary_deltas=True)
    if fmt == "arrows":  # the IPC stream format: schema, batches, end marker; no footer
        return pa.ipc.new_stream(file, schema, options=options)
    return pa.ipc.new_file(file, schema, options=options)


def write_header(out, head):
    """Write the header bytes before the records (the records' writer appends after them)."""
    if head:
        with writing(out):
            f = out.records_file()  # a file: a new buffered writer on its descriptor; a stream: the stream
            f.write(head)
            f.flush()
            if not out.stream:
                f.close()  # (the descriptor stays open)
