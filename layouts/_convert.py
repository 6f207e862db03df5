"""Streaming file conversion: legacy records <-> Parquet / Feather / Arrow IPC, chunk by chunk.

Records -> Arrow: a regular file is memory-mapped and a reader thread reads in the
pages of chunk k+1 (a stream is read into staging buffers) while the main thread
converts chunk k into one of two arenas and a writer thread hands chunk k-1 to
pyarrow's writer; at most a few chunks are in memory whatever the file size.
Arrow -> records: a reader thread reads (or decodes) and checks part k+1 while part k
goes through ``SoA.to_aos`` into one of two record buffers and the writer appends
part k-1 to the output. With ``device="cuda"`` the chunks go through GPU slots
(:mod:`layouts._cuda.transpose`) in the same pipeline.

Output is atomic (:class:`layouts._files.FileOutput`): on Linux everything is written to
an unnamed file (``O_TMPFILE``) in the destination's directory, linked in only when
complete; elsewhere to a uniquely named temporary file beside it, renamed over it. An error
or Ctrl-C closes and drops that file at once; a killed process leaves the destination as it
was (absent or the old file). Pipes, devices and file objects are streamed into
(:class:`layouts._files.StreamOutput`).
"""

import errno
import io
import os
import queue
import re
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Mapping

import numpy as np
import pyarrow as pa

from ._aos import AoS, as_layout
from ._errors import ConversionError, LayoutError
from ._faults import forward_error, shrunk_error
from ._files import (BlockReservation, InterruptHold, arrow_kind, check_count, check_input, check_offset,
                     input_name, maps, open_output, partial_record, refuse_arrow, too_few)
from ._soa import SoA
from ._formats import DEFAULT_CHUNK, FORMATS, SUFFIXES
from .kernels._memory import MappedGuard

if TYPE_CHECKING:
    from ._layout import Layout

__all__ = ["convert", "ConvertResult", "FORMATS"]



@dataclass(frozen=True)
class ConvertResult:
    """What :func:`convert` did: records, bytes read and written, seconds, output path."""

    records: int
    bytes_in: int
    bytes_out: int
    seconds: float
    dst: str

    @property
    def gbps(self) -> float:
        """Record bytes per second, in GB/s."""
        return self.bytes_in / self.seconds / 1e9 if self.seconds else float("inf")

    def __str__(self) -> str:
        return (f"{self.records:,} records, {_size(self.bytes_in)} in, {_size(self.bytes_out)} "
                f"out, {self.seconds:.2f} s, {_speed(self.gbps)} -> {self.dst}")


def _size(n):
    """Bytes as MB with one decimal, or as kB or bytes where that would show 0.0 MB."""
    return f"{n / 1e6:,.1f} MB" if n >= 50_000 else f"{n / 1e3:,.1f} kB" if n >= 1000 else f"{n:,} bytes"


def _speed(gbps):
    """GB/s with two decimals, or MB/s or kB/s where that would show 0.00 GB/s."""
    if gbps >= 0.01:
        return f"{gbps:,.2f} GB/s"
    return f"{gbps * 1e3:,.2f} MB/s" if gbps >= 0.00001 else f"{gbps * 1e6:,.2f} kB/s"


def output_format(dst, format=None):
    """The format named, or the one the destination's suffix implies (else ``records``).
    A file object destination takes it from its ``name``'s suffix, else needs ``format``."""
    if format is not None:
        if format not in FORMATS:
            raise LayoutError(f"format must be one of {FORMATS}, got {format!r}")
        return format
    if not isinstance(dst, (str, os.PathLike)):
        name = getattr(dst, "name", None)
        if isinstance(name, str) and Path(name).suffix.lower() in SUFFIXES:
            return SUFFIXES[Path(name).suffix.lower()]
        raise LayoutError(f"writing to a file object ({name or type(dst).__name__}) needs format=, one of {FORMATS}: "
                          f"it has no file name to tell the format by")
    suffix = Path(dst).suffix
    if suffix.lower() not in SUFFIXES:
        said = f"suffix {suffix!r}" if suffix else "no suffix"
        known = ", ".join(f"{s} ({f})" for s, f in SUFFIXES.items())
        raise LayoutError(f"{dst} has {said}, which names no output format; give format= (one of {FORMATS}) "
                          f"or a known suffix: {known}")
    return SUFFIXES[suffix.lower()]


def convert(src: "str | os.PathLike[str] | BinaryIO", layout: "Layout | np.typing.DTypeLike",
            dst: "str | os.PathLike[str] | BinaryIO", *, format: "str | None" = None, device: "str | None" = None,
            chunk_bytes: int = DEFAULT_CHUNK, compression: "str | None" = None, overwrite: bool = False,
            offset: int = 0, count: "int | None" = None, trailing: str = "error",
            nulls: "Mapping[str, Any] | None" = None,
            fill: "Mapping[str, Any] | None" = None, truncate: bool = False, cast: str = "strict",
            overlap: bool = True, threads: "int | None" = None,
            progress: "Callable[[int, int, int | None], object] | None" = None, time_unit: Any = None,
            extra: Any = "error", header: "bytes | str | os.PathLike[str] | BinaryIO | None" = None) -> ConvertResult:
    """Convert a file chunk by chunk, in bounded memory, writing the output atomically.

    Parameters
    ----------
    src : str, os.PathLike or binary file object
        Legacy records (after ``offset`` header bytes) when ``format`` is an Arrow
        format; a Parquet or Arrow IPC (Feather) file when ``format="records"``. A
        regular file of records is memory-mapped; a FIFO, a block device or a file
        object is read as a stream; a character device (``/dev/zero``, a terminal) is
        refused, as it may never end. A Parquet or Arrow file given as records is an
        error that says so. A file object is read from its current position: what the
        caller read before (a header) is not part of the input. A Parquet or Arrow IPC
        file object that can seek is read in place; one that cannot (a pipe, standard
        input) is first copied to an unnamed temporary file, removed however the
        conversion ends.
    layout : Layout or numpy.dtype
        The record type (e.g. ``Layout.from_c(header, "struct tick")``).
    dst : str, os.PathLike or writable binary file object
        Output path, written whole or not at all: an existing file is refused unless
        ``overwrite=True``; through a symlink its target is written (the link stays); the
        input itself (by any path or hard link), a directory, a block device or a socket
        is refused. A FIFO, a character device (``/dev/null``) or ``/dev/stdout`` is not
        replaced but streamed into, as is a binary file object (``sys.stdout.buffer``,
        an open file, ``io.BytesIO``), which is flushed and left open. A stream gets the
        bytes as they are converted: after an error, what was written stays written.
        When the reader of a pipe goes away, :class:`BrokenPipeError` is raised (an
        ``OSError`` naming the destination), for a command to exit quietly.
    format : {"parquet", "feather", "arrow", "arrows", "records"}, optional
        Output format; by default from ``dst``'s suffix (``.parquet``, ``.feather``,
        ``.arrow``/``.ipc``, ``.arrows``; records: ``.bin``, ``.dat``, ``.rec``, ``.records``,
        ``.raw``); any other suffix, or none, needs ``format=``, and so does a file object
        unless its ``name`` has one of those suffixes. ``feather`` and ``arrow``
        are both the Arrow IPC file format (``feather`` compresses with LZ4 by default);
        ``arrows`` is the Arrow IPC stream format (``pyarrow.ipc.open_stream`` reads it,
        also from a pipe as it comes). Every format is written front to back without
        seeking, so any of them can go to a pipe.
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
    offset : int
        Records input: bytes of header before the first record, counted from where the
        input starts (a file object's current position).
    count : int, optional
        Records input: the number of records to convert (default: all after
        ``offset``). Bytes after them are not read as records (a trailer, extended
        headers, another chunk); from a stream they are not read at all. An input with
        fewer records is a ConversionError stating both numbers.
    trailing : {"error", "ignore"}
        A partial record at the end of the input (without ``count``): an error, or
        skipped with a warning saying how many bytes, where.
    nulls, fill, truncate, cast, time_unit, extra
        As in :meth:`AoS.to_soa` and :meth:`SoA.from_arrow` (``cast`` is ``"strict"``
        or ``"parse"``; ``time_unit`` names the unit of integer fields that take time
        columns; ``extra="drop"`` or a list of names drops columns the layout does not
        have, which are an error by default). A damaged or truncated Parquet/Arrow input
        is a ConversionError naming the file and the batch or row group.
    header : bytes, str, os.PathLike or binary file object, optional
        Arrow -> records: the file header written before the records. Bytes are
        written as given (``offset``, if given, must be their length); a path or file
        (such as the original records file) gives its first ``offset`` bytes. Records ->
        Arrow skips ``offset`` header bytes; Arrow -> records with an ``offset`` and no
        ``header`` is an error (it would write no header).
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

    Examples
    --------
    >>> import io, sys, numpy as np, pyarrow as pa, layouts as lo
    >>> raw = io.BytesIO(np.arange(5, dtype="<i4").tobytes())
    >>> out = io.BytesIO()                       # or sys.stdout.buffer
    >>> lo.convert(raw, [("a", "<i4")], out, format="arrows").records
    5
    >>> pa.ipc.open_stream(out.getvalue()).read_all().column("a").to_pylist()
    [0, 1, 2, 3, 4]
    """
    layout = as_layout(layout)
    if isinstance(dst, (str, os.PathLike)) and os.path.isdir(dst):
        raise LayoutError(f"{dst} is a directory; give a file path for the output")
    fmt = output_format(dst, format)
    offset, count = check_offset(offset), check_count(count)
    head = _header_bytes(header, offset, fmt, time_unit, extra)
    if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, (int, np.integer)):
        raise LayoutError(f"chunk_bytes must be a whole number of bytes (an int, e.g. 64 << 20), got "
                          f"{chunk_bytes!r} ({type(chunk_bytes).__name__})")
    if chunk_bytes < 1:
        raise LayoutError(f"chunk_bytes must be positive, got {chunk_bytes}")
    count = _records_only(fmt, count, src)
    out = open_output(dst, overwrite=overwrite, src=src)  # checks dst; an unnamed or temporary file
    t0 = time.perf_counter()
    try:
        if fmt == "records":
            _write_header(out, head)
            records, bytes_in = _arrow_to_records(src, layout, out, out.name, chunk_bytes, fill, truncate, cast,
                                                  overlap, threads, device, progress, time_unit, extra)
        else:
            records, bytes_in = _records_to_arrow(src, layout, out, out.name, fmt, chunk_bytes, compression, offset,
                                                  trailing, nulls, overlap, threads, device, progress, count=count)
        with _writing(out):
            out.commit()
    except BaseException as err:
        # closed and dropped now, whatever still refers to it; a file's few system calls with a further Ctrl-C
        # held (and dropped: one exception is on its way already), not a stream's, whose flush may block
        with InterruptHold() if not out.stream else nullcontext():
            out.discard()
        if isinstance(err, KeyboardInterrupt) and out.kept:  # a Ctrl-C held while the output was put in place
            setattr(err, "_layouts_output_kept", out.name)  # noqa: B010 - for the command's message
        raise
    return ConvertResult(records, bytes_in, out.written(), time.perf_counter() - t0, out.name)


def _records_only(fmt, count, src=None):
    """``count`` describes a records input, so with a Parquet/Arrow input (``format="records"``,
    Arrow -> records) it is refused; ``offset`` there is the header's size (see :func:`_header_bytes`)."""
    if fmt == "records" and count is not None:
        raise LayoutError(count_on_the_way_back(count, src))
    return count


def count_on_the_way_back(count, src):
    """Why ``count=`` is refused when writing records: what the input at ``src`` is (a
    path whose first bytes are looked at: Parquet, Arrow, or neither, which would be
    records: records -> records is no conversion), and what to do instead."""
    from ._files import arrow_kind

    said = (f"count={count} applies to an input of records (records -> Arrow), whose first {count} records it takes, "
            f"but this writes records (format='records', or a records destination)")
    kind = None
    if isinstance(src, (str, os.PathLike)) and os.path.isfile(src):
        try:
            fd = os.open(src, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            fd = None
        if fd is not None:
            try:
                kind = arrow_kind(lambda at, n: os.pread(fd, n, at), os.fstat(fd).st_size) or "records"
            except OSError:
                kind = None
            finally:
                os.close(fd)
    if kind == "records":
        return (f"{said}, which it makes only from Parquet or Arrow data, and {os.fspath(src)} is neither (it has no "
                f"Parquet or Arrow magic bytes: records, it seems): records -> records is no conversion; to convert "
                f"records to Arrow, give an Arrow destination (.parquet, .feather, .arrow, .arrows) or format='parquet'")
    what = f"{os.fspath(src)} is {kind}" if kind else "its input is Parquet or Arrow data"
    return (f"{said}, and {what}, whose every row is written: leave count= out (to write fewer rows, slice the table "
            f"first, e.g. pyarrow's Table.slice)")


def _header_bytes(header, offset, fmt, time_unit=None, extra="error"):
    """The header to write before the records (Arrow -> records), or None; the options
    that apply to one direction only are refused in the other."""
    if fmt != "records":
        for name, value, unset in (("header", header, None), ("time_unit", time_unit, None), ("extra", extra, "error")):
            if value is not unset and value != unset:
                raise LayoutError(f"{name}= applies when writing records (Arrow -> records), but this writes {fmt}")
        return None
    if header is None:
        if offset:
            raise LayoutError(
                f"offset={offset} skips a header when reading records, but this writes records from Arrow data, "
                f"where it would do nothing; to write a {offset}-byte header before the records, pass header= as "
                f"the original records file (its first {offset} bytes are copied) or as the header's bytes")
        return None
    if isinstance(header, (bytes, bytearray, memoryview)):
        data = bytes(header)
        if offset and offset != len(data):
            raise LayoutError(f"header= is {len(data)} bytes, but offset={offset}: give the header's bytes alone, "
                              f"or leave offset out")
        return data
    if not offset:
        raise LayoutError("header= a file needs offset=N, the header's size in bytes: its first N bytes are copied")
    if offset > HEADER_CAP:
        raise LayoutError(f"offset={offset} asks for a header of {offset} bytes, more than the {HEADER_CAP} bytes "
                          f"(1 GiB) a header may have: give offset= as the header's size (the bytes before the "
                          f"first record of the original records file)")
    if isinstance(header, (str, os.PathLike)):
        from ._cdecl.files import open_regular

        where = os.fspath(header)
        try:
            with open_regular(header, f"header= is the original records file, whose first {offset} bytes "
                                      f"(offset={offset}) are copied") as f:
                size = os.fstat(f.fileno()).st_size
                if size < offset:
                    raise LayoutError(f"the header file {where} is {size} bytes, shorter than the {offset}-byte "
                                      f"header (offset={offset})")
                data = _read_header(f, offset)
        except OSError as err:
            raise LayoutError(f"cannot read the header from {where!r}: {err.strerror}") from None
    elif hasattr(header, "read"):
        where = str(getattr(header, "name", f"(a {type(header).__name__})"))
        data = _read_header(header, offset)
    else:
        raise LayoutError(f"header= takes bytes, a path or a binary file object, got {type(header).__name__}")
    if len(data) < offset:
        raise LayoutError(f"the header file {where} is {len(data)} bytes, shorter than the {offset}-byte header "
                          f"(offset={offset})")
    return bytes(data)


HEADER_CAP = 2**30  # the largest header= the way back writes (offset=), in bytes


def _read_header(f, offset):
    """Up to ``offset`` bytes of ``f``, read 1 MiB at a time (a file object that ends
    sooner gives fewer: the caller says so), never more than it holds."""
    parts, left = [], offset
    while left:
        part = f.read(min(left, 1 << 20))
        if not part:
            break
        parts.append(bytes(part))
        left -= len(part)
    return b"".join(parts)


def _write_header(out, head):
    """Write the header bytes before the records (the records' writer appends after them)."""
    if head:
        with _writing(out):
            f = out.records_file()  # a file: a new buffered writer on its descriptor; a stream: the stream
            f.write(head)
            f.flush()
            if not out.stream:
                f.close()  # (the descriptor stays open)


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
            _start(self.thread, self.close)

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
        """Stop the reader thread and wait for it (see :func:`_wait_out`)."""
        self.stop.set()
        return _wait_out(self._join)

    def _join(self):
        while self.thread is not None and self.thread.is_alive():
            try:
                self.full.get_nowait()
            except queue.Empty:
                pass
            self.free.put(np.empty(0, dtype=np.uint8))
            self.thread.join(timeout=0.1)


_FIX_CONVERT = ("to turn it into records, give a records destination (a path not ending in .parquet, .feather, "
                ".arrow, .ipc or .arrows, or format='records')")


def _open_records(src, offset):
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
                return _Watched(f, name, offset), None, name, True      # /proc or /sys file: read as it comes
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
    return (f"{name} is a character device (like a terminal or /dev/zero), which may never end: records must come "
            f"from a file or a pipe; to take N bytes of a device, pipe them: head -c N DEVICE | layouts convert - ...")


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
                raise LayoutError(f"{self.name} is {kind}, not raw records (it begins and ends as {kind} does); "
                                  f"{_FIX_CONVERT}")
        return n

    def close(self):
        self.f.close()


def _partial(name, size, itemsize, whole, left, trailing, offset=0, stream=False):
    """A partial record at the end (see :func:`partial_record`). A path's bytes count from
    its first byte; a stream's (a pipe, a file object) from where reading began, which
    for a file object is its position when it was given, so the message says so."""
    if not stream:
        partial_record(f"{name} has {size} bytes of records: {whole} records of {itemsize} bytes and {left} bytes "
                       f"left over", itemsize, left, trailing, stacklevel=5, end=offset + size)
        return
    partial_record(f"{name} has {size} bytes of records: {whole} records of {itemsize} bytes and {left} bytes "
                   f"left over, from byte {offset + size - left:,} counted from where reading began (a file "
                   f"object's position when it was given{f', the {offset}-byte header offset included' if offset else ''})", itemsize,
                   left, trailing, stacklevel=5)


def _records_to_arrow(src, layout, tmp, dst, fmt, chunk_bytes, compression, offset, trailing, nulls, overlap,
                      threads, device, progress, count=None):
    if trailing not in ("error", "ignore"):
        raise LayoutError(f"trailing must be 'error' or 'ignore', got {trailing!r}")
    itemsize = layout.itemsize
    rows = max(1, chunk_bytes // itemsize)
    f, size, name, close = _open_records(src, offset)
    try:
        if size is not None:
            whole, left = divmod(size, itemsize)
            if count is not None:  # the records asked for; what follows them is not records
                if count > whole:
                    raise too_few(name, count, whole, itemsize, offset)
                whole, left = count, 0
            if left:
                _partial(name, size, itemsize, whole, left, trailing, offset)
            chunks = _mapped_chunks(f, offset, whole, rows, layout, overlap, name)
            total = whole * itemsize
        else:
            chunks = _stream_chunks(f if count is None else _Taking(f, count * itemsize), rows, layout, name,
                                    trailing, overlap, offset, count)
            total = None
        sink = _ArrowSink(tmp, fmt, compression, dst)
        with closing(chunks), _Pipeline(sink, overlap, slots=3 if device == "cuda" else 2) as pipe:
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


def _mapped_chunks(f, offset, whole, rows, layout, overlap, name="the input"):
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
    pool = ThreadPoolExecutor(1, thread_name_prefix="layouts-reader") if overlap else None

    def touch(start):
        _read_pages(raw[start * itemsize : (start + rows) * itemsize])

    def check(end):  # records [0, end) must still be there, and must have been read
        size = os.fstat(f.fileno()).st_size
        lost = guard.fault()
        if size < offset + end * itemsize or lost is not None:
            first = min(max(size - offset, 0) // itemsize, lost // itemsize if lost is not None else whole)
            raise shrunk_error(name, size, offset, itemsize, first, "converted",
                               "convert it again once it is complete (the destination was left as it was)")

    def close():
        hold = _wait_out(lambda: pool.shutdown(wait=True) if pool is not None else None)
        guard.close()  # no thread reads the mapping any more
        return hold

    with _closing_after(close):
        ahead = None
        if pool is not None:  # its one thread starts here (see _start)
            with InterruptHold() as hold:
                ahead = pool.submit(touch, 0)
            hold.deliver()
        for start in range(0, whole, rows):
            if ahead is not None:
                ahead.result()
                ahead = pool.submit(touch, start + rows) if start + rows < whole else None
            end = min(start + rows, whole)
            check(end)
            yield AoS(records[start:end].view(np.ndarray), layout)  # guarded here, not again by to_soa
            check(end)  # a page lost while the chunk converted read as zeros: not written


class _Taking:
    """The first ``nbytes`` of a stream: ``count`` records, and nothing read after them."""

    def __init__(self, f, nbytes):
        self.f, self.left = f, nbytes

    def readinto(self, view):
        if not self.left:
            return 0
        n = self.f.readinto(memoryview(view)[: self.left])
        self.left -= n or 0
        return n


def _stream_chunks(f, rows, layout, name, trailing, overlap, offset=0, count=None):
    """AoS chunks of a stream, read into staging buffers by a :class:`_Reader`; with
    ``count``, a stream that ends before that many records is a ConversionError."""
    itemsize, done = layout.itemsize, 0
    reader = _Reader(f, rows, itemsize, overlap)
    with _closing_after(reader.close):
        for buf, n in reader:
            whole, left = divmod(n, itemsize)
            if left and count is None:  # a stream ends inside a record
                _partial(name, done * itemsize + n, itemsize, done + whole, left, trailing, offset, True)
            if not whole:
                break
            done += whole
            yield AoS(buf[: whole * itemsize], layout)
        if count is not None and done < count:
            raise too_few(name, count, done, itemsize, offset)


class _Pipeline:
    """Hands converted chunks to a sink (pyarrow's writer, or the records file), in a
    thread when ``overlap`` is set: chunk k is written while chunk k+1 converts.
    ``slots`` sets of buffers take turns (two on the CPU; three pinned buffer sets on
    the GPU, where one chunk is written, one converts and one is queued): a slot is
    handed out again only once what was put from it is written."""

    def __init__(self, sink, overlap, slots=2):
        self.sink, self.records, self.error = sink, 0, None
        self.nslots, self.abandoned = slots, False
        self.kept = [None] * slots  # per slot: the SoA whose arena the CPU path reuses
        self.free = queue.Queue()
        for i in range(slots):
            self.free.put(i)
        self.todo = queue.Queue(maxsize=1)
        self.current = None
        self.thread = threading.Thread(target=self._run, name="layouts-writer", daemon=True) if overlap else None

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
                if self.error is None and not self.abandoned:
                    self.sink.write(data)
            except BaseException as err:  # noqa: BLE001 - raised in the converting thread
                self.error = err
            del item, data  # nothing here may keep the slot's buffers exported once it is free
            self.free.put(slot)

    def __enter__(self):
        if self.thread is not None:
            _start(self.thread, lambda: _wait_out(self._stop_writer))
        return self

    def __exit__(self, kind, value, tb):
        if self.thread is not None:
            self.abandoned = kind is not None  # an error or Ctrl-C: what is queued is not written
            hold = _wait_out(self._stop_writer)
            if kind is None and self.error is None:
                try:
                    hold.deliver()  # a Ctrl-C while the last chunks were written: the output is dropped
                except BaseException:
                    self._close_quietly()
                    raise
        if kind is None and self.error is None:
            self.sink.close()
            return False
        self._close_quietly()
        if kind is None:
            raise self.error
        return False

    def _close_quietly(self):
        """An error or Ctrl-C (here, or in the writer) is on its way and the output is dropped: it is the
        one to report, not what finishing a file cut short says."""
        try:
            self.sink.close()
        except Exception:  # noqa: BLE001 - the sink's handles are closed either way
            pass

    def _stop_writer(self):
        """Tell the writer thread to end and wait for it (it may be writing a chunk whose
        buffers go once this returns)."""
        while self.thread.is_alive():
            try:
                self.todo.put(None, timeout=0.05)
            except queue.Full:
                pass
            self.thread.join(timeout=0.05)


def _wait_out(wait):
    """Run ``wait()`` to its end, Ctrl-C held meanwhile (:class:`layouts._files.InterruptHold`):
    it waits for a thread that uses buffers the caller is about to free, and a
    ``KeyboardInterrupt`` raised inside ``Thread.join`` would make the join return while
    the thread still runs (CPython gh-90882). Returns the hold: the caller calls its
    ``deliver()`` (raising ``KeyboardInterrupt`` for a Ctrl-C meanwhile) when no exception
    is on its way; when one is, a Ctrl-C meanwhile is dropped."""
    with InterruptHold() as hold:
        wait()
    return hold


def _start(thread, undo):
    """Start ``thread`` with Ctrl-C held: a ``KeyboardInterrupt`` raised inside
    ``Thread.start`` (which waits for the thread to begin) would leave it running with
    nothing to stop it. A Ctrl-C meanwhile calls ``undo()`` (stop the thread, wait for it),
    then raises ``KeyboardInterrupt``."""
    with InterruptHold() as hold:
        thread.start()
    if hold.count:
        undo()
        hold.deliver()


@contextmanager
def _closing_after(close):
    """Call ``close()`` (which returns an :class:`InterruptHold`, see :func:`_wait_out`) when
    the block ends: a Ctrl-C held meanwhile is delivered when the block ended normally
    (a generator used up, or returning), dropped when an exception is on its way (an
    error, a Ctrl-C, or ``GeneratorExit`` as the consumer stops)."""
    try:
        yield
    except BaseException:
        close()
        raise
    close().deliver()


_METADATA = 1 << 16  # reserved per batch beyond its buffers: IPC message and padding, Parquet pages


@contextmanager
def _writing(out):
    """An error writing the output ``out`` (:func:`layouts._files.open_output`) names the
    destination, the bytes written so far and, for a full disk, what to do. A reader
    that closed its end of a pipe is a :class:`BrokenPipeError` (a command exits quietly)."""
    try:
        yield
    except OSError as err:
        done = out.written()
        if err.errno == errno.EPIPE:
            raise BrokenPipeError(errno.EPIPE, f"writing {out.name}: its reader closed it after {done:,} bytes of "
                                               f"output") from err
        reason = os.strerror(err.errno) if err.errno else str(err)
        hint = "; free space there or write elsewhere" if err.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        left = "what was written stays written" if out.stream else "the destination was left as it was"
        raise OSError(err.errno, f"writing {out.name} failed after {done:,} bytes of output: {reason}{hint} "
                                 f"({left})") from err


class _ArrowSink:
    """Record batches into Parquet (a row group each) or Arrow IPC (a batch each); the
    writer opens on the first batch, which gives the schema. The file's blocks are
    reserved a batch ahead (:class:`BlockReservation`): records -> Arrow IPC from the
    page cache ran 1.13-1.20x faster with it (``python -m benchmarks.block_reservation``)."""

    def __init__(self, out, fmt, compression, dst=None):
        self.out, self.fmt, self.compression = out, fmt, compression
        self.writer = self.file = self.blocks = None
        self.dictionaries = _Dictionaries()

    def write(self, batch):
        with _writing(self.out):
            if self.file is None:
                # a file: pyarrow's own file on it (its writes need no Python); a stream: through the
                # counting wrapper, whose position pyarrow keeps itself (nothing seeks)
                out = self.out
                self.file = (pa.OSFile(out.native_path, "wb") if out.native_path is not None
                             else pa.PythonFile(out.file, mode="w"))
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
        with _writing(self.out):
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


class _RecordsSink:
    """Record bytes appended to a file. No blocks are reserved ahead here: in trial runs
    it gained nothing from the page cache and, reading the input from the disk, it
    halved the speed (the reservation waited behind the input's reads)."""

    def __init__(self, out, dst=None):
        self.out = out
        self.file = out.records_file()

    def write(self, data):
        with _writing(self.out):
            self.file.write(data)

    def close(self):
        file, self.file = self.file, None
        if file is not None:
            with _writing(self.out):
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


# ----------------------------------------------------------------- Arrow -> records


def _arrow_batches(src, rows, name):
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
        raise LayoutError(f"{name} is neither Parquet nor Arrow IPC (it starts with {bytes(head[:8])!r}); to write "
                          f"records, the input must be one of those") from None
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
            f"room, or pass the file's path instead of a pipe") from None
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
                f"(head -c {at} keeps the streams) or write the input again") from None
        if not stream.schema.equals(schema):
            raise ConversionError(
                f"{name}: the Arrow IPC stream from byte {at:,} has another schema than the first "
                f"({_schema_line(stream.schema)}; the first: {_schema_line(schema)}); streams concatenated in one "
                f"input must have one schema: convert them apart")
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


def _parts(batches, rows):
    """``(where, part)``: the batches cut into parts of at most ``rows`` rows."""
    for where, batch in batches:
        for start in range(0, batch.num_rows, rows):
            yield where, batch.slice(start, rows)


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

    def close():
        stop.set()
        return _wait_out(thread.join)  # it may be reading pages of buffers that go with the items

    thread = threading.Thread(target=run, name="layouts-reader", daemon=True)
    _start(thread, close)
    with _closing_after(close):
        while True:
            item = ready.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


_ROW = re.compile(r"\brow (\d+)\b")


def _input_rows(err, first):
    """A part's message with each row it names counted from the input's first row (the
    checks count from the part's)."""
    return _ROW.sub(lambda m: f"row {first + int(m.group(1))}", str(err)) if first else str(err)


@contextmanager
def _rows(name, first, n, where=None):
    """Name the input, its batch or row group and its rows in an error about one part
    of an Arrow input."""
    try:
        yield
    except (LayoutError, ConversionError) as err:
        where = f"{where}, " if where else ""
        named = type(err)(f"{name}, {where}rows {first} to {first + n}: {_input_rows(err, first)}")
        named.__dict__.update(err.__dict__)  # problems and fixes (layouts._arrow_in.Problems)
        raise named from err


def _whole_input(err, parts, first, check):
    """``err``, a part's column problems (:class:`layouts._arrow_in.Problems`), with those of
    the rest of the input that it does not have: the other parts are checked, not
    converted, so that one error names every problem and every option the input needs."""
    from ._arrow_in import Problems

    if getattr(err, "problems", None) is None:
        return err
    found = Problems()
    found.items = list(err.problems)
    seen = {}  # column -> the kinds of fix its problems so far need
    for column, e in found.items:
        seen.setdefault(column, set()).update(getattr(e, "fix", None) or {"": None})
    while True:
        part = None
        try:
            where, part = next(parts)
            check(part)
        except StopIteration:
            break
        except (ConversionError, LayoutError) as later:
            problems = getattr(later, "problems", None)
            if problems is None:  # not a column problem (a damaged part): said once, and no further reading
                found.add(None, later if part is None else
                          type(later)(f"{where}, rows {first} to {first + part.num_rows}: {_input_rows(later, first)}"))
                break
            for column, e in problems:
                kinds = set(getattr(e, "fix", None) or {"": None})
                if not kinds <= seen.get(column, set()):
                    seen.setdefault(column, set()).update(kinds)
                    at = ConversionError(f"{where}, rows {first} to {first + part.num_rows}: {_input_rows(e, first)}")
                    at.fix = getattr(e, "fix", None)
                    found.add(column, at)
        first += part.num_rows
    return err if len(found.items) == len(err.problems) else found.error()


def _arrow_to_records(src, layout, tmp, dst, chunk_bytes, fill, truncate, cast, overlap, threads, device,
                      progress, time_unit=None, extra="error"):
    rows = max(1, chunk_bytes // layout.itemsize)
    name = os.fspath(src) if isinstance(src, (str, os.PathLike)) else input_name(src)

    def check(part):
        return SoA.from_arrow(part, layout, fill=fill, truncate=truncate, cast=cast, time_unit=time_unit, extra=extra)

    def bound(parts):  # each part checked (buffers, offsets) and cast for the layout, its pages read
        first = 0
        for where, part in parts:
            with _rows(name, first, part.num_rows, where):
                try:
                    soa = check(part)
                except ConversionError as err:
                    raise _whole_input(err, parts, first + part.num_rows, check) from err
            if overlap:
                _touch(soa)
            yield soa
            first += part.num_rows

    parts = _ahead(bound(_parts(_arrow_batches(src, rows, name), rows)), overlap)

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
