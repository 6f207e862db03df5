"""Streaming file conversion: legacy records <-> Parquet / Feather / Arrow IPC, chunk by chunk.

Records -> Arrow: a regular file is memory-mapped and a reader thread reads in the
pages of chunk k+1 (a stream is read into staging buffers) while the main thread
converts chunk k into one of two arenas and a writer thread hands chunk k-1 to
pyarrow's writer; at most a few chunks are in memory whatever the file size.
Arrow -> records: a reader thread reads (or decodes) and checks part k+1 while part k
goes through ``SoA.to_aos`` into one of two record buffers and the writer appends
part k-1 to the output. With ``device="cuda"`` the chunks go through GPU slots
(:mod:`layouts._cuda.transpose`) in the same pipeline.

Output is atomic: everything is written to a temporary file beside the destination and
renamed over it only when complete; on an error or Ctrl-C the temporary file is removed,
and a killed process leaves the destination as it was (absent or the old file).
"""

import errno
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ._aos import AoS, as_layout
from ._errors import ConversionError, LayoutError
from ._faults import forward_error
from ._files import BlockReservation, partial_record
from ._soa import SoA

__all__ = ["convert", "ConvertResult", "FORMATS"]

FORMATS = ("parquet", "feather", "arrow", "records")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".feather": "feather", ".arrow": "arrow",
             ".ipc": "arrow", ".arrows": "arrow"}
DEFAULT_CHUNK = 64 << 20


@dataclass(frozen=True)
class ConvertResult:
    """What :func:`convert` did: records, bytes read and written, seconds, output path."""

    records: int
    bytes_in: int
    bytes_out: int
    seconds: float
    dst: str

    @property
    def gbps(self):
        """Record bytes per second, in GB/s."""
        return self.bytes_in / self.seconds / 1e9 if self.seconds else float("inf")

    def __str__(self):
        return (f"{self.records:,} records, {self.bytes_in / 1e6:,.1f} MB in, {self.bytes_out / 1e6:,.1f} MB "
                f"out, {self.seconds:.2f} s, {self.gbps:.2f} GB/s -> {self.dst}")


def output_format(dst, format=None):
    """The format named, or the one the destination's suffix implies (else ``records``)."""
    if format is not None:
        if format not in FORMATS:
            raise LayoutError(f"format must be one of {FORMATS}, got {format!r}")
        return format
    return _SUFFIXES.get(Path(dst).suffix.lower(), "records")


def convert(src, layout, dst, *, format=None, device=None, chunk_bytes=DEFAULT_CHUNK, compression=None,
            overwrite=False, offset=0, trailing="error", nulls=None, fill=None, truncate=False,
            overlap=True, threads=None, progress=None):
    """Convert a file chunk by chunk, in bounded memory, writing the output atomically.

    Parameters
    ----------
    src : str, os.PathLike or binary file object
        Legacy records (after ``offset`` header bytes) when ``format`` is an Arrow
        format; a Parquet or Arrow IPC (Feather) file when ``format="records"``.
    layout : Layout or numpy.dtype
        The record type (e.g. ``Layout.from_c(header, "struct tick")``).
    dst : str or os.PathLike
        Output path. An existing file is refused unless ``overwrite=True``.
    format : {"parquet", "feather", "arrow", "records"}, optional
        Output format; by default from ``dst``'s suffix (``.parquet``, ``.feather``,
        ``.arrow``/``.ipc``; anything else writes records). ``feather`` and ``arrow`` are
        both the Arrow IPC file format; ``feather`` compresses with LZ4 by default.
    device : {"cpu", "cuda"}, optional
        Where the conversion runs. With ``"cuda"`` (records -> Arrow) each chunk is
        copied to page-locked memory and goes to the GPU in one transfer on its own CUDA
        stream, converts there and comes back in one transfer: the transfers of one
        chunk overlap with the conversion of the next and the writing of the one
        before. Arrow -> records on the GPU is the mirror image.
    chunk_bytes : int
        Bytes of records per chunk (a Parquet row group or an IPC record batch).
    compression : str, optional
        Parquet codec (default ``"snappy"``; ``"none"`` for none) or IPC codec
        (``"lz4"``, ``"zstd"``; default none for ``arrow``).
    trailing : {"error", "ignore"}
        A partial record at the end of the input: an error, or skipped with a warning.
    nulls, fill, truncate
        As in :meth:`AoS.to_soa` and :meth:`SoA.from_arrow`.
    overlap : bool
        Read chunk k+1 while chunk k converts and chunk k-1 is written (records ->
        Arrow; on the GPU, the transfers too). ``False`` runs the same chunks one after
        another, for comparison.
    progress : callable, optional
        Called as ``progress(records_done, bytes_done, bytes_total)`` after each chunk
        (``bytes_total`` is None for a stream).

    Returns
    -------
    ConvertResult
    """
    layout = as_layout(layout)
    fmt = output_format(dst, format)
    if chunk_bytes < 1:
        raise LayoutError(f"chunk_bytes must be positive, got {chunk_bytes}")
    dst = Path(dst)
    if dst.exists() and not overwrite:
        raise LayoutError(f"{dst} exists; pass overwrite=True (--overwrite) to replace it")
    if dst.is_dir():
        raise LayoutError(f"{dst} is a directory; give a file path for the output")
    if not dst.parent.is_dir():
        raise LayoutError(f"the directory of {dst} does not exist")
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.layouts-tmp")
    t0 = time.perf_counter()
    try:
        if fmt == "records":
            records, bytes_in = _arrow_to_records(src, layout, tmp, dst, chunk_bytes, fill, truncate, overlap,
                                                  threads, device, progress)
        else:
            records, bytes_in = _records_to_arrow(src, layout, tmp, dst, fmt, chunk_bytes, compression, offset,
                                                  trailing, nulls, overlap, threads, device, progress)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ConvertResult(records, bytes_in, dst.stat().st_size, time.perf_counter() - t0, str(dst))


# ----------------------------------------------------------------- records -> Arrow


class _Reader:
    """Fills staging buffers from a stream in a thread (or inline when serial)."""

    def __init__(self, f, rows, itemsize, overlap, depth=2):
        self.f, self.rows, self.itemsize = f, rows, itemsize
        self.free = queue.Queue()
        for _ in range(depth + 1):
            self.free.put(np.empty(rows * itemsize, dtype=np.uint8))
        self.full = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="layouts-reader", daemon=True) if overlap else None
        if self.thread:
            self.thread.start()

    def _fill(self):
        """The next ``(buffer, nbytes)``, ``(None, 0)`` at the end, or an exception."""
        buf = self.free.get()
        want = buf.nbytes
        got, view = 0, memoryview(buf)
        while got < want:
            n = self.f.readinto(view[got:want])
            if not n:
                break
            got += n
        if got == 0:
            self.free.put(buf)
            return None, 0
        return buf, got

    def _run(self):
        try:
            while not self.stop.is_set():
                item = self._fill()
                self.full.put(item)
                if item[0] is None:
                    return
        except BaseException as err:  # noqa: BLE001 - handed to the consumer
            self.full.put((err, 0))

    def __iter__(self):
        while True:
            buf, n = self.full.get() if self.thread else self._fill()
            if isinstance(buf, BaseException):
                raise buf
            if buf is None:
                return
            yield buf, n
            self.free.put(buf)

    def close(self):
        self.stop.set()
        while self.thread is not None and self.thread.is_alive():
            try:
                self.full.get_nowait()
            except queue.Empty:
                pass
            self.free.put(np.empty(0, dtype=np.uint8))
            self.thread.join(timeout=0.1)


def _open_records(src, offset):
    """``(binary file, bytes after offset or None, name, close?)``."""
    if isinstance(src, (str, os.PathLike)):
        try:
            f = open(src, "rb", buffering=0)
        except OSError as err:
            raise LayoutError(f"cannot read records from {os.fspath(src)!r}: {err.strerror}") from None
        size = os.fstat(f.fileno()).st_size
        if offset > size:
            f.close()
            raise LayoutError(f"{src} is {size} bytes, shorter than the {offset}-byte header offset")
        f.seek(offset)
        return f, size - offset, os.fspath(src), True
    if not hasattr(src, "readinto"):
        raise LayoutError(f"convert takes a path or a binary file object, got {type(src).__name__}")
    skipped = 0
    while skipped < offset:
        chunk = src.read(min(offset - skipped, 1 << 20))
        if not chunk:
            raise LayoutError(f"the input ended after {skipped} bytes, inside the {offset}-byte header")
        skipped += len(chunk)
    return src, None, str(getattr(src, "name", "the input")), False


def _partial(name, size, itemsize, whole, left, trailing):
    partial_record(f"{name} has {size} bytes of records: {whole} records of {itemsize} bytes and {left} bytes "
                   f"left over", itemsize, left, trailing, stacklevel=5)


def _records_to_arrow(src, layout, tmp, dst, fmt, chunk_bytes, compression, offset, trailing, nulls, overlap,
                      threads, device, progress):
    if trailing not in ("error", "ignore"):
        raise LayoutError(f"trailing must be 'error' or 'ignore', got {trailing!r}")
    itemsize = layout.itemsize
    rows = max(1, chunk_bytes // itemsize)
    f, size, name, close = _open_records(src, offset)
    try:
        if size is not None:
            whole, left = divmod(size, itemsize)
            if left:
                _partial(name, size, itemsize, whole, left, trailing)
            chunks = _mapped_chunks(f, offset, whole, rows, layout, overlap)
            total = whole * itemsize
        else:
            chunks = _stream_chunks(f, rows, layout, name, trailing, overlap)
            total = None
        with _Pipeline(_ArrowSink(tmp, fmt, compression, dst), overlap, slots=3 if device == "cuda" else 2) as pipe:
            if device == "cuda":
                _forward_on_gpu(chunks, layout, rows, nulls, pipe, overlap, name, offset, progress, total)
            else:
                for aos in chunks:
                    first = pipe.records
                    with _position(layout, first, name, offset):
                        soa = aos.to_soa(nulls=nulls, threads=threads, device=device, out=pipe.arena(len(aos)))
                    pipe.write(soa)
                    if progress is not None:
                        progress(pipe.records, pipe.records * itemsize, total)
            if pipe.records == 0:  # no records: an empty file with the schema
                pipe.write(AoS(b"", layout).to_soa(nulls=nulls, out=pipe.arena(0)))
    finally:
        if close:
            f.close()
    return pipe.records, pipe.records * itemsize


@contextmanager
def _position(layout, first, name, offset):
    """Give a conversion fault of one chunk (the file's records ``first...``) the record
    number and byte position in the file."""
    try:
        yield
    except ConversionError as err:
        if getattr(err, "fault", None) is None:
            raise
        raise forward_error(layout, err.records, err.fault, first, name, offset) from None


def _forward_on_gpu(chunks, layout, rows, nulls, pipe, overlap, name, offset, progress, total):
    """Records -> Arrow on the GPU, overlapped (:func:`_through_gpu`, with
    :class:`layouts._cuda.transpose.ForwardSlot`)."""
    from ._cuda import transpose as _gpu

    slots = [_gpu.ForwardSlot(layout, rows, nulls or {}) for _ in range(pipe.nslots)]

    def finished(i):
        slot, first = slots[i], pipe.records  # chunks finish in order
        with _position(layout, first, name, offset):
            soa = slot.finish()
        pipe.put(i, soa.to_record_batch(), len(soa))
        if progress is not None:
            progress(pipe.records, pipe.records * layout.itemsize, total)

    _through_gpu((aos.array for aos in chunks), slots, pipe, overlap, finished)


def _through_gpu(items, slots, pipe, overlap, finished):
    """Drive chunks through GPU slots, each with its own CUDA stream and buffers: chunk
    k+1 is queued on its slot (host copy into pinned memory, host-to-device copy,
    kernels, device-to-host copy) before chunk k is waited for and handed to
    ``finished(slot index)``, so one chunk's transfers overlap another's kernels while
    the writer thread writes a third. ``overlap=False`` waits for each chunk at once."""
    queued = []
    try:
        for item in items:
            i = pipe.take()
            slots[i].submit(item)
            queued.append(i)
            if len(queued) > 1 or not overlap:
                finished(queued.pop(0))
        while queued:
            finished(queued.pop(0))
    finally:  # on an error too: no copy or kernel may outlive the buffers it uses
        for slot in slots:
            slot.stream.synchronize()


def _read_pages(raw):
    """Read one byte of every page of ``raw`` (uint8): on a memory-mapped input the
    reads from the disk happen here, in the reader thread, not in the kernel."""
    int(raw[::4096].sum())


def _mapped_chunks(f, offset, whole, rows, layout, overlap):
    """AoS chunks over a memory map of a regular file; with ``overlap`` a thread reads
    (faults in) the pages of chunk k+1 while chunk k converts."""
    if whole == 0:
        return
    records = np.memmap(f, dtype=layout.dtype, mode="r", offset=offset, shape=(whole,))
    raw = records.view(np.uint8) if records.dtype.itemsize else None
    pool = ThreadPoolExecutor(1, thread_name_prefix="layouts-reader") if overlap else None

    def touch(start):
        _read_pages(raw[start * layout.itemsize : (start + rows) * layout.itemsize])

    try:
        ahead = pool.submit(touch, 0) if pool else None
        for start in range(0, whole, rows):
            if ahead is not None:
                ahead.result()
                ahead = pool.submit(touch, start + rows) if start + rows < whole else None
            yield AoS(records[start : start + rows], layout)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)


def _stream_chunks(f, rows, layout, name, trailing, overlap):
    """AoS chunks of a stream, read into staging buffers by a :class:`_Reader`."""
    itemsize, done = layout.itemsize, 0
    reader = _Reader(f, rows, itemsize, overlap)
    try:
        for buf, n in reader:
            whole, left = divmod(n, itemsize)
            if left:  # a stream ends inside a record
                _partial(name, done * itemsize + n, itemsize, done + whole, left, trailing)
            if not whole:
                return
            done += whole
            yield AoS(buf[: whole * itemsize], layout)
    finally:
        reader.close()


class _Pipeline:
    """Hands converted chunks to a sink (pyarrow's writer, or the records file), in a
    thread when ``overlap`` is set: chunk k is written while chunk k+1 converts.
    ``slots`` sets of buffers take turns (two on the CPU; three pinned buffer sets on
    the GPU, where one chunk is written, one converts and one is queued): a slot is
    handed out again only once what was put from it is written."""

    def __init__(self, sink, overlap, slots=2):
        self.sink, self.records, self.error = sink, 0, None
        self.nslots = slots
        self.kept = [None] * slots  # per slot: the SoA whose arena the CPU path reuses
        self.free = queue.Queue()
        for i in range(slots):
            self.free.put(i)
        self.todo = queue.Queue(maxsize=1)
        self.current = None
        self.thread = threading.Thread(target=self._run, name="layouts-writer", daemon=True) if overlap else None
        if self.thread:
            self.thread.start()

    def take(self):
        """A slot whose last chunk is written (waits for the writer): its buffers may
        be filled again."""
        slot = self.free.get()
        if self.error is not None:
            raise self.error
        return slot

    def put(self, slot, item, records):
        """Write ``item`` (what the sink takes: a record batch, or record bytes), which
        holds ``records`` records in the buffers of ``slot``."""
        self.records += records
        if self.thread is None:
            self.sink.write(item)
            self.free.put(slot)
        else:
            self.todo.put((item, slot))
            if self.error is not None:
                raise self.error

    def arena(self, n):
        """An SoA to reuse for the next chunk of n records (None: allocate one)."""
        self.current = self.take()
        soa = self.kept[self.current]
        return soa if soa is not None and soa._arena.capacity >= n else None

    def write(self, soa):
        """Write a chunk converted into (or in place of) the arena :meth:`arena` gave."""
        slot, self.current = self.current, None
        self.kept[slot] = soa  # the slot's own arena, or a new, larger one
        self.put(slot, soa.to_record_batch(), len(soa))

    def _run(self):
        while True:
            item = self.todo.get()
            if item is None:
                return
            data, slot = item
            try:
                if self.error is None:
                    self.sink.write(data)
            except BaseException as err:  # noqa: BLE001 - raised in the converting thread
                self.error = err
            self.free.put(slot)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if self.thread is not None:
            self.todo.put(None)
            self.thread.join()
        self.sink.close()
        if kind is None and self.error is not None:
            raise self.error
        return False


_METADATA = 1 << 16  # reserved per batch beyond its buffers: IPC message and padding, Parquet pages


@contextmanager
def _writing(dst, path):
    """An error writing the output (``path``, the temporary file) names the destination,
    the bytes written so far and, for a full disk, what to do."""
    try:
        yield
    except OSError as err:
        done = os.path.getsize(path) if os.path.exists(path) else 0
        reason = os.strerror(err.errno) if err.errno else str(err)
        hint = "; free space there or write elsewhere" if err.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        raise OSError(err.errno, f"writing {dst} failed after {done:,} bytes of output: {reason}{hint} "
                                 f"(the destination was left as it was)") from err


class _ArrowSink:
    """Record batches into Parquet (a row group each) or Arrow IPC (a batch each); the
    writer opens on the first batch, which gives the schema. The file's blocks are
    reserved a batch ahead (:class:`BlockReservation`): records -> Arrow IPC from the
    page cache ran 1.13-1.20x faster with it (``python -m benchmarks.block_reservation``)."""

    def __init__(self, path, fmt, compression, dst):
        self.path, self.fmt, self.compression, self.dst, self.writer = path, fmt, compression, dst, None
        self.dictionaries = _Dictionaries()
        self.blocks = None

    def write(self, batch):
        with _writing(self.dst, self.path):
            if self.writer is None:
                self.writer = _writer(self.path, self.fmt, batch.schema, self.compression)
                self.blocks = BlockReservation(self.path)
            self.blocks.ahead(batch.nbytes + _METADATA)
            if self.fmt == "parquet":
                self.writer.write_batch(batch, row_group_size=batch.num_rows)
            else:
                self.writer.write_batch(self.dictionaries.extend(batch))

    def close(self):
        if self.writer is not None:
            with _writing(self.dst, self.path):
                try:
                    self.writer.close()
                finally:
                    self.blocks.close()


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


class _RecordsSink:
    """Record bytes appended to a file. No blocks are reserved ahead here: in trial runs
    it gained nothing from the page cache and, reading the input from the disk, it
    halved the speed (the reservation waited behind the input's reads)."""

    def __init__(self, path, dst):
        self.path, self.dst = path, dst
        self.file = open(path, "wb")

    def write(self, data):
        with _writing(self.dst, self.path):
            self.file.write(data)

    def close(self):
        with _writing(self.dst, self.path):
            self.file.close()


def _writer(path, fmt, schema, compression):
    if fmt == "parquet":
        import pyarrow.parquet as pq

        codec = "snappy" if compression is None else compression
        return pq.ParquetWriter(path, schema, compression=codec)
    codec = ("lz4" if fmt == "feather" else None) if compression is None else compression
    codec = None if codec in ("none", "uncompressed") else codec
    options = pa.ipc.IpcWriteOptions(compression=codec, emit_dictionary_deltas=True)
    return pa.ipc.new_file(str(path), schema, options=options)


# ----------------------------------------------------------------- Arrow -> records


def _arrow_batches(src, rows):
    """Record batches of a Parquet or Arrow IPC (file or stream) input; an IPC file is
    memory-mapped, so its batches are read when converted, without a copy."""
    path = os.fspath(src) if isinstance(src, (str, os.PathLike)) else None
    head = b""
    if path is not None:
        try:
            with open(path, "rb") as f:
                head = f.read(8)
        except OSError as err:
            raise LayoutError(f"cannot read {path!r}: {err.strerror}") from None
    if head[:4] == b"PAR1":
        import pyarrow.parquet as pq

        # pre_buffer (on by default) reads ahead all row groups: memory would grow with the file
        return pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=rows)
    try:
        if head[:6] == b"ARROW1":
            reader = pa.ipc.open_file(pa.memory_map(path))
            return (reader.get_batch(i) for i in range(reader.num_record_batches))
        return iter(pa.ipc.open_stream(pa.memory_map(path) if path is not None else src))
    except pa.ArrowInvalid as err:
        raise LayoutError(
            f"{path or 'the input'} is neither Parquet nor Arrow IPC ({err}); to write records, the "
            f"input must be one of those"
        ) from None


def _parts(batches, rows):
    """The batches cut into parts of at most ``rows`` rows."""
    for batch in batches:
        for start in range(0, batch.num_rows, rows):
            yield batch.slice(start, rows)


def _touch(soa):
    """Read in the pages of the bytes ``soa``'s columns use (:func:`_read_pages`)."""
    for column in soa._columns:
        _, validity, ends, data = column.used()
        for used in (validity, ends, data):
            if used is not None:
                _read_pages(used.view(np.uint8))


def _ahead(items, overlap, depth=2):
    """``items``, produced by a thread up to ``depth`` ahead when ``overlap`` is set
    (pyarrow decodes Parquet and reads files without holding the GIL)."""
    if not overlap:
        yield from items
        return
    ready, stop, end = queue.Queue(maxsize=depth), threading.Event(), object()

    def offer(item):  # False once the consumer has gone: never block on a full queue then
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def run():
        try:
            for item in items:
                if not offer(item):
                    return
            offer(end)
        except BaseException as err:  # noqa: BLE001 - raised in the consumer
            offer(err)

    thread = threading.Thread(target=run, name="layouts-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = ready.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


@contextmanager
def _rows(name, first, n):
    """Name the input and its rows in an error about one part of an Arrow input."""
    try:
        yield
    except (LayoutError, ConversionError) as err:
        raise type(err)(f"{name}, rows {first} to {first + n}: {err}") from err


def _arrow_to_records(src, layout, tmp, dst, chunk_bytes, fill, truncate, overlap, threads, device, progress):
    rows = max(1, chunk_bytes // layout.itemsize)
    name = os.fspath(src) if isinstance(src, (str, os.PathLike)) else str(getattr(src, "name", "the input"))

    def bound(parts):  # each part checked and cast for the layout, its pages read
        first = 0
        for part in parts:
            with _rows(name, first, part.num_rows):
                soa = SoA.from_arrow(part, layout, fill=fill, truncate=truncate)
            if overlap:
                _touch(soa)
            yield soa
            first += part.num_rows

    parts = _ahead(bound(_parts(_arrow_batches(src, rows), rows)), overlap)

    def report():
        if progress is not None:
            progress(pipe.records, pipe.records * layout.itemsize, None)

    on_gpu = device == "cuda"
    with _Pipeline(_RecordsSink(tmp, dst), overlap, slots=3 if on_gpu else 2) as pipe, closing(parts):
        if on_gpu:
            from ._cuda import transpose as _gpu

            slots = [_gpu.ReverseSlot(layout) for _ in range(pipe.nslots)]

            def finished(i):
                n = len(slots[i].soa)
                with _rows(name, pipe.records, n):
                    records = slots[i].finish()
                pipe.put(i, records, n)
                report()

            _through_gpu(parts, slots, pipe, overlap, finished)
        else:
            buffers = [None] * pipe.nslots
            for soa in parts:
                n, slot = len(soa), pipe.take()
                if buffers[slot] is None:
                    buffers[slot] = np.empty(rows, dtype=layout.dtype)
                out = buffers[slot][:n]
                with _rows(name, pipe.records, n):
                    soa.to_aos(out=out, threads=threads, device=device)
                pipe.put(slot, memoryview(out.view(np.uint8)).cast("B")[: n * layout.itemsize], n)
                report()
    return pipe.records, pipe.records * layout.itemsize
