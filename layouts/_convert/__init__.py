"""Streaming file conversion: legacy records <-> Parquet / Feather / Arrow IPC, chunk by chunk.

:func:`convert` checks its options once (:mod:`.options`), opens the output and runs the
pipeline (:mod:`.pipeline`) from a source (:mod:`.sources`) into a sink (:mod:`.sinks`),
on the GPU through :mod:`.gpu`; every thread beside the main one is a
:class:`.readahead.Handoff`.

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

import os
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Mapping

import numpy as np
import pyarrow as pa  # noqa: F401 - benchmarks/ipc_read.py reads pyarrow through this module

from .._aos import as_layout
from .._files import BlockReservation, open_output  # noqa: F401 - BlockReservation: see below
from .._formats import DEFAULT_CHUNK, FORMATS
from ..kernels.threads import InterruptHold
from .options import ConvertOptions, count_on_the_way_back, output_format
from .pipeline import Pipeline, arrow_to_records, records_to_arrow
from .sinks import ArrowSink, write_header, writing
from .sources import mapped_chunks

if TYPE_CHECKING:
    from .._layout import Layout

__all__ = ["convert", "ConvertResult", "FORMATS", "output_format", "count_on_the_way_back"]

# the names tests reach in for here (tests/test_interrupts.py, test_mmap_shrink.py; test_convert.py replaces
# BlockReservation.ahead), as they did when the converter was one module
_ArrowSink, _Pipeline, _mapped_chunks = ArrowSink, Pipeline, mapped_chunks


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
        return (
            f"{self.records:,} records, {_size(self.bytes_in)} in, {_size(self.bytes_out)} "
            f"out, {self.seconds:.2f} s, {_speed(self.gbps)} -> {self.dst}"
        )


def _size(n):
    """Bytes as MB with one decimal, or as kB or bytes where that would show 0.0 MB."""
    return f"{n / 1e6:,.1f} MB" if n >= 50_000 else f"{n / 1e3:,.1f} kB" if n >= 1000 else f"{n:,} bytes"


def _speed(gbps):
    """GB/s with two decimals, or MB/s or kB/s where that would show 0.00 GB/s."""
    if gbps >= 0.01:
        return f"{gbps:,.2f} GB/s"
    return f"{gbps * 1e3:,.2f} MB/s" if gbps >= 0.00001 else f"{gbps * 1e6:,.2f} kB/s"


def convert(
    src: "str | os.PathLike[str] | BinaryIO",
    layout: "Layout | np.typing.DTypeLike",
    dst: "str | os.PathLike[str] | BinaryIO",
    *,
    format: "str | None" = None,
    device: "str | None" = None,
    chunk_bytes: int = DEFAULT_CHUNK,
    compression: "str | None" = None,
    overwrite: bool = False,
    offset: int = 0,
    count: "int | None" = None,
    trailing: str = "error",
    nulls: "Mapping[str, Any] | None" = None,
    fill: "Mapping[str, Any] | None" = None,
    truncate: bool = False,
    cast: str = "strict",
    overlap: bool = True,
    threads: "int | None" = None,
    progress: "Callable[[int, int, int | None], object] | None" = None,
    time_unit: Any = None,
    extra: Any = "error",
    header: "bytes | str | os.PathLike[str] | BinaryIO | None" = None,
) -> ConvertResult:
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
    options = ConvertOptions.checked(
        src,
        dst,
        format=format,
        device=device,
        chunk_bytes=chunk_bytes,
        compression=compression,
        overwrite=overwrite,
        offset=offset,
        count=count,
        trailing=trailing,
        nulls=nulls,
        fill=fill,
        truncate=truncate,
        cast=cast,
        overlap=overlap,
        threads=threads,
        progress=progress,
        time_unit=time_unit,
        extra=extra,
        header=header,
    )
    if options.format == "records" and layout.aliases:
        from .._soa import aliases_error

        raise aliases_error(layout)  # (before a record is read or an output made)
    out = open_output(dst, overwrite=options.overwrite, src=src)  # checks dst; an unnamed or temporary file
    t0 = time.perf_counter()
    try:
        if options.format == "records":
            write_header(out, options.header)
            records, bytes_in = arrow_to_records(src, layout, out, options)
        else:
            records, bytes_in = records_to_arrow(src, layout, out, options)
        with writing(out):
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
