"""Record files as Dask DataFrames: many files, or files larger than one machine.

Each partition is one byte range of one file, cut on record boundaries; its task reads
that range and nothing else, and transposes it with this library's one-pass kernel.
Record streams (:func:`read_stream`) give one DataFrame per record type, a partition
per file (or per byte range of fixed-size records).

>>> import layouts.dask as ld                                      # doctest: +SKIP
>>> df = ld.read_records("ticks/*.bin", layout, blocksize="128MiB")  # doctest: +SKIP
>>> df[df.qty > 100].px.mean().compute()                          # doctest: +SKIP
>>> frames = ld.read_stream("days/*.itch", "itch50")                # doctest: +SKIP
>>> frames["add_order"].shares.sum().compute()                      # doctest: +SKIP

Needs the ``dask`` extra (``pip install 'layouts-arrow[dask]'``); nothing here imports Dask
until it is called.
"""

import os
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

import numpy as np

from . import _backends as backends
from ._aos import AoS, as_layout, checked_nulls
from ._errors import ConversionError, LayoutError
from ._faults import forward_error, guarded_reads, shrunk_error
from ._files import check_count, check_offset, check_trailing, maps, too_few, whole_records
from ._soa import SoA

if TYPE_CHECKING:
    from ._layout import Layout

__all__ = ["read_records", "byte_ranges", "read_range", "read_stream", "stream_schemas"]

DEVICES = backends.DEVICES

PerFile = Union[int, None, Sequence[Any], Callable[[str], Any]]  # one value, one per file, or path -> value


def read_records(
    paths: "str | os.PathLike[str] | Sequence[str | os.PathLike[str]]",
    layout: "Layout | np.typing.DTypeLike",
    *,
    blocksize: "int | str" = "128MiB",
    offset: PerFile = 0,
    count: PerFile = None,
    trailing: str = "error",
    nulls: "Mapping[str, Any] | None" = None,
    device: str = "cpu",
    storage_options: "dict[str, Any] | None" = None,
) -> Any:
    """Record files as a lazy ``dask.dataframe.DataFrame``, one partition per byte range.

    Parameters
    ----------
    paths : str, os.PathLike or list of them
        Files, glob patterns (``"data/*.bin"``) or fsspec URLs (``"s3://bucket/*.bin"``).
        Every worker must be able to open them (a shared file system on a cluster).
    layout : Layout or numpy.dtype
        The record type, e.g. ``Layout.from_c(header, "struct tick")``.
    blocksize : int or str
        Target bytes per partition (``"64MiB"``), rounded down to whole records.
    offset : int, sequence of int, or callable
        Bytes of header at the start of a file, before its first record: one number for
        every file; a sequence with one per file, in the order of the files matched
        (sorted, as Dask and fsspec list them; ``len`` must match); or a callable
        ``offset(path)`` given each file's path as fsspec names it (for a local file an
        absolute path), e.g. one that reads the header.
    count : int, None, sequence or callable
        Records to take from a file after its ``offset`` (None: all of them); given as
        ``offset`` is. Bytes after them are not records (a trailer, extended headers).
        A file with fewer records is a ConversionError naming it and both numbers.
    trailing : {"error", "ignore"}
        A file whose bytes after ``offset`` are not a whole number of records (and whose
        ``count`` is None) is an error stating its sizes (default), or a warning and the
        partial record is skipped.
    nulls : dict, optional
        Sentinel values that mean "missing", as in :meth:`AoS.to_soa`.
    device : {"cpu", "cuda"}
        ``"cpu"``: partitions are pandas DataFrames of ``pandas.ArrowDtype`` columns over
        the Arrow buffers. ``"cuda"``: cuDF DataFrames (needs cuDF and dask-cudf), made
        on the GPU: each task copies its byte range to the device once, transposes it
        there and hands the device columns to cuDF without a copy (``SoA.to_cudf``).
    storage_options : dict, optional
        Passed to fsspec to open the files (credentials for remote stores).

    Returns
    -------
    dask.dataframe.DataFrame
        Indexed by record number across all files in order, with known divisions, so
        ``df.loc[i]`` finds record ``i`` without reading other partitions.

    A partition of a local file is memory-mapped, and its reads are guarded: a file that
    another program truncates after this call planned the partitions from its size is a
    ConversionError naming the file and the first record that is gone, when the
    partition is computed, never a SIGBUS that kills the worker.
    """
    dd, fsspec = _require_dask()
    layout = as_layout(layout)
    check_trailing(trailing)
    backend = backends.get(device)  # the device name, checked once; the tasks carry the backend
    size = _blocksize(blocksize)
    nulls = checked_nulls(layout, nulls)
    if not backend.host:
        _require_cudf()

    fs, _, names = fsspec.core.get_fs_token_paths(paths, mode="rb", storage_options=storage_options or {})
    if not names:
        raise LayoutError(f"no files match {paths!r}; check the path or glob pattern")
    offsets = _per_file(offset, names, "offset", check_offset)
    counts = _per_file(count, names, "count", check_count)
    sizes = [_file_size(fs, name, planned=True) for name in names]
    parts = byte_ranges(names, sizes, layout.itemsize, size, offset=offsets, trailing=trailing, count=counts)
    options = (layout, nulls, backend, dict(zip(names, offsets)))
    meta = _empty_part(options)
    if not parts:  # files with no records: one empty partition, same columns
        return dd.from_map(_empty_part, [options], meta=meta, enforce_metadata=False)
    first_rows = [p[3] for p in parts]
    divisions = (*first_rows, first_rows[-1] + (parts[-1][2] - parts[-1][1]) // layout.itemsize - 1)
    return dd.from_map(
        _Task(fs, options),
        parts,
        meta=meta,
        divisions=divisions,
        label="layouts-read-records",
        enforce_metadata=False,
    )


def _file_size(fs, name, planned=False):
    """The size of file ``name``; a directory (which fsspec gives for a path without a
    glob) is refused while the graph is planned, not when a partition is computed. With
    ``planned`` (byte ranges cut from the size, mapped), so is a local file whose size is
    not its bytes' (``/proc`` says 0, ``/sys`` 4,096 and does not map)."""
    info = fs.info(name)
    if info.get("type") == "directory":
        glob = name.rstrip("/") + "/*.bin"
        raise LayoutError(
            f"{name} is a directory, not a record file; give its files with a glob pattern, e.g. "
            f"{glob!r}, or a list of paths"
        )
    size = info["size"]
    if planned and _is_local(fs):
        with open(name, "rb") as f:
            if not maps(f.fileno(), size) and (size or f.read(1)):
                raise LayoutError(
                    f"{name} says it is {size:,} bytes but cannot be mapped or has other bytes (a /proc or /sys "
                    f"file): Dask's partitions are byte ranges planned from file sizes; read it with "
                    f"layouts.read_records({name!r}, layout), which reads such a file whole"
                )
    return size


def _blocksize(blocksize):
    """A positive number of bytes from ``blocksize`` (an int, or a size like ``"64MiB"``)."""
    from dask.utils import parse_bytes

    size = blocksize
    if isinstance(size, str):
        try:
            size = parse_bytes(size)
        except ValueError:
            pass
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size <= 0:
        raise LayoutError(f"blocksize must be a positive number of bytes or a size like '64MiB', got {blocksize!r}")
    return int(size)


def _per_file(value, names, what, check):
    """One checked value per file from ``value``: a scalar, a sequence with one per file, or a callable of the
    path."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if callable(value):
        return [check(value(name), f"{what}({name!r})") for name in names]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return [check(value)] * len(names)
    if len(value) != len(names):
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise LayoutError(
            f"{what} has {len(value)} values but {len(names)} files match ({shown}); give one per "
            f"file in that order, one value for all, or a callable {what}(path)"
        )
    return [check(v, f"{what}[{i}] ({name})") for i, (v, name) in enumerate(zip(value, names))]


def byte_ranges(names, sizes, itemsize, blocksize, *, offset=0, trailing="error", count=None):
    """``[(name, start, stop, first_row)]``: each file after its ``offset`` header, cut
    into ranges of whole records of about ``blocksize`` bytes (at least one record);
    ``first_row`` counts records across all files. Files with no records give no range.
    ``offset`` and ``count`` (records per file, None for all) are one value for every
    file or a list with one per file."""
    per_block = max(1, int(blocksize) // itemsize) * itemsize
    offsets = offset if isinstance(offset, (list, tuple)) else [offset] * len(names)
    counts = count if isinstance(count, (list, tuple)) else [count] * len(names)
    parts, row = [], 0
    for name, size, offset, count in zip(names, sizes, offsets, counts):
        if count is None:
            whole = whole_records(name, size, offset, itemsize, trailing, stacklevel=4)
        else:
            whole = whole_records(name, size, offset, itemsize, "ignore", quiet=True)
            if count > whole:
                raise too_few(name, count, whole, itemsize, offset)
            whole = count
        end = offset + whole * itemsize
        for start in range(offset, end, per_block):
            stop = min(start + per_block, end)
            parts.append((name, start, stop, row))
            row += (stop - start) // itemsize
    return parts


def read_range(f, start, stop):
    """Exactly bytes ``[start, stop)`` of an open binary file, as a NumPy byte array."""
    out = np.empty(stop - start, np.uint8)
    f.seek(start)
    view, got = memoryview(out), 0
    while got < len(out):
        n = f.readinto(view[got:])
        if not n:
            raise LayoutError(
                f"{getattr(f, 'path', f)} ended at byte {start + got}, before the end of the "
                f"byte range [{start}, {stop}) planned from its size; was the file cut short "
                f"after read_records listed it?"
            )
        got += n
    return out


class _Task:
    """One partition: read a byte range, transpose it, wrap the columns as a frame.

    On ``"cuda"`` the range's record bytes go to the GPU in one host-to-device copy,
    the device kernel transposes them into one arena there, and cuDF wraps the arena's
    columns: no copy back to the host."""

    def __init__(self, fs, options):
        self.fs, self.options = fs, options

    def __call__(self, part):
        name, start, stop, first_row = part
        layout, nulls, _, offsets = self.options
        base = offsets.get(name, start)
        try:
            if not _is_local(self.fs):
                with self.fs.open(name, "rb") as f:
                    return self._convert(AoS(read_range(f, start, stop), layout), first_row)
            # map just this range: the kernel reads the page cache directly, guarded against the file shrinking
            records = _map(name, start, stop, layout, base)
            with guarded_reads(records, layout.itemsize, base=base, doing=_DOING, fix=_FIX_SHRUNK):
                return self._convert(AoS(records.view(np.ndarray), layout), first_row)
        except ConversionError as err:
            fault = getattr(err, "fault", None)
            if fault is None or getattr(err, "records", None) is None:
                raise
            # a value's error: the file, and the record and byte in it (not in this partition)
            first = (start - base) // layout.itemsize
            raise forward_error(layout, err.records, fault, first=first, source=name, offset=base) from None

    def _convert(self, aos, first_row):
        layout, nulls, backend, _ = self.options
        if not backend.host:  # the partition stays where it was converted: a cuDF frame
            return _device_frame(aos.to_soa(nulls=nulls, device=backend.name), first_row)
        return _frame(aos.to_soa(nulls=nulls, threads=1).to_arrow(), first_row)


def _map(name, start, stop, layout, base):
    """Records ``[start, stop)`` of a local file, memory-mapped; a file now shorter than
    that (cut after the partitions were planned) is the ConversionError of
    :func:`layouts._faults.shrunk_error`."""
    itemsize = layout.itemsize
    for _ in range(2):
        size = os.path.getsize(name)
        if size < stop:
            raise shrunk_error(name, size, base, itemsize, max(size - base, 0) // itemsize, _DOING, _FIX_SHRUNK)
        try:
            return np.memmap(name, layout.dtype, mode="r", offset=start, shape=((stop - start) // itemsize,))
        except ValueError:  # cut between the size and the map: the size says where
            continue
    raise shrunk_error(name, size, base, itemsize, max(size - base, 0) // itemsize, _DOING, _FIX_SHRUNK)


_DOING = "read by Dask"
_FIX_SHRUNK = (
    "call layouts.dask.read_records again once it is complete (the partitions were planned from its size "
    "when read_records was called)"
)


def _is_local(fs):
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol
    return "file" in protocols


def _empty_part(options):
    layout, nulls, backend, _ = options
    if not backend.host:
        return _device_frame(AoS(b"", layout).to_soa(nulls=nulls, device=backend.name), 0)
    return _frame(AoS(b"", layout).to_soa(nulls=nulls).to_arrow(), 0)


def _frame(table, first_row):
    """A partition over the Arrow buffers: pandas ``ArrowDtype`` columns, no copy."""
    import pandas as pd

    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    frame.index = pd.RangeIndex(first_row, first_row + table.num_rows)
    return frame


def _device_frame(soa, first_row):
    """A partition over a device SoA's arena: a cuDF frame wrapping its columns (see
    ``SoA.to_cudf`` for the few it converts on the device), indexed by record number."""
    cudf = _require_cudf()
    frame = soa.to_cudf()
    frame.index = cudf.RangeIndex(first_row, first_row + len(soa))
    return frame


def _require_dask():
    try:
        import dask.dataframe as dd
        import fsspec
    except ImportError as err:
        raise ImportError(
            f"layouts.dask needs Dask's DataFrame ({err.name} is missing): pip install 'layouts-arrow[dask]'"
        ) from None
    return dd, fsspec


def _require_cudf():
    try:
        import cudf
        import dask_cudf  # noqa: F401  (registers cuDF partitions with Dask)
    except ImportError as err:
        raise ImportError(
            f"device='cuda' partitions need cuDF and dask-cudf ({err.name} is missing): install "
            f"them from RAPIDS for your CUDA version, e.g. pip install cudf-cu12 dask-cudf-cu12"
        ) from None
    return cudf


# --------------------------------------------------------------------------- record streams
RESERVED_TABLES = ("_header", "_gaps", "_blocks", "_unknown")


def read_stream(
    paths: "str | os.PathLike[str] | Sequence[str | os.PathLike[str]]",
    spec: Any,
    *,
    types: "Sequence[str] | None" = None,
    blocksize: "int | str | None" = None,
    file_column: str = "_file",
    storage_options: "dict[str, Any] | None" = None,
) -> "dict[str, Any]":
    """Record stream files as lazy Dask DataFrames, one per record type, one partition per file.

    Each partition is :func:`layouts.read_stream` of one whole file: the framing of a
    length-prefixed stream (pcap, ITCH, RDW) can only be followed from the file's start,
    so such a file is not cut into byte ranges. Files are read when a partition is
    computed; the graph, and every frame's ``meta``, come from the description and the
    file names alone (no file is opened to build them).

    With ``blocksize``, a stream of fixed-size records (one section with
    ``framing = { size = ... }``, behind an optional header) is cut into byte ranges of
    whole records, as :func:`read_records` cuts files: planning them reads each file's
    size and, where the description has a header, its header (a few bytes) on the
    client. The first range of a file holds the header and whatever precedes the
    records, the last one whatever follows them; each task reads its range only. A VB
    file (``lo.Stream.bdw``) is cut into ranges of whole blocks: planning follows its
    block descriptor words on the client (a local file, memory-mapped: the page of each
    BDW is read; a remote one stays one partition).

    Parameters
    ----------
    paths : str, os.PathLike or list of them
        Files, glob patterns (``"days/*.itch"``) or fsspec URLs, as :func:`read_records`
        takes them; matched files in sorted order, one partition each (or one per range).
    spec : Stream, path to a ``.toml`` description, or a built-in name
        As :func:`layouts.read_stream` takes it (``"pcap"``, ``"itch50"``); a mistake in
        it is a LayoutError here, before any file is read.
    types : list of str, optional
        Which tables to return: record type names of the description and, only when named
        here, the reserved entries it can produce (``"_header"``, ``"_gaps"``, and
        ``"_blocks"``/``"_unknown"`` where a section has them). Default: every record type.
    blocksize : int or str, optional
        Target bytes per partition (``"64MiB"``) for a stream of fixed-size records (see
        above); None (default): one partition per file. A length-framed description with
        ``blocksize`` is a LayoutError saying why it cannot be cut.
    file_column : str
        Name of the column, first in every frame, that names each row's file: a pandas
        ``Categorical`` whose categories are the matched files in partition order (ordered,
        so sorting on it and ``_offset`` restores the files' order), as fsspec names them
        (a local file: its absolute path).
    storage_options : dict, optional
        Passed to fsspec to open the files.

    Returns
    -------
    dict of str to dask.dataframe.DataFrame
        One frame per type, in the description's order. Columns: ``file_column``, then the
        columns of :func:`layouts.read_stream`'s table (``_offset``, ``_prefix``, the
        fields, ``_tail``) as pandas ``ArrowDtype``. ``_offset`` and the file column
        identify a record. Each partition's index counts its records of that type from 0;
        divisions are unknown (record counts per type are known only once read).

    The frames of one call share their read tasks: computing several together
    (``dask.compute(frames["add_order"], frames["trade"])``) reads each file once. A file
    that fails is a ConversionError naming it (and the byte offset and record type) when
    its partition is computed. A local file is memory-mapped and its reads are guarded:
    one that shrinks while it is read is a ConversionError naming it, not a SIGBUS.

    Examples
    --------
    >>> import dask, layouts.dask as ld                                  # doctest: +SKIP
    >>> frames = ld.read_stream("days/*.itch", "itch50")                 # doctest: +SKIP
    >>> adds, trades = dask.compute(frames["add_order"], frames["trade"])  # doctest: +SKIP
    >>> ld.read_stream("caps/*.pcap", "pcap", types=["packet", "_header"])["_header"].compute()  # doctest: +SKIP
    """
    dd, fsspec = _require_dask()
    import pandas as pd
    from dask import delayed

    from ._stream.read import resolve

    stream = resolve(spec)
    if not isinstance(file_column, str) or not file_column:
        raise LayoutError(f"file_column must be a column name (a non-empty str), got {file_column!r}")
    empties = stream_schemas(stream)
    record_types = [n for n in empties if n not in RESERVED_TABLES]
    wanted = list(record_types) if types is None else _checked_types(types, empties, record_types)
    for name in wanted:
        if file_column in empties[name].names:
            raise LayoutError(
                f"table {name!r} has a column named {file_column!r}; pass another "
                f"file_column=, e.g. file_column='_path'"
            )
    size = None if blocksize is None else _blocksize(blocksize)
    if size is not None:
        why = _unsplittable(stream)
        if why:
            raise LayoutError(
                f"blocksize= cuts only streams of fixed-size records (one section with framing = "
                f"{{ size = ... }}) and VB files into byte ranges; {stream.name} {why}, so each file "
                f"is one partition: leave blocksize out"
            )
    fs, _, names = fsspec.core.get_fs_token_paths(paths, mode="rb", storage_options=storage_options or {})
    if not names:
        raise LayoutError(f"no files match {paths!r}; check the path or glob pattern")
    for name in names:
        _file_size(fs, name)
    files = pd.CategoricalDtype(names, ordered=True)
    task = _StreamTask(fs, stream, {n: empties[n] for n in wanted}, file_column, files)
    pieces = [
        (i, name, piece)
        for i, name in enumerate(names)
        for piece in ([None] if size is None else _stream_ranges(fs, name, stream, size))
    ]
    reads = [
        delayed(task, pure=True)(i, name, piece, dask_key_name=f"layouts-read-stream-{_token(task, name, piece)}")
        for i, name, piece in pieces
    ]
    out = {}
    for name in wanted:
        meta = _stream_frame(empties[name].empty_table(), file_column, files, 0)
        parts = [delayed(_pick, pure=True)(r, name) for r in reads]
        out[name] = dd.from_delayed(parts, meta=meta, verify_meta=False)
    return out


def stream_schemas(spec: Any) -> "dict[str, Any]":
    """``{table name: pyarrow.Schema}`` of every table :func:`layouts.read_stream` can
    return for a description, computed from the description alone: its record types in
    order, then the reserved entries it can produce (``_header`` with a header,
    ``_blocks`` for VB sections, ``_unknown`` where a section keeps unknown tags, and
    ``_gaps``). They are the schemas of ``read_stream``'s own tables for a section with
    no records (the same code builds them), so a file's tables have them too."""
    from ._stream.frame import Scanned
    from ._stream.read import StreamTables, _convert, _raw_table, _tables, resolve
    from ._stream.spec import _BdwSection, _open_list

    stream = resolve(spec)
    opens = [
        f"{t.name}.{name}"
        for s in stream.sections
        for t in s.types
        for name, ty in getattr(t.record, "fields", ())
        if isinstance(ty, str) and _open_list(ty)
    ]
    if opens:
        raise LayoutError(
            f"{stream.name}: the list length of {opens[0]} comes from each file's header, so its tables' "
            f"schemas are known only file by file, and one Dask frame has one schema: not taken yet; read "
            f"the files with layouts.read_stream (one dict of tables each)"
        )
    order = stream.orders()[0]  # the byte order changes no Arrow type
    buf = np.zeros(0, np.uint8)
    buf.flags.writeable = False
    none = np.zeros(0, np.int64)
    got = StreamTables()
    got.stream, got.order, got.decimals = stream, order, {}
    for i, s in enumerate(stream.sections):
        blocks = none if isinstance(s, _BdwSection) else None
        _tables(
            got,
            stream,
            s,
            Scanned(0, 0, none, none, np.zeros(0, np.int32), blocks),
            buf,
            "<schema>",
            order,
            f"{stream.name} section[{i}]",
        )
    out = {name: soa.to_arrow().schema for name, soa in got.items() if name != "_blocks"}
    if stream.header is not None:
        out["_header"] = (
            _convert(buf, stream.header, order, none, none, 0, False, False, "<schema>", "header")[0].to_arrow().schema
        )
    if "_blocks" in got:
        out["_blocks"] = got["_blocks"].to_arrow().schema
    raw = _raw_table(buf, none, none).to_arrow().schema
    if any(s.unknown == "keep" for s in stream.sections):
        out["_unknown"] = raw
    out["_gaps"] = raw
    return out


def _checked_types(types, empties, record_types):
    if isinstance(types, str):
        types = [types]
    wanted = list(types)
    for name in wanted:
        if name not in empties:
            extra = [n for n in empties if n in RESERVED_TABLES]
            raise LayoutError(
                f"types names {name!r}, which is no table of this stream; its record types: "
                f"{', '.join(record_types)}; reserved tables it can have: {', '.join(extra)}"
            )
    twice = sorted({n for n in wanted if wanted.count(n) > 1})
    if twice:
        raise LayoutError(f"types names {', '.join(map(repr, twice))} twice; name each table once")
    return wanted


def _token(*parts):
    from dask.base import tokenize

    return tokenize(*parts)


def _pick(frames, name):
    return frames[name]


class _StreamTask:
    """One file: :func:`layouts.read_stream` of it, every wanted table as a pandas frame
    with the file column; tables the file lacks (a reserved entry, a type with no
    records...) are empty frames of the planned schema."""

    def __init__(self, fs, stream, schemas, file_column, files):
        self.fs, self.stream, self.schemas, self.file_column, self.files = fs, stream, schemas, file_column, files

    def __dask_tokenize__(self):
        return (
            "layouts-stream-task",
            _token(self.fs),
            self.stream,
            sorted((k, str(v)) for k, v in self.schemas.items()),
            self.file_column,
            tuple(self.files.categories),
        )

    def __call__(self, index, name, piece=None):
        from ._stream.read import read_stream as read

        if piece is None and _is_local(self.fs):
            tables = read(name, self.stream)  # mapped, its reads guarded
        elif piece is None:
            with self.fs.open(name, "rb") as f:
                data = read_range(f, 0, self.fs.size(name))
            try:
                tables = read(data, self.stream)
            except ConversionError as err:
                raise ConversionError(_relabel(str(err), name)) from err
        else:
            tables = self._range(name, piece)
        out = {}
        for table_name, schema in self.schemas.items():
            table = tables.get(table_name, schema.empty_table())
            table = table.to_arrow() if isinstance(table, SoA) else table
            out[table_name] = _stream_frame(_as_schema(table, schema), self.file_column, self.files, index)
        return out

    def _same_header(self, name, planned):
        """A ConversionError if the file's header is not the one its ranges were cut by."""
        if not planned:
            return
        with self.fs.open(name, "rb") as f:
            now = bytes(read_range(f, 0, len(planned))) if self.fs.size(name) >= len(planned) else b""
        if now != planned:
            raise ConversionError(
                f"{name}: its header (bytes 0 to {len(planned)}) changed after layouts.dask.read_stream cut the "
                f"file into partitions by it: they no longer fit its records; call read_stream again"
            )

    def _range(self, name, piece):
        """read_stream of bytes ``[start, stop)`` of a file of fixed-size records: the
        first range with the description's header (the section's count cut to the range's
        records), a later one as a section of its own, its offsets moved to the file's;
        of a VB file: whole blocks, read as the file is."""
        import dataclasses

        import pyarrow as pa
        import pyarrow.compute as pc

        from ._stream.read import read_stream as read
        from ._stream.spec import Stream

        if piece[2] == "vb":  # whole blocks of a VB file
            start, stop, _ = piece
            sub, record_size, section_start = self.stream, 1, start
        else:
            start, stop, first, count, order, record_size, section_start, index, planned = piece
            self._same_header(name, planned)
            s = self.stream.sections[index]
            framing = dataclasses.replace(s.framing, size=record_size)
            if first:  # the header, the bytes before the records, the first records of section 0
                sub = dataclasses.replace(
                    self.stream,
                    sections=(dataclasses.replace(s, framing=framing, offset=section_start, count=count, bytes=None),),
                )
            else:
                sub = Stream(
                    [dataclasses.replace(s, framing=framing, offset=None, count=count, bytes=None)],
                    order=order,
                    name=self.stream.name,
                )
        if _is_local(self.fs):
            data = _map_range(name, start, stop)
            with guarded_reads(data, record_size, base=section_start, doing=_DOING, fix=_FIX_STREAM):
                tables = _read_labelled(read, data, sub, name, start)
        else:
            with self.fs.open(name, "rb") as f:
                tables = _read_labelled(read, read_range(f, start, stop), sub, name, start)
        out = {}
        for key, soa in tables.items():
            table = soa.to_arrow()
            if start:
                i = table.schema.get_field_index("_offset")
                table = table.set_column(i, "_offset", pc.add(table.column(i), pa.scalar(start, pa.int64())))
            out[key] = table
        return out


def _read_labelled(read, data, stream, name, start):
    """read_stream of a file's bytes from ``start`` on; its errors name the file and its bytes."""
    try:
        return read(data, stream)
    except ConversionError as err:
        raise ConversionError(_relabel(str(err), name, start)) from err


def _is_vb(stream):
    from ._stream.spec import _BdwSection

    return len(stream.sections) == 1 and isinstance(stream.sections[0], _BdwSection) and stream.header is None


def _unsplittable(stream):
    """Why ``stream``'s files cannot be cut into byte ranges (None: they can)."""
    if _is_vb(stream):  # cut at block descriptor words
        return None
    if any(s.framing.size is None for s in stream.sections):
        return "frames its records by a length field: where a record starts is known only from the ones before it"
    return None


def _stream_ranges(fs, name, stream, blocksize):
    """Byte ranges of whole records of one file of fixed-size records: ``[(start, stop,
    first, records, byte order, record size, section start, section index), ...]``, each
    section cut on its own (its last range runs to the next section's start), or ``[None]``
    (one whole-file partition) when the file has one range or its header or size does not
    fit the description (read_stream then reports what is wrong, when the partition is
    computed)."""
    from ._stream.frame import detect_order
    from ._stream.read import _convert, header_values

    size = fs.size(name)
    if _is_vb(stream):
        return _vb_ranges(fs, name, size, blocksize)
    if getattr(stream, "header_size", None) is not None:  # a header whose size its fields give (LAS): whole files
        return [None]
    order, values, h, head = stream.orders()[0], {}, 0, b""
    if stream.header is not None or stream.byteorder is not None:
        b = stream.byteorder
        h = stream.header.size(order) if stream.header is not None else 0
        need = max(h, b.offset + b.size if b is not None else 0)
        if size < need:
            return [None]
        with fs.open(name, "rb") as f:
            head = read_range(f, 0, need)
        head.flags.writeable = False
        try:
            order = detect_order(stream, head, name)
            if stream.header is not None:
                at = np.zeros(1, np.int64)
                header, _ = _convert(
                    head, stream.header, order, at, np.full(1, h, np.int64), 0, False, False, name, "header"
                )
                values = header_values(stream, header, order)
        except ConversionError:
            return [None]
    plan = _section_plan(stream, values, h, size)
    if plan is None:
        return [None]
    out = []
    for i, (start, _end, count, record_size) in enumerate(plan):
        per = max(1, blocksize // record_size)
        for k in range(0, count, per):
            n = min(per, count - k)
            first = i == 0 and k == 0
            lo = 0 if first else start + k * record_size
            # the last range of a section runs to the next one's start (the bytes between are its _gaps)
            last_of_section = k + n == count
            hi = (plan[i + 1][0] if i + 1 < len(plan) else size) if last_of_section else start + (k + n) * record_size
            out.append((lo, hi, first, n, order, record_size, start, i, bytes(head)))
    return [None] if len(out) < 2 else out


def _section_plan(stream, values, h, size):
    """``[(start, end, records, record size), ...]`` of a stream's fixed-size sections, from
    its header's values, or None where a section is empty, not fixed-size, or its numbers
    do not fit the file (one whole-file partition: read_stream reports what is wrong)."""
    from ._stream.spec import evaluate

    plan, pos = [], h
    several = len(stream.sections) > 1
    for i, s in enumerate(stream.sections):
        if s.framing.size is None:
            return None
        if several and (
            s.select is not None
            or any(
                "[" in t and not t.rstrip("]").split("[")[-1].isdigit() for rt in s.types for _, t in rt.record.fields
            )
        ):
            return None  # a later section's range has no header to choose its type or size its lists
        try:
            start = pos if s.offset is None else evaluate(s.offset, values, "offset")
            record_size = evaluate(s.framing.size, values, "framing.size")
            count = None if s.count is None else evaluate(s.count, values, "count")
            end = None if s.bytes is None else start + evaluate(s.bytes, values, "bytes")
        except (ValueError, TypeError, LayoutError):  # sizes the description does not give as numbers
            return None
        if record_size <= 0 or not pos <= start <= size:
            return None
        if count is None:
            stop = size if end is None else end
            if (end is None and i + 1 < len(stream.sections)) or stop > size or (stop - start) % record_size:
                return None
            count = (stop - start) // record_size
        if count <= 0 or (end is not None and count * record_size != end - start) or start + count * record_size > size:
            return None
        pos = start + count * record_size
        plan.append((start, pos, count, record_size))
    return plan


def _vb_ranges(fs, name, size, blocksize):
    """Byte ranges of whole blocks of one VB file (``[(start, stop, "vb"), ...]``), found
    by following its block descriptor words (the scan kernel, over the file memory-mapped:
    it touches the page of each BDW); ``[None]`` (one whole-file partition) for a file that
    is not local, has one range, or whose BDWs do not chain to its end (read_stream then
    reports what is wrong, when the partition is computed)."""
    from ._stream.frame import scan_section
    from ._stream.spec import Framing, Length, Record, RecordType, Section, Stream

    if not _is_local(fs) or size <= blocksize:
        return [None]
    blocks = Stream(
        [
            Section(
                Framing(length=Length(offset=0, size=2, order="big", counts_itself=True), prefix=0),
                (RecordType("block", Record((("bdw", ">u2"), ("spare", ">u2")))),),
                tail="column",
            )
        ],
        name="bdw",
    )
    data = np.memmap(name, np.uint8, mode="r", shape=(size,))
    data.flags.writeable = False
    try:
        with guarded_reads(data, 1, base=0, doing=_DOING, fix=_FIX_STREAM):
            got = scan_section(blocks, blocks.sections[0], np.asarray(data), name, "big", {}, 0, size, -1, "bdw")
    except ConversionError:
        return [None]
    if got.end != size or (got.lengths < 8).any():
        return [None]
    ends = got.offsets + got.lengths
    # cut after the first block that reaches each multiple of blocksize
    cuts = np.unique(np.searchsorted(ends, np.arange(blocksize, size, blocksize), "left"))
    stops = [int(ends[c]) for c in cuts if ends[c] < size] + [size]
    starts = [0] + stops[:-1]
    if len(stops) < 2:
        return [None]
    return [(a, b, "vb") for a, b in zip(starts, stops)]


def _map_range(name, start, stop):
    """Bytes ``[start, stop)`` of a local file, memory-mapped (a file now shorter: the
    ConversionError of :func:`layouts._faults.shrunk_error`)."""
    for _ in range(2):
        size = os.path.getsize(name)
        if size < stop:
            break
        try:
            return np.memmap(name, np.uint8, mode="r", offset=start, shape=(stop - start,))
        except ValueError:  # cut between the size and the map
            continue
    raise ConversionError(
        f"{name} shrank after layouts.dask.read_stream planned its byte ranges: it is now {size} "
        f"bytes, and the range [{start}, {stop}) is gone; {_FIX_STREAM}"
    )


_FIX_STREAM = (
    "call layouts.dask.read_stream again once it is complete (its byte ranges were planned from its size "
    "when read_stream was called)"
)


def _relabel(message, name, shift=0):
    """A read_stream message about a buffer (of bytes from ``shift`` on), naming the file
    and its bytes instead."""
    if shift:
        message = re.sub(r"\bbyte (\d+)", lambda m: f"byte {int(m.group(1)) + shift}", message)
    return name + message[len("<buffer>") :] if message.startswith("<buffer>") else f"{name}: {message}"


def _as_schema(table, schema, limit=2**31 - 1):
    """``table`` with ``schema``'s types: a ``_tail`` that read_stream made
    ``large_binary`` (a file with more than 2 GiB of tails) becomes ``binary`` in chunks
    of at most ``limit`` bytes each, so every partition has the planned dtype."""
    import pyarrow as pa

    if table.schema.equals(schema):
        return table
    columns = []
    for field in schema:
        column = table.column(field.name)
        if column.type == field.type:
            columns.append(column)
            continue
        if not (pa.types.is_large_binary(column.type) and pa.types.is_binary(field.type)):
            raise LayoutError(
                f"column {field.name!r} is {column.type}, but {field.type} was planned; please report "
                f"this as a bug of layouts.dask.read_stream"
            )
        chunks = []
        for chunk in column.chunks:
            offsets = np.frombuffer(chunk.buffers()[1], np.int64)[chunk.offset : chunk.offset + len(chunk) + 1]
            start = 0
            while start < len(chunk):
                stop = int(np.searchsorted(offsets, offsets[start] + limit, side="right")) - 1
                stop = max(stop, start + 1)
                chunks.append(chunk.slice(start, stop - start).cast(field.type))
                start = stop
        columns.append(pa.chunked_array(chunks, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _stream_frame(table, file_column, files, index):
    """A partition: the table's columns as pandas ``ArrowDtype`` (no copy), the file column first."""
    import pandas as pd

    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    frame.insert(0, file_column, pd.Categorical.from_codes(np.full(table.num_rows, index, np.int64), dtype=files))
    frame.index = pd.RangeIndex(table.num_rows)
    return frame
