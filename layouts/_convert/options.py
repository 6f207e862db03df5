"""The options of one conversion, checked once: :class:`ConvertOptions`.

Each wrong value is a :class:`layouts.LayoutError` with the message :func:`layouts.convert`
has always given, found in the same order; what passes is a frozen dataclass that the
sources, the pipeline, the sinks and the GPU path read from (the format resolved from the
destination, the header read into bytes).
"""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .._errors import LayoutError
from .._files import check_count, check_offset
from .._formats import DEFAULT_CHUNK, FORMATS, SUFFIXES

__all__ = ["ConvertOptions", "output_format", "count_on_the_way_back", "HEADER_CAP"]


@dataclass(frozen=True)
class ConvertOptions:
    """:func:`layouts.convert`'s keywords, checked (see :meth:`checked`); ``header`` is the
    header's bytes (Arrow -> records) or None."""

    format: str
    device: "str | None" = None
    chunk_bytes: int = DEFAULT_CHUNK
    compression: "str | None" = None
    overwrite: bool = False
    offset: int = 0
    count: "int | None" = None
    trailing: str = "error"
    nulls: "Mapping[str, Any] | None" = None
    fill: "Mapping[str, Any] | None" = None
    truncate: bool = False
    cast: str = "strict"
    overlap: bool = True
    threads: "int | None" = None
    progress: "Callable[[int, int, int | None], object] | None" = None
    time_unit: Any = None
    extra: Any = "error"
    header: "bytes | None" = None

    @classmethod
    def checked(
        cls,
        src,
        dst,
        *,
        format=None,
        device=None,
        chunk_bytes=DEFAULT_CHUNK,
        compression=None,
        overwrite=False,
        offset=0,
        count=None,
        trailing="error",
        nulls=None,
        fill=None,
        truncate=False,
        cast="strict",
        overlap=True,
        threads=None,
        progress=None,
        time_unit=None,
        extra="error",
        header=None,
    ) -> "ConvertOptions":
        """The options of a conversion of ``src`` to ``dst``; a wrong one is a LayoutError.
        (``nulls``, ``fill``, ``truncate``, ``cast``, ``time_unit``, ``extra``, ``threads``
        and ``device`` are checked where they are used, by the containers and the kernels.)"""
        if isinstance(dst, (str, os.PathLike)) and os.path.isdir(dst):
            raise LayoutError(f"{dst} is a directory; give a file path for the output")
        fmt = output_format(dst, format)
        offset, count = check_offset(offset), check_count(count)
        head = header_bytes(header, offset, fmt, time_unit, extra)
        if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, (int, np.integer)):
            raise LayoutError(
                f"chunk_bytes must be a whole number of bytes (an int, e.g. 64 << 20), got "
                f"{chunk_bytes!r} ({type(chunk_bytes).__name__})"
            )
        if chunk_bytes < 1:
            raise LayoutError(f"chunk_bytes must be positive, got {chunk_bytes}")
        count = records_only(fmt, count, src)
        if fmt != "records" and trailing not in ("error", "ignore"):  # (records are written whole: not used)
            raise LayoutError(f"trailing must be 'error' or 'ignore', got {trailing!r}")
        return cls(
            format=fmt,
            device=device,
            chunk_bytes=int(chunk_bytes),
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
            header=head,
        )

    def rows(self, layout):
        """Records per chunk: ``chunk_bytes`` of them, at least one."""
        return max(1, self.chunk_bytes // layout.itemsize)


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
        raise LayoutError(
            f"writing to a file object ({name or type(dst).__name__}) needs format=, one of {FORMATS}: "
            f"it has no file name to tell the format by"
        )
    suffix = Path(dst).suffix
    if suffix.lower() not in SUFFIXES:
        said = f"suffix {suffix!r}" if suffix else "no suffix"
        known = ", ".join(f"{s} ({f})" for s, f in SUFFIXES.items())
        raise LayoutError(
            f"{dst} has {said}, which names no output format; give format= (one of {FORMATS}) "
            f"or a known suffix: {known}"
        )
    return SUFFIXES[suffix.lower()]


def records_only(fmt, count, src=None):
    """``count`` describes a records input, so with a Parquet/Arrow input (``format="records"``,
    Arrow -> records) it is refused; ``offset`` there is the header's size (see :func:`header_bytes`)."""
    if fmt == "records" and count is not None:
        raise LayoutError(count_on_the_way_back(count, src))
    return count


def count_on_the_way_back(count, src):
    """Why ``count=`` is refused when writing records: what the input at ``src`` is (a
    path whose first bytes are looked at: Parquet, Arrow, or neither, which would be
    records: records -> records is no conversion), and what to do instead."""
    from .._files import arrow_kind

    said = (
        f"count={count} applies to an input of records (records -> Arrow), whose first {count} records it takes, "
        f"but this writes records (format='records', or a records destination)"
    )
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
        return (
            f"{said}, which it makes only from Parquet or Arrow data, and {os.fspath(src)} is neither (it has no "
            f"Parquet or Arrow magic bytes: records, it seems): records -> records is no conversion; to convert "
            f"records to Arrow, give an Arrow destination (.parquet, .feather, .arrow, .arrows) or format='parquet'"
        )
    what = f"{os.fspath(src)} is {kind}" if kind else "its input is Parquet or Arrow data"
    return (
        f"{said}, and {what}, whose every row is written: leave count= out (to write fewer rows, slice the table "
        f"first, e.g. pyarrow's Table.slice)"
    )


def header_bytes(header, offset, fmt, time_unit=None, extra="error"):
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
                f"the original records file (its first {offset} bytes are copied) or as the header's bytes"
            )
        return None
    if isinstance(header, (bytes, bytearray, memoryview)):
        data = bytes(header)
        if offset and offset != len(data):
            raise LayoutError(
                f"header= is {len(data)} bytes, but offset={offset}: give the header's bytes alone, or leave offset out"
            )
        return data
    if not offset:
        raise LayoutError("header= a file needs offset=N, the header's size in bytes: its first N bytes are copied")
    if offset > HEADER_CAP:
        raise LayoutError(
            f"offset={offset} asks for a header of {offset} bytes, more than the {HEADER_CAP} bytes "
            f"(1 GiB) a header may have: give offset= as the header's size (the bytes before the "
            f"first record of the original records file)"
        )
    if isinstance(header, (str, os.PathLike)):
        from .._regular import open_regular

        where = os.fspath(header)
        try:
            with open_regular(
                header, f"header= is the original records file, whose first {offset} bytes (offset={offset}) are copied"
            ) as f:
                size = os.fstat(f.fileno()).st_size
                if size < offset:
                    raise LayoutError(
                        f"the header file {where} is {size} bytes, shorter than the {offset}-byte "
                        f"header (offset={offset})"
                    )
                data = _read_header(f, offset)
        except OSError as err:
            raise LayoutError(f"cannot read the header from {where!r}: {err.strerror}") from None
    elif hasattr(header, "read"):
        where = str(getattr(header, "name", f"(a {type(header).__name__})"))
        data = _read_header(header, offset)
    else:
        raise LayoutError(f"header= takes bytes, a path or a binary file object, got {type(header).__name__}")
    if len(data) < offset:
        raise LayoutError(
            f"the header file {where} is {len(data)} bytes, shorter than the {offset}-byte header (offset={offset})"
        )
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
