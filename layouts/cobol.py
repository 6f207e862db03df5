"""COBOL copybooks beyond the Layout: the copybook's own facts, and ``OCCURS DEPENDING ON``
tables as Arrow lists whose lengths come from their count fields.

``Layout.from_copybook`` reads records at their maximum size: an ``OCCURS 1 TO 80 TIMES
DEPENDING ON N`` table is a ``fixed_size_list`` of 80 elements (the exact bytes of the
record, so the way back gives them back). :func:`cut_depending_on` turns such columns of a
table into ``list`` columns of ``N`` elements per row, as Cobrix shows them::

    import layouts as lo, layouts.cobol
    book = lo.cobol.read_copybook("accounts.cob")
    layout = lo.Layout.from_copybook("accounts.cob")
    table = lo.AoS(records, layout).to_soa().to_arrow()
    lists = lo.cobol.cut_depending_on(table, book)

See docs/mainframe.md.
"""

import mmap
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._cobol import CobolField, Copybook, read_copybook
from ._cobol.metadata import group_rows, with_groups
from ._cobol.signs import PREFIX as SIGN_PREFIX
from ._cobol.signs import keep_signs, put_signs, separate_sign_fields, sign_counts, sign_fields
from ._errors import ConversionError, LayoutError

__all__ = [
    "CobolField",
    "Copybook",
    "annotate",
    "cut_depending_on",
    "depending_tables",
    "float_counts",
    "invalid_counts",
    "keep_signs",
    "put_signs",
    "read_copybook",
    "read_segments",
    "read_variable",
    "separate_sign_fields",
    "sign_counts",
    "uncovered_count",
    "variable_sign_counts",
    "write_segments",
    "with_group_conditions",
    "write_variable",
]


def depending_tables(book: Copybook) -> "list[tuple[tuple, str, int]]":
    """``[(path of the table, dotted path of its count field, maximum), ...]`` for every
    ``OCCURS DEPENDING ON`` of the record, outermost first."""
    seen: dict = {}
    for f in book.fields:
        for depth, counter, size in zip(f.dims_at, f.depending_on, f.shape):
            if counter:
                seen.setdefault((f.path[:depth], counter, size), None)
    return sorted(seen, key=lambda t: len(t[0]))


def cut_depending_on(
    table: pa.Table, book: Copybook, *, flatten: bool = False, occurs_mappings: "dict | None" = None
) -> pa.Table:
    """``table`` (read with ``Layout.from_copybook(..., flatten=flatten)``) with every
    ``OCCURS DEPENDING ON`` column cut to its count: ``fixed_size_list<T>[max]`` becomes
    ``list<T>`` holding the first ``count`` elements of each row.

    Tables inside tables are cut too, each element by its own count (a count inside the
    enclosing table's element, as ``OCCURS ... DEPENDING ON INNER-COUNT`` in a group that
    itself occurs): outer tables first, so the counts of elements past an outer count are
    never read. A count below 0, above the maximum, or null is a ConversionError naming
    the row and the field. With ``flatten=True`` only counts outside any table are
    supported (a LayoutError says so). ``occurs_mappings`` (``{table name: {text value:
    count}}``, Cobrix's option) gives the count of a table whose DEPENDING ON item is text:
    the text without its trailing spaces is looked up (a value not there is a
    ConversionError)."""
    from ._occurs import _check_mappings

    mappings = _check_mappings(occurs_mappings, book)
    tables = depending_tables(book)
    if flatten:
        counters = {f.name: f for f in book.fields}
        for path, counter, _size in tables:
            holder = counters.get(counter)
            if holder is None or holder.shape:
                raise LayoutError(
                    f"{'.'.join(path)} OCCURS DEPENDING ON {counter}, a count inside another table: "
                    f"with flatten=True only counts outside any table are supported; read the "
                    f"table without flatten"
                )
        for path, counter, size in tables:
            if counter not in table.column_names:
                raise LayoutError(
                    f"the count {counter} of {'.'.join(path)} (OCCURS DEPENDING ON): {counter} is not a "
                    f"column of the table; read the table with the options the copybook was read with"
                )
            counts = _counts(table.column(counter), counter, ".".join(path), size, mappings.get(path[-1]))
            for f in book.fields:
                if f.path[: len(path)] == path and f.name in table.column_names:
                    i = table.column_names.index(f.name)
                    cut = _cut(table.column(i), counts)
                    table = table.set_column(
                        i, pa.field(f.name, cut.type, metadata=table.schema.field(i).metadata), cut
                    )
        return table
    if not tables:
        return table
    record = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(table.schema))
    for path, counter, size in tables:
        record = _apply(record, path, tuple(counter.split(".")), size, ".".join(path), counter, mappings.get(path[-1]))
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(record)]).replace_schema_metadata(
        table.schema.metadata
    )


def _apply(array, path, counter, size, where, counter_name, mapping=None, act=None):
    """``array`` (a struct) with the table at ``path`` cut by the count at ``counter``,
    both relative to it; lists on the common part of the paths are gone through, each
    element cut by its own count."""
    if len(counter) == 1 or path[0] != counter[0]:  # the count is in this element, down its groups
        column = array
        for name in counter:
            column = column.field(_index(column, name, f"the count {counter_name} of {where}"))
            if not pa.types.is_struct(column.type) and name != counter[-1]:
                raise LayoutError(
                    f"{where} OCCURS DEPENDING ON {counter_name}: the count is inside another "
                    f"table than the one that holds {where}; not supported"
                )
        return (act or _replace)(array, path, _counts(column, counter_name, where, size, mapping))
    k = _index(array, path[0], f"the table {where}")
    child = array.field(k)
    if pa.types.is_struct(child.type):
        new = _apply(child, path[1:], counter[1:], size, where, counter_name, mapping, act)
    else:  # a list of structs: every element, each by its own count
        values = _apply(child.flatten(), path[1:], counter[1:], size, where, counter_name, mapping, act)
        if pa.types.is_fixed_size_list(child.type):
            new = pa.FixedSizeListArray.from_arrays(values, child.type.list_size)
        else:
            offsets = child.offsets.to_numpy() - child.offsets[0].as_py()
            new = _list_array(offsets, values, pa.field("item", values.type))
    return _with_child(array, k, new)


def _index(array, name, what):
    """The index of ``name`` among the struct's fields (``get_field_index`` gives -1 for
    a name that is not there, which ``field(-1)`` would take as the last field)."""
    k = array.type.get_field_index(name)
    if k < 0:
        there = [array.type.field(i).name for i in range(array.type.num_fields)]
        raise LayoutError(
            f"{what} (OCCURS DEPENDING ON): {name} is not a column of the table (its columns: "
            f"{', '.join(there)}); read the table with the options the copybook was read with (a "
            f"REDEFINES alternative not kept? names=...?)"
        )
    return k


def _with_child(array, k, new):
    fields = [array.type.field(i) for i in range(array.type.num_fields)]
    children = [array.field(i) for i in range(array.type.num_fields)]
    children[k] = new
    fields[k] = pa.field(fields[k].name, new.type, metadata=fields[k].metadata)
    return pa.StructArray.from_arrays(children, fields=fields, mask=array.is_null() if array.null_count else None)


def uncovered_count(records, layout) -> int:
    """How many records hold bytes other than zero where no field of ``layout`` is: FILLER
    (unless ``fillers="keep"``), the alternatives of a REDEFINES left out, the bytes
    ``record_start_offset`` and ``record_end_offset`` skip. The way back writes zeros
    there. ``records``: as :func:`sign_counts`'s."""
    from ._cobol.signs import _records

    buf, n, on_device = _records(records, layout, False)
    covered = np.zeros(layout.itemsize, bool)
    for f in layout.fields:
        for at in f.element_offsets().reshape(-1).tolist():
            covered[at : at + f.width] = True
    gaps = np.flatnonzero(~covered)
    if not gaps.size or not n:
        return 0
    rows = (buf.copy_to_host() if on_device else buf).reshape(n, layout.itemsize)
    step = max(1, _FLOAT_BATCH // gaps.size)
    return sum(int(np.count_nonzero(rows[r0 : r0 + step][:, gaps].any(axis=1))) for r0 in range(0, n, step))


_FLOAT_BATCH = 1 << 20  # values of a field read and written back at a time by float_counts


def float_counts(records, layout) -> "dict[str, int]":
    """``{field: count}`` of the IBM float values (COMP-1, COMP-2) that the way back writes
    as other bytes, for the fields that have any, in the Layout's order. They are read
    into IEEE floats and written back normalized (docs/mainframe.md, "IBM floats"): an
    unnormalized value, a zero fraction with an exponent, a COMP-1 value below float32's
    normal range (rounded into its subnormals) or a COMP-2 value of more than 53
    significant bits comes back otherwise. Each value is read and written back by the
    conversion itself and the bytes compared. A value no float holds (a COMP-1 beyond
    float32) is not counted: reading refuses it, or makes it null (``invalid="null"``).
    ``records``: as :func:`sign_counts`'s::

        lo.cobol.float_counts(records, layout)   # {'RATE': 2}: 2 values come back as other bytes
    """
    import dataclasses

    from ._aos import AoS
    from ._cobol.signs import _records
    from ._layout import Layout
    from ._soa import SoA

    buf, n, on_device = _records(records, layout, False)
    rows = (buf.copy_to_host() if on_device else buf).reshape(n, layout.itemsize)
    out = {}
    for f in layout.fields:
        if f.encoding is None or f.encoding.kind != "hfloat":
            continue
        encoding = dataclasses.replace(f.encoding, invalid="null")
        one = Layout.from_dtype(np.dtype([("v", f"V{f.width}")]), encodings={"v": encoding})
        count = 0
        for at in f.element_offsets().reshape(-1).tolist():
            for r0 in range(0, n, _FLOAT_BATCH):
                raw = np.ascontiguousarray(rows[r0 : r0 + _FLOAT_BATCH, at : at + f.width])
                column = AoS(raw.reshape(-1).view(one.dtype), one).to_soa().to_arrow().column("v")
                if column.null_count:
                    valid = column.is_valid().to_numpy(zero_copy_only=False)
                    column, raw = column.filter(valid), raw[valid]
                back = SoA.from_arrow(pa.table({"v": column}), one).to_aos().array
                written = np.ascontiguousarray(back).view(np.uint8).reshape(-1, f.width)
                count += int(np.count_nonzero((written != raw).any(axis=1)))
        if count:
            out[f.name] = count
    return out


def invalid_counts(table: pa.Table, layout) -> "dict[str, int]":
    """``{field: count}``: how many values of each field read with ``invalid="null"``
    were invalid bytes made null (every other field has no nulls), for the fields that
    had any, in the Layout's order. ``table`` is what ``AoS(...).to_soa().to_arrow()``
    (or :func:`read_variable`, :func:`read_segments`, a Parquet file ``convert`` wrote)
    gives with ``layout``; nested and ``flatten=True`` tables alike (a field in a table
    counts every element; elements past an OCCURS DEPENDING ON count, cut away, do not)::

        layout = lo.Layout.from_copybook("accounts.cob", invalid="null")
        table = lo.AoS(records, layout).to_soa().to_arrow()
        lo.cobol.invalid_counts(table, layout)   # {'BALANCE': 3}
    """
    out = {}
    for f in layout.fields:
        if f.encoding is None or f.encoding.invalid != "null":
            continue
        count = _nulls_of(table, f.name)
        if count:
            out[f.name] = count
    return out


def _nulls_of(table, name):
    """Null values of the leaf ``name`` (dotted) of ``table``: lists flattened."""
    if name in table.column_names:
        return _leaf_nulls(table.column(name), ())
    parts = name.split(".")
    if parts[0] not in table.column_names:
        raise LayoutError(
            f"field {name!r} is not in the table (its columns: {', '.join(table.column_names)}); give the "
            f"table read with this Layout"
        )
    return _leaf_nulls(table.column(parts[0]), tuple(parts[1:]))


def _leaf_nulls(column, rest):
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    total = 0
    for array in chunks:
        while True:
            if (
                pa.types.is_list(array.type)
                or pa.types.is_large_list(array.type)
                or pa.types.is_fixed_size_list(array.type)
            ):
                array = array.flatten()
            elif pa.types.is_struct(array.type) and rest:
                k = array.type.get_field_index(rest[0])
                if k < 0:
                    raise LayoutError(
                        f"{rest[0]!r} is not a field of {array.type}; give the table read with this Layout"
                    )
                array, rest = array.field(k), rest[1:]
            else:
                break
        total += array.null_count
    return total


def annotate(table: pa.Table, book: Copybook) -> pa.Table:
    """``table`` with the copybook's facts in each leaf's Arrow field metadata:
    ``cobol.line``, ``cobol.picture``, ``cobol.usage`` and, where the item has 88 levels,
    ``cobol.88`` (JSON: ``{"ACTIVE": ["'A'"], ...}``, the values as written); ``cobol.depending_on``
    on OCCURS DEPENDING ON items. They stay with the columns in Parquet and Arrow IPC files.
    Works with nested and flattened tables (leaves found by their dotted name)."""
    import json

    facts = {}
    for f in book.fields:
        meta = {"cobol.line": str(f.line), "cobol.picture": f.picture, "cobol.usage": f.usage}
        if f.conditions:
            meta["cobol.88"] = json.dumps({name: list(values) for name, values in f.conditions})
        if any(f.depending_on):
            meta["cobol.depending_on"] = ",".join(d for d in f.depending_on if d)
        facts[f.name] = meta
    fields = [_annotated(field, field.name, facts) for field in table.schema]
    return with_group_conditions(
        pa.Table.from_arrays(table.columns, schema=pa.schema(fields, metadata=table.schema.metadata)), book
    )


def with_group_conditions(table: pa.Table, book: Copybook) -> pa.Table:
    """``table`` with the 88 levels of the copybook's items that are no leaf column (the
    record itself, groups, FILLERs: ``book.group_conditions``) kept: all in the schema's
    metadata ``cobol.88.groups`` (JSON: ``[{"item": "STATUS-GROUP", "path": "A.STATUS-GROUP",
    "line": 7, "offset": 10, "size": 3, "conditions": {"OPEN": ["'O  '"]}}, ...]``, the
    values as written, compared with the item's bytes from ``offset``), and each group's also
    as ``cobol.88`` metadata of its struct column where the table has one (not flattened).
    A table read with ``Layout.from_copybook``'s Layout has them already."""
    import json

    groups = getattr(book, "group_conditions", ())
    if not groups:
        return table
    schema = with_groups(table.schema, json.dumps(group_rows(groups)))
    return pa.Table.from_arrays(table.columns, schema=schema)


def _annotated(field, name, facts):
    meta = dict(field.metadata or {})
    if name in facts:
        meta.update({k.encode(): v.encode() for k, v in facts[name].items()})
    return pa.field(field.name, _annotated_type(field.type, name, facts), field.nullable, meta or None)


def _annotated_type(arrow_type, name, facts):
    if pa.types.is_struct(arrow_type):
        return pa.struct(
            [
                _annotated(arrow_type.field(i), f"{name}.{arrow_type.field(i).name}", facts)
                for i in range(arrow_type.num_fields)
            ]
        )
    if pa.types.is_fixed_size_list(arrow_type):
        item = arrow_type.value_field
        inner = pa.field(item.name, _annotated_type(item.type, name, facts), item.nullable, item.metadata)
        return pa.list_(inner, arrow_type.list_size)
    if pa.types.is_list(arrow_type):
        item = arrow_type.value_field
        return pa.list_(pa.field(item.name, _annotated_type(item.type, name, facts), item.nullable, item.metadata))
    return arrow_type


def _counts(column, counter, where, size, mapping=None):
    if mapping is not None:
        return _in_range(_mapped_counts(column, counter, where, mapping), counter, where, size)
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        err = ConversionError(
            f"record {row}: the count {counter} of {where} (OCCURS DEPENDING ON) is null (its "
            f"bytes were invalid); read the table at its maximum size, or fix the record"
        )
        err.row, err.count_row = row, (where, counter)
        raise err
    try:
        counts = pc.cast(column, pa.int64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        row, value = _first_fraction(column)
        raise ConversionError(
            f"record {row}: the count {counter} of {where} (OCCURS DEPENDING ON) is {value!r}, not a "
            f"whole number; read the table at its maximum size, or fix the record (or the copybook: "
            f"a count is an integer item)"
        ) from None
    return _in_range(counts, counter, where, size)


def _in_range(counts, counter, where, size):
    bad = np.flatnonzero((counts < 0) | (counts > size))
    if bad.size:
        row = int(bad[0])
        err = ConversionError(
            f"record {row}: the count {counter} of {where} (OCCURS DEPENDING ON) is "
            f"{int(counts[row])}, outside 0..{size}; read the table at its maximum size, or "
            f"fix the record"
        )
        err.row, err.count_row, err.value = row, (where, counter), f"{int(counts[row])}, outside 0..{size}"
        raise err
    return counts


def _mapped_counts(column, counter, where, mapping):
    """The counts of text values through ``occurs_mappings`` (trailing spaces dropped)."""
    keys = {k.rstrip(" "): v for k, v in mapping.items()}
    counts = np.zeros(len(column), np.int64)
    for row, value in enumerate(column.to_pylist()):
        got = keys.get(value.rstrip(" ")) if isinstance(value, str) else None
        if got is None:
            raise ConversionError(
                f"record {row}: the count {counter} of {where} (OCCURS DEPENDING ON) is {value!r}, no key of "
                f"its occurs_mappings ({sorted(keys)}); add the value to the mapping, or fix the record"
            )
        counts[row] = got
    return counts


def _first_fraction(column):
    """``(row, value)`` of the first count that is no whole number (the error path)."""
    for row, value in enumerate(column.to_pylist()):
        try:
            if isinstance(value, str):
                int(value.strip())
            elif value != int(value):
                return row, value
        except (TypeError, ValueError, OverflowError):
            return row, value
    return 0, column[0].as_py() if len(column) else None


def _replace(array, path, counts):
    """``array`` (a struct) with the fixed-size list at ``path`` (struct names down to
    it) cut to ``counts``."""
    k = _index(array, path[0], f"the table {'.'.join(path)}")
    child = array.field(k)
    if len(path) == 1:
        return _with_child(array, k, _cut(child, counts))
    if not pa.types.is_struct(child.type):
        raise LayoutError(f"expected a struct on the way to {'.'.join(path)}, found {child.type}")
    return _with_child(array, k, _replace(child, path[1:], counts))


def _cut(column, counts):
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_fixed_size_list(array.type):
        raise LayoutError(f"an OCCURS DEPENDING ON column is a fixed_size_list, found {array.type}")
    size = array.type.list_size
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    starts = np.arange(len(counts), dtype=np.int64) * size
    index = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1], dtype=np.int64)
    values = array.flatten().take(pa.array(index))
    return _list_array(offsets, values, array.type.value_field)


def _list_array(offsets, values, field):
    """A ``list`` array, or a ``large_list`` one where the elements pass 2**31 - 1 (its
    int32 offsets would wrap around)."""
    if offsets[-1] > np.iinfo(np.int32).max:
        return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), values, type=pa.large_list(field))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, type=pa.list_(field))


# ------------------------------------------------------------------ variable and multi-segment files
_FRAMINGS = ("rdw", "bdw", "rdw-little")


def _framing(framing):
    from ._stream.spec import Framing, Length, preset

    if framing in ("rdw", "bdw"):
        return preset(framing)
    if framing == "rdw-little":  # two zero bytes, then the record's length (RDW not counted), little-endian
        return Framing(length=Length(offset=2, size=2, order="little", unit=1, counts_itself=False, adjust=0), prefix=4)
    raise LayoutError(f"framing must be one of {_FRAMINGS}, got {framing!r}")


def _id_bytes(value, codepage):
    """A segment id's bytes: text through the code page's table (layouts' tables: EBCDIC,
    ``ascii``, ``latin-1``), or the bytes given."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if not isinstance(value, str):  # (bytes(200) would be 200 zero bytes)
        raise LayoutError(
            f"segment id {value!r}: give the id as text ('H', through the code page) or as its bytes "
            f"(b'\\xc8'), not {type(value).__name__}"
        )
    from ._ebcdic import check_codepage, encode_table

    table = encode_table(check_codepage(codepage, "codepage"))
    codes = [int(table[ord(ch)]) if ord(ch) < 0x10000 else -1 for ch in value]
    if -1 in codes:
        bad = value[codes.index(-1)]
        raise LayoutError(
            f"segment id {value!r} has no byte in code page {codepage} ({bad!r} has none); give the id's "
            f"bytes, or its code page"
        )
    return bytes(codes)


def _segment_stream(types, segment, framing, codepage):
    """The record stream: each record read as ``_head`` (its bytes up to the segment
    id's end) and ``_tail`` (the rest), typed by its segment id."""
    from ._layout import Layout
    from ._stream.spec import BdwSection, Record, RecordType, Section, Stream, Tag

    if not isinstance(types, dict):
        raise LayoutError(f"types must be a dict {{segment id: Layout}}, got {type(types).__name__}")
    for value, layout in types.items():
        if not isinstance(layout, Layout):
            raise LayoutError(
                f"types[{value!r}] must be a layouts.Layout, got {type(layout).__name__} "
                f"(Layout.from_copybook(book, record=...) makes one)"
            )
    offset, size = _segment_place(segment, types)
    if not (isinstance(offset, int) and isinstance(size, int) and offset >= 0 and 1 <= size <= 8):
        raise LayoutError(
            f"segment=(offset, size) gives the segment id's bytes in the record (size 1 to 8), got {segment!r}"
        )
    longest = max((layout.itemsize for layout in types.values()), default=0)
    if offset + size > longest:  # (no record holds it: records are as long as their Layout, or shorter)
        raise LayoutError(
            f"segment=({offset}, {size}): the segment id's bytes end at {offset + size}, past every segment's "
            f"Layout (the longest is {longest} bytes); give an offset and size inside the records"
        )
    head = Record((("_head", f"S{offset + size}"),))
    record_types = []
    for value in types:
        raw = _id_bytes(value, codepage)
        if len(raw) != size:
            raise LayoutError(f"segment id {value!r} is {len(raw)} bytes in {codepage}; the segment field has {size}")
        record_types.append(RecordType(_table_name(value), head, int.from_bytes(raw, "big")))
    tag = Tag(offset, size, "big")
    if framing == "bdw":
        section = BdwSection(tuple(record_types), tag=tag, tail="column")
    else:
        section = Section(_framing(framing), tuple(record_types), tag=tag, tail="column")
    return Stream((section,), name="segments")


def _segment_place(segment, types):
    """``(offset, size)`` of the segment id: given, or the field of that name (a text
    field at the same place in every Layout, as a copybook's ``SEGMENT-ID``)."""
    if not isinstance(segment, str):
        return segment
    places = set()
    for value, layout in types.items():
        try:
            field = layout[segment]
        except KeyError:
            raise LayoutError(
                f"segment={segment!r}: the Layout of segment {value!r} has no leaf of that name; its "
                f"leaves are {layout.names}"
            ) from None
        if field.shape:
            raise LayoutError(f"segment={segment!r} is a table (OCCURS); name a field of one value")
        places.add((field.offset, field.width))
    if len(places) != 1:
        raise LayoutError(
            f"segment={segment!r} is at different places in the segments' Layouts: "
            f"{sorted(places)} (offset, bytes); give segment=(offset, size)"
        )
    return places.pop()


def _table_name(value):
    """A segment table's name: the id as given (bytes as latin-1 text when printable)."""
    if isinstance(value, str):
        return value
    text = bytes(value).decode("latin-1")
    return text if text.isprintable() else bytes(value).hex()


def read_segments(
    src, types, *, segment, framing="rdw", codepage="cp037", short="error", signs=False
) -> "dict[str, pa.Table]":
    """Variable-length records (RDW or BDW+RDW framing) of several segment types, each
    decoded with its own Layout (``Layout.from_copybook``, one per segment: another
    record of the copybook, or the same one with another ``redefines=`` choice).

    Parameters
    ----------
    src : path, bytes-like or binary file
        The records, as :func:`layouts.read_stream` takes them.
    types : dict
        ``{segment id: Layout}``; the id is text (encoded in ``codepage``) or bytes.
    segment : (offset, size) or str
        Where the segment id is in each record (after the RDW), e.g. ``(0, 1)``, or the
        name of its field in the Layouts (``"SEGMENT-ID"``); the ids given in ``types``
        are its whole bytes (``"C    "`` for a ``PIC X(5)`` holding ``C``).
    framing : {"rdw", "bdw", "rdw-little"}
        IBM V (RDW: 2-byte big-endian length counting the RDW), VB (BDW blocks of RDW
        records), or an RDW of two zero bytes and a little-endian length not counting
        the RDW (files Cobrix reads with its default ``is_rdw_big_endian=false``).

    short : {"error", "pad"}
        A record shorter than its Layout's last field: a ConversionError, or read with
        zero bytes past its end (``_length`` keeps its length: the way back cuts it).
    signs : bool
        Add a ``_sign.FIELD`` column per packed and zoned field (:func:`keep_signs`: the
        signs the way back would write otherwise, null elsewhere); :func:`write_segments`
        puts them back, so every valid value comes back byte for byte.

    Returns one table per segment id: ``_offset`` (the record's byte offset in the
    file), ``_prefix`` (the RDW bytes the length does not use), ``_length`` (the record's
    length) and the Layout's columns; with ``bdw``, ``"_blocks"`` too (as
    :func:`layouts.read_stream`). A record longer than its Layout is a ConversionError.
    """
    from ._aos import AoS
    from ._stream import read_stream

    if short not in ("error", "pad"):
        raise LayoutError(f"short must be 'error' or 'pad', got {short!r}")
    stream = _segment_stream(types, segment, framing, codepage)
    try:
        tables = read_stream(src, stream)
    except ConversionError as err:
        raise ConversionError(_segment_words(str(err), framing)) from None
    out = {}
    for value, layout in types.items():
        name = _table_name(value)
        raw = tables[name].to_arrow()
        heads, tails = raw.column("_head").to_pylist(), raw.column("_tail").to_pylist()
        offsets = raw.column("_offset").to_numpy()
        records = np.zeros(len(heads), layout.dtype)
        view = records.view(np.uint8).reshape(len(heads), layout.itemsize)
        needed = _needed(layout) if short == "error" else 0
        lengths = np.zeros(len(heads), np.int64)
        for i, (h, t) in enumerate(zip(heads, tails)):
            body = h + (t or b"")
            if len(body) < needed or len(body) > layout.itemsize:
                raise ConversionError(
                    f"segment {value!r}: the record at byte {int(offsets[i])} is {len(body)} bytes; "
                    f"its Layout needs {needed} to {layout.itemsize}"
                    + (" (short='pad' reads it with zeros past its end)" if len(body) < needed else "")
                )
            view[i, : len(body)] = np.frombuffer(body, np.uint8)
            lengths[i] = len(body)
        try:
            table = AoS(records, layout).to_soa().to_arrow()
        except ConversionError as err:
            raise ConversionError(_in_the_file(str(err), value, offsets, src)) from None
        if signs:
            table = keep_signs(table, records, layout)
        table = table.add_column(0, "_length", pa.array(lengths))
        if "_prefix" in raw.column_names:  # the RDW's spare bytes, kept for the way back
            table = table.add_column(0, "_prefix", raw.column("_prefix"))
        out[name] = table.add_column(0, "_offset", pa.array(offsets.astype(np.int64)))
    if "_blocks" in tables:  # BDWs: where each block starts, for the way back
        out["_blocks"] = tables["_blocks"].to_arrow()
    return out


def _in_the_file(message, value, offsets, src):
    """A value's error of one segment's records, with the record and byte in the file (each
    record's data follows its 4-byte RDW) instead of in the segment's own records."""
    import re

    where = f" of {os.fspath(src)}" if isinstance(src, (str, os.PathLike)) else ""

    def place(m):
        row, at = int(m.group(1)), int(m.group(3))
        start = int(offsets[row])
        return f"segment {value!r} record {row}: byte {start + 4 + at:,}{where} (offset {at} in the record at byte {start:,})"

    return re.sub(r"record (\d+): byte (\d+) of the records \(offset (\d+) in the record\)", place, message, count=1)


def _needed(layout):
    """Bytes up to the end of the Layout's last field (a trailing hole is not needed)."""
    holes = layout.holes
    if holes and holes[-1][0] + holes[-1][1] == layout.itemsize:
        return holes[-1][0]
    return layout.itemsize


def _narrowed(table, schema):
    """``table`` with only the columns (and struct fields) of ``schema``: tables read with
    every REDEFINES alternative go back through a Layout that keeps one per set."""
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            raise ConversionError(f"the table has no column {field.name!r}, which the Layout needs")
        columns.append(_narrow(table.column(field.name).combine_chunks(), field.type))
    return pa.table(
        columns, schema=pa.schema([pa.field(f.name, c.type, metadata=f.metadata) for f, c in zip(schema, columns)])
    )


def _narrow(array, wanted):
    if pa.types.is_struct(wanted) and pa.types.is_struct(array.type):
        children, fields = [], []
        for k in range(wanted.num_fields):
            want = wanted.field(k)
            index = array.type.get_field_index(want.name)
            if index < 0:
                raise ConversionError(f"the table's struct has no field {want.name!r}, which the Layout needs")
            children.append(_narrow(array.field(index), want.type))
            fields.append(pa.field(want.name, children[-1].type, metadata=want.metadata))
        return pa.StructArray.from_arrays(children, fields=fields, mask=array.is_null() if array.null_count else None)
    if (
        pa.types.is_fixed_size_list(wanted)
        and pa.types.is_fixed_size_list(array.type)
        and pa.types.is_struct(wanted.value_type)
    ):
        values = _narrow(array.flatten(), wanted.value_type)
        return pa.FixedSizeListArray.from_arrays(values, wanted.list_size)
    return array


def write_segments(tables, types, dst=None, *, segment, framing="rdw", codepage="cp037", overwrite=False):
    """The way back of :func:`read_segments`: records of every segment table, in
    ``_offset`` order, each cut to its ``_length``, framed again (lengths recomputed).
    ``types`` may keep one alternative per REDEFINES set where the tables have several
    (the others' columns are left out). Bytes no field covers (FILLER, skipped
    alternatives) are written as zeros. A table's ``_sign.FIELD`` columns
    (``read_segments(..., signs=True)``) are put into its records (:func:`put_signs`).
    Returns the bytes, or writes them to ``dst`` as :func:`layouts.write_stream` does (an
    existing file replaced only with ``overwrite=True``)."""
    from ._soa import SoA
    from ._stream import write_stream

    stream = _segment_stream(types, segment, framing, codepage)
    offset, size = _segment_place(segment, types)
    head_size = offset + size
    names = {_table_name(value): value for value in types}
    if "_blocks" in tables and framing != "bdw":
        raise ConversionError(
            f"tables holds '_blocks', the blocks of a file read with framing='bdw', but framing is {framing!r}: "
            f"the blocks would be lost; write with framing='bdw', or leave the table out for records without blocks"
        )
    for name in tables:
        if name != "_blocks" and name not in names:
            raise ConversionError(
                f"tables holds {name!r}, which no segment type names (types: {', '.join(names)}); its "
                f"records would be lost: add its type, or leave the table out"
            )
    parts = {}
    for name, value in names.items():
        layout = types[value]
        if name not in tables:
            raise ConversionError(
                f"tables has no table {name!r} for segment type {value!r}; give every type's table "
                f"(as read_segments gives them: an empty one where the file has no such records)"
            )
        table = tables[name]
        for column in ("_offset", "_prefix"):
            if column not in table.column_names:
                raise ConversionError(
                    f"table {name!r} has no column {column!r}, which the way back needs (read_segments "
                    f"gives it: the record's place in the file, the RDW's spare bytes)"
                )
        prefix = table.column("_prefix")
        if prefix.null_count:
            first = int(np.flatnonzero(prefix.is_null().to_numpy(zero_copy_only=False))[0])
            raise ConversionError(
                f"table {name!r}: column '_prefix' has {prefix.null_count} nulls (first at row {first}): each "
                f"row needs its RDW's bytes, as read_segments gave them; give a null row {bytes(4)!r} (the "
                f"lengths are written anew from the records)"
            )
        records = SoA.from_arrow(_narrowed(table, layout.schema), layout).to_aos().array
        kept = [c for c in table.column_names if c.startswith(SIGN_PREFIX)]
        if kept:
            try:
                put_signs(records, table.select(kept), layout)
            except (LayoutError, ConversionError) as err:
                raise type(err)(f"table {name!r}: {err}") from None
        view = records.view(np.uint8).reshape(len(records), layout.itemsize)
        lengths = (
            table.column("_length").to_numpy()
            if "_length" in table.column_names
            else np.full(len(records), layout.itemsize)
        )
        _check_lengths(name, lengths, head_size, layout.itemsize)
        bodies = [view[i, : int(n)].tobytes() for i, n in enumerate(lengths)]
        _check_ids(name, value, bodies, offset, size, codepage)
        parts[name] = pa.table(
            {
                "_offset": table.column("_offset"),
                "_prefix": table.column("_prefix"),
                "_head": pa.array([b[:head_size] for b in bodies], pa.binary(head_size)),
                "_tail": pa.array([b[head_size:] for b in bodies], pa.binary()),
            }
        )
    if "_blocks" in tables:
        parts["_blocks"] = tables["_blocks"]
    return write_stream(parts, stream, dst, overwrite=overwrite)


def _check_lengths(name, lengths, least, most):
    """Each record's ``_length`` within what its Layout's bytes can give (a longer one
    was cut to the record, a shorter one than the segment id failed in Arrow)."""
    bad = np.flatnonzero((lengths < least) | (lengths > most))
    if bad.size:
        row = int(bad[0])
        raise ConversionError(
            f"table {name!r}, row {row}: _length {int(lengths[row])} is not {least} to {most} (the "
            f"segment id's end to the Layout's size); fix the column, or drop it to write whole records"
        )


def _check_ids(name, value, bodies, offset, size, codepage):
    """Every row's segment id bytes are its table's id: a row whose id field says another
    segment was written with this table's id."""
    raw = _id_bytes(value, codepage)
    for row, body in enumerate(bodies):
        if body[offset : offset + size] != raw:
            found = body[offset : offset + size]
            raise ConversionError(
                f"table {name!r}, row {row}: its segment id bytes (offset {offset} of the record) are "
                f"{found.hex(' ').upper()}, not {value!r} ({raw.hex(' ').upper()}); move the row to its "
                f"segment's table, or fix the id field"
            )


# ------------------------------------------------------------------ records as long as their counts
_BOOK_OPTIONS = (
    "record",
    "codepage",
    "names",
    "floating_point",
    "redefines",
    "record_start_offset",
    "record_end_offset",
    "source_format",
    "fillers",
)


_CAP_FROM = 64 << 10  # a record of more bytes at its maximum is laid out with the most elements the data holds
_FIRST_CAP = 16  # ... starting from this many elements a table (doubled while the data holds more)


def _variable(copybook, occurs_mappings, options, caps=None, table=None):
    """``(VariableRecord, Copybook, Layout)`` of the copybook's record. A record of more than
    ``_CAP_FROM`` bytes at its maximum is laid out with its DEPENDING ON tables capped
    (``caps``: ``{table path: elements}``; by default ``_FIRST_CAP`` each): memory and time
    follow the counts the data holds, not the copybook's maximum (``Grow`` asks for more;
    with ``table``, the way back's, the longest of its lists)."""
    from ._cobol import layout_from_copybook, read_capped
    from ._layout import Encoding, Layout
    from ._occurs import VariableRecord, table_caps

    if options.get("flatten"):
        raise LayoutError(
            "flatten=True: records as long as their counts are read as nested tables (their lists are cut "
            "per element); read them without flatten"
        )
    book_options = {k: v for k, v in options.items() if k in _BOOK_OPTIONS}
    book = read_copybook(copybook, **book_options)
    maxima = {path: most for path, _, most in depending_tables(book)}
    if caps is None and maxima and book.dtype.itemsize > _CAP_FROM:
        caps = {path: min(most, _FIRST_CAP) for path, most in maxima.items()}
        if table is not None:
            caps.update(table_caps(table, maxima))
    if caps:
        caps = {path: max(1, n) for path, n in caps.items()}  # (a table of 0 elements has no column)
        book = read_capped(copybook, caps, **book_options)
        layout = layout_from_copybook(Layout.from_dtype, Encoding, copybook, occurs_caps=caps, **options)
    else:
        layout = Layout.from_copybook(copybook, **options)
    var = VariableRecord(book, layout, occurs_mappings, maxima if caps else None)
    var.padding = (int(options.get("record_start_offset") or 0), int(options.get("record_end_offset") or 0))
    return var, book, layout


_FRAMED = "layouts.framing"  # _prefix's field metadata: the framing read_variable read it with
_RDW_KIND = {"rdw": "rdw", "bdw": "rdw", "rdw-little": "rdw-little"}  # the same RDW bytes


def _grown(copybook, occurs_mappings, options, more):
    """:func:`_variable` with the larger caps a record asked for (``more``: a ``Grow``); a
    record too large even so is a ConversionError naming that record."""
    try:
        return _variable(copybook, occurs_mappings, options, more.caps)
    except ConversionError as err:
        raise ConversionError(f"{more.where}: {err}") from None


def _framed_stream(framing):
    from ._stream.spec import BdwSection, Record, RecordType, Section, Stream

    if framing not in _FRAMINGS:
        raise LayoutError(
            f"framing must be None (records back to back), 'rdw', 'bdw' or 'rdw-little' for records as long as "
            f"their counts, got {framing!r}"
        )
    kind = RecordType("records", Record((("_head", "S1"),)))
    if framing == "bdw":
        return Stream((BdwSection((kind,), tail="column"),), name="variable")
    return Stream((Section(_framing(framing), (kind,), tail="column"),), name="variable")


_BLOCKS = b"layouts.bdw_blocks"  # read_variable's BDW blocks, kept in the table's metadata for the way back


def _blocks_metadata(blocks):
    import json

    return {
        _BLOCKS: json.dumps(
            {
                "offset": blocks.column("_offset").to_pylist(),
                "prefix": [p.hex() for p in blocks.column("_prefix").to_pylist()],
            }
        ).encode()
    }


def _blocks_table(table):
    import json

    raw = (table.schema.metadata or {}).get(_BLOCKS)
    if raw is None:
        raise ConversionError(
            "framing='bdw': the table has no block list (read_variable(..., framing='bdw') keeps it in the table's "
            "metadata, which Parquet and Arrow IPC files keep); read the table from the file read_variable wrote"
        )
    doc = json.loads(raw)
    return pa.table(
        {
            "_offset": pa.array(doc["offset"], pa.int64()),
            "_prefix": pa.array([bytes.fromhex(p) for p in doc["prefix"]], pa.binary(4)),
        }
    )


def read_variable(src, copybook, *, framing=None, occurs_mappings=None, **options) -> pa.Table:
    """Records as long as their ``OCCURS DEPENDING ON`` counts make them (Cobrix's
    ``variable_size_occurs=true``): a table's elements past its count are not in the
    record, so the fields after the table move.

    Parameters
    ----------
    src : path, bytes-like (a NumPy array: its elements' bytes) or binary file object
        The records: back to back (``framing=None``, Cobrix's ``record_format=F``), or each
        the body of an RDW (``"rdw"``, ``"rdw-little"``, or ``"bdw"``: blocks of RDW
        records, as :func:`read_segments`).
    copybook : str or path
        The copybook (text or path); ``options`` are :meth:`Layout.from_copybook`'s
        (``record=``, ``codepage=``, ``invalid=``, ``trim=``...; not ``flatten``).
    occurs_mappings : dict, optional
        ``{table name: {text value: count}}``: the count of a table whose DEPENDING ON
        item is text (Cobrix's ``occurs_mappings``), e.g. ``{"DETAIL1": {"A": 0, "B": 1}}``.

    Returns the table of the copybook's record with every DEPENDING ON table a ``list``
    of its count (as :func:`cut_depending_on` gives), with ``_offset`` (each record's
    byte offset) and, with framing, ``_prefix`` (the RDW's spare bytes); with ``"bdw"``
    the blocks' offsets and spare bytes are in the table's schema metadata
    (``layouts.bdw_blocks``), which Parquet and Arrow IPC files keep, for the way back. A count outside
    ``0..max``, no number (or no key of its mapping), or data that ends inside a record is
    a ConversionError naming the record, its byte offset and the count's field.
    """
    from ._occurs import Grow, read_pieces

    var, book, layout = _variable(copybook, occurs_mappings, options)
    src = _contiguous(src)
    prefix = None
    if framing is None:
        from ._stream.read import _check_shrunk
        from .kernels._memory import MappedGuard

        data, label, owner = _source_of(src)
        # a mapped file truncated meanwhile: the gone pages read as zeros (no SIGBUS), and the
        # read is reported as such, whatever else those zeros caused
        mapped = isinstance(owner, mmap.mmap)
        with MappedGuard(data.ctypes.data if mapped and data.nbytes else 0, data.nbytes if mapped else 0) as guard:
            try:
                while True:
                    try:
                        fast = read_pieces(var, data, _variable_schema(var, book, layout))
                        if fast is not None:  # one pass: no maximum-layout copy, no cut
                            table, starts = fast
                        else:
                            starts, lengths = var.scan(data, label=label)
                            table = _variable_table(var, book, layout, data, starts, lengths, label, starts)
                        break
                    except Grow as more:  # a count above its cap: laid out with more elements, read again
                        var, book, layout = _grown(copybook, occurs_mappings, options, more)
            except ConversionError as err:
                _check_shrunk(guard, label, data.nbytes, err)
                _check_size(owner if mapped else None, label, data.nbytes, err)
                raise
            _check_shrunk(guard, label, data.nbytes, None)
            _check_size(owner if mapped else None, label, data.nbytes, None)
        del data, owner
    else:
        data, starts, lengths, raw, blocks = _framed_bodies(src, framing)
        label = _label_of(src)
        offsets = raw.column("_offset").to_numpy()
        prefix = raw.column("_prefix") if "_prefix" in raw.column_names else None
        while True:
            try:
                fast = read_pieces(var, data, _variable_schema(var, book, layout), starts, lengths)
                if fast is not None:
                    table = fast[0]
                else:
                    var.check_framed(data, starts, lengths, offsets, label)
                    table = _variable_table(var, book, layout, data, starts, lengths, label, offsets + 4)  # the bodies'
                break
            except Grow as more:
                var, book, layout = _grown(copybook, occurs_mappings, options, more)
        starts = offsets
    if prefix is not None:  # the framing it was read with: its spare bytes mean nothing in another
        table = table.add_column(0, pa.field("_prefix", prefix.type, metadata={_FRAMED: framing}), prefix)
    if framing == "bdw":
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **_blocks_metadata(blocks)})
    return with_group_conditions(table.add_column(0, "_offset", pa.array(np.asarray(starts, np.int64))), book)


def _framed_bodies(src, framing):
    """``(bodies, starts, lengths, records table, blocks table or None)`` of RDW records:
    their bodies back to back, where each starts and its length, and read_stream's tables."""
    from ._stream import read_stream

    at0 = _position(src)
    try:
        framed = read_stream(src, _framed_stream(framing))
    except ConversionError as err:
        raise _empty_record(err, src, at0, framing) or ConversionError(_framing_words(str(err), framing)) from None
    raw = framed["records"].to_arrow()
    blocks = framed["_blocks"].to_arrow() if "_blocks" in framed else None
    bodies = [h + (t or b"") for h, t in zip(raw.column("_head").to_pylist(), raw.column("_tail").to_pylist())]
    lengths = np.array([len(b) for b in bodies], np.int64)
    starts = np.zeros(len(bodies), np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return np.frombuffer(b"".join(bodies), np.uint8), starts, lengths, raw, blocks


def variable_sign_counts(src, copybook, *, framing=None, occurs_mappings=None, **options) -> "dict[str, int]":
    """:func:`sign_counts` of the records :func:`read_variable` reads (the same arguments):
    ``{field: count}`` of the packed and zoned values, of the elements each record's counts
    hold, whose sign the way back (:func:`write_variable`) writes otherwise. The data is
    read again: give bytes (a path is read whole first, so that it is the data read)."""
    from ._occurs import Grow

    var, book, layout = _variable(copybook, occurs_mappings, options)
    if not sign_fields(layout):
        return {}
    if framing is None:
        if isinstance(src, (str, os.PathLike)):
            with open(src, "rb") as f:
                src = f.read()
        data, label, _ = _source_of(_contiguous(src))
    else:
        data, starts, lengths, raw, _ = _framed_bodies(src, framing)
        label, offsets = _label_of(src), raw.column("_offset").to_numpy()
    while True:
        try:
            if framing is None:
                starts, lengths = var.scan(data, label=label)
            else:  # (the counts checked, as read_variable does: a larger layout where they need it)
                var.check_framed(data, starts, lengths, offsets, label)
            counts: "dict[str, int]" = {}
            step = max(1, _BATCH_BYTES // max(var.size, 1))
            for i in range(0, len(starts), step):
                records = var.spread(data, starts[i : i + step], lengths[i : i + step])
                for name, count in sign_counts(records.view(layout.dtype).reshape(-1), layout).items():
                    counts[name] = counts.get(name, 0) + count
            return counts
        except Grow as more:  # (as read_variable: the layout with more elements)
            var, book, layout = _grown(copybook, occurs_mappings, options, more)


def _position(src):
    """Where a seekable binary file object is (its records start there), else None."""
    try:
        return src.tell() if hasattr(src, "read") and src.seekable() else None
    except (OSError, ValueError, AttributeError):
        return None


def _empty_record(err, src, at0, framing):
    """The ConversionError of an RDW of no body (its length 4, the RDW alone) in
    read_variable's terms: the record's number and byte, as its other messages give; None
    for any other error (or bytes that cannot be read again)."""
    import re

    found = re.search(r"byte (\d+): a variable section\[\d+\] type 'records' record of 4 bytes, shorter", str(err))
    if found is None:
        return None
    byte = int(found.group(1))
    try:
        if isinstance(src, (str, os.PathLike)):
            with open(src, "rb") as f:
                data = f.read(byte)
        elif hasattr(src, "read"):
            if at0 is None:
                return None
            src.seek(at0)
            data = src.read(byte)
        else:
            data = bytes(memoryview(src).cast("B")[:byte])
    except (OSError, ValueError, TypeError):
        return None
    record, at = 0, 0
    blocks = [(0, len(data))]
    if framing == "bdw":  # each block: its BDW (2 bytes of length counting itself, or 4 with the top bit)
        blocks, b = [], 0
        while b + 4 <= len(data):
            n = (
                int.from_bytes(data[b : b + 4], "big") & 0x7FFFFFFF
                if data[b] & 0x80
                else int.from_bytes(data[b : b + 2], "big")
            )
            blocks.append((b + 4, min(b + max(n, 4), len(data))))
            b += max(n, 4)
    for at, end in blocks:
        while at + 4 <= end and at < byte:
            n = (
                int.from_bytes(data[at + 2 : at + 4], "little") + 4
                if framing == "rdw-little"
                else int.from_bytes(data[at : at + 2], "big")
            )
            if n < 4:
                return None
            record, at = record + 1, at + n
    return ConversionError(
        f"{_label_of(src)}: record {record} (byte {byte}): its RDW says 4 bytes, the RDW alone: a record of no bytes, "
        f"which no record of the copybook is (the fields before its first table are in every record); the file is "
        f"damaged, or a record was left empty: fix its RDW, or drop it"
    )


def _segment_words(text, framing):
    """A record stream's message about a segments file in read_segments's terms: segment ids
    and its own arguments, no stream-description keys."""
    import re

    text = _framing_words(text, framing, "read_segments")
    text = re.sub(r" of segments section\[\d+\]", "", text)
    text = re.sub(r"(is no type) \(types: ([^)]*)\)", r"\1 (the ids of types: \2)", text)
    return text.replace(
        'the stream is damaged, or set unknown = "skip" or "keep" in the section',
        "the file is damaged, or give that segment id a Layout in types",
    )


def _framing_words(text, framing, who="read_variable"):
    """A record stream's message about RDWs in read_variable's and write_variable's (or
    ``who``'s) terms: no record type, section or framing settings that these functions do
    not have."""
    import re

    text = re.sub(r"^<buffer>:", "the data:", text)
    text = re.sub(r";? ?the record is type 'records' of variable section\[\d+\]", "", text)
    text = text.replace("the record's length field", "the RDW's length field")
    fix = f"the framing is not {framing!r} ({who}'s framing: 'rdw', 'rdw-little' or 'bdw')"
    text = re.sub(r"wrong framing settings \([^)]*\)", fix, text)
    text = re.sub(r"the framing's length settings \([^)]*\) are wrong", fix, text)
    text = text.replace("(try the rdw framing)", "(try framing='rdw')")
    text = re.sub(r"table 'records', row", "row", text)
    text = re.sub(r"table '_blocks', row (\d+)", r"block \1", text)
    return text.replace("shorten its _tail", "lower its counts")


_BATCH_BYTES = 64 << 20  # read_variable spreads at most this many bytes of maximum-layout records at a time


def _variable_table(var, book, layout, data, starts, lengths, label, at):
    """The records at ``starts`` (``lengths`` bytes) of ``data`` as the table of lists cut to
    their counts: spread into the maximum layout, decoded and cut a batch of records at a
    time, so that the memory the maximum layout takes is bounded (``_BATCH_BYTES``, at
    least one record) however many records the data holds. ``at``: each record's byte in
    ``label`` (the file), for the messages."""
    from ._aos import AoS

    step = max(1, _BATCH_BYTES // max(var.size, 1))
    lead, trail = _padding(var)
    parts = []
    for i in range(0, max(len(starts), 1), step):
        records = var.spread(data, starts[i : i + step], lengths[i : i + step])
        try:
            part = AoS(records.view(layout.dtype).reshape(-1), layout).to_soa().to_arrow()
        except ConversionError as err:
            if getattr(err, "fault", None) is None or layout.fields[err.fault[1]].encoding is None:
                raise
            raise _value_error(var, layout, records, err.fault, i, label, at) from None
        try:
            part = cut_depending_on(part, book, occurs_mappings=var.mappings)
        except ConversionError as err:
            if getattr(err, "count_row", None) is None:
                raise
            raise _null_count_error(var, records, err, i, label, at) from None
        for name, lo_, hi in reversed(((_START, 0, lead), (_END, var.size - trail, var.size))):
            if hi > lo_:  # the bytes record_start_offset/record_end_offset skip, kept for the way back
                cells = np.ascontiguousarray(records[:, lo_:hi]).reshape(-1)
                part = part.add_column(
                    0,
                    name,
                    pa.FixedSizeBinaryArray.from_buffers(
                        pa.binary(hi - lo_), len(records), [None, pa.py_buffer(cells)]
                    ),
                )
        del records
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts, promote_options="permissive")


def _variable_schema(var, book, layout):
    """The schema of :func:`_variable_table`'s tables (of no records: the exact way's)."""
    schema = getattr(var, "_schema", None)
    if schema is None:
        none = np.zeros(0, np.int64)
        schema = var._schema = _variable_table(var, book, layout, np.zeros(0, np.uint8), none, none, "", none).schema
    return schema


def _value_error(var, layout, records, fault, first, label, at):
    """The ConversionError of a field whose bytes are no valid value, at the file's byte and
    the record's own offset (the record as the data holds it, not its maximum layout)."""
    from ._mainframe import _element, forward_message

    row = fault[0]
    f = layout.fields[fault[1]]
    k, off, _, _ = _element(f, records[row].tobytes())
    own = var.offset_in_record(records[row], off)
    own = off if own is None else own
    start = int(at[first + row])
    where = f"{label}: field {f.name!r}, record {first + row} (byte {start})"
    of = "of the data" if label == "the data" else "of the file"
    text = forward_message(f, records.view(layout.dtype).reshape(-1), fault, where, start + own - off, of)
    text = text.replace(f"(offset {off} in the record)", f"(offset {own} in the record)", 1)
    text = text.replace("(Encoding(..., invalid='null'))", "(read_variable(..., invalid='null'))")
    return ConversionError(text)


def _null_count_error(var, records, err, first, label, at):
    """The ConversionError of a count made null (``invalid="null"``: its bytes are no valid
    value of its field, though they are a count), in read_variable's terms."""
    where, counter = err.count_row
    n = int(err.row)
    head = f"{label}: record {first + n} (byte {int(at[first + n])})"
    field = next((f for f in var.book.fields if f.name == counter), None)
    shown = ""
    if field is not None and not field.shape:
        own = var.offset_in_record(records[n], field.offset)
        raw = records[n, field.offset : field.offset + field.width].tobytes().hex(" ").upper()
        shown = f" (bytes {raw} at byte {int(at[first + n]) + (own or 0)})"
    elif field is not None:
        head = f"{label}: records {first}.. (an element of a table)"
    return ConversionError(
        f"{head}: the count {counter} of {where} (OCCURS DEPENDING ON){shown} is not a valid value of its field "
        f"(invalid='null' made it null), so its table cannot be cut to it; fix the record, or read it with "
        f"invalid='error' (the default) to see why its bytes are invalid"
    )


_START, _END = "_record_start", "_record_end"  # the bytes record_start_offset= and record_end_offset= skip


def _check_outer_bytes_written(table, var, framing):
    """A LayoutError if the table holds bytes read from around its records (``_record_start``,
    ``_record_end``, an RDW's ``_prefix``) that these options would not write back: they
    would be lost without a word."""
    lead, trail = _padding(var)
    unused = []
    for name, option, used in ((_START, "record_start_offset", lead), (_END, "record_end_offset", trail)):
        if name in table.column_names and not used:
            width = getattr(table.schema.field(name).type, "byte_width", None)
            unused.append((name, f"{option}={width}" if width else f"{option}=N"))
    if "_prefix" in table.column_names and framing is None:
        read_as = (table.schema.field("_prefix").metadata or {}).get(_FRAMED.encode(), b"").decode() or "rdw"
        unused.append(("_prefix", f"framing={read_as!r}"))
    if unused:
        names = [name for name, _ in unused]
        raise LayoutError(
            f"the table has the columns {names}, bytes read from around each record, which these options do "
            f"not write back: they would be lost; pass the options the table was read with "
            f"({', '.join(option for _, option in unused)}), or drop them from the table (table.drop_columns({names}))"
        )


def _padding(var):
    """``(bytes before, bytes after)`` the copybook's record in every record (the options
    ``record_start_offset`` and ``record_end_offset``)."""
    return var.padding


def _check_size(mapping, label, size, err):
    """A ConversionError when the mapped file is now shorter than when it was mapped: the
    bytes past its new end read as zeros in its last page (no fault), not as the data."""
    try:
        now = mapping.size() if mapping is not None else size
    except (OSError, ValueError):
        return
    if now < size:
        raise ConversionError(
            f"{label}: the file shrank while it was read: it was {size} bytes and is now {now}; the records from "
            f"byte {now} on were gone when read: read it again once whoever writes it is done"
        ) from err


def _padding_bytes(table, name, width):
    """The ``(rows, width)`` bytes of the column ``name`` (read_variable's ``_record_start`` or
    ``_record_end``): the bytes before or after the copybook's record, written back."""
    option = "record_start_offset" if name == _START else "record_end_offset"
    if name not in table.column_names:
        raise ConversionError(
            f"{option}={width}: the table has no column {name!r} ({width} bytes per row), the bytes of each "
            f"record that the copybook does not describe (read_variable gives it); add it (zero bytes if they "
            f"mean nothing) so that they are not made up"
        )
    column = table.column(name).combine_chunks()
    if column.type != pa.binary(width) or column.null_count:
        raise ConversionError(
            f"{option}={width}: the column {name!r} is {column.type}"
            f"{' with nulls' if column.null_count else ''}; it holds {width} bytes per row (fixed_size_binary"
            f"[{width}], as read_variable gives it)"
        )
    raw = np.frombuffer(column.buffers()[1], np.uint8, len(column) * width, column.offset * width)
    return raw.reshape(len(column), width)


def _contiguous(src):
    """``src`` with an array or memoryview whose elements are not back to back (a strided
    view) copied into one that is: the records are the view's bytes, in its order."""
    if isinstance(src, (bool, int, float)) or src is None:
        raise LayoutError(
            f"read_variable reads a path, a bytes-like object or a binary file object, got {type(src).__name__} "
            f"{src!r} (a file descriptor is not read: open the file, or give its path)"
        )
    try:
        if isinstance(src, np.ndarray):
            return np.ascontiguousarray(src).view(np.uint8).reshape(-1)
        if isinstance(src, memoryview) and not src.c_contiguous:
            return np.ascontiguousarray(np.asarray(src)).view(np.uint8).reshape(-1)
    except (TypeError, ValueError) as err:
        raise LayoutError(f"read_variable cannot read the bytes of a {type(src).__name__}: {err}") from None
    return src


def _label_of(src):
    if isinstance(src, (str, os.PathLike)):
        return os.fspath(src)
    name = getattr(src, "name", None) if hasattr(src, "read") else None
    return name if isinstance(name, str) else "the data"


def _source_of(src):
    """``(uint8 array, label for messages, owner to keep alive)`` of a path (memory-mapped),
    a binary file object (read from its current position) or a bytes-like object: the
    stream reader's :func:`layouts._stream.frame._source_bytes`, its errors as LayoutErrors."""
    from ._stream.frame import _source_bytes

    try:
        data, _, owner = _source_bytes(src)
    except ConversionError as err:
        raise LayoutError(str(err).replace("read_stream needs", "read_variable reads")) from None
    return data, _label_of(src), owner


def write_variable(
    table,
    copybook,
    dst=None,
    *,
    framing=None,
    occurs_mappings=None,
    fill=None,
    truncate=False,
    overwrite=False,
    **options,
):
    """The way back of :func:`read_variable`: each row written as long as its counts make
    it, back to back (or each in an RDW, in the blocks read with ``"bdw"``), byte for byte. Every list's length must be its
    count (a ConversionError names the row otherwise: an element would be lost or made
    up). ``fill`` and ``truncate`` as in :meth:`layouts.SoA.from_arrow` (a value for the nulls
    of a field, by its dotted name; cut text longer than its field). Returns the bytes, or
    writes them to ``dst``: a path (a regular file written whole or not at all, one that
    exists replaced only with ``overwrite=True``; a FIFO or a device streamed into) or a
    binary file object, as :func:`layouts.convert`'s destinations."""
    from ._occurs import uncut
    from ._soa import SoA

    var, book, layout = _variable(copybook, occurs_mappings, options, table=table)
    columns = [c for c in table.column_names if not c.startswith("_")]
    if layout.aliases:
        pa_, pb = (x.split(".") for x in layout.aliases[0])
        p = next((i for i, (x, y) in enumerate(zip(pa_, pb)) if x != y), 0)  # the alternatives: the first names apart
        a, b = pa_[p], pb[p]
        drop = f"table.drop_columns([{b!r}])" if p == 0 else f"the field {'.'.join(pb[: p + 1])}"
        raise LayoutError(
            f"{a} and {b} share bytes of the record (REDEFINES), so the way back would write those bytes twice; "
            f"keep one alternative of each REDEFINES set: write_variable(..., redefines={{{a!r}: {a!r}}}), and "
            f"drop the other from the table ({drop})"
        )
    extra = [c for c in columns if c not in layout.dtype.names]
    if extra:
        raise LayoutError(
            f"the table has columns {extra} that the copybook's record, read with these options, does not have "
            f"(its items: {list(layout.dtype.names)}); they would be lost: drop them from the table "
            f"(table.drop_columns({extra})), or pass the options the table was read with (redefines=...)"
        )
    _check_outer_bytes_written(table, var, framing)
    try:
        fixed = uncut(table.select(columns), book, layout, var)
    except ConversionError as err:
        if getattr(err, "count_row", None) is None:
            raise
        where, counter = err.count_row
        what = getattr(err, "value", None) or "null"
        raise ConversionError(
            f"row {err.row}: the count {counter} of {where} (OCCURS DEPENDING ON) is {what}; fix the value"
        ) from None
    records = SoA.from_arrow(fixed, layout, fill=fill or {}, truncate=truncate).to_aos().array
    view = records.view(np.uint8).reshape(len(records), layout.itemsize)
    for name, lo_, hi in ((_START, 0, _padding(var)[0]), (_END, layout.itemsize - _padding(var)[1], layout.itemsize)):
        if hi > lo_:
            view[:, lo_:hi] = _padding_bytes(table, name, hi - lo_)
    out, lengths = var.shrink(view)
    if framing is None:
        data = out.tobytes()
    else:
        from ._stream import write_stream

        if "_prefix" not in table.column_names:
            raise ConversionError("the table has no column '_prefix', which RDW framing needs (read_variable gives it)")
        prefix = table.column("_prefix")
        meta = table.schema.field("_prefix").metadata or {}
        read_as = meta.get(_FRAMED.encode(), b"").decode()
        if read_as and _RDW_KIND.get(read_as) != _RDW_KIND.get(framing):
            # read with another framing: its bytes are that framing's (a little-endian length is
            # no segment control); the new RDWs' spare bytes are zero
            prefix = pa.array([bytes(4)] * len(table), pa.binary(4))
        starts = np.zeros(len(lengths), np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        bodies = [out[s : s + n].tobytes() for s, n in zip(starts.tolist(), lengths.tolist())]
        if any(len(b) == 0 for b in bodies):
            raise ConversionError("a record of no bytes has no RDW form; fix its counts")
        most = 65535 if framing == "rdw-little" else 65531  # a 2-byte length; an IBM RDW counts its own 4 bytes
        if lengths.size and int(lengths.max()) > most:
            row = int(np.argmax(lengths > most))
            raise ConversionError(
                f"row {row}: the record is {int(lengths[row]):,} bytes as its counts make it; an RDW "
                f"(framing={framing!r}) frames at most {most:,} bytes of record (its length field is 2 bytes"
                f"{', and counts the RDW' if most < 65535 else ''}): lower the counts, or write the records "
                f"without framing (framing=None)"
            )
        part = pa.table(
            {
                "_offset": table.column("_offset"),
                "_prefix": prefix,
                "_head": pa.array([b[:1] for b in bodies], pa.binary(1)),
                "_tail": pa.array([b[1:] for b in bodies], pa.binary()),
            }
        )
        parts = {"records": part}
        if framing == "bdw":
            parts["_blocks"] = _blocks_table(table)
        try:
            data = write_stream(parts, _framed_stream(framing), None)
        except ConversionError as err:
            raise ConversionError(_framing_words(str(err), framing)) from None
    if dst is None:
        return data
    from ._files import open_output

    output = open_output(dst, overwrite=overwrite)
    try:
        f = output.records_file()
        f.write(data)
        f.flush()
        if not output.stream:
            f.close()  # (the buffer's; the descriptor stays the output's)
        output.commit()
    except BaseException:
        output.discard()
        raise
    return None
