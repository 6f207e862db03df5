"""Where the records come from: a records file or stream (Records -> Arrow), a Parquet or
Arrow IPC file or stream (Arrow -> records), each as chunks of at most ``rows`` records.

A regular file of records is memory-mapped and handed out as AoS views, the pages of the
next chunk read in ahead by a thread (:class:`layouts._convert.readahead.ReadAhead`); a
stream is read into staging buffers ahead, by a thread too. Arrow inputs are read by
pyarrow batch by batch (a Parquet row group at a time, never pre-buffered), and a damaged
or truncated one is a ConversionError naming the file and the batch or row group.
"""

import io
import os
import stat
from contextlib import closing, contextmanager

import numpy as np
import pyarrow as pa

from .._aos import AoS
from .._errors import ConversionError, LayoutError
from .._faults import shrunk_error
from .._files import arrow_kind, check_input, input_name, maps, partial_record, refuse_arrow, too_few
from ..kernels._memory import MappedGuard
from .readahead import ReadAhead, closing_after, in_slots

_FIX_CONVERT = (
    "to turn it into records, give a records destination (a path not ending in .parquet, .feather, "
    ".arrow, .ipc or .arrows, or format='records')"
)


@contextmanager
def records_chunks(src, layout, options):
    """``(chunks, bytes of records or None for a stream, the input's name)`` of a records
    input (:class:`layouts._convert.options.ConvertOptions`: ``offset``, ``count``,
    ``trailing``, ``overlap``): AoS chunks of ``options.rows(layout)`` records, closed
    (their thread joined, the file closed) when the block ends."""
    itemsize, rows, offset, count = layout.itemsize, options.rows(layout), options.offset, options.count
    f, size, name, close = open_records(src, offset)
    try:
        if size is not None:
            whole, left = divmod(size, itemsize)
            if count is not None:  # the records asked for; what follows them is not records
                if count > whole:
                    raise too_few(name, count, whole, itemsize, offset)
                whole, left = count, 0
            if left:
                # the warning names the caller of convert(): 7 frames up, this block's __enter__ among them
                _partial(name, size, itemsize, whole, left, options.trailing, offset, stacklevel=7)
            chunks = mapped_chunks(f, offset, whole, rows, layout, options.overlap, name)
            total = whole * itemsize
        else:
            chunks = stream_chunks(
                f if count is None else Taking(f, count * itemsize),
                rows,
                layout,
                name,
                options.trailing,
                options.overlap,
                offset,
                count,
            )
            total = None
        with closing(chunks):
            yield chunks, total, name
    finally:
        if close:
            f.close()


def open_records(src, offset):
    """``(binary file, bytes after offset or None, name, close?)``. A regular file has a
    size (and is mapped); a FIFO, a block device or a file object is a stream
    (:class:`_Watched`). A character device is refused: ``/dev/zero`` never ends. So is a
    Parquet or Arrow file."""
    if isinstance(src, (str, os.PathLike)):
        name = os.fspath(src)
        try:
            f = open(src, "rb", buffering=0)
        except OSError as err:
            raise LayoutError(f"cannot read records from {name!r}: {err.strerror}") from None
        try:
            mode = os.fstat(f.fileno()).st_mode
            if stat.S_ISCHR(mode):
                raise LayoutError(_endless(name))
            size = os.fstat(f.fileno()).st_size
            if not stat.S_ISREG(mode) or not maps(f.fileno(), size):  # a FIFO, a block device (st_size 0), a
                return _Watched(f, name, offset), None, name, True  # /proc or /sys file: read as it comes
            refuse_arrow(name, f.fileno(), size, _FIX_CONVERT)
            if offset > size:
                raise LayoutError(f"{src} is {size} bytes, shorter than the {offset}-byte header offset")
            f.seek(offset)
            return f, size - offset, name, True
        except BaseException:
            f.close()
            raise
    name = input_name(src)
    check_input(src, "src", name)
    if not hasattr(src, "readinto"):
        raise LayoutError(f"convert takes a path or a binary file object, got {type(src).__name__}")
    try:
        mode = os.fstat(src.fileno()).st_mode
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        mode = 0
    if stat.S_ISCHR(mode):
        raise LayoutError(_endless(name))
    return _Watched(src, name, offset), None, name, False


def _endless(name):
    return (
        f"{name} is a character device (like a terminal or /dev/zero), which may never end: records must come "
        f"from a file or a pipe; to take N bytes of a device, pipe them: head -c N DEVICE | layouts convert - ..."
    )


class _Watched:
    """A records stream, read through (``readinto``) as it is converted. It keeps its
    first bytes and its last 16 so that at its end a Parquet or Arrow IPC file piped in
    is an error that says so (:func:`layouts._files.arrow_kind`), not records."""

    _HEAD = 1 << 16

    def __init__(self, f, name, offset):
        self.f, self.name = f, name
        self.head, self.tail, self.size = bytearray(), b"", 0
        skipped = 0
        while skipped < offset:
            chunk = f.read(min(offset - skipped, 1 << 20))
            if not chunk:
                raise LayoutError(f"{name} ended after {skipped} bytes, inside the {offset}-byte header")
            self._saw(chunk)
            skipped += len(chunk)

    def _saw(self, data):
        if len(self.head) < self._HEAD:
            self.head += data[: self._HEAD - len(self.head)]
        self.tail = (self.tail + bytes(data[-16:]))[-16:]
        self.size += len(data)

    def _read(self, start, n):
        if start + n > len(self.head) and start >= self.size - len(self.tail):
            start -= self.size - len(self.tail)
            return self.tail[start : start + n]
        return bytes(self.head[start : start + n])

    def readinto(self, view):
        n = self.f.readinto(view)
        if n:
            self._saw(memoryview(view)[:n])
        elif n == 0:
            kind = arrow_kind(self._read, self.size)
            if kind is not None:
                raise LayoutError(
                    f"{self.name} is {kind}, not raw records (it begins and ends as {kind} does); {_FIX_CONVERT}"
                )
        return n

    def close(self):
        self.f.close()


def _partial(name, size, itemsize, whole, left, trailing, offset=0, stream=False, stacklevel=5):
    """A partial record at the end (see :func:`partial_record`). A path's bytes count from
    its first byte; a stream's (a pipe, a file object) from where reading began, which
    for a file object is its position when it was given, so the message says so. A
    warning names the line ``stacklevel`` frames up from :func:`partial_record`."""
    if not stream:
        partial_record(
            f"{name} has {size} bytes of records: {whole} records of {itemsize} bytes and {left} bytes left over",
            itemsize,
            left,
            trailing,
            stacklevel=stacklevel,
            end=offset + size,
        )
        return
    partial_record(
        f"{name} has {size} bytes of records: {whole} records of {itemsize} bytes and {left} bytes "
        f"left over, from byte {offset + size - left:,} counted from where reading began (a file "
        f"object's position when it was given{f', the {offset}-byte header offset included' if offset else ''})",
        itemsize,
        left,
        trailing,
        stacklevel=stacklevel,
    )


def read_pages(raw):
    """Read one byte of every page of ``raw`` (uint8): on a memory-mapped input the
    reads from the disk happen here, in the reader thread, not in the kernel."""
    int(raw[::4096].sum())


def mapped_chunks(f, offset, whole, rows, layout, overlap, name="the input"):
    """AoS chunks over a memory map of a regular file; with ``overlap`` a thread reads
    (faults in) the pages of chunk k+1 while chunk k converts.

    Another process may truncate the file meanwhile. Its size is checked before each
    chunk is handed out and after it is converted, and the reads are guarded
    (:class:`layouts.kernels._memory.MappedGuard`): a page that is gone reads as zeros
    instead of killing the process with SIGBUS, and the chunk is then reported as a
    ConversionError naming the file and the first record that is missing."""
    if whole == 0:
        return
    itemsize = layout.itemsize
    records = np.memmap(f, dtype=layout.dtype, mode="r", offset=offset, shape=(whole,))
    raw = records.view(np.uint8) if records.dtype.itemsize else None
    guard = MappedGuard(raw.ctypes.data if raw is not None else 0, whole * itemsize)

    def touched():  # the start of each chunk, its pages read in first (by the read-ahead thread, with overlap)
        for start in range(0, whole, rows):
            if overlap:
                read_pages(raw[start * itemsize : (start + rows) * itemsize])
            yield start

    def check(end):  # records [0, end) must still be there, and must have been read
        size = os.fstat(f.fileno()).st_size
        lost = guard.fault()
        if size < offset + end * itemsize or lost is not None:
            first = min(max(size - offset, 0) // itemsize, lost // itemsize if lost is not None else whole)
            raise shrunk_error(
                name,
                size,
                offset,
                itemsize,
                first,
                "converted",
                "convert it again once it is complete (the destination was left as it was)",
            )

    starts = ReadAhead(touched(), ahead=1, overlap=overlap)  # chunk k+1's pages read while chunk k converts

    def close():
        hold = starts.close()  # its thread joined
        guard.close()  # no thread reads the mapping any more
        return hold

    with closing_after(close):
        for start in starts:
            end = min(start + rows, whole)
            check(end)
            yield AoS(records[start:end].view(np.ndarray), layout)  # guarded here, not again by to_soa
            check(end)  # a page lost while the chunk converted read as zeros: not written


class Taking:
    """The first ``nbytes`` of a stream: ``count`` records, and nothing read after them."""

    def __init__(self, f, nbytes):
        self.f, self.left = f, nbytes

    def readinto(self, view):
        if not self.left:
            return 0
        n = self.f.readinto(memoryview(view)[: self.left])
        self.left -= n or 0
        return n


def stream_chunks(f, rows, layout, name, trailing, overlap, offset=0, count=None):
    """AoS chunks of a stream, read into staging buffers (with ``overlap``, by a thread,
    two chunks ahead); with ``count``, a stream that ends before that many records is a
    ConversionError."""
    itemsize, done, ahead = layout.itemsize, 0, 2
    buffers = [np.empty(rows * itemsize, dtype=np.uint8) for _ in range(ahead + 1 if overlap else 1)]

    def fill(buf):  # ``(buf, bytes read)``; None at the end of the stream
        want, got, view = buf.nbytes, 0, memoryview(buf)
        while got < want:
            n = f.readinto(view[got:want])
            if not n:
                break
            got += n
        return (buf, got) if got else None

    reads = ReadAhead(in_slots(buffers, fill), ahead=ahead, overlap=overlap)
    with closing_after(reads.close):
        for buf, n in reads:
            whole, left = divmod(n, itemsize)
            if left and count is None:  # a stream ends inside a record
                _partial(name, done * itemsize + n, itemsize, done + whole, left, trailing, offset, True)
            if not whole:
                break
            done += whole
            yield AoS(buf[: whole * itemsize], layout)
        if count is not None and done < count:
            raise too_few(name, count, done, itemsize, offset)


def arrow_batches(src, rows, name):
    """``(where, record batch)`` of a Parquet or Arrow IPC (file or stream) input, with
    ``where`` naming the batch or row group; an IPC file is read (``pyarrow.OSFile``),
    not memory-mapped, so that one truncated meanwhile is an error, not SIGBUS. A file
    that cannot be read (damaged, truncated) is a ConversionError naming it and the
    batch or row group, whatever pyarrow raised."""
    path = os.fspath(src) if isinstance(src, (str, os.PathLike)) else None
    head = tail = b""
    if path is None:
        return _object_batches(src, rows, name)
    if path is not None:
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                size = os.fstat(f.fileno()).st_size
                if size >= 12:
                    f.seek(size - 6)
                    tail = f.read(6)
        except OSError as err:
            raise LayoutError(f"cannot read {path!r}: {err.strerror}") from None
    if head[:4] == b"PAR1":
        if tail[-4:] != b"PAR1":
            raise _truncated(name, "Parquet", "PAR1", size)
        return _parquet_batches(path, rows, name)
    if head[:6] == b"ARROW1":
        if tail != b"ARROW1":
            raise _truncated(name, "Arrow IPC", "ARROW1", size)
        # read, not memory-mapped: a file another program truncates meanwhile is then a short
        # read (a ConversionError naming the batch), not SIGBUS in pyarrow's own reads
        source = pa.OSFile(path)
        try:
            with _reading(name, "the file's footer"):
                reader = pa.ipc.open_file(source)
                count = reader.num_record_batches
        except BaseException:
            source.close()
            raise
        return _closing_when_done(_file_batches(reader, count, name), source)
    source = pa.OSFile(path)
    try:
        stream = pa.ipc.open_stream(source)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a file that is not IPC
        source.close()
        if head[:4] == b"\xff\xff\xff\xff":  # an IPC stream's first message, damaged
            raise _unreadable(name, "the stream's schema", err) from err
        raise LayoutError(
            f"{path or 'the input'} is neither Parquet nor Arrow IPC ({err}); to write records, the "
            f"input must be one of those"
        ) from None
    return _closing_when_done(_stream_batches(stream, name, source), source)


def _object_batches(f, rows, name):
    """The batches of a Parquet or Arrow IPC input given as a binary file object, read
    from its current position: a file that can seek is read in place (its bytes from
    that position on, :class:`_Window`); a Parquet or IPC file on a pipe, which must be
    read from its end, is first copied to an unnamed temporary file (removed however
    the conversion ends); an IPC stream is read as it comes."""
    check_input(f, "src", name)
    if not hasattr(f, "read"):
        raise LayoutError(f"convert takes a path or a binary file object, got {type(f).__name__}")
    window = _Window.over(f)
    if window is None:  # a pipe: its first bytes tell the format
        head = _read_upto(f, 8, name)
        if head[:4] != b"PAR1" and head[:6] != b"ARROW1":
            return _stream_or_refuse(_Chained(head, f), head, name)
        window = _Window(_spool(head, f, name), 0, owned=True)
    try:
        head, size = window.pread(0, 8), window.size
        tail = window.pread(size - 6, 6) if size >= 12 else b""
        if head[:4] == b"PAR1":
            if tail[-4:] != b"PAR1":
                raise _truncated(name, "Parquet", "PAR1", size)
            batches = _parquet_batches(window, rows, name)
        elif head[:6] == b"ARROW1":
            if tail != b"ARROW1":
                raise _truncated(name, "Arrow IPC", "ARROW1", size)
            with _reading(name, "the file's footer"):
                reader = pa.ipc.open_file(window)
                count = reader.num_record_batches
            batches = _file_batches(reader, count, name)
        else:
            return _stream_or_refuse(window, head, name)
    except BaseException:
        window.close()
        raise
    return _closing_when_done(batches, window)


def _stream_or_refuse(f, head, name):
    try:
        stream = pa.ipc.open_stream(f)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a file that is not IPC
        if head[:4] == b"\xff\xff\xff\xff":  # an IPC stream's first message, damaged
            raise _unreadable(name, "the stream's schema", err) from err
        raise LayoutError(
            f"{name} is neither Parquet nor Arrow IPC (it starts with {bytes(head[:8])!r}); to write "
            f"records, the input must be one of those"
        ) from None
    return _stream_batches(stream, name, f)


def _closing_when_done(batches, window):
    try:
        yield from batches
    finally:
        window.close()


def _read_upto(f, n, name):
    data = b""
    while len(data) < n:
        more = f.read(n - len(data))
        if isinstance(more, str):
            raise LayoutError(f"{name} is open in text mode; open it with 'rb'")
        if not more:
            break
        data += more
    return data


def _spool(head, f, name):
    """A Parquet or IPC file arriving on a pipe, copied to an unnamed temporary file
    (``tempfile.TemporaryFile``: unlinked at once, its space freed when closed or when
    the process ends); a failure (a full disk) names the format and the fix."""
    import shutil
    import tempfile

    kind = "a Parquet file" if head[:4] == b"PAR1" else "an Arrow IPC file"
    spool = tempfile.TemporaryFile(prefix="layouts-spool-")
    try:
        spool.write(head)
        shutil.copyfileobj(f, spool, 1 << 20)
        spool.flush()
    except OSError as err:
        spool.close()
        raise LayoutError(
            f"{name} is {kind}, which is read from its end, so a pipe's bytes are first copied to a temporary "
            f"file in {tempfile.gettempdir()}; that failed: {err.strerror or err}; set TMPDIR to a directory with "
            f"room, or pass the file's path instead of a pipe"
        ) from None
    except BaseException:
        spool.close()
        raise
    return spool


class _Window(io.RawIOBase):
    """Bytes ``start...`` (to the end) of a seekable binary file, as a file of its own:
    pyarrow reads a Parquet or IPC file object there through it (its seeks count from
    ``start``). ``owned``: the file is closed with the window (a spool)."""

    def __init__(self, f, start, owned=False):
        super().__init__()
        self.f, self.start, self.owned, self.pos = f, start, owned, 0
        self.size = max(f.seek(0, io.SEEK_END) - start, 0)

    @classmethod
    def over(cls, f):
        """A window from ``f``'s current position, or None when ``f`` cannot seek."""
        try:
            if not f.seekable():
                return None
            return cls(f, f.tell())
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            return None

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, pos, whence=io.SEEK_SET):
        self.pos = max({io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + pos, 0)
        return self.pos

    def pread(self, at, n):
        self.f.seek(self.start + at)
        return _read_upto(self.f, n, "the input")

    def readinto(self, buffer):
        n = min(len(buffer), max(self.size - self.pos, 0))
        if n <= 0:
            return 0
        data = self.pread(self.pos, n)
        memoryview(buffer)[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def close(self):
        if self.owned and not self.closed:
            self.f.close()
        super().close()


class _Chained(io.RawIOBase):
    """``head`` (bytes already read) and then the rest of the stream ``f``; ``pos`` counts
    the bytes given out, from ``start`` (where ``head`` was in the input)."""

    def __init__(self, head, f, start=0):
        super().__init__()
        self.head, self.f, self.pos = head, f, start

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.head:
            n = min(len(buffer), len(self.head))
            memoryview(buffer)[:n], self.head = self.head[:n], self.head[n:]
            self.pos += n
            return n
        data = self.f.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        self.pos += len(data)
        return len(data)


def _file_batches(reader, count, name):
    for i in range(count):
        with _reading(name, f"batch {i}"):
            batch = reader.get_batch(i)
        yield f"batch {i}", batch


def _stream_batches(stream, name, source):
    """The batches of an IPC stream read from ``source``, and of every stream concatenated
    after it (``layouts convert ... --to - >> all.arrows`` appends one a run): each must
    have the first one's schema, and bytes after the last that are not a stream are an
    error naming where they start; nothing after an end-of-stream marker is passed over."""
    at, schema, i = None, stream.schema, 0
    while True:
        where = f"batch {i}" if at is None else f"the stream from byte {at:,}, batch {i}"
        with _reading(name, where):
            try:
                batch = stream.read_next_batch()
            except StopIteration:
                batch = None
        if batch is not None:
            yield where, batch
            i += 1
            continue
        at = source.pos if isinstance(source, _Chained) else source.tell()
        head = _read_upto(source, 8, name)
        if not head:
            return
        if isinstance(source, _Chained):  # a pipe: the bytes read are given back in front
            source = _Chained(head + source.head, source.f, at)
        else:
            source.seek(at)
        try:
            stream = pa.ipc.open_stream(source)
        except Exception as err:  # noqa: BLE001 - pyarrow raises several types for bytes that are not IPC
            why = "; ".join(line.strip() for line in str(err).splitlines() if line.strip())
            raise ConversionError(
                f"{name}: the bytes from byte {at:,} on (after the end of an Arrow IPC stream) are not an Arrow "
                f"IPC stream (they start with {bytes(head)!r}; {type(err).__name__}: {why}); cut them off "
                f"(head -c {at} keeps the streams) or write the input again"
            ) from None
        if not stream.schema.equals(schema):
            raise ConversionError(
                f"{name}: the Arrow IPC stream from byte {at:,} has another schema than the first "
                f"({_schema_line(stream.schema)}; the first: {_schema_line(schema)}); streams concatenated in one "
                f"input must have one schema: convert them apart"
            )
        i = 0


def _schema_line(schema):
    return ", ".join(f"{field.name}: {field.type}" for field in schema)


def _parquet_batches(path, rows, name):
    import pyarrow.parquet as pq

    with _reading(name, "the file's metadata"):
        # pre_buffer (on by default) reads ahead all row groups: memory would grow with the file
        file = pq.ParquetFile(path, pre_buffer=False)
        groups = file.num_row_groups

    def each():
        for g in range(groups):
            where = f"row group {g}"
            with _reading(name, where):
                batches = file.iter_batches(batch_size=rows, row_groups=[g])
            while True:
                with _reading(name, where):
                    batch = next(batches, None)
                if batch is None:
                    break
                yield where, batch

    return each()


def _truncated(name, what, marker, size):
    return ConversionError(
        f"{name} is a truncated {what} file: it starts with the {what} marker but does not end with it "
        f"({marker!r}), so it was cut short ({size:,} bytes are left): copy or write it again whole"
    )


def _unreadable(name, where, err):
    why = "; ".join(line.strip() for line in str(err).splitlines() if line.strip())  # one line
    return ConversionError(
        f"{name}, {where}: cannot be read ({type(err).__name__}: {why}); the file is damaged, or was "
        f"truncated or written wrongly"
    )


@contextmanager
def _reading(name, where):
    """A pyarrow error reading ``where`` of input ``name`` as a ConversionError (pyarrow
    raises ArrowInvalid, OSError, ArrowNotImplementedError... for a damaged file)."""
    try:
        yield
    except (LayoutError, ConversionError, StopIteration):
        raise
    except Exception as err:  # noqa: BLE001 - a damaged file: pyarrow raises many types
        raise _unreadable(name, where, err) from err


def cut_batches(batches, rows):
    """``(where, part)``: the batches cut into parts of at most ``rows`` rows."""
    for where, batch in batches:
        for start in range(0, batch.num_rows, rows):
            yield where, batch.slice(start, rows)


def touch_columns(soa):
    """Read in the pages of the bytes ``soa``'s columns use (:func:`read_pages`)."""
    for column in soa.parts().columns:
        _, validity, ends, data = column.used()
        for used in (validity, ends, data):
            if used is not None:
                read_pages(used.view(np.uint8))
