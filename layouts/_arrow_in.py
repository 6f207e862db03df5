"""Arrow data bound for a record layout: find, check and (only where needed) cast columns."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._errors import ConversionError, LayoutError
from ._plan import ColumnBuffers

_FILLED = ("copy", "bits", "enum")  # kinds whose kernels write a fill value under a null
_STRINGISH = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_string, pa.types.is_large_string)
CASTS = ("strict", "parse")


def check_cast(cast):
    """``cast`` after checking it is one of :data:`CASTS`."""
    if cast not in CASTS:
        raise LayoutError(f"cast must be one of {CASTS}, got {cast!r}")
    return cast


def as_table(obj):
    """A pyarrow.Table from a Table, RecordBatch or any Arrow PyCapsule producer."""
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    try:
        if hasattr(obj, "__arrow_c_stream__"):
            return pa.RecordBatchReader.from_stream(obj).read_all()
        if hasattr(obj, "__arrow_c_array__"):
            return pa.Table.from_batches([pa.record_batch(obj)])
    except pa.ArrowException as err:
        raise ConversionError(f"reading the Arrow data of a {type(obj).__name__} failed: {err}") from err
    raise TypeError(
        f"SoA.from_arrow takes a pyarrow Table/RecordBatch or an object with "
        f"__arrow_c_stream__ or __arrow_c_array__, got {type(obj).__name__}"
    )


def columns_from_arrow(obj, layout, fill, cast="strict"):
    """``(length, per-leaf ColumnBuffers, fills)`` for the layout, from Arrow data.

    Every column the layout uses is checked first (:func:`check_column`): the kernels
    and pyarrow's casts only ever read buffers whose sizes and offsets were checked."""
    check_cast(cast)
    table = as_table(obj)
    unknown = set(fill) - set(layout.names)
    if unknown:
        raise LayoutError(f"fill names {sorted(unknown)}, which are not leaf fields; leaves are {layout.names}")
    try:
        table.validate()
    except pa.ArrowException as err:
        raise ConversionError(f"the Arrow data is not valid Arrow: {err}") from None
    leaves = iter(layout.fields)
    columns, fills = [], {}
    tops, present = layout._arrow_fields(), set(table.column_names)  # column_names is a new list each time
    for top in tops:
        if top.name not in present:
            raise ConversionError(
                f"the Arrow data has no column {top.name!r} (it has {table.column_names}); "
                f"the layout needs {[f.name for f in tops]}"
            )
        chunked = table.column(top.name)
        for chunk in chunked.chunks:
            check_column(chunk, top.name)
        arr = chunked.chunk(0) if chunked.num_chunks == 1 else pa.concat_arrays(chunked.chunks) \
            if chunked.num_chunks else pa.array([], type=chunked.type)
        _descend(arr, top.type, top.name, leaves, columns, fill, fills, cast)
    return table.num_rows, columns, fills


def check_column(arr, name):
    """Check what reading ``arr`` will dereference, or raise ConversionError naming column ``name``.

    Buffer sizes, lengths of children and validity bitmaps are checked for every column
    (``Array.validate()``, constant time); offsets of strings and binaries are checked to
    be ascending and inside the data (one vectorised pass over the offsets, not over the
    bytes; UTF-8 is checked where it matters, by the kernel writing ``U<n>`` fields);
    other columns with offsets or indices (lists, maps, dictionaries, views) get
    pyarrow's full validation. Fixed-width values are not read: any bits are a value.
    On 2,000,000 rows this took 0.2 ms for a string column (1.0 ms for pyarrow's full
    validation of it as binary, 5.5 ms with UTF-8) and nothing measurable for fixed-width
    columns, against 14 ms to write the records.
    """
    try:
        arr.validate()
        if any(test(arr.type) for test in _STRINGISH):
            _check_offsets(arr)
        else:
            arr.validate(full=True)
    except pa.ArrowException as err:
        raise ConversionError(
            f"column {name!r} ({arr.type}, {len(arr)} rows) is not valid Arrow data: {err}; the input is "
            f"damaged or was written wrongly"
        ) from None


def _check_offsets(arr):
    """Offsets of a (large) binary/string array: ascending, from 0 or more, ending inside the data."""
    n = len(arr)
    if n == 0:
        return
    width = 8 if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type) else 4
    _, offsets, data = arr.buffers()
    ends = np.frombuffer(offsets, dtype=f"<i{width}", count=n + 1, offset=arr.offset * width)
    size = 0 if data is None else data.size
    if ends[0] < 0 or ends[-1] > size:
        raise pa.ArrowInvalid(f"its offsets run from {ends[0]} to {ends[-1]}, outside the {size} bytes of data")
    down = ends[1:] < ends[:-1]
    if down.any():
        row = int(np.argmax(down))
        raise pa.ArrowInvalid(f"its offsets go down at row {row} ({ends[row]} then {ends[row + 1]})")


def _descend(arr, arrow_type, name, leaves, columns, fill, fills, cast):
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
        _descend(arr.flatten(), arrow_type.value_type, name, leaves, columns, fill, fills, cast)
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
            _descend(arr.field(index), child.type, f"{name}.{child.name}", leaves, columns, fill, fills, cast)
    else:
        field = next(leaves)
        columns.append(_leaf(arr, field, fill, fills, cast))


def _mismatch(arr, arrow_type, name):
    raise ConversionError(f"column {name!r} has Arrow type {arr.type}; the layout needs {arrow_type}")


def _no_parent_nulls(arr, name, what):
    if arr.null_count:
        raise ConversionError(
            f"column {name!r} has {arr.null_count} null {what} (first at row "
            f"{pc.index(pc.is_null(arr), True).as_py()}); records cannot hold a missing "
            f"{what[:-1]}: fill them first (pyarrow.compute.fill_null) or drop those rows"
        )


def _leaf(arr, field, fill, fills, cast):
    """Check and, only where needed, cast one leaf column; returns its ColumnBuffers."""
    name, kind = field.name, field.kind
    if kind in ("bytes", "cstr", "utf32"):
        if kind == "bytes" and arr.type == field.arrow_type:
            pass
        elif kind == "utf32":
            kind = "utf32"
            if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
                arr = _cast(arr, pa.string(), name, field, cast)
        else:
            kind = "cstr"
            if not any(test(arr.type) for test in _STRINGISH):
                arr = _cast(arr, pa.binary(), name, field, cast)
    elif kind == "enum" or (field.enum and not pa.types.is_integer(arr.type)):
        arr, kind = _enum_column(arr, field)  # names are welcome even with enum_as="int"
    elif arr.type != field.arrow_type:
        arr = _cast(arr, field.arrow_type, name, field, cast)
    if arr.null_count:
        if name in fill and kind in _FILLED:
            fills[name] = fill[name]
        elif name in fill:
            try:
                value = _time_fill(field, fill[name], arr.type)
                if value is not None:
                    arr = pc.fill_null(arr, value if isinstance(value, pa.Scalar) else pa.scalar(value, type=arr.type))
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as err:
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


def _time_fill(field, value, arrow_type):
    """The fill value of a datetime/timedelta field whose column is another time unit
    (``M8[m]`` as ``timestamp[s]``, ``M8[D]`` as ``date32``...) as an Arrow scalar of that
    type; None for NaT (the nulls stay nulls, written as NaT); other fields: ``value``."""
    if field.dtype.kind not in "mM" or not pa.types.is_temporal(arrow_type):
        return value
    given = np.asarray(value)
    if given.dtype.kind not in "mM":  # a number: a count of the field's unit
        given = np.array(value, dtype=field.dtype.newbyteorder("="))
    if np.isnat(given):
        return None
    unit = "D" if pa.types.is_date32(arrow_type) else arrow_type.unit
    count = given.astype(f"{field.dtype.kind}8[{unit}]")
    if count.astype(given.dtype) != given:
        raise ValueError(f"{given} is not a whole number of {unit} (the column's unit)")
    raw = pa.array([int(count.view(np.int64))], pa.int32() if arrow_type.bit_width == 32 else pa.int64())
    return raw.view(arrow_type)[0]


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


def _value_kind(t):
    """What a column of Arrow type ``t`` holds, for :func:`_cast`'s rule that values do
    not change kind by default: ``number``, ``boolean``, ``time``, ``text``, or None
    (all-null columns fit any field; nested types are matched by their leaves)."""
    if pa.types.is_dictionary(t):
        return _value_kind(t.value_type)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_temporal(t):
        return "time"
    if any(test(t) for test in _STRINGISH) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return "text"
    return None


def _cast(arr, target, name, field, cast="strict"):
    """Cast only if no value changes; else a ConversionError naming the column and row.

    With ``cast="strict"`` a column is also never cast to another kind of value (text
    parsed as numbers or times, booleans as integers, numbers as text or times...)."""
    needs = f"field {name!r} ({field.dtype.str}) needs {target}" if field else f"the layout needs {target}"
    have, want = _value_kind(arr.type), _value_kind(target)
    if cast == "strict" and have and want and have != want:
        raise ConversionError(
            f"column {name!r} has Arrow type {arr.type} ({have}); {needs} ({want}), and {have} values are not "
            f"converted to {want} unless asked: pass cast='parse' to convert them "
            f"(still only when every value comes back unchanged), or convert the column first"
        )
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
