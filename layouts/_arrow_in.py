"""Arrow data bound for a record layout: find, check and (only where needed) cast columns."""

import pyarrow as pa
import pyarrow.compute as pc

from ._errors import ConversionError, LayoutError
from ._plan import ColumnBuffers

_FILLED = ("copy", "bits", "enum")  # kinds whose kernels write a fill value under a null
_STRINGISH = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_string, pa.types.is_large_string)


def as_table(obj):
    """A pyarrow.Table from a Table, RecordBatch or any Arrow PyCapsule producer."""
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    if hasattr(obj, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(obj).read_all()
    if hasattr(obj, "__arrow_c_array__"):
        return pa.Table.from_batches([pa.record_batch(obj)])
    raise TypeError(
        f"SoA.from_arrow takes a pyarrow Table/RecordBatch or an object with "
        f"__arrow_c_stream__ or __arrow_c_array__, got {type(obj).__name__}"
    )


def columns_from_arrow(obj, layout, fill):
    """``(length, per-leaf ColumnBuffers, fills)`` for the layout, from Arrow data."""
    table = as_table(obj)
    unknown = set(fill) - set(layout.names)
    if unknown:
        raise LayoutError(f"fill names {sorted(unknown)}, which are not leaf fields; leaves are {layout.names}")
    leaves = iter(layout.fields)
    columns, fills = [], {}
    for top in layout._arrow_fields():
        if top.name not in table.column_names:
            raise ConversionError(
                f"the Arrow data has no column {top.name!r} (it has {table.column_names}); "
                f"the layout needs {[f.name for f in layout._arrow_fields()]}"
            )
        chunked = table.column(top.name)
        arr = chunked.chunk(0) if chunked.num_chunks == 1 else pa.concat_arrays(chunked.chunks) \
            if chunked.num_chunks else pa.array([], type=chunked.type)
        _descend(arr, top.type, top.name, leaves, columns, fill, fills)
    return table.num_rows, columns, fills


def _descend(arr, arrow_type, name, leaves, columns, fill, fills):
    if pa.types.is_fixed_size_list(arrow_type):
        if not pa.types.is_fixed_size_list(arr.type):
            arr = _cast(arr, pa.list_(arr.type.value_type, arrow_type.list_size), name, "") \
                if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) else _mismatch(arr, arrow_type, name)
        if arr.type.list_size != arrow_type.list_size:
            raise ConversionError(
                f"column {name!r} holds lists of {arr.type.list_size}; the field is a sub-array of "
                f"{arrow_type.list_size}"
            )
        _no_parent_nulls(arr, name, "lists")
        _descend(arr.flatten(), arrow_type.value_type, name, leaves, columns, fill, fills)
    elif pa.types.is_struct(arrow_type):
        if not pa.types.is_struct(arr.type):
            _mismatch(arr, arrow_type, name)
        _no_parent_nulls(arr, name, "structs")
        for child in arrow_type:
            index = arr.type.get_field_index(child.name)
            if index < 0:
                raise ConversionError(
                    f"column {name!r} has no child {child.name!r} (it has {[c.name for c in arr.type]})"
                )
            _descend(arr.field(index), child.type, f"{name}.{child.name}", leaves, columns, fill, fills)
    else:
        field = next(leaves)
        columns.append(_leaf(arr, field, fill, fills))


def _mismatch(arr, arrow_type, name):
    raise ConversionError(f"column {name!r} has Arrow type {arr.type}; the layout needs {arrow_type}")


def _no_parent_nulls(arr, name, what):
    if arr.null_count:
        raise ConversionError(
            f"column {name!r} has {arr.null_count} null {what} (first at row "
            f"{pc.index(pc.is_null(arr), True).as_py()}); records cannot hold a missing "
            f"{what[:-1]}: fill them first (pyarrow.compute.fill_null) or drop those rows"
        )


def _leaf(arr, field, fill, fills):
    """Check and, only where needed, cast one leaf column; returns its ColumnBuffers."""
    name, kind = field.name, field.kind
    if kind in ("bytes", "cstr", "utf32"):
        if kind == "bytes" and arr.type == field.arrow_type:
            pass
        elif kind == "utf32":
            kind = "utf32"
            if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
                arr = _cast(arr, pa.string(), name, field)
        else:
            kind = "cstr"
            if not any(test(arr.type) for test in _STRINGISH):
                arr = _cast(arr, pa.binary(), name, field)
    elif kind == "enum" or (field.enum and not pa.types.is_integer(arr.type)):
        arr, kind = _enum_column(arr, field)  # names are welcome even with enum_as="int"
    elif arr.type != field.arrow_type:
        arr = _cast(arr, field.arrow_type, name, field)
    if arr.null_count:
        if name in fill and kind in _FILLED:
            fills[name] = fill[name]
        elif name in fill:
            try:
                arr = pc.fill_null(arr, pa.scalar(fill[name], type=arr.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as err:
                raise ConversionError(f"fill[{name!r}]={fill[name]!r} is not a {arr.type} value: {err}") from err
        elif field.dtype.kind not in "mM":
            first = pc.index(pc.is_null(arr), True).as_py()
            raise ConversionError(
                f"column {name!r} has {arr.null_count} nulls (first at row {first // max(field.count, 1)}), "
                f"but field {name!r} ({field.dtype.str} at offset {field.offset}) cannot hold a null; "
                f"pass fill={{{name!r}: value}} to write a value in their place"
            )
    elif name in fill and kind in _FILLED:
        fills[name] = fill[name]
    if kind == "enum":
        return ColumnBuffers(arr.type, len(arr), *arr.buffers()[:1], None, arr.buffers()[1], arr.offset,
                             kind, arr.dictionary)
    bufs = arr.buffers()
    if len(bufs) == 3:
        validity, offsets, data = bufs
    else:
        (validity, data), offsets = bufs, None
    return ColumnBuffers(arr.type, len(arr), validity, offsets, data, arr.offset, kind)


def _enum_column(arr, field):
    """An enum leaf's column as ``(array, kind)``: dictionary-encoded names with int32
    indices (kind ``enum``; entries are enumerator names or numbers, checked when
    written), or plain integers (kind ``copy``: the values themselves)."""
    if pa.types.is_integer(arr.type):
        return _cast(arr, pa.from_numpy_dtype(field.dtype.newbyteorder("=")), field.name, field), "copy"
    if any(test(arr.type) for test in _STRINGISH):
        arr = pc.dictionary_encode(arr)
    if not pa.types.is_dictionary(arr.type):
        raise ConversionError(
            f"column {field.name!r} has Arrow type {arr.type}; C enum field {field.name!r} takes "
            f"enumerator names (dictionary or string) or integers"
        )
    if arr.type.index_type != pa.int32():
        arr = pa.DictionaryArray.from_arrays(_cast(arr.indices, pa.int32(), field.name, None), arr.dictionary)
    return arr, "enum"


def _cast(arr, target, name, field):
    """Cast only if no value changes; else a ConversionError naming the column and row."""
    needs = f"field {name!r} ({field.dtype.str}) needs {target}" if field else f"the layout needs {target}"
    try:
        out = arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        raise ConversionError(
            f"column {name!r} has Arrow type {arr.type}; {needs}, and casting would change "
            f"values or is not possible: {err}"
        ) from err
    try:
        back = out.cast(arr.type, safe=False)
        same = pc.fill_null(pc.equal(back, arr), True)
        if pa.types.is_floating(arr.type):
            same = pc.or_(same, pc.and_(pc.is_nan(arr), pc.is_nan(back)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return out  # no comparison kernel (nested, binary): the safe cast is the check
    if pc.all(same).as_py() is False:
        row = pc.index(same, False).as_py()
        raise ConversionError(
            f"column {name!r} row {row}: {arr[row].as_py()!r} ({arr.type}) becomes "
            f"{out[row].as_py()!r} as {target}; {needs}: change the field's type or the data"
        )
    return out
