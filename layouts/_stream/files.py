"""A stream's tables as a directory of files, one per record type, and back (``layouts
convert --stream``).

:func:`write_dir` writes ``TYPE.parquet`` (or ``.feather``, ``.arrow``, ``.arrows``) for
every record type of the description, empty ones too (the way back needs each type's
columns), and ``_header``, ``_gaps``, ``_blocks``, ``_unknown`` where the stream has them
(a type's name never starts with ``_``, so these cannot clash). The set is written into
a temporary directory beside the destination and moved into place only once every file
is complete; :func:`read_dir` reads such a directory back into tables for
:func:`write_stream`. Each file's schema metadata carries ``layouts.stream``: the stream's
name, the table's name and the byte order it was read in.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
import shutil
import tempfile
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import pyarrow as pa

from .._errors import ConversionError, LayoutError
from .._files import InterruptHold
from .._formats import SUFFIXES
from ..kernels._memory import MappedGuard
from .frame import _checked, detect_order, scan_section, source_bytes
from .read import (
    StreamTables,
    _check_shrunk,
    _gaps,
    _keep_prefix,
    _tables,
    read_header,
    section_range,
)
from .spec import Stream, evaluate

__all__ = [
    "write_dir",
    "read_dir",
    "scan_dir",
    "write_back",
    "DirSet",
    "convert_to_dir",
    "count_stream",
    "read_windows",
    "WINDOW",
    "RESERVED_TABLES",
    "SUFFIX",
    "READ_SUFFIXES",
    "table_bytes",
    "set_names",
]

WINDOW = 16 << 20  # bytes of the stream read into tables at a time (convert --stream, both ways)

RESERVED_TABLES = ("_header", "_gaps", "_blocks", "_unknown")
SUFFIX = {"parquet": ".parquet", "feather": ".feather", "arrow": ".arrow", "arrows": ".arrows"}
READ_SUFFIXES = {suffix: fmt for suffix, fmt in SUFFIXES.items() if fmt != "records"}  # the Arrow formats'
DEFAULT_CODEC = {"parquet": "snappy", "feather": "lz4", "arrow": None, "arrows": None}
META = b"layouts.stream"


def read_windows(src: Any, stream: Stream, window: int = WINDOW) -> "Iterator[StreamTables]":
    """The tables of :func:`read_stream`, a window of about ``window`` bytes of records
    at a time: each window a :class:`StreamTables` holding the tables of the records in
    it (every type of the section it is in, empty ones too; the first also ``_header``,
    the last ``_gaps``). Concatenated, window after window, they are ``read_stream``'s
    tables. The scan of a framed section stops at the last record that ends inside the
    window and resumes at the next record's boundary (a record larger than the window
    gets a window of its own); fixed-size sections go by ranges of their count; a VB
    section by whole blocks. A path is memory-mapped and the mapping's pages of finished
    windows are given back, so memory stays bounded by the window whatever the file's
    size. Errors are read_stream's, raised at the window that meets them (a conversion
    that consumes the windows must not keep what came before: ``convert_to_dir`` does not).
    """
    if window < 1:
        raise ConversionError(f"window = {window}: the bytes read at a time must be at least 1")
    buf, label, owner = source_bytes(src)
    mapped = owner if isinstance(owner, mmap.mmap) else None
    with MappedGuard(
        buf.ctypes.data if mapped is not None and buf.nbytes else 0, buf.nbytes if mapped is not None else 0
    ) as guard:
        try:
            for tables in _windows(stream, buf, label, int(window), mapped):
                _check_shrunk(guard, label, buf.nbytes, None, mapped)  # no window made of zeros goes out
                yield tables
        except ConversionError as err:
            _check_shrunk(guard, label, buf.nbytes, err, mapped)
            raise
        _check_shrunk(guard, label, buf.nbytes, None, mapped)


def _give_back(mapped: "mmap.mmap | None", done: int, upto: int) -> int:
    """Drop the mapping's pages of ``[done, upto)`` from the process (they are read again
    from the file if needed): the pages of finished windows would otherwise stay counted
    in the resident memory. Returns the new ``done``."""
    if mapped is None or not hasattr(mapped, "madvise"):
        return done
    page = mmap.PAGESIZE
    upto = upto // page * page
    if upto > done:
        mapped.madvise(mmap.MADV_DONTNEED, done, upto - done)
        return upto
    return done


def _windows(stream: Stream, buf: np.ndarray, label: str, window: int, mapped) -> "Iterator[StreamTables]":
    """read_stream's walk (``read._read``), section by section, window by window."""
    order = detect_order(stream, buf, label)
    size = buf.shape[0]

    def fresh() -> StreamTables:
        out = StreamTables()
        out.stream, out.order, out.decimals = stream, order, {}
        return out

    first = fresh()  # the header goes out with the first window
    pending: "StreamTables | None" = first
    values: dict = {}
    covered = []
    pos = done = 0
    if stream.header is not None:
        first["_header"], values, pos = read_header(stream, buf, order, label)
        covered.append((0, pos))
    for i, s in enumerate(stream.sections):
        where = f"{stream.name} section[{i}]"
        s = _checked(lambda: s.resolve(values, where, size), label)
        start, end, limit = section_range(s, values, where, label, size, pos)
        at, count = start, 0
        while True:
            left = -1 if limit < 0 else limit - count
            got = scan_section(stream, s, buf, label, order, values, at, end, left, where, stop=at + window)
            out = pending if pending is not None else fresh()
            pending = None
            _tables(out, stream, s, got, buf, label, order, where)
            yield out
            count += len(got.offsets)
            progressed = got.end > at
            at = got.end
            done = _give_back(mapped, done, at)
            if at >= end or (limit >= 0 and count >= limit) or not progressed:
                break
        if limit >= 0 and count < limit:
            raise ConversionError(
                f"{label}: {where}: count = {s.count!r} is {limit} records, but the data ends "
                f"after {count} (byte {at}); the file is truncated or the header damaged"
            )
        if s.bytes is not None and at != end:
            raise ConversionError(f"{label}: byte {at}: {where} should end at byte {end} (bytes = {s.bytes!r})")
        covered.append((start, at))
        pos = at
    last = pending if pending is not None else fresh()
    _gaps(last, buf, covered, size)
    if pending is not None or "_gaps" in last:
        yield last


def set_names(stream: Stream) -> "list[str]":
    """Every table a directory of this stream can hold: the types, then the reserved ones."""
    return [t.name for s in stream.sections for t in s.types] + list(RESERVED_TABLES)


def _check_names(stream: Stream) -> None:
    for s in stream.sections:
        for t in s.types:
            n = t.name
            if n in (".", "..") or n.startswith(".") or "/" in n or os.sep in n or "\0" in n:
                raise ConversionError(
                    f"{stream.name}: record type {n!r} cannot name a file ({n}.parquet); rename "
                    f"the type in the stream description (letters, digits, _ and -)"
                )


def _metadata(table: pa.Table, stream: Stream, name: str, order: str) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    meta[META] = json.dumps({"stream": stream.name, "table": name, "order": order}).encode()
    return table.replace_schema_metadata(meta)


class _Appender:
    """One table's file, written a window of records at a time: Parquet row groups, or
    Arrow IPC record batches (Feather is the IPC file format, compressed)."""

    def __init__(self, path: str, fmt: str, codec: "str | None", schema: pa.Schema):
        self.schema = schema
        codec = DEFAULT_CODEC[fmt] if codec is None else (None if codec == "none" else codec)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            self.sink = None
            self.writer = pq.ParquetWriter(path, schema, compression=codec or "none")
        else:
            self.sink = pa.OSFile(path, "wb")
            options = pa.ipc.IpcWriteOptions(compression=codec)
            make = pa.ipc.new_stream if fmt == "arrows" else pa.ipc.new_file
            self.writer = make(self.sink, schema, options=options)
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.schema != self.schema:
            table = table.cast(self.schema)  # a window's _tail past 2 GiB (large_binary) or a string's kind
        if table.num_rows or not self.rows:
            self.writer.write_table(table)
        self.rows += table.num_rows

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            if self.sink is not None:
                self.sink.close()


def _append(writer: _Appender, table: pa.Table) -> None:
    """One window's table onto its file (a function of its own: the tests fail it)."""
    writer.write(table)


def write_dir(
    tables: Mapping[str, Any],
    stream: Stream,
    order: str,
    dst: str,
    fmt: str,
    *,
    compression: "str | None" = None,
    overwrite: bool = False,
    check: "Callable[[], None] | None" = None,
) -> "list[str]":
    """Write ``tables`` (as :func:`read_stream` gives them) into directory ``dst``, one
    file per table, all or none; returns the file names written.

    ``dst`` is created if missing; in an existing one, files of this set's names (every
    type's and reserved table's, with this format's suffix) need ``overwrite``, and are
    then replaced as a set: one this conversion does not write (a ``_gaps`` file from an
    earlier one) is removed. Other files are never touched. ``check`` runs before each
    file (the command's Ctrl-C check). A Ctrl-C held while the set is moved into place is
    raised after it, with ``_layouts_output_kept`` set to ``dst``.
    """
    return _write_set([tables], stream, lambda: order, dst, fmt, compression, overwrite, check)


def convert_to_dir(
    src: Any,
    stream: Stream,
    dst: str,
    fmt: str,
    *,
    compression: "str | None" = None,
    overwrite: bool = False,
    check: "Callable[[], None] | None" = None,
    window: int = WINDOW,
    placed: "Callable[[], None] | None" = None,
) -> "tuple[list[str], str, dict[str, tuple[int, int]]]":
    """Read the stream ``src`` window by window (:func:`read_windows`) and write its
    tables into directory ``dst`` as :func:`write_dir` does, each window's records
    appended to each type's file (a Parquet row group, IPC record batches): memory is
    bounded by the window, not the file. Returns ``(files written, byte order,
    {table: (records, bytes)})``. The files hold the same tables, in the same order, as
    ``write_dir(read_stream(src, stream), ...)`` writes; nothing is written unless the
    whole stream converts."""
    counts: "dict[str, tuple[int, int]]" = {}
    seen: dict = {}

    def windows():
        for tables in read_windows(src, stream, window):
            seen["order"] = tables.order
            seen["header"] = tables.get("_header", seen.get("header"))  # (the first window's)
            for name, (n, b) in table_bytes(stream, tables, tables.order, seen["header"]).items():
                if name == "_header":
                    counts[name] = (n, b)
                else:
                    was = counts.get(name, (0, 0))
                    counts[name] = (was[0] + n, was[1] + b)
            yield tables

    written = _write_set(windows(), stream, lambda: seen["order"], dst, fmt, compression, overwrite, check, placed)
    return written, seen["order"], _in_order(stream, counts)


def count_stream(src: Any, stream: Stream, window: int = WINDOW) -> "tuple[str, Any, dict[str, tuple[int, int]]]":
    """``(byte order, the _header table or None, {table: (records, bytes)})`` of a
    stream, read window by window (``layouts inspect --stream``): memory bounded by the
    window. The counts are :func:`table_bytes` of read_stream's tables, in its order."""
    counts: "dict[str, tuple[int, int]]" = {}
    order, header = stream.orders()[0], None
    for tables in read_windows(src, stream, window):
        order = tables.order
        if "_header" in tables:
            header = tables["_header"]
        for name, (n, b) in table_bytes(stream, tables, tables.order, header).items():
            was = counts.get(name, (0, 0)) if name != "_header" else (0, 0)
            counts[name] = (was[0] + n, was[1] + b)
    return order, header, _in_order(stream, counts)


def _in_order(stream: Stream, counts: dict) -> dict:
    """``counts`` in :func:`table_bytes`'s order: the types, then the reserved tables."""
    names = [t.name for s in stream.sections for t in s.types] + ["_header", "_gaps", "_unknown", "_blocks"]
    return {n: counts[n] for n in names if n in counts}


def _write_set(
    windows, stream: Stream, order_of, dst: str, fmt: str, compression, overwrite, check, placed=None
) -> "list[str]":
    """The directory set of :func:`write_dir`, its tables coming in windows (each a
    mapping of some of the set's tables; a table in several is appended to). ``placed()``
    is called once the set is in place (before a Ctrl-C held meanwhile is raised, which
    Python may run later than the statement it came at)."""
    _check_names(stream)
    suffix = SUFFIX[fmt]
    label = dst
    path = dst.rstrip(os.sep) or dst
    exists = os.path.isdir(path)
    if os.path.lexists(path) and not exists:
        raise ConversionError(
            f"{label} exists and is not a directory; --stream writes a directory, one file per "
            f"record type: give a directory (created if missing), e.g. --to {path}.d/"
        )
    ours = [n + suffix for n in set_names(stream)]
    present: "list[str]" = []
    if exists:
        present = [f for f in ours if os.path.lexists(os.path.join(path, f))]
        for f in present:
            p = os.path.join(path, f)
            if os.path.islink(p) or not os.path.isfile(p):
                raise ConversionError(
                    f"{os.path.join(label, f)} is not a regular file; it is never replaced: move "
                    f"it away, or give another directory"
                )
        if present and not overwrite:
            shown = ", ".join(present[:3]) + (f" and {len(present) - 3} more" if len(present) > 3 else "")
            raise ConversionError(
                f"{label} holds {shown} of this conversion's files; pass --overwrite to replace "
                f"them (the directory's other files are left alone), or give another directory"
            )
    parent = os.path.dirname(os.path.realpath(path) if exists else os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ConversionError(f"cannot create {label}: its parent directory {parent} does not exist; create it first")
    made = InterruptHold()  # a Ctrl-C as the temporary directory is made: raised once it is ours to remove
    with made:
        try:
            tmp = tempfile.mkdtemp(prefix=".layouts-stream-", dir=parent)
        except OSError as err:
            raise ConversionError(f"cannot write {label}: {err.strerror} in {parent}; nothing was written") from err
    writers: "dict[str, _Appender]" = {}
    held = 0
    try:
        made.deliver()
        names = set_names(stream)
        for tables in windows:
            for name in names:
                if name not in tables:
                    continue
                if check is not None:
                    check()
                table = tables[name]
                table = table.to_arrow() if hasattr(table, "to_arrow") else table
                f = name + suffix
                try:
                    if name not in writers:
                        schema = _metadata(table, stream, name, order_of()).schema
                        writers[name] = _Appender(os.path.join(tmp, f), fmt, compression, schema)
                    _append(writers[name], table)
                except (OSError, pa.ArrowException) as err:
                    raise ConversionError(
                        f"writing {os.path.join(label, f)} failed: {err}; nothing was written "
                        f"({label} was left as it was)"
                    ) from err
        for name in list(writers):
            try:
                writers.pop(name).close()
            except (OSError, pa.ArrowException) as err:
                raise ConversionError(
                    f"writing {os.path.join(label, name + suffix)} failed: {err}; nothing was "
                    f"written ({label} was left as it was)"
                ) from err
        written = [n + suffix for n in names if os.path.exists(os.path.join(tmp, n + suffix))]
        if check is not None:
            check()
        hold = InterruptHold()
        with hold:
            _commit(tmp, path, label, exists, written, present)
            if placed is not None:
                placed()
        held = hold.count
    finally:
        cleanup = InterruptHold()
        with cleanup:
            for w in writers.values():
                try:
                    w.close()
                except Exception:  # noqa: BLE001 - the set is being removed anyway
                    pass
            shutil.rmtree(tmp, ignore_errors=True)
        held += cleanup.count
    if held:  # the set is in place, whole: say so with the Ctrl-C
        stop = KeyboardInterrupt()
        setattr(stop, "_layouts_output_kept", label)
        raise stop
    return written


def _commit(tmp, path, label, exists, written, present):
    """Move the complete set into place: a new directory renamed whole; into an existing
    one, the old files of the set moved aside first, and all put back on a failure."""
    if not exists:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o777 & ~mask)
        try:
            os.rename(tmp, path)
        except OSError as err:
            raise ConversionError(f"cannot create {label}: {err.strerror}; nothing was written") from err
        return
    old = os.path.join(tmp, ".old")
    os.mkdir(old)
    moved_old: "list[str]" = []
    moved_new: "list[str]" = []
    try:
        for f in present:
            os.rename(os.path.join(path, f), os.path.join(old, f))
            moved_old.append(f)
        for f in written:
            os.rename(os.path.join(tmp, f), os.path.join(path, f))
            moved_new.append(f)
    except OSError as err:
        for f in moved_new:
            os.rename(os.path.join(path, f), os.path.join(tmp, f))
        for f in moved_old:
            os.rename(os.path.join(old, f), os.path.join(path, f))
        raise ConversionError(
            f"moving the files into {label} failed: {err.strerror}; {label} was left as it was"
        ) from err


def _read_one(path: str, fmt: str) -> pa.Table:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).read()  # (not read_table: it imports pandas, see layouts._arrays)
    if fmt == "arrows":
        with pa.OSFile(path, "rb") as f:
            return pa.ipc.open_stream(f).read_all()
    with pa.memory_map(path, "r") as f:
        return pa.ipc.open_file(f).read_all()


def _written_from(path: str, kind: str) -> "str | None":
    """The stream a file of a directory was written from (its metadata), if it says."""
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            schema = pq.read_schema(path)
        else:
            schema = _read_one(path, kind).schema
        return json.loads((schema.metadata or {})[META])["stream"]
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError):
        return None


def read_dir(src: str, stream: Stream, fmt: "str | None" = None) -> "tuple[dict, str | None, dict]":
    """The tables of a directory :func:`write_dir` wrote: ``(tables, order, files)``
    (``order`` from the files' metadata, None where they have none; ``files``: table
    name -> path, for messages)."""
    d = scan_dir(src, stream, fmt)
    return d.read_all(), d.order, d.labels


class DirSet:
    """A directory of a stream's tables, checked (names, columns, byte order) but not
    read: ``paths`` (table -> (path, format)), ``labels`` (table -> path for messages),
    ``schemas`` and ``order`` (from the files' metadata, None where they have none)."""

    def __init__(self, paths: dict, labels: dict, schemas: dict, order: "str | None"):
        self.paths, self.labels, self.schemas, self.order = paths, labels, schemas, order

    def read_all(self) -> dict:
        return {name: self.read_all_of(name) for name in self.paths}

    def read_all_of(self, name: str) -> pa.Table:
        p, kind = self.paths[name]
        return self._guarded(name, kind, lambda: _read_one(p, kind)).replace_schema_metadata(None)

    def batches(self, name: str) -> "Iterator[pa.RecordBatch]":
        """The table's record batches in file order, read one at a time."""
        p, kind = self.paths[name]
        if kind == "parquet":
            import pyarrow.parquet as pq

            # pre_buffer keeps the column chunks it read ahead: memory would grow with the file
            pf = self._guarded(name, kind, lambda: pq.ParquetFile(p, pre_buffer=False))
            it = pf.iter_batches(batch_size=1 << 13)  # 23 tables each hold a batch: keep them small
        elif kind == "arrows":
            f = pa.OSFile(p, "rb")
            it = iter(self._guarded(name, kind, lambda: pa.ipc.open_stream(f)))
        else:
            m = pa.memory_map(p, "r")
            reader = self._guarded(name, kind, lambda: pa.ipc.open_file(m))
            it = (reader.get_batch(i) for i in range(reader.num_record_batches))
        while True:
            batch = self._guarded(name, kind, lambda: next(it, None))
            if batch is None:
                return
            yield batch.replace_schema_metadata(None)

    def _guarded(self, name, kind, fn):
        try:
            return fn()
        except (OSError, pa.ArrowException) as err:
            raise ConversionError(
                f"{self.labels[name]} cannot be read as {kind}: {err}; it is damaged, or of "
                f"another format than its suffix says"
            ) from err


def write_back(
    d: DirSet,
    stream: Stream,
    dst: str,
    *,
    order: "str | None",
    overwrite: bool = False,
    window: int = WINDOW,
    check: "Callable[[], None] | None" = None,
    fill: "Mapping[str, Mapping[str, Any]] | None" = None,
) -> int:
    """Write the stream of a directory's tables to ``dst`` (whole or not at all); returns
    the number of records. A stream of one section that runs from where the header ends
    to the end of the file (no offset, count, bytes or select; not VB; no header field in
    its framing or lists; no ``_gaps``) is written window by window: every table read a
    batch at a time and the records whose ``_offset`` falls in the window (``window``
    bytes of offsets) merged and written, so memory is bounded by the window; its files
    must be in ``_offset`` order (as convert --stream writes them), else, and for other
    streams, the tables are read whole and written by :func:`write_stream`. A table
    write_stream refuses is also read whole, so the error names its row in the file.
    ``fill``: as :func:`write_stream`'s ({type: {field: value}} written where a column is null)."""
    from .._files import open_output
    from .write import write_stream

    if _windowable(stream, d):
        target = open_output(dst, overwrite=overwrite)
        try:
            f = target.records_file()
            try:
                n = _write_windows(d, stream, f, order, window, check, fill)
                f.flush()
            finally:
                if not target.stream:
                    f.close()
            target.commit()
            return n
        except (_Unsorted, ConversionError, LayoutError):
            # out of order, or bad values: the whole tables' way, whose errors name the row in the file
            target.discard()
        except BaseException as err:
            target.discard()
            if isinstance(err, OSError) and not isinstance(err, BrokenPipeError):
                raise ConversionError(
                    f"writing {target.name} failed: {err.strerror or err}; the destination was left as it was"
                ) from err
            raise
    tables = d.read_all()
    if check is not None:
        check()
    write_stream(tables, stream, dst, order=order, overwrite=overwrite, fill=fill)
    return sum(t.num_rows for name, t in tables.items() if not name.startswith("_"))


class _Unsorted(Exception):
    """A table file not in ``_offset`` order: the windows cannot be cut by offset."""


def _windowable(stream: Stream, d: DirSet) -> bool:
    from .spec import _BdwSection

    if len(stream.sections) != 1 or "_gaps" in d.paths or "_blocks" in d.paths:
        return False
    s = stream.sections[0]
    if isinstance(s, _BdwSection) or any(v is not None for v in (s.offset, s.count, s.bytes, s.select)):
        return False
    if isinstance(s.framing.size, str):
        return False
    for t in s.types:
        for _, kind in t.record.fields:
            if "[" in kind and not kind.rstrip("]").split("[")[-1].isdigit():
                return False
    return all("_offset" in d.schemas[n].names for n in d.paths if n != "_header")


class _Cursor:
    """One table's batches, handed out by ``_offset`` ranges."""

    def __init__(self, batches, schema: pa.Schema, label: str):
        self.batches, self.schema, self.label = batches, schema, label
        self.pending: "list[pa.RecordBatch]" = []
        self.last = None
        self.done = False

    def _offsets(self, batch):
        col = batch.column(batch.schema.get_field_index("_offset"))
        if col.null_count:
            raise _Unsorted()  # write_stream says what is wrong with it
        return col.cast(pa.int64()).to_numpy(zero_copy_only=False)

    def _fill(self) -> bool:
        while not self.done:
            batch = next(self.batches, None)
            if batch is None:
                self.done = True
                return False
            if batch.num_rows:
                offs = self._offsets(batch)
                if (len(offs) > 1 and (np.diff(offs) < 0).any()) or (self.last is not None and offs[0] < self.last):
                    raise _Unsorted()
                self.last = offs[-1]
                self.pending.append(batch)
                return True
        return False

    def head(self):
        if not self.pending and not self._fill():
            return None
        return int(self._offsets(self.pending[0])[0])

    def take(self, hi: int) -> pa.Table:
        """The rows with ``_offset < hi``."""
        out = []
        while True:
            if not self.pending and not self._fill():
                break
            batch = self.pending[0]
            offs = self._offsets(batch)
            cut = int(np.searchsorted(offs, hi, "left"))
            if cut == 0:
                break
            out.append(batch.slice(0, cut))
            if cut < batch.num_rows:
                self.pending[0] = batch.slice(cut)
                break
            self.pending.pop(0)
        return pa.Table.from_batches(out, self.schema)


def _write_windows(d: DirSet, stream: Stream, f, order, window: int, check, fill=None) -> int:
    from .write import write_stream

    header = d.read_all_of("_header") if "_header" in d.paths else None
    rest = dataclasses.replace(stream, header=None, header_size=None)
    cursors = {n: _Cursor(d.batches(n), d.schemas[n], d.labels[n]) for n in d.paths if n != "_header"}
    first, n = True, 0
    while True:
        if check is not None:
            check()
        heads = [h for h in (c.head() for c in cursors.values()) if h is not None]
        if not heads and not first:
            return n
        hi = (min(heads) if heads else 0) + max(int(window), 1)
        tables: dict = {name: c.take(hi) for name, c in cursors.items()}
        n += sum(t.num_rows for name, t in tables.items() if not name.startswith("_"))
        if first and header is not None:
            tables["_header"] = header
        fills = fill if first or not fill else {k: v for k, v in fill.items() if k != "_header"}
        write_stream(tables, stream if first else rest, f, order=order, fill=fills)
        first = False


def _read_schema(p: str, kind: str) -> pa.Schema:
    if kind == "parquet":
        import pyarrow.parquet as pq

        return pq.read_schema(p)
    if kind == "arrows":
        with pa.OSFile(p, "rb") as f:
            return pa.ipc.open_stream(f).schema
    with pa.memory_map(p, "r") as f:
        return pa.ipc.open_file(f).schema


def scan_dir(src: str, stream: Stream, fmt: "str | None" = None) -> DirSet:
    """The table files of a directory :func:`write_dir` wrote, checked (read_dir's errors)
    by their schemas, not yet read."""
    _check_names(stream)
    label = src
    path = src.rstrip(os.sep) or src
    try:
        entries = sorted(os.listdir(path))
    except OSError as err:
        raise ConversionError(f"cannot read the directory {label}: {err.strerror}") from err
    types = [t.name for s in stream.sections for t in s.types]
    known = set(types) | set(RESERVED_TABLES)
    found: "dict[str, list[tuple[str, str]]]" = {}
    for e in entries:
        stem, ext = os.path.splitext(e)
        kind = READ_SUFFIXES.get(ext.lower())
        if e.startswith(".") or kind is None or (fmt is not None and kind != fmt):
            continue  # not a table of the set (a README, a hidden file)
        if stem not in known:
            origin = _written_from(os.path.join(path, e), kind)
            hint = (
                f"it was written from a {origin} stream: check --stream"
                if origin not in (None, stream.name)
                else "or check --stream"
            )
            raise ConversionError(
                f"{os.path.join(label, e)} is no record type of {stream.name} and no reserved table; remove or rename "
                f"it (a type's file is TYPE{ext}; types: {', '.join(types)}; reserved: {', '.join(RESERVED_TABLES)}), "
                f"{hint}"
            )
        found.setdefault(stem, []).append((e, kind))
    for stem, both in found.items():
        if len(both) > 1:
            names = " and ".join(f for f, _ in both)
            raise ConversionError(
                f"{label} holds both {names} for table {stem!r}; pass --format "
                f"{'|'.join(sorted({k for _, k in both}))} to choose, or remove one"
            )
    if not found:
        raise ConversionError(
            f"{label} holds no table files (TYPE.parquet, .feather, .arrow, .arrows) of "
            f"{stream.name}; convert the stream into it first: layouts convert FILE --stream SPEC "
            f"--to {label}"
        )
    any_ext = os.path.splitext(next(iter(found.values()))[0][0])[1]
    missing = [t for t in types if t not in found]
    if stream.header is not None and "_header" not in found:
        missing.insert(0, "_header")
    if missing:
        shown = ", ".join(m + any_ext for m in missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        raise ConversionError(
            f"{label} has no {shown}: layouts convert --stream writes one file per record type, "
            f"empty ones too, and the way back needs each; restore the file, or convert the stream "
            f"into {label} again"
        )
    tables: dict = {}
    files: dict = {}
    paths: dict = {}
    orders: "dict[str, str]" = {}
    for stem, [(e, kind)] in found.items():
        p = os.path.join(path, e)
        try:
            schema = _read_schema(p, kind)
        except (OSError, pa.ArrowException) as err:
            raise ConversionError(
                f"{os.path.join(label, e)} cannot be read as {kind}: {err}; it is damaged, or of "
                f"another format than its suffix says"
            ) from err
        meta = (schema.metadata or {}).get(META)
        if meta is not None:
            try:
                order = json.loads(meta).get("order")
            except (ValueError, AttributeError):
                order = None
            if order in ("big", "little"):
                orders[stem] = order
        tables[stem] = pa.Table.from_batches([], schema=schema.remove_metadata())  # (empty_table imports pandas)
        files[stem] = os.path.join(label, e)
        paths[stem] = (p, kind)
    checked = stream
    if stream.header is not None and "_header" in paths:
        # list lengths from the header (segy's samples): the types' columns as the header gives them
        from .read import header_values

        order = orders.get("_header") or stream.orders()[0]
        try:
            checked = _with_lengths(stream, header_values(stream, _read_one(*paths["_header"]), order))
        except (ValueError, KeyError, IndexError, OSError, pa.ArrowException):
            checked = stream  # (the way back says what is wrong with the header)
    _check_columns(checked, tables, files)
    distinct = set(orders.values())
    if len(distinct) > 1:
        a, b = sorted(orders, key=lambda n: orders[n])[0], sorted(orders, key=lambda n: orders[n])[-1]
        raise ConversionError(
            f"{files[a]} was read in {orders[a]}-endian order but {files[b]} in {orders[b]}-endian; "
            f"the files come from different streams: convert the stream into {label} again"
        )
    return DirSet(paths, files, {k: t.schema for k, t in tables.items()}, distinct.pop() if distinct else None)


def _with_lengths(stream: Stream, values: dict) -> Stream:
    """``stream`` with its list lengths that are header expressions (segy's samples) resolved by
    the header's ``values``."""
    sections = tuple(s.resolve(values, f"{stream.name} section[{i}]", 2**62) for i, s in enumerate(stream.sections))
    return dataclasses.replace(stream, sections=sections)


def _check_columns(stream: Stream, tables: dict, files: dict) -> None:
    """Each type's file has the type's columns, and no others."""
    order = stream.orders()[0]
    for s in stream.sections:
        for t in s.types:
            table = tables[t.name]
            layout = t.record.plan(order, int(s.framing.prefix or 0), True, _keep_prefix(s))[0]
            want = list(layout.names) + (["_tail"] if s.tail == "column" else [])
            missing = [n for n in want if n not in table.column_names]
            extra = [n for n in table.column_names if n not in want]
            if missing:
                raise ConversionError(
                    f"{files[t.name]} has no column {missing[0]!r}, which record type {t.name!r} "
                    f"needs (its columns: {', '.join(want)}); the file is not a table of this type: "
                    f"check --stream, or restore the column"
                )
            if extra:
                raise ConversionError(
                    f"{files[t.name]} has a column {extra[0]!r}, which record type {t.name!r} does "
                    f"not have (its columns: {', '.join(want)}); it would not be written: drop it"
                )
            types = {f.name: f.arrow_type for f in layout.fields}
            types.update({f.name: f.type for f in layout.schema if f.name in types})  # (a list: its list type)
            types["_tail"] = pa.binary()
            for n in want:
                found, need = table.schema.field(n).type, types[n]
                if not _fits(found, need):
                    raise ConversionError(
                        f"{files[t.name]}: column {n!r} is {found}, but record type {t.name!r} "
                        f"needs {need}; cast the column to {need} (as layouts convert --stream "
                        f"wrote it)"
                    )


def _fits(found: pa.DataType, need: pa.DataType) -> bool:
    if found == need:
        return True
    kinds = ((pa.types.is_string, pa.types.is_large_string), (pa.types.is_binary, pa.types.is_large_binary))
    return any(any(k(found) for k in pair) and any(k(need) for k in pair) for pair in kinds)


def table_bytes(
    stream: Stream, tables: Mapping[str, Any], order: str, header: Any = None
) -> "dict[str, tuple[int, int]]":
    """``{table: (records, bytes of the stream)}`` of every table present (framing included).
    ``header``: the stream's ``_header`` table where ``tables`` has none (a window after the
    first), whose values give the sizes of records with header-sized lists (SEG-Y's traces)."""
    import pyarrow.compute as pc

    def arrow(v):
        return v.to_arrow() if hasattr(v, "to_arrow") else v

    def tails(table):
        if "_tail" not in table.column_names or not table.num_rows:
            return 0
        return int(pc.sum(pc.binary_length(table.column("_tail"))).as_py() or 0)

    from .read import header_values

    out: "dict[str, tuple[int, int]]" = {}
    values = {}
    header = tables.get("_header", header)
    if header is not None and stream.header is not None:
        values = header_values(stream, header, order)
    if "_header" in tables and stream.header is not None:
        size = stream.header.size(order) if stream.header_size is None else evaluate(stream.header_size, values, "")
        out["_header"] = (1, int(size))
    for s in _with_lengths(stream, values).sections:
        for t in s.types:
            if t.name in tables:
                table = arrow(tables[t.name])
                fixed = int(s.framing.prefix or 0) + t.record.size(order)
                out[t.name] = (table.num_rows, table.num_rows * fixed + tails(table))
    for name in ("_gaps", "_unknown"):
        if name in tables:
            table = arrow(tables[name])
            out[name] = (table.num_rows, tails(table))
    if "_blocks" in tables:
        out["_blocks"] = (arrow(tables["_blocks"]).num_rows, 4 * arrow(tables["_blocks"]).num_rows)
    return out
