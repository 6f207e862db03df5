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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._cobol import CobolField, Copybook, read_copybook
from ._errors import ConversionError, LayoutError

__all__ = ["CobolField", "Copybook", "read_copybook", "depending_tables", "cut_depending_on"]


def depending_tables(book: Copybook) -> "list[tuple[tuple, str, int]]":
    """``[(path of the table, dotted path of its count field, maximum), ...]`` for every
    ``OCCURS DEPENDING ON`` of the record, outermost first."""
    seen: dict = {}
    for f in book.fields:
        for depth, counter, size in zip(f.dims_at, f.depending_on, f.shape):
            if counter:
                seen.setdefault((f.path[:depth], counter, size), None)
    return sorted(seen, key=lambda t: len(t[0]))


def cut_depending_on(table: pa.Table, book: Copybook, *, flatten: bool = False) -> pa.Table:
    """``table`` (read with ``Layout.from_copybook(..., flatten=flatten)``) with every
    ``OCCURS DEPENDING ON`` column cut to its count: ``fixed_size_list<T>[max]`` becomes
    ``list<T>`` holding the first ``count`` elements of each row.

    A count below 0, above the maximum, or null is a ConversionError naming the row and
    the field. Tables whose count lies inside another table (nested ``DEPENDING ON``)
    are a LayoutError: not supported yet."""
    counters = {f.name: f for f in book.fields}
    tables = depending_tables(book)
    for path, counter, size in tables:
        holder = counters.get(counter)
        if holder is None or holder.shape:
            raise LayoutError(f"{'.'.join(path)} OCCURS DEPENDING ON {counter}, a count inside another table: "
                              f"cutting nested DEPENDING ON tables is not supported yet; read them at their "
                              f"maximum size")
    for path, counter, size in tables:
        counts = _counts(table, counter, flatten, ".".join(path), size)
        if flatten:
            for f in book.fields:
                if f.path[:len(path)] == path and f.name in table.column_names:
                    i = table.column_names.index(f.name)
                    cut = _cut(table.column(i), counts)
                    table = table.set_column(i, pa.field(f.name, cut.type, metadata=table.schema.field(i).metadata),
                                             cut)
        else:
            i = table.column_names.index(path[0])
            column = _replace(table.column(i).combine_chunks(), path[1:], counts)
            table = table.set_column(i, pa.field(path[0], column.type, metadata=table.schema.field(i).metadata),
                                     column)
    return table


def _counts(table, counter, flatten, where, size):
    if flatten:
        column = table.column(counter)
    else:
        first, *rest = counter.split(".")
        column = table.column(first)
        for name in rest:
            column = pc.struct_field(column, name)
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise ConversionError(f"record {row}: the count {counter} of {where} (OCCURS DEPENDING ON) is null (its "
                              f"bytes were invalid); read the table at its maximum size, or fix the record")
    counts = pc.cast(column, pa.int64()).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero((counts < 0) | (counts > size))
    if bad.size:
        row = int(bad[0])
        raise ConversionError(f"record {row}: the count {counter} of {where} (OCCURS DEPENDING ON) is "
                              f"{int(counts[row])}, outside 0..{size}; read the table at its maximum size, or "
                              f"fix the record")
    return counts


def _replace(array, path, counts):
    """``array`` with the fixed-size list at ``path`` (struct names below it) cut."""
    if not path:
        return _cut(array, counts)
    if not pa.types.is_struct(array.type):
        raise LayoutError(f"expected a struct on the way to {'.'.join(path)}, found {array.type}")
    fields = [array.type.field(k) for k in range(array.type.num_fields)]
    children = [array.field(k) for k in range(array.type.num_fields)]
    k = array.type.get_field_index(path[0])
    children[k] = _replace(children[k], path[1:], counts)
    fields[k] = pa.field(fields[k].name, children[k].type, metadata=fields[k].metadata)
    return pa.StructArray.from_arrays(children, fields=fields, mask=array.is_null() if array.null_count else None)


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
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values,
                                    type=pa.list_(array.type.value_field))
