"""write_stream: {record type name: table} -> the framed stream, byte for byte."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._errors import ConversionError, LayoutError
from .._files import open_output
from .._plan import reverse_ops
from .._soa import SoA, every_reverse_error
from ..kernels import stream as K
from .frame import _checked, selected
from .read import _keep_prefix, header_values, resolve
from .spec import Record, Section, _BdwSection, evaluate

__all__ = ["write_stream"]


def _arrow(value: Any, name: str) -> pa.Table:
    if isinstance(value, SoA):  # a device table (read_stream(device="cuda")) comes back in one copy
        return value.to_device("cpu").to_arrow()  # itself when on the host
    if isinstance(value, pa.RecordBatch):
        return pa.Table.from_batches([value])
    if isinstance(value, pa.Table):
        return value
    if hasattr(value, "__arrow_c_stream__") or hasattr(value, "__arrow_c_array__"):
        return pa.table(value)
    raise ConversionError(
        f"table {name!r} is a {type(value).__name__}; give an SoA, a pyarrow Table or anything with __arrow_c_stream__"
    )


def _column(table: pa.Table, name: str, what: str, fix: str) -> pa.Array:
    if name not in table.column_names:
        raise ConversionError(f"{what} has no column {name!r}; {fix}")
    return table.column(name).combine_chunks()


def _block_words(col: pa.Array) -> pa.Array:
    """``_blocks._prefix`` as ``fixed_size_binary[4]``: each block's 4 BDW bytes, no
    nulls, no other width (a bare cast would fail, or write a null as zeros)."""
    fix = "expected each block's 4 BDW bytes (fixed_size_binary[4])"
    found = str(col.type)
    if col.null_count:
        raise ConversionError(f"table '_blocks': _prefix is {found} with {col.null_count} nulls; {fix}")
    if pa.types.is_fixed_size_binary(col.type) and col.type.byte_width == 4:
        return col
    if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
        widths = pc.binary_length(col).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(widths != 4)
        if not len(bad):
            return col.cast(pa.binary(4))
        found += f" with a value of {int(widths[bad[0]])} bytes (row {int(bad[0])})"
    raise ConversionError(f"table '_blocks': _prefix is {found}; {fix}")


def _offsets(table: pa.Table, what: str) -> np.ndarray:
    col = _column(
        table,
        "_offset",
        what,
        "add _offset: each record's place in the stream's order (its byte "
        "offset, as read_stream gives it, or any increasing numbers)",
    )
    if col.null_count:
        raise ConversionError(f"{what}: _offset has {col.null_count} nulls; every record needs its place")
    fix = "expected integers (int64): each record's place in the stream's order; cast the column"
    if not pa.types.is_integer(col.type):
        raise ConversionError(f"{what}: _offset is {col.type}; {fix}")
    try:
        return col.cast(pa.int64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid as err:  # uint64 values past int64
        raise ConversionError(f"{what}: _offset is {col.type} with a value past int64 ({err}); {fix}") from err


def _tails(table: pa.Table, n: int, what: str) -> "tuple[np.ndarray, np.ndarray]":
    """(int64 offsets, uint8 data) of the ``_tail`` column (empty tails without it)."""
    if "_tail" not in table.column_names:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.uint8)
    col = table.column("_tail").combine_chunks()
    view = hasattr(pa.types, "is_binary_view") and pa.types.is_binary_view(col.type)
    if not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type) or view):
        raise ConversionError(
            f"{what}: _tail is {col.type}; expected binary, large_binary or binary_view (the bytes after the fields)"
        )
    if col.null_count:
        raise ConversionError(f"{what}: _tail has {col.null_count} nulls; use empty bytes for records without a tail")
    if view:  # the cast reads each value where its view says: every view checked first (a damaged array)
        try:
            col.validate(full=True)
        except pa.ArrowException as err:
            raise ConversionError(f"{what}: the _tail column's views are damaged ({err}); rebuild the column") from err
    col = col.cast(pa.large_binary())  # (binary_view, from read_stream(tails="view"): its values gathered)
    bufs = col.buffers()
    offs = np.frombuffer(bufs[1], np.int64)[col.offset : col.offset + n + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    # the kernels copy through these offsets: check them first (a damaged Arrow array)
    if len(offs) != n + 1 or (n and (offs[0] < 0 or np.any(np.diff(offs) < 0) or offs[-1] > len(data))):
        raise ConversionError(
            f"{what}: the _tail column's offsets are damaged (not increasing, or past its "
            f"{len(data)} data bytes); rebuild the column"
        )
    return np.ascontiguousarray(offs), data


def _dense(table: pa.Table, record: Record, order, prefix, keep, what, type_name="_header", fill=None):
    """The fixed parts' columns as an SoA (None for an empty table whose lists do not
    fit the header), and the plan that places them: ``(soa, layout, runs, zeros)``.
    ``fill``: {field: value} written where that column is null."""
    layout, runs, zeros, _ = record.plan(order, prefix, True, keep)
    have = set(table.column_names)  # (a list made anew on each call)
    missing = [n for n in layout.names if n not in have]
    if missing:
        raise ConversionError(f"{what} has no column {missing[0]!r}; its columns must include {layout.names}")
    extra = [n for n in table.column_names if n not in layout.names and n not in ("_offset", "_tail")]
    if extra:
        raise ConversionError(
            f"{what} has {'a column' if len(extra) == 1 else 'columns'} {', '.join(map(repr, extra))} that record "
            f"type {type_name!r} does not have (its columns: {', '.join(dict.fromkeys([*layout.names, '_offset', '_tail']))}): "
            f"{'it' if len(extra) == 1 else 'they'} would not be written; drop {'it' if len(extra) == 1 else 'them'} "
            f"(table.drop_columns({extra!r})), or correct the name"
        )
    if not table.num_rows:  # nothing to write (its columns' types are not checked: no value can be lost)
        return None, layout, runs, zeros
    fill = dict(fill or {})
    _check_nulls(table, record, layout, runs, prefix, what, type_name, fill)
    table = _space_padded(table, record, layout)
    try:
        soa = SoA.from_arrow(table.select(layout.names), layout, fill=fill)
    except ConversionError as err:
        if str(err).startswith("fill["):  # a fill value that is not one of the column's type
            raise ConversionError(f"{what}: fill[{type_name!r}]{str(err)[4:]}") from err
        lists = [f"{n} {t}" for n, t in record.fields if "[" in t]
        if not lists:
            raise ConversionError(f"{what}: {_stream_advice(str(err))}") from None
        if not table.num_rows:  # an empty table of a type the header's lengths do not fit: nothing to write
            return None, layout, runs, zeros
        raise ConversionError(
            f"{what}: {err}; its lists ({', '.join(lists)}) have the lengths the header gives: "
            f"set the header field to the lists' length, or the lists to the header's"
        ) from err
    return soa, layout, runs, zeros


def _space_padded(table: pa.Table, record: Record, layout) -> pa.Table:
    """``table`` with each value of a text field (``S<n>`` shown as a string) shorter than
    its field padded with spaces to the field's bytes, as read_stream reads such a field
    (trailing spaces kept; a NUL would be refused there), not with NULs. Longer values are
    left as they are (the conversion says so, naming the row)."""
    widths = {f.name: f.width for f in layout.fields}
    for name in getattr(record, "text", ()):
        if name not in table.column_names or name not in widths:
            continue
        col = table.column(name).combine_chunks()
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) or not len(col):
            continue
        width, n = widths[name], len(col)
        lengths = pc.fill_null(pc.binary_length(col), width).to_numpy(zero_copy_only=False).astype(np.int64)
        if lengths.min() >= width or lengths.max() > width:
            continue
        bufs = col.buffers()
        offs = np.frombuffer(bufs[1], np.int64 if pa.types.is_large_string(col.type) else np.int32)
        offs = offs[col.offset : col.offset + n + 1].astype(np.int64)
        data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        lengths = np.where(valid, np.diff(offs), 0)
        padded = np.full((n, width), 0x20, np.uint8)
        rows = np.repeat(np.arange(n), lengths)
        starts = np.repeat(offs[:-1], lengths)
        within = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        padded[rows, within] = data[starts + within]
        offsets = pa.py_buffer(np.arange(0, (n + 1) * width, width, dtype=np.int64))
        new = pa.Array.from_buffers(pa.large_string(), n, [None, offsets, pa.py_buffer(padded)])
        if col.null_count:
            new = pc.if_else(col.is_valid(), new, pa.scalar(None, pa.large_string()))
        new = new.cast(col.type)
        table = table.set_column(table.column_names.index(name), table.schema.field(name), new)
    return table


def _stream_advice(text):
    """A table conversion's message in write_stream's terms: it has no ``truncate=`` or
    ``bytes_as=``, and a field's offset is in the stream's record, not in the columns' staging
    record (left out)."""
    import re

    text = re.sub(r" at offset \d+(, )?", lambda m: ", " if m.group(1) else "", text)
    text = re.sub(r"pass truncate=True to cut it to (\d+ \w+)", r"shorten it to \1 (write_stream cuts nothing)", text)
    text = re.sub(
        r"pass truncate=True to cut such values to (\d+ \w+), or change the field's width",
        r"shorten such values to \1 (the record type's field: write_stream cuts nothing)",
        text,
    )
    return re.sub(
        r"\(bytes_as='binary' or 'string'\)(.*)Remove the NUL, or bind the field with bytes_as='fixed' to keep its raw bytes",
        r"(as the description reads it)\1Remove the NUL, or declare the field as bytes (not text) in the description",
        text,
    )


def _check_nulls(table, record, layout, runs, prefix, what, type_name, fill):
    """A null in a column whose field cannot hold one (every field but datetime64's,
    which take NaT), without a ``fill`` value: an error naming the table, the record
    type, the field as the stream has it (its type and offset in the record) and the
    fixes write_stream has."""
    from .read import _field_in_stream, _place

    for f in layout.fields:
        if f.name in ("_offset", "_prefix") or f.dtype.kind in "mM":
            continue
        col = table.column(f.name)
        lists = f.count > 1 and (pa.types.is_fixed_size_list(col.type) or pa.types.is_list(col.type))
        nulls = col.null_count
        missing = "nulls"
        if lists and not nulls and f.name not in fill:  # nulls among the lists' values
            values = col.combine_chunks().flatten()
            nulls = values.null_count
            first = pc.index(pc.is_null(values), True).as_py() // f.count if nulls else 0
            missing = "null values in its lists"
        elif nulls and (f.name not in fill or lists):
            first = pc.index(pc.is_null(col), True).as_py()
            missing = "missing lists" if lists else "nulls"
        else:
            continue
        if not nulls:
            continue
        kind = dict(record.fields).get(f.name) if record.fields else None
        kind = kind or (f.encoding.short() if f.encoding is not None else f.dtype.str)
        src = _field_in_stream(layout, np.array(runs, np.int64).reshape(-1, 3), f)
        at = f" at {_place(src, prefix)}" if src >= 0 else ""
        owner = "the header" if type_name == "_header" else f"record type {type_name!r}"
        fix = (
            "a record has no place for a missing list: fill them in the table first (pyarrow.compute.fill_null) "
            "or drop those rows"
            if missing == "missing lists"
            else f"pass fill={{{type_name!r}: {{{f.name!r}: value}}}} to write a value in their place, or fill "
            f"them in the table first (pyarrow.compute.fill_null) or drop those rows"
        )
        raise ConversionError(
            f"{what}, row {first}: column {f.name!r} has {nulls} {missing}, but field {f.name!r} "
            f"({kind}{at}) of {owner} cannot hold a null; {fix}"
        )


_NO_FRAME = np.array([0, 0, 0, 0, 0, 0, 0, 0, 0], np.int64)  # see K.soa_to_aos_at


def _place(
    out,
    soa,
    layout,
    runs,
    zeros,
    positions,
    what,
    record,
    order,
    frame=_NO_FRAME,
    lengths=None,
    framed=None,
    type_name="_header",
):
    """Each record of ``soa`` assembled from its columns and stored in ``out`` at
    ``positions`` (with its length field and tag, see K.soa_to_aos_at), in one pass.
    ``framed``: ``(section, type, fixed size, tail sizes)`` for the errors of a field
    under the length field or the tag."""
    if soa is None or not len(positions):
        return
    r = np.array(runs, np.int64).reshape(-1, 3)
    z = np.array(zeros, np.int64).reshape(-1, 2)
    lengths = np.zeros(0, np.int64) if lengths is None else np.ascontiguousarray(lengths, np.int64)
    positions = np.ascontiguousarray(positions, np.int64)
    try:
        ops, offs, keep = reverse_ops(soa.layout, soa._columns, soa._fills, soa._truncate)
    except ConversionError as err:
        if str(err).startswith("fill["):  # a fill value the field cannot hold
            raise ConversionError(f"{what}: fill[{type_name!r}]{str(err)[4:]}") from err
        raise
    fault = K.soa_to_aos_at(
        out, positions, layout.itemsize, r, z, frame, lengths, ops, offs, owners=(soa._columns, ops, offs, keep)
    )
    del keep
    if fault is None:
        return
    bad, op, code = fault
    if code in (K.E_LENGTH, K.E_TAG) and framed is not None:
        raise _frame_error(soa, record, order, bad, code, frame, lengths, framed, what)
    if code != K.E_WIDE and soa.layout.fields[op].name == "_prefix":  # (the framing's bytes, not text)
        width = soa.layout.fields[op].dtype.itemsize
        value = soa.to_arrow().column("_prefix")[bad].as_py()
        raise ConversionError(
            f"{what}: column '_prefix', row {bad}: {value!r} is not the record's {width} framing bytes, which "
            f"each row holds (as read_stream gave them); give each row its {width} bytes"
        )
    if code != K.E_WIDE:
        said = every_reverse_error(soa.layout, soa._columns, soa._fills, soa._truncate, len(soa), fault)
        listed = [str(e) for _, e in said.problems]  # (without the options of SoA.from_arrow that fix them)
        text = (
            listed[0]
            if len(listed) == 1
            else f"{len(listed)} columns hold values their fields cannot: "
            + "; ".join(f"({k}) {e}" for k, e in enumerate(listed, 1))
        )
        raise ConversionError(f"{what}: {_stream_advice(text)}") from None
    row = soa.to_arrow().slice(bad, 1)
    for name, t in record.fields:
        from .spec import field_dtype

        dt, width, _ = field_dtype(t, order, name)
        value = row.column(name)[0].as_py()
        if dt.itemsize != width and isinstance(value, int) and value >= 1 << (8 * width):
            raise ConversionError(
                f"{what}, row {bad}: field {name!r} = {value} does not fit its "
                f"{width} bytes ({t}); the largest is {(1 << 8 * width) - 1}"
            )
    raise ConversionError(f"{what}, row {bad}: a value does not fit its field")  # pragma: no cover


def _field_at(record, order, prefix, at):
    """The name of the field of ``record`` (after ``prefix`` bytes of framing) that
    holds byte ``at`` of the record."""
    from .spec import field_dtype

    pos = prefix
    for name, t in record.fields:
        width = field_dtype(t, order, name)[1]
        if pos <= at < pos + width:
            return name
        pos += width
    return "?"  # pragma: no cover (the callers check that the byte lies in the fields)


def _shown(value):
    """A column value as the message shows it: bytes as bytes and their integer."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, bytes):
        return f"{value!r} ({int.from_bytes(value, 'big')})" if len(value) <= 8 else repr(value)
    return repr(value)


def _frame_error(soa, record, order, bad, code, frame, lengths, framed, what):
    """The ConversionError of a record whose field under the length field or the tag
    holds another value than the framing stores there (an edited column)."""
    s, t, fixed, tails = framed
    at = int(frame[0] if code == K.E_LENGTH else frame[3])
    name = _field_at(record, order, s.framing.prefix, at)
    value = soa.to_arrow().slice(bad, 1).column(name)[0].as_py()
    if code == K.E_LENGTH:
        want = int(lengths[bad])
        size = fixed + int(tails[bad])
        return ConversionError(
            f"{what}, row {bad}: field {name!r} holds {_shown(value)}, but it is the record's length "
            f"field, which must say {want} for this record of {size} bytes (its fields and a _tail of "
            f"{int(tails[bad])} bytes); set {name} to {want}, or change the _tail"
        )
    tag = t.tag_value(s.tag, what)
    told = f"{t.tag!r} ({tag})" if isinstance(t.tag, str) else f"{tag}"
    return ConversionError(
        f"{what}, row {bad}: field {name!r} holds {_shown(value)}, but it is the section's tag, and "
        f"type {t.name!r}'s tag is {told}; move the record to the table of its type, or set {name} "
        f"to {t.tag!r}"
    )


def write_stream(
    tables: Mapping[str, Any],
    spec: Any,
    dst: Any = None,
    *,
    order: "str | None" = None,
    overwrite: bool = False,
    fill: "Mapping[str, Mapping[str, Any]] | None" = None,
) -> "bytes | None":
    """Write tables (as :func:`read_stream` gives them) back as the stream, in the order
    of their ``_offset`` columns.

    Records of all types are merged by ``_offset`` and laid end to end from the
    section's start; each record's length field is computed from its size, its tag
    written from its type, and header expressions (``count``, ``bytes``, ``offset``)
    are checked against what is written. Tables from ``read_stream`` give back the
    same bytes.

    Parameters
    ----------
    tables : dict of name -> SoA, pyarrow Table or Arrow producer
    spec : Stream, path to a description, or a built-in name
    dst : path, binary file object, or None (return the bytes)
        A path is written whole or not at all (a temporary file renamed into place);
        an existing one needs ``overwrite=True``.
    order : "big" or "little", optional
        The byte order of a stream whose order comes from a magic number; defaults to
        ``tables.order`` (set by read_stream).
    fill : dict, optional
        Record type name (or ``"_header"``) -> {field: value} written where that column
        is null, e.g. ``fill={"C": {"AMT": 0}}`` (a field read with ``invalid = "null"``
        has no bytes to go back to). A null with no fill value is an error (datetime64
        fields take NaT), as in ``SoA.from_arrow``.

    Examples
    --------
    >>> import pyarrow as pa, layouts as lo
    >>> S = lo.Stream
    >>> s = S([S.Section(S.Framing(length=S.Length(0, 1, "big")), [S.RecordType("x", S.Record([("v", ">u2")]))],
    ...                  tail="column")])
    >>> t = pa.table({"_offset": [0, 1], "v": pa.array([7, 8], pa.uint16()), "_tail": [b"", b"hi"]})
    >>> lo.write_stream({"x": t}, s)
    b'\\x02\\x00\\x07\\x04\\x00\\x08hi'
    """
    stream = resolve(spec)
    if not isinstance(tables, Mapping):
        raise LayoutError(
            f"write_stream: tables must be a dict of record type name -> table (what read_stream returns), "
            f"got {type(tables).__name__}; e.g. write_stream({{'packet': table, '_header': header}}, spec)"
        )
    if order is not None and order not in ("big", "little"):
        raise LayoutError(f'write_stream: order={order!r}; expected "big" or "little" (or None)')
    if stream.byteorder is not None:
        order = order or getattr(tables, "order", None)
        if order not in ("big", "little"):
            raise LayoutError(
                f'{stream.name}: the byte order comes from the file\'s magic number; pass order="big" '
                f'or "little" (read_stream\'s result carries it as .order)'
            )
    elif order is not None and order != stream.order and stream.order in ("big", "little"):
        raise LayoutError(
            f"write_stream: order={order!r}, but {stream.name} is {stream.order}-endian (its description's order); "
            f"leave order out"
        )
    else:
        order = stream.order
    names = {t.name for s in stream.sections for t in s.types}
    fill = _fills(fill, stream, names)
    extra = sorted(set(tables) - names - {"_header", "_gaps", "_blocks", "_unknown"})
    if extra:
        raise ConversionError(f"table {extra[0]!r} is no record type of {stream.name} (types: {sorted(names)})")
    if "_unknown" in tables and not any(s.unknown == "keep" for s in stream.sections):
        n = _arrow(tables["_unknown"], "_unknown").num_rows
        if n:
            raise ConversionError(
                f"table '_unknown' has {n} records, but no section of {stream.name} keeps unknown "
                f'records (unknown = "keep"); drop the table, or set unknown = "keep" in the section '
                f"they belong to"
            )
    pieces: list = []  # (start, end, writer)
    values: dict = {}
    pos = 0
    found = _Found()  # each table's problems: the tables after a failed one are checked too
    if stream.header is not None:
        if "_header" not in tables:
            raise ConversionError(f"{stream.name} has a header: tables need '_header' (one row of its fields)")
        ht = _arrow(tables["_header"], "_header")
        if ht.num_rows != 1:
            raise ConversionError(f"'_header' has {ht.num_rows} rows; a stream has one header")
        ht = ht.append_column("_offset", pa.array([0], pa.int64())) if "_offset" not in ht.column_names else ht
        values = header_values(stream, ht, order)
        hrec, h = _checked(lambda: stream.header_record(values, order, stream.name), "'_header'")
        have, kept = set(ht.column_names), dict(hrec.fields)
        absent = [n for n, _ in stream.header.fields if n in have and n not in kept]
        if absent:
            raise ConversionError(
                f"'_header' has column {absent[0]!r}, a field past the header's size = "
                f"{stream.header_size!r} ({h} bytes); drop the column, or set the size field so "
                f"the header holds it"
            )
        got = found.run(lambda: _dense(ht, hrec, order, 0, False, "_header", "_header", fill.get("_header")))
        if got is not None:
            soa, layout, runs, zeros = got
            found.converted.append(("'_header'", soa))
            pieces.append((0, h, ("fixed", soa, layout, runs, zeros, np.zeros(1, np.int64), "_header", hrec)))
        pos = h
    for i, s in enumerate(stream.sections):
        where = f"{stream.name} section[{i}]"
        s = _checked(lambda: s.resolve(values, where, 2**62), where)  # list lengths from the header
        start = pos if s.offset is None else _checked(lambda: evaluate(s.offset, values, f"{where}.offset"), where)
        end, parts = _section(tables, stream, s, order, start, where, values, fill, found)
        if found.errors:  # (tables missing from the placement: only their problems are said)
            continue
        # records of every type and, kept with unknown = "keep", those of no type: read_stream
        # counts both against the header's count
        nrec = sum(len(p[5]) for p in parts if p[0] == "fixed") + sum(len(p[-1]) for p in parts if p[0] == "raw")
        if s.count is not None:
            want = _checked(lambda: evaluate(s.count, values, f"{where}.count"), where)
            if want != nrec:
                raise ConversionError(
                    f"{where}: the header's count = {s.count!r} is {want}, but the tables hold "
                    f"{nrec} records; set the header field to {nrec}"
                )
        if s.bytes is not None:
            want = _checked(lambda: evaluate(s.bytes, values, f"{where}.bytes"), where)
            if want != end - start:
                raise ConversionError(
                    f"{where}: the header's bytes = {s.bytes!r} is {want}, but the records take "
                    f"{end - start} bytes; set the header field to {end - start}"
                )
        pieces.append((start, end, ("many", parts)))
        pos = end
    found.raise_all()
    if "_gaps" in tables:
        gt = _arrow(tables["_gaps"], "_gaps")
        goffs = _offsets(gt, "'_gaps'")
        toffs, data = _tails(gt, gt.num_rows, "'_gaps'")
        for k in range(gt.num_rows):
            a = int(goffs[k])
            pieces.append((a, a + int(toffs[k + 1] - toffs[k]), ("raw", data[toffs[k] : toffs[k + 1]])))
    pieces.sort(key=lambda p: (p[0], p[1]))
    at = 0
    for a, b, _ in pieces:
        if a != at:
            what = "overlap" if a < at else "leave a hole"
            raise ConversionError(
                f"the parts of the stream {what} at byte {min(a, at)} (one ends at {at}, the next "
                f"starts at {a}); check the header's offsets and the _gaps table"
            )
        at = b
    out = np.zeros(at, np.uint8)
    for a, b, w in pieces:
        if w[0] == "raw":
            out[a:b] = w[1]
        elif w[0] == "fixed":
            _, soa, layout, runs, zeros, positions, what, rec = w
            found.run(lambda: _place(out, soa, layout, runs, zeros, positions + a, what, rec, order))
        else:
            for p in w[1]:
                found.run(lambda: _write_part(out, p, order))
    found.raise_all(searched=False)
    return _emit(out, dst, overwrite)


class _Found:
    """The problems of write_stream's tables, gathered so that one error names each table's:
    ``run(fn)`` returns ``fn()``, or None after noting its ConversionError; ``converted``:
    ``(table, SoA)`` of the tables that converted (searched for value problems when another
    did not, as the way back to records does)."""

    def __init__(self):
        self.errors: list = []
        self.converted: list = []

    def run(self, fn):
        try:
            return fn()
        except ConversionError as err:
            self.errors.append(err)
            return None

    def raise_all(self, searched=True):
        if not self.errors:
            return
        said = [str(e) for e in self.errors]
        if searched:
            from .._soa import value_problems

            for what, soa in self.converted:
                said += [f"{what}: {_stream_advice(str(e))}" for _, e in value_problems(soa)]
        if len(said) == 1:
            raise self.errors[0]
        raise ConversionError(
            f"{len(said)} problems in the tables: " + "; ".join(f"({k}) {t}" for k, t in enumerate(said, 1))
        )


def _fills(fill, stream, names) -> dict:
    """``fill`` checked: record type names (or ``"_header"``) to {field: value}."""
    if fill is None:
        return {}
    if not isinstance(fill, Mapping) or not all(isinstance(v, Mapping) for v in fill.values()):
        raise LayoutError(
            "fill: expected {record type: {field: value}}, e.g. fill={'C': {'AMT': 0}} (the types of "
            f"{stream.name}: {sorted(names)})"
        )
    for name, values in fill.items():
        if name == "_header" and stream.header is not None:
            fields = [n for n, _ in stream.header.fields]
        else:
            found = [t for s in stream.sections for t in s.types if t.name == name]
            if not found:
                raise LayoutError(f"fill: {name!r} is no record type of {stream.name} (types: {sorted(names)})")
            rec = found[0].record
            fields = [n for n, _ in rec.fields] if rec.fields else [f.name for f in rec.layout.fields]
        for field in values:
            if field not in fields:
                raise LayoutError(f"fill: {name!r} has no field {field!r} (its fields: {', '.join(fields)})")
    return {k: dict(v) for k, v in fill.items()}


def _section(tables, stream, s: Section, order, start, where, values, fill=None, found=None):
    """(end, parts) of one section: each type's records at their new positions."""
    keep = _keep_prefix(s)
    prefix = s.framing.prefix
    entries = []  # per part: (offsets, sizes)
    parts: list = []
    chosen = s.types[selected(s, values, "the header", where)].name if s.select is not None else None
    for t in s.types:
        what = f"table {t.name!r}"
        if t.name not in tables:
            continue
        table = _arrow(tables[t.name], t.name)
        n = table.num_rows
        if chosen is not None and t.name != chosen and n:
            raise ConversionError(
                f"{what} has {n} records, but the header's select = {s.select!r} chooses type "
                f"{chosen!r} for all of {where}; set the header field to type {t.name!r}'s tag "
                f"({t.tag!r}), or move the records"
            )
        offs = _offsets(table, what)
        toffs, tdata = _tails(table, n, what)
        if s.tail == "error" and n and (toffs[-1] - toffs[0]):
            raise ConversionError(
                f'{what} has a _tail with bytes, but {where} keeps no tails (tail = "error"); '
                f'drop the column or set tail = "column"'
            )
        dense = lambda: _dense(table, t.record, order, prefix, keep, what, t.name, (fill or {}).get(t.name))  # noqa: E731
        got = dense() if found is None else found.run(dense)
        if got is None:
            continue
        soa, layout, runs, zeros = got
        if found is not None and soa is not None:
            found.converted.append((what, soa))
        fixed = prefix + t.record.size(order)
        sizes = fixed + np.diff(toffs)
        parts.append(["fixed", soa, layout, runs, zeros, None, what, t.record, fixed, toffs, tdata, t, s])
        entries.append((offs, sizes))
    if "_unknown" in tables and s.unknown == "keep":
        table = _arrow(tables["_unknown"], "_unknown")
        toffs, tdata = _tails(table, table.num_rows, "table '_unknown'")
        check = lambda: _check_unknown(s, toffs, tdata, order, where)  # noqa: E731
        check() if found is None else found.run(check)
        parts.append(["raw", toffs, tdata, None])
        entries.append((_offsets(table, "table '_unknown'"), np.diff(toffs)))
    if found is not None and found.errors:  # (a table that did not convert: no placement to check)
        return start, []
    if isinstance(s, _BdwSection):
        table = _arrow(
            tables.get(
                "_blocks", pa.table({"_offset": pa.array([], pa.int64()), "_prefix": pa.array([], pa.binary(4))})
            ),
            "_blocks",
        )
        boffs = _offsets(table, "table '_blocks'")
        prefixes = _block_words(_column(table, "_prefix", "table '_blocks'", "give each block's 4 BDW bytes"))
        parts.append(
            [
                "blocks",
                np.frombuffer(prefixes.buffers()[1], np.uint8)[
                    prefixes.offset * 4 : (prefixes.offset + len(boffs)) * 4
                ],
                None,
            ]
        )
        entries.append((boffs, np.full(len(boffs), 4, np.int64)))
    if not entries:
        return start, []
    keys = np.concatenate([e[0] for e in entries])
    sizes = np.concatenate([e[1] for e in entries]).astype(np.int64)
    cut = np.cumsum([0] + [len(e[0]) for e in entries])  # part k is keys[cut[k]:cut[k + 1]]
    if not isinstance(s, _BdwSection) and K.tiles(keys, sizes, start):  # records back where they were: no sort
        end = start + int(sizes.sum())
        for k, p in enumerate(parts):
            p[5 if p[0] == "fixed" else -1] = keys[cut[k] : cut[k + 1]]
        _check_fixed_size(s, values, where, sizes, cut, _labels(parts))
        return end, parts
    idx = np.argsort(keys, kind="stable")
    if len(idx) > 1 and np.any(np.diff(keys[idx]) == 0):
        k = int(keys[idx][np.flatnonzero(np.diff(keys[idx]) == 0)[0]])
        raise ConversionError(
            f"{where}: two records have _offset {k}; the order of the stream is ambiguous (offsets must be unique)"
        )
    pos = np.empty(len(idx), np.int64)
    ends = np.cumsum(sizes[idx])
    if len(idx) and ends[-1] > 2**62:
        raise ConversionError(f"{where}: the records add up to {int(ends[-1])} bytes; too large")
    pos[idx] = start + ends - sizes[idx]
    end = start + int(ends[-1]) if len(idx) else start
    for k, p in enumerate(parts):
        p[5 if p[0] == "fixed" else -1] = pos[cut[k] : cut[k + 1]]
    if isinstance(s, _BdwSection) and len(idx):
        bk = len(parts) - 1
        if idx[0] < cut[bk]:  # the first piece of the section is not a block descriptor word
            raise ConversionError(
                f"{where}: the first record comes before the first block descriptor word; each "
                f"record needs a block (_blocks._offset below the records')"
            )
        bpos = pos[cut[bk] : cut[bk + 1]]
        srt = np.argsort(bpos)
        lens = np.empty(len(bpos), np.int64)
        lens[srt] = np.diff(np.append(bpos[srt], end))
        if np.any(lens > 0xFFFF) or np.any(lens < 8):
            k = int(np.flatnonzero((lens > 0xFFFF) | (lens < 8))[0])
            raise ConversionError(
                f"{where}: block {k} (byte {int(bpos[k])}) would be {int(lens[k])} bytes; a VB "
                f"block holds 8..65535 (a BDW and at least one record): "
                + (
                    "split it: add a row to _blocks whose _offset is that of the record to start the next block"
                    if lens[k] > 0xFFFF
                    else "drop that _blocks row, or give the block its records"
                )
            )
        parts[bk][-1] = (bpos, lens)
    _check_fixed_size(s, values, where, sizes, cut, _labels(parts))
    return end, parts


def _field_values(toffs, tdata, at, size, big):
    """The unsigned integer of ``size`` bytes at ``at`` in each record (records long enough)."""
    raw = tdata[toffs[:-1, None] + at + np.arange(size)].astype(np.uint64)
    weights = np.uint64(256) ** (np.arange(size)[::-1] if big else np.arange(size)).astype(np.uint64)
    return (raw * weights).sum(axis=1, dtype=np.uint64)


def _check_unknown(s: Section, toffs, tdata, order, where):
    """Each ``_unknown`` record (its bytes, framing included) is still one record of the
    section that read_stream would keep as unknown: room for its framing and tag, a length
    field that says its size, and a tag that is no type's (else the stream written would
    not read back, or would read back as another type's records)."""
    sizes = np.diff(toffs)
    if not len(sizes):
        return
    ln, tag = s.framing.length, s.tag
    need = 0 if ln is None else ln.offset + ln.size
    if tag is not None:
        need = max(need, int(s.framing.prefix or 0) + tag.offset + tag.size)

    def refuse(k, why):
        raise ConversionError(
            f"{where}: table '_unknown', row {k} (_tail {bytes(tdata[toffs[k] : toffs[k] + min(int(sizes[k]), 16)])!r}"
            f"{'...' if sizes[k] > 16 else ''}, {int(sizes[k])} bytes): {why}; an _unknown record is written as its "
            f"bytes, framing included: give it its whole record, or move it to its type's table"
        )

    short = np.flatnonzero(sizes < max(need, 1))
    if len(short):
        refuse(int(short[0]), f"a record of this section needs at least {max(need, 1)} bytes (its framing and tag)")
    if ln is not None:
        said = _field_values(toffs, tdata, ln.offset, ln.size, ln.big(order)).astype(np.int64) * ln.unit + ln.base()
        wrong = np.flatnonzero(said != sizes)
        if len(wrong):
            k = int(wrong[0])
            refuse(
                k,
                f"its length field (bytes {ln.offset}..{ln.offset + ln.size - 1}) says a record of {int(said[k])} bytes",
            )
    if tag is not None and s.types:
        known = {t.tag_value(tag, where): t.name for t in s.types if t.tag is not None}
        tags = _field_values(toffs, tdata, int(s.framing.prefix or 0) + tag.offset, tag.size, tag.order == "big")
        hit = np.flatnonzero(np.isin(tags, np.array(sorted(known), np.uint64)))
        if len(hit):
            k = int(hit[0])
            refuse(
                k,
                f"its tag {int(tags[k])} is the tag of record type {known[int(tags[k])]!r}, so it would read back as one",
            )


def _labels(parts):
    """The table each part of a section comes from, as errors name it."""
    return [p[6] if p[0] == "fixed" else "table '_unknown'" if p[0] == "raw" else "table '_blocks'" for p in parts]


def _check_fixed_size(s, values, where, sizes, cut, labels):
    """The records of a fixed-size section are all its size; ``cut`` and ``labels`` say which
    table (``labels[k]``: rows ``cut[k]..cut[k + 1]`` of ``sizes``) a wrong one is in."""
    if s.framing.size is not None:
        fs = _checked(lambda: evaluate(s.framing.size, values, f"{where}.framing.size"), where)
        wrong = np.flatnonzero(sizes != fs)
        if len(wrong):
            k = int(wrong[0])
            part = int(np.searchsorted(cut, k, side="right")) - 1
            named = f" ({labels[part]}, row {k - int(cut[part])})" if part < len(labels) else ""
            size = s.framing.size
            d = int(sizes[k]) - fs
            header = f" (or set the header's {size} to {int(sizes[k])} if every record is that size)"
            raise ConversionError(
                f"{where}: fixed-size records are {fs} bytes"
                + (f" (the header's {size})" if isinstance(size, str) else "")
                + f", a record here{named} would be {int(sizes[k])}: its _tail is {abs(d)} bytes too "
                + ("long; cut it" if d > 0 else "short; pad it")
                + (header if isinstance(size, str) else "")
            )


def _write_part(out, p, order):
    kind = p[0]
    if kind == "raw":
        toffs, tdata, positions = p[1], p[2], p[3]
        K.scatter_tails(toffs - toffs[0], tdata[toffs[0] :], positions, np.zeros(len(positions), np.int64), out)
        return
    if kind == "blocks":
        if not len(p[2]):  # no records, no blocks (an empty VB file)
            return
        raw, (bpos, lens) = p[1], p[2]
        for k in range(len(bpos)):
            out[bpos[k] : bpos[k] + 4] = raw[4 * k : 4 * k + 4]
        K.put_fields(out, bpos, 0, 2, True, lens.astype(np.uint64))
        return
    _, soa, layout, runs, zeros, positions, what, record, fixed, toffs, tdata, t, s = p
    frame, lengths = _frame(s, t, order, positions, fixed, toffs, what)
    framed = (s, t, fixed, np.diff(toffs))
    _place(out, soa, layout, runs, zeros, positions, what, record, order, frame, lengths, framed, t.name)
    if len(tdata):
        K.scatter_tails(toffs - toffs[0], tdata[toffs[0] :], positions, np.full(len(positions), fixed, np.int64), out)


def _frame(s, t, order, positions, fixed, toffs, what):
    """The length field and tag the records of type ``t`` carry: ``(frame, lengths)`` as
    K.soa_to_aos_at takes them, each record's length value checked against its field."""
    frame = _NO_FRAME.copy()
    lengths = None
    ln = s.framing.length
    if ln is not None and len(positions):
        sizes = fixed + np.diff(toffs)
        raw = sizes - ln.base()
        value = raw // ln.unit if ln.unit != 1 else raw
        bad = np.flatnonzero(
            ((raw % ln.unit != 0) if ln.unit != 1 else False)
            | (raw < 0)
            | (value >= (1 << (8 * ln.size)) if ln.size < 8 else raw < 0)
        )
        if len(bad):
            k = int(bad[0])
            fix = "shorten its _tail"
            if ln.unit != 1 and raw[k] % ln.unit:
                down, up = int(sizes[k] - raw[k] % ln.unit), int(sizes[k] + ln.unit - raw[k] % ln.unit)
                fix = f"cut or pad its _tail to a record of {down} or {up} bytes (a multiple of the unit from {ln.base()})"
            raise ConversionError(
                f"{what}, row {k}: a record of {int(sizes[k])} bytes cannot be framed: its length "
                f"field ({ln.size} bytes, unit {ln.unit}, counting from {ln.base()}) cannot say it; {fix}"
            )
        frame[0:3] = ln.offset, ln.size, ln.big(order)
        # a field under the length field (pcap's incl_len) must say what the framing stores
        frame[7] = s.framing.prefix <= ln.offset and ln.offset + ln.size <= fixed
        lengths = value
    if s.tag is not None and len(positions):
        tag = np.array(t.tag_value(s.tag, what), np.uint64).view(np.int64)  # (the bits of a value >= 2**63)
        frame[3:7] = s.framing.prefix + s.tag.offset, s.tag.size, s.tag.order == "big", tag
        frame[8] = 1  # the tag is a field of every type (checked when the description is loaded)
    return frame, lengths


def _emit(out: np.ndarray, dst: Any, overwrite: bool) -> "bytes | None":
    """The stream's bytes, or written to ``dst`` by the rules of every output
    (:func:`layouts._files.open_output`): a file whole or not at all, never replacing
    what is not a regular file; FIFOs, devices and file objects streamed into."""
    if dst is None:
        return out.tobytes()
    target = open_output(dst, overwrite=overwrite)
    try:
        f = target.records_file()
        try:
            f.write(out.data)
            f.flush()
        finally:
            if not target.stream:
                f.close()  # (the descriptor stays open until commit)
        target.commit()
    except BaseException as err:
        target.discard()
        if isinstance(err, OSError) and not isinstance(err, BrokenPipeError):
            raise ConversionError(
                f"writing {target.name} failed: {err.strerror or err}; the destination was left as it was"
            ) from err
        raise
    return None
