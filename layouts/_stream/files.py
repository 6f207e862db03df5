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

import json
import os
import shutil
import tempfile
from typing import Any, Callable, Mapping

import pyarrow as pa

from .._errors import ConversionError
from .._files import InterruptHold
from .._formats import SUFFIXES
from .read import _keep_prefix
from .spec import Stream

__all__ = ["write_dir", "read_dir", "RESERVED_TABLES", "SUFFIX", "READ_SUFFIXES", "table_bytes", "set_names"]

RESERVED_TABLES = ("_header", "_gaps", "_blocks", "_unknown")
SUFFIX = {"parquet": ".parquet", "feather": ".feather", "arrow": ".arrow", "arrows": ".arrows"}
READ_SUFFIXES = {suffix: fmt for suffix, fmt in SUFFIXES.items() if fmt != "records"}  # the Arrow formats'
DEFAULT_CODEC = {"parquet": "snappy", "feather": "lz4", "arrow": None, "arrows": None}
META = b"layouts.stream"


def set_names(stream: Stream) -> "list[str]":
    """Every table a directory of this stream can hold: the types, then the reserved ones."""
    return [t.name for s in stream.sections for t in s.types] + list(RESERVED_TABLES)


def _check_names(stream: Stream) -> None:
    for s in stream.sections:
        for t in s.types:
            n = t.name
            if n in (".", "..") or n.startswith(".") or "/" in n or os.sep in n or "\0" in n:
                raise ConversionError(f"{stream.name}: record type {n!r} cannot name a file ({n}.parquet); rename "
                                      f"the type in the stream description (letters, digits, _ and -)")


def _metadata(table: pa.Table, stream: Stream, name: str, order: str) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    meta[META] = json.dumps({"stream": stream.name, "table": name, "order": order}).encode()
    return table.replace_schema_metadata(meta)


def _write_one(table: pa.Table, path: str, fmt: str, codec: "str | None") -> None:
    codec = DEFAULT_CODEC[fmt] if codec is None else (None if codec == "none" else codec)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path, compression=codec or "none")
    elif fmt == "feather":
        import pyarrow.feather as feather

        feather.write_feather(table, path, compression=codec or "uncompressed")
    else:
        options = pa.ipc.IpcWriteOptions(compression=codec)
        with pa.OSFile(path, "wb") as sink:
            writer = (pa.ipc.new_file if fmt == "arrow" else pa.ipc.new_stream)(sink, table.schema, options=options)
            with writer:
                writer.write_table(table)


def write_dir(tables: Mapping[str, Any], stream: Stream, order: str, dst: str, fmt: str, *,
              compression: "str | None" = None, overwrite: bool = False,
              check: "Callable[[], None] | None" = None) -> "list[str]":
    """Write ``tables`` (as :func:`read_stream` gives them) into directory ``dst``, one
    file per table, all or none; returns the file names written.

    ``dst`` is created if missing; in an existing one, files of this set's names (every
    type's and reserved table's, with this format's suffix) need ``overwrite``, and are
    then replaced as a set: one this conversion does not write (a ``_gaps`` file from an
    earlier one) is removed. Other files are never touched. ``check`` runs before each
    file (the command's Ctrl-C check). A Ctrl-C held while the set is moved into place is
    raised after it, with ``_layouts_output_kept`` set to ``dst``.
    """
    _check_names(stream)
    suffix = SUFFIX[fmt]
    label = dst
    path = dst.rstrip(os.sep) or dst
    exists = os.path.isdir(path)
    if os.path.lexists(path) and not exists:
        raise ConversionError(f"{label} exists and is not a directory; --stream writes a directory, one file per "
                              f"record type: give a directory (created if missing), e.g. --to {path}.d/")
    ours = [n + suffix for n in set_names(stream)]
    present: "list[str]" = []
    if exists:
        present = [f for f in ours if os.path.lexists(os.path.join(path, f))]
        for f in present:
            p = os.path.join(path, f)
            if os.path.islink(p) or not os.path.isfile(p):
                raise ConversionError(f"{os.path.join(label, f)} is not a regular file; it is never replaced: move "
                                      f"it away, or give another directory")
        if present and not overwrite:
            shown = ", ".join(present[:3]) + (f" and {len(present) - 3} more" if len(present) > 3 else "")
            raise ConversionError(f"{label} holds {shown} of this conversion's files; pass --overwrite to replace "
                                  f"them (the directory's other files are left alone), or give another directory")
    parent = os.path.dirname(os.path.realpath(path) if exists else os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ConversionError(f"cannot create {label}: its parent directory {parent} does not exist; create it first")
    made = InterruptHold()  # a Ctrl-C as the temporary directory is made: raised once it is ours to remove
    with made:
        try:
            tmp = tempfile.mkdtemp(prefix=".layouts-stream-", dir=parent)
        except OSError as err:
            raise ConversionError(f"cannot write {label}: {err.strerror} in {parent}; nothing was written") from err
    written: "list[str]" = []
    held = 0
    try:
        made.deliver()
        for name in set_names(stream):
            if name not in tables:
                continue
            if check is not None:
                check()
            table = tables[name]
            table = table.to_arrow() if hasattr(table, "to_arrow") else table
            f = name + suffix
            try:
                _write_one(_metadata(table, stream, name, order), os.path.join(tmp, f), fmt, compression)
            except OSError as err:
                raise ConversionError(f"writing {os.path.join(label, f)} failed: {err}; nothing was written "
                                      f"({label} was left as it was)") from err
            written.append(f)
        if check is not None:
            check()
        hold = InterruptHold()
        with hold:
            _commit(tmp, path, label, exists, written, present)
        held = hold.count
    finally:
        cleanup = InterruptHold()
        with cleanup:
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
        raise ConversionError(f"moving the files into {label} failed: {err.strerror}; {label} was left as it "
                              f"was") from err


def _read_one(path: str, fmt: str) -> pa.Table:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path)
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
            hint = f"it was written from a {origin} stream: check --stream" if origin not in (None, stream.name) \
                else "or check --stream"
            raise ConversionError(
                f"{os.path.join(label, e)} is no record type of {stream.name} and no reserved table; remove or rename "
                f"it (a type's file is TYPE{ext}; types: {', '.join(types)}; reserved: {', '.join(RESERVED_TABLES)}), "
                f"{hint}")
        found.setdefault(stem, []).append((e, kind))
    for stem, both in found.items():
        if len(both) > 1:
            names = " and ".join(f for f, _ in both)
            raise ConversionError(f"{label} holds both {names} for table {stem!r}; pass --format "
                                  f"{'|'.join(sorted({k for _, k in both}))} to choose, or remove one")
    if not found:
        raise ConversionError(f"{label} holds no table files (TYPE.parquet, .feather, .arrow, .arrows) of "
                              f"{stream.name}; convert the stream into it first: layouts convert FILE --stream SPEC "
                              f"--to {label}")
    any_ext = os.path.splitext(next(iter(found.values()))[0][0])[1]
    missing = [t for t in types if t not in found]
    if stream.header is not None and "_header" not in found:
        missing.insert(0, "_header")
    if missing:
        shown = ", ".join(m + any_ext for m in missing[:3]) + (f" and {len(missing) - 3} more"
                                                               if len(missing) > 3 else "")
        raise ConversionError(f"{label} has no {shown}: layouts convert --stream writes one file per record type, "
                              f"empty ones too, and the way back needs each; restore the file, or convert the stream "
                              f"into {label} again")
    tables: dict = {}
    files: dict = {}
    orders: "dict[str, str]" = {}
    for stem, [(e, kind)] in found.items():
        p = os.path.join(path, e)
        try:
            table = _read_one(p, kind)
        except (OSError, pa.ArrowException) as err:
            raise ConversionError(f"{os.path.join(label, e)} cannot be read as {kind}: {err}; it is damaged, or of "
                                  f"another format than its suffix says") from err
        meta = (table.schema.metadata or {}).get(META)
        if meta is not None:
            try:
                order = json.loads(meta).get("order")
            except (ValueError, AttributeError):
                order = None
            if order in ("big", "little"):
                orders[stem] = order
        tables[stem] = table.replace_schema_metadata(None)
        files[stem] = os.path.join(label, e)
    _check_columns(stream, tables, files)
    distinct = set(orders.values())
    if len(distinct) > 1:
        a, b = sorted(orders, key=lambda n: orders[n])[0], sorted(orders, key=lambda n: orders[n])[-1]
        raise ConversionError(f"{files[a]} was read in {orders[a]}-endian order but {files[b]} in {orders[b]}-endian; "
                              f"the files come from different streams: convert the stream into {label} again")
    return tables, (distinct.pop() if distinct else None), files


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
                raise ConversionError(f"{files[t.name]} has no column {missing[0]!r}, which record type {t.name!r} "
                                      f"needs (its columns: {', '.join(want)}); the file is not a table of this type: "
                                      f"check --stream, or restore the column")
            if extra:
                raise ConversionError(f"{files[t.name]} has a column {extra[0]!r}, which record type {t.name!r} does "
                                      f"not have (its columns: {', '.join(want)}); it would not be written: drop it")
            types = {f.name: f.arrow_type for f in layout.fields}
            types["_tail"] = pa.binary()
            for n in want:
                found, need = table.schema.field(n).type, types[n]
                if not _fits(found, need):
                    raise ConversionError(f"{files[t.name]}: column {n!r} is {found}, but record type {t.name!r} "
                                          f"needs {need}; cast the column to {need} (as layouts convert --stream "
                                          f"wrote it)")


def _fits(found: pa.DataType, need: pa.DataType) -> bool:
    if found == need:
        return True
    kinds = ((pa.types.is_string, pa.types.is_large_string), (pa.types.is_binary, pa.types.is_large_binary))
    return any(any(k(found) for k in pair) and any(k(need) for k in pair) for pair in kinds)


def table_bytes(stream: Stream, tables: Mapping[str, Any], order: str) -> "dict[str, tuple[int, int]]":
    """``{table: (records, bytes of the stream)}`` of every table present (framing included)."""
    import pyarrow.compute as pc

    def arrow(v):
        return v.to_arrow() if hasattr(v, "to_arrow") else v

    def tails(table):
        if "_tail" not in table.column_names or not table.num_rows:
            return 0
        return int(pc.sum(pc.binary_length(table.column("_tail"))).as_py() or 0)

    out = {}
    for s in stream.sections:
        for t in s.types:
            if t.name in tables:
                table = arrow(tables[t.name])
                fixed = int(s.framing.prefix or 0) + t.record.size(order)
                out[t.name] = (table.num_rows, table.num_rows * fixed + tails(table))
    if "_header" in tables and stream.header is not None:
        out["_header"] = (1, stream.header.size(order))
    for name in ("_gaps", "_unknown"):
        if name in tables:
            table = arrow(tables[name])
            out[name] = (table.num_rows, tails(table))
    if "_blocks" in tables:
        out["_blocks"] = (arrow(tables["_blocks"]).num_rows, 4 * arrow(tables["_blocks"]).num_rows)
    return out
