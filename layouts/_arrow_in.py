"""Arrow data bound for a record layout: find, check and (only where needed) cast columns."""

import re
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._errors import ConversionError, LayoutError, Problems, merge_fixes
from ._plan import ColumnBuffers, null_bits

_FILLED = ("copy", "bits", "enum")  # kinds whose kernels write a fill value under a null
_STRINGISH = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_string, pa.types.is_large_string)
CASTS = ("strict", "parse")
TIME_UNITS = ("s", "ms", "us", "ns")
_UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
# a unit at the end of a field's name, after "_" or ".": ts_ns, t_us, elapsed_ms, epoch_sec, at.nanos
_NAMED_UNIT = re.compile(r"[_.](s|secs?|ms|msecs?|millis|us|usecs?|micros|ns|nsecs?|nanos)$", re.I)
_UNIT_WORDS = {
    "s": "s",
    "sec": "s",
    "secs": "s",
    "ms": "ms",
    "msec": "ms",
    "msecs": "ms",
    "millis": "ms",
    "us": "us",
    "usec": "us",
    "usecs": "us",
    "micros": "us",
    "ns": "ns",
    "nsec": "ns",
    "nsecs": "ns",
    "nanos": "ns",
}


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
    except (pa.ArrowException, ValueError) as err:
        _duplicate_columns(obj)
        raise ConversionError(f"reading the Arrow data of a {type(obj).__name__} failed: {err}") from err
    raise TypeError(
        f"SoA.from_arrow takes a pyarrow Table/RecordBatch or an object with "
        f"__arrow_c_stream__ or __arrow_c_array__, got {type(obj).__name__}"
    )


def _duplicate_columns(obj):
    """A LayoutError naming the repeated names of a data frame's columns, which its Arrow
    export refuses (pandas: ValueError), as the Table path names them; else nothing."""
    try:
        names = [str(c) for c in obj.columns]
    except Exception:  # noqa: BLE001 - not a data frame, or one that cannot list them: the caller's error
        return
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        where = {n: [i for i, m in enumerate(names) if m == n] for n in twice}
        raise LayoutError(
            f"the {type(obj).__name__} has "
            + ", ".join(f"{len(at)} columns named {n!r} (columns {at})" for n, at in where.items())
            + f" of {names}; a field is found by name, which would not say which one to read: rename all but one "
            f"first (pandas: df.columns = [...]), or drop the ones not meant"
        )


def columns_from_arrow(obj, layout, fill, cast="strict", time_unit=None, extra="error", truncate=None):
    """``(length, per-leaf ColumnBuffers, fills)`` for the layout, from Arrow data.

    Every column the layout uses is checked first (:func:`check_column`): the kernels
    and pyarrow's casts only ever read buffers whose sizes and offsets were checked.
    Every column that does not fit the layout (missing, extra, a type or unit that needs
    an option, nulls with no fill) is reported in one ConversionError, each with its fix
    (:class:`Problems`). With ``truncate=False`` a string longer than its field is one of
    those problems (``None``: not checked here, the kernel refuses it when writing)."""
    check_cast(cast)
    drop = check_extra(extra)
    table = as_table(obj)
    unknown = set(fill) - set(layout.names)
    if unknown:
        raise LayoutError(f"fill names {sorted(unknown)}, which are not leaf fields; leaves are {layout.names}")
    check = _Check(fill, cast, time_units(time_unit, layout), drop)
    check.truncate = truncate
    try:
        table.validate()
    except pa.ArrowException as err:
        raise ConversionError(f"the Arrow data is not valid Arrow: {err}") from None
    leaves = iter(layout.fields)
    columns, fills = [], check.fills
    tops, present = layout._arrow_fields(), set(table.column_names)  # column_names is a new list each time
    names = {top.name for top in tops}  # once: a set per column made 10,000 columns cost 26 s
    check.stored = _stored_units(table.schema)
    kept = sorted(drop & names) if isinstance(drop, set) else []
    if kept:
        raise LayoutError(
            f"extra names {kept}, which the layout has: only columns the layout does not have are dropped"
        )
    check.extras([c for c in table.column_names if c not in names], "the Arrow data", [f.name for f in tops])
    marked = _encoding_marked(table.schema)
    floats_told = _check_floats(table.schema, layout, check)
    by_field: list = []  # per leaf, its column, or None where its top-level column has a problem
    for top in tops:
        group = [next(leaves) for _ in range(_leaf_count(top.type))]
        had, first = len(check.problems.items), len(columns)
        by_field += [None] * len(group)
        if top.name in present and marked:
            _check_encodings(table.schema.field(top.name), group, check, floats=not floats_told)
        if top.name not in present:
            check.problems.add(
                top.name,
                ConversionError(
                    f"the Arrow data has no column {top.name!r} (it has {table.column_names}); "
                    f"the layout needs {[f.name for f in tops]}"
                ),
            )
            continue
        chunked = table.column(top.name)
        for chunk in chunked.chunks:
            check_column(chunk, top.name)
        arr = (
            chunked.chunk(0)
            if chunked.num_chunks == 1
            else pa.concat_arrays(chunked.chunks)
            if chunked.num_chunks
            else pa.array([], type=chunked.type)
        )
        try:
            _descend(arr, top.type, top.name, iter(group), columns, fill, fills, cast, check)
        except ConversionError as err:
            check.problems.add(top.name, err)
        if len(check.problems.items) == had and len(columns) - first == len(group):
            by_field[len(by_field) - len(group) :] = columns[first:]
    if check.problems.items:
        said = check.problems.error()
        said.prepared = (table.num_rows, by_field, fills)  # (what the columns without a problem became)
        raise said
    return table.num_rows, columns, fills


def _leaf_count(arrow_type):
    """Leaf fields under a (top-level) Arrow field of the layout."""
    if pa.types.is_fixed_size_list(arrow_type):
        return _leaf_count(arrow_type.value_type)
    if pa.types.is_struct(arrow_type):
        return sum(_leaf_count(child.type) for child in arrow_type)
    return 1


def check_extra(extra):
    """``extra`` as ``"error"``, ``"drop"`` or a set of column names that may be dropped."""
    if isinstance(extra, str):
        if extra not in ("error", "drop"):
            raise LayoutError(f"extra must be 'error', 'drop' or a list of column names to drop, got {extra!r}")
        return set() if extra == "error" else extra
    try:
        names = set(extra)
    except TypeError:
        raise LayoutError(f"extra must be 'error', 'drop' or a list of column names to drop, got {extra!r}") from None
    if not all(isinstance(n, str) for n in names):
        raise LayoutError(f"extra must be 'error', 'drop' or a list of column names to drop, got {extra!r}")
    return names


def name_unit(name):
    """The time unit a field's name ends in (``ts_ns`` -> ``"ns"``), or None."""
    m = _NAMED_UNIT.search(name)
    return _UNIT_WORDS[m.group(1).lower()] if m else None


def time_units(time_unit, layout):
    """``{leaf name: unit or "name"}`` (and ``None``: the one for every other leaf) from
    ``time_unit``: None, a unit or ``"name"`` for every field, or ``{field: unit or "name"}``."""
    allowed = TIME_UNITS + ("name",)
    if time_unit is None:
        return {}
    if isinstance(time_unit, str):
        if time_unit not in allowed:
            raise LayoutError(f"time_unit must be one of {allowed} or {{field: unit}}, got {time_unit!r}")
        return {None: time_unit}
    try:
        items = dict(time_unit).items()
    except (TypeError, ValueError):
        raise LayoutError(f"time_unit must be one of {allowed} or {{field: unit}}, got {time_unit!r}") from None
    fields = {f.name: f for f in layout.fields}
    out = {}
    for name, unit in items:
        field = fields.get(name)
        if field is None:
            raise LayoutError(f"time_unit names {name!r}, which is not a leaf field; leaves are {layout.names}")
        if unit not in allowed:
            raise LayoutError(f"time_unit[{name!r}] must be one of {allowed}, got {unit!r}")
        if field.enum or field.kind == "bool" or field.dtype.kind not in "iumM":
            raise LayoutError(
                f"time_unit names field {name!r} ({field.dtype.str}), but a time unit applies to "
                f"integer fields (times written as counts) and datetime fields (integers read as "
                f"counts)"
            )
        out[name] = unit
    return out


def _problem(text, **fix):
    """A ConversionError that carries the keyword arguments that fix it (see :class:`Problems`)."""
    err = ConversionError(text)
    err.fix = fix
    return err


class _Check:
    """What checking one Arrow input against a layout needs: the options, and the problems found."""

    def __init__(self, fill=None, cast="strict", units=None, drop=None):
        self.fill, self.cast, self.units, self.drop = fill or {}, cast, units or {}, drop or set()
        self.fills, self.problems = {}, Problems()
        self.truncate = None  # False: strings longer than their field are problems (fix: truncate=True)
        self.stored = {}  # {column: the datetime64/timedelta64 dtype its int64 counts are (to_arrow's metadata)}

    def extras(self, names, where, wanted):
        """Columns (or struct children) ``names`` the layout does not have: a problem unless dropped."""
        left = [] if self.drop == "drop" else list(dict.fromkeys(n for n in names if n not in self.drop))
        if left:
            said = f"columns {left}" if len(left) > 1 else f"a column {left[0]!r}"
            self.problems.add(
                left[0],
                _problem(
                    f"{where} has {said} that the layout does not have "
                    f"(it has {wanted}), which would be lost: pass extra={left!r} to drop "
                    f"{'them' if len(left) > 1 else 'it'}, or change the layout",
                    extra=left,
                ),
            )

    def unit(self, field):
        """The unit ``time_unit`` gives ``field`` (``"name"`` read from its name), or None."""
        unit = self.units.get(field.name, self.units.get(None))
        if unit != "name":
            return unit
        named = name_unit(field.name)
        if named is None:
            raise _problem(
                f"time_unit='name' takes field {field.name!r}'s unit from its name, but the name ends in no unit "
                f"(like ts_ns, t_us, t_ms, t_s): pass time_unit={{{field.name!r}: 'UNIT'}}, the unit it counts "
                f"(s, ms, us or ns)",
                time_unit={field.name: "UNIT"},
            )
        return named


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


def _descend(arr, arrow_type, name, leaves, columns, fill, fills, cast, check=None):
    if pa.types.is_fixed_size_list(arrow_type):
        if not pa.types.is_fixed_size_list(arr.type):
            arr = (
                _cast(arr, pa.list_(arr.type.value_type, arrow_type.list_size), name, "")
                if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)
                else _mismatch(arr, arrow_type, name)
            )
        if arr.type.list_size != arrow_type.list_size:
            raise ConversionError(
                f"column {name!r} holds lists of {arr.type.list_size}; the field is a sub-array of "
                f"{arrow_type.list_size}"
            )
        _no_parent_nulls(arr, name, "lists")
        _descend(arr.flatten(), arrow_type.value_type, name, leaves, columns, fill, fills, cast, check)
    elif pa.types.is_struct(arrow_type):
        if not pa.types.is_struct(arr.type):
            _mismatch(arr, arrow_type, name)
        _no_parent_nulls(arr, name, "structs")
        if check is not None:
            wanted = {c.name for c in arrow_type}
            check.extras(
                [f"{name}.{c.name}" for c in arr.type if c.name not in wanted],
                f"column {name!r}",
                [c.name for c in arrow_type],
            )
        for child in arrow_type:
            index = arr.type.get_field_index(child.name)
            if index < 0:
                raise ConversionError(
                    f"column {name!r} has no child {child.name!r} (it has {[c.name for c in arr.type]})"
                )
            _descend(arr.field(index), child.type, f"{name}.{child.name}", leaves, columns, fill, fills, cast, check)
    else:
        field = next(leaves)
        columns.append(_leaf(arr, field, fill, fills, cast, check))


_ENCODING = b"layouts.encoding"


def _schema_leaves(field, name=None):
    """``(name, field)`` of each leaf of an Arrow field, in the layout's order (structs'
    children in turn; a list's metadata is its field's)."""
    name = name or field.name
    t = field.type
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        t = t.value_type
    if not pa.types.is_struct(t):
        yield name, field
        return
    for child in t:
        yield from _schema_leaves(child, f"{name}.{child.name}")


def _encoding_marked(schema):
    """Whether any column of the Arrow data says how it was read (the ``layouts.encoding``
    metadata that ``to_arrow`` writes for a mainframe field): data a mainframe layout made."""
    return any(_ENCODING in (f.metadata or {}) for top in schema for _, f in _schema_leaves(top))


def _check_floats(schema, layout, check):
    """A problem if the data's COMP-1/COMP-2 columns were read as one float format (the
    schema's ``cobol.floating_point``, from the copybook layout that read them) and the
    layout writes the other. Returns whether the schema says the format (then the columns'
    own metadata is not looked at for it)."""
    stored = (schema.metadata or {}).get(b"cobol.floating_point", b"").decode(errors="replace")
    writes = layout.cobol_floats
    if stored and writes and stored != writes:
        names = [f.name for f in layout.fields if f.dtype.kind == "f" or (f.encoding and f.encoding.kind == "hfloat")]
        formats = {"ibm": "IBM hexadecimal", "ieee": "IEEE"}
        check.problems.add(
            names[0] if names else None,
            ConversionError(
                f"the Arrow data's COMP-1/COMP-2 columns {names} were read as {formats.get(stored, stored)} "
                f"floating point (its cobol.floating_point metadata), but the layout writes "
                f"{formats.get(writes, writes)}: every value's bytes would change; make the layout with "
                f"floating_point={stored!r} (Layout.from_copybook), or drop the schema's metadata to write "
                f"{formats.get(writes, writes)} on purpose"
            ),
        )
    return bool(stored)


def _check_encodings(top, group, check, floats=True):
    """A problem for each leaf whose bytes the layout would write in another code page or
    float format than the one its column says it was read with (its ``layouts.encoding``
    metadata): the defaults of ``Layout.from_copybook`` would otherwise change every such
    byte without a word. Only where the data carries that metadata (``_encoding_marked``);
    the float format only with ``floats`` (the schema does not say it)."""
    import json

    leaves = list(_schema_leaves(top))
    if len(leaves) != len(group):
        return  # (not the layout's shape: the column's own check says so)
    for (name, arrow_field), field in zip(leaves, group):
        text = (arrow_field.metadata or {}).get(_ENCODING)
        try:
            read = json.loads(text) if text is not None else None
        except ValueError:
            continue  # (damaged metadata says nothing)
        if not isinstance(read, dict):
            read = None
        enc = field.encoding
        was_ibm = read is not None and read.get("kind") == "hfloat"
        writes_ibm = enc is not None and enc.kind == "hfloat"
        if (field.dtype.kind == "f" or writes_ibm) and floats:
            if was_ibm != writes_ibm:
                read_as, write_as = ("IBM hexadecimal", "IEEE") if was_ibm else ("IEEE", "IBM hexadecimal")
                fix = "ibm" if was_ibm else "ieee"
                check.problems.add(
                    name,
                    ConversionError(
                        f"column {name!r} holds floats read from {read_as} floating point (its "
                        f"{_ENCODING.decode()} metadata says how it was read), but the layout writes "
                        f"{write_as}: every value's bytes would change; make the layout with "
                        f"floating_point={fix!r} (Layout.from_copybook), or drop the column's metadata to "
                        f"write {write_as} on purpose"
                    ),
                )
        elif enc is not None and enc.kind == "text" and read is not None and read.get("kind") == "text":
            if read.get("codepage") != enc.codepage:
                check.problems.add(
                    name,
                    ConversionError(
                        f"column {name!r} holds text read from code page {read.get('codepage')} (its "
                        f"{_ENCODING.decode()} metadata), but the layout writes code page {enc.codepage}: "
                        f"characters would come back as other bytes; make the layout with "
                        f"codepage={read.get('codepage')!r} (Layout.from_copybook), or drop the column's "
                        f"metadata to write {enc.codepage} on purpose"
                    ),
                )


def _mismatch(arr, arrow_type, name):
    raise ConversionError(f"column {name!r} has Arrow type {arr.type}; the layout needs {arrow_type}")


def _no_parent_nulls(arr, name, what):
    if arr.null_count:
        raise ConversionError(
            f"column {name!r} has {arr.null_count} null {what} (first at row "
            f"{pc.index(pc.is_null(arr), True).as_py()}); records cannot hold a missing "
            f"{what[:-1]}: fill them first (pyarrow.compute.fill_null) or drop those rows"
        )


def _exactly(scalar, value, name, arrow_type):
    """Refuse a fill value that pyarrow made another one (1.5 into int64 is 1)."""
    if isinstance(value, (bool, str, bytes)) or not isinstance(value, (int, float, Decimal, np.number)):
        return
    got = scalar.as_py()
    if got != value and not (value != value and got != got):  # (NaN is NaN)
        raise ValueError(f"it would be written as {got!r}; give a value the field holds exactly")


def _leaf(arr, field, fill, fills, cast, check=None):
    """Check and, only where needed, cast one leaf column; returns its ColumnBuffers.

    With ``check`` (:class:`_Check`), a column with nulls and no fill and a column whose
    type does not fit are both reported (one ConversionError for the column either way)."""
    name, kind = field.name, field.kind
    problems = Problems()
    nulls = arr.null_count
    try:
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
        elif field.encoding is not None:
            arr = _mainframe_column(arr, field, cast)
        elif kind == "enum" or (field.enum and not pa.types.is_integer(arr.type)):
            arr, kind = _enum_column(arr, field)  # names are welcome even with enum_as="int"
        elif _scales_to_raw(arr.type, field, check or _Check()):
            arr = _raw_counts(arr, field, check or _Check())
        elif _counts_of_time(arr.type, field):
            arr = _time_counts(arr, field, cast, check or _Check())
        elif arr.type != field.arrow_type:
            arr = _cast(arr, field.arrow_type, name, field, cast)
    except ConversionError as err:
        if check is None:
            raise
        problems.add(name, err)
    if check is not None and check.truncate is False and kind in ("cstr", "utf32", "text") and not problems.items:
        too_long = _too_long(arr, field, kind)
        if too_long is not None:
            problems.add(name, too_long)
    if nulls and not problems.items:
        nulls = arr.null_count  # (a cast keeps the nulls it was given)
    if name in fill and kind in _FILLED and not problems.items:
        try:  # (the value the kernel writes under a null: checked here, with the other columns' problems)
            null_bits(field, fill[name], "fill")
        except ConversionError as err:
            problems.add(name, err)
    if nulls:
        if name in fill and kind in _FILLED:
            fills[name] = fill[name]
        elif name in fill:
            if not problems.items:
                try:
                    value = _time_fill(field, fill[name], arr.type)
                    if value is not None:
                        scalar = value if isinstance(value, pa.Scalar) else pa.scalar(value, type=arr.type)
                        _exactly(scalar, value, name, arr.type)
                        arr = pc.fill_null(arr, scalar)
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as err:
                    problems.add(
                        name, ConversionError(f"fill[{name!r}]={fill[name]!r} is not a {arr.type} value: {err}")
                    )
        elif field.dtype.kind not in "mM":
            first = pc.index(pc.is_null(arr), True).as_py()
            problems.add(
                name,
                _problem(
                    f"column {name!r} has {nulls} nulls (first at row {first // max(field.count, 1)}), "
                    f"but field {name!r} ({field.dtype.str} at offset {field.offset}) cannot hold a null; "
                    f"pass fill={{{name!r}: value}} to write a value in their place",
                    fill={name: "value"},
                ),
            )
    elif name in fill and kind in _FILLED:
        fills[name] = fill[name]
    if problems.items:
        if len(problems.items) == 1:
            raise problems.items[0][1]
        errs = [err for _, err in problems.items]
        raise _problem("; and ".join(map(str, errs)), **merge_fixes([getattr(err, "fix", None) or {} for err in errs]))
    if kind == "enum":
        return ColumnBuffers(
            arr.type, len(arr), *arr.buffers()[:1], None, arr.buffers()[1], arr.offset, kind, arr.dictionary
        )
    bufs = arr.buffers()
    if len(bufs) == 3:
        validity, offsets, data = bufs
    else:
        (validity, data), offsets = bufs, None
    return ColumnBuffers(arr.type, len(arr), validity, offsets, data, arr.offset, kind)


def _mainframe_column(arr, field, cast):
    """A column for a mainframe field: text as string (large_string kept); a decimal
    field's decimal128 of the field's scale as it is, whatever its precision (the kernels
    check every value against the PICTURE); anything else cast to the field's type."""
    want = field.arrow_type
    if field.kind == "text":
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            return arr
        return _cast(arr, pa.string(), field.name, field, cast)
    if pa.types.is_decimal128(want) and pa.types.is_decimal128(arr.type) and arr.type.scale == want.scale:
        return arr
    if arr.type == want:
        return arr
    return _cast(arr, want, field.name, field, cast)


def _too_long(arr, field, kind):
    """The problem (fix: ``truncate=True``) of the first string of ``arr`` longer than
    ``field`` (bytes; characters for ``U<n>``), or None when every one fits."""
    width = field.width // 4 if kind == "utf32" else field.width
    try:
        lengths = pc.utf8_length(arr) if kind in ("utf32", "text") else pc.binary_length(arr)
        longest = pc.max(lengths).as_py()
        if longest is None or longest <= width:
            return None
        row = pc.index(pc.greater(lengths, width), True).as_py()
        length = lengths[row].as_py()
    except (pa.ArrowException, NotImplementedError):
        return None  # the kernel still refuses it when writing
    try:
        value = arr[row].as_py()
    except (UnicodeDecodeError, pa.ArrowException):  # damaged text: its bytes (the UTF-8 check names it)
        value = pc.cast(arr.slice(row, 1), pa.large_binary())[0].as_py() if hasattr(arr, "slice") else b""
    shown = repr(value if len(value) <= 40 else value[:40]) + ("..." if len(value) > 40 else "")
    unit = "characters" if kind in ("utf32", "text") else "bytes"
    longer = "" if longest == length else f"; the longest value has {longest}"
    return _problem(
        f"column {field.name!r}, row {row // max(field.count, 1)}: {shown} ({length} {unit}) is longer "
        f"than field {field.name!r} ({field.dtype.str} at offset {field.offset}, {width} {unit}{longer}): "
        f"pass truncate=True to cut such values to {width} {unit}, or change the field's width",
        truncate=True,
    )


def _counts_of_time(arrow_type, field):
    """Whether a column of ``arrow_type`` meets ``field`` as times and counts: a time
    column for an integer field, or an integer column for a datetime field."""
    if field.enum or field.kind == "bool":
        return False
    if field.dtype.kind in "iu":
        return _value_kind(arrow_type) == "time" and not pa.types.is_dictionary(arrow_type)
    return field.dtype.kind in "mM" and pa.types.is_temporal(field.arrow_type) and pa.types.is_integer(arrow_type)


# A unit's size: (seconds, length) for fixed units, (months, length) for months and years.
_UNIT_SIZES = {
    "as": ("s", Fraction(1, 10**18)),
    "fs": ("s", Fraction(1, 10**15)),
    "ps": ("s", Fraction(1, 10**12)),
    "ns": ("s", Fraction(1, 10**9)),
    "us": ("s", Fraction(1, 10**6)),
    "ms": ("s", Fraction(1, 1000)),
    "s": ("s", Fraction(1)),
    "m": ("s", Fraction(60)),
    "h": ("s", Fraction(3600)),
    "D": ("s", Fraction(86400)),
    "W": ("s", Fraction(604800)),
    "M": ("months", Fraction(1)),
    "Y": ("months", Fraction(12)),
}
_INT64_MAX = 2**63 - 1


def _raw_time(field):
    """Whether ``field`` is a datetime/timedelta whose unit Arrow has no type for (ps, fs,
    as; timedelta months and years): its column is ``int64`` counts of the field's unit."""
    return field.dtype.kind in "mM" and not field.enum and field.arrow_type == pa.int64()


def _source_unit(arrow_type, field, check):
    """``(unit, count)`` that the values of a column of ``arrow_type`` count, for a
    :func:`_raw_time` field; None when they are the field's own counts (an integer column
    with no ``time_unit`` for the field) or not times at all."""
    if pa.types.is_dictionary(arrow_type):
        return _source_unit(arrow_type.value_type, field, check)
    if pa.types.is_timestamp(arrow_type) or pa.types.is_duration(arrow_type) or pa.types.is_time(arrow_type):
        return arrow_type.unit, 1
    if pa.types.is_date32(arrow_type):
        return "D", 1
    if pa.types.is_date64(arrow_type):
        return "ms", 1
    if pa.types.is_integer(arrow_type):
        unit = check.unit(field)
        if unit is not None:
            return unit, 1
        stored = check.stored.get(field.name)
        if stored is not None and stored != field.dtype.newbyteorder("="):
            return np.datetime_data(stored)
    return None


def _scales_to_raw(arrow_type, field, check):
    """Whether :func:`_raw_counts` writes the column: a :func:`_raw_time` field from a
    time column or counts of a named unit, or a datetime field of an Arrow unit from
    int64 counts that ``to_arrow`` marked as another unit (``layouts.dtype``)."""
    if not _raw_time(field):
        exact = (
            field.dtype.kind in "mM"
            and not field.enum
            and pa.types.is_integer(arrow_type)
            and check.stored.get(field.name) is not None
            and check.unit(field) is None
            and getattr(field.arrow_type, "unit", None) == np.datetime_data(field.dtype)[0]
            and np.datetime_data(field.dtype)[1] == 1
        )
        if not exact:
            return False
    return _source_unit(arrow_type, field, check) is not None


def _stored_units(schema):
    """``{column: dtype}`` for int64 columns that ``to_arrow`` wrote from datetime64 or
    timedelta64 fields Arrow has no unit for (the field metadata ``layouts.dtype``)."""
    out = {}
    for f in schema:
        text = (f.metadata or {}).get(b"layouts.dtype")
        if text is not None and pa.types.is_integer(f.type):
            try:
                dtype = np.dtype(text.decode())
            except (TypeError, ValueError, UnicodeDecodeError):
                continue
            if dtype.kind in "mM" and np.datetime_data(dtype)[0] in _UNIT_SIZES:
                out[f.name] = dtype.newbyteorder("=")
    return out


def _raw_counts(arr, field, check):
    """A time column (or an integer column with ``time_unit``) as int64 counts of a
    :func:`_raw_time` field's unit, scaled exactly (``timestamp[ns]`` into ``M8[ps]``:
    x1000); a ConversionError naming the row of a value that does not fit or is not a
    whole number of the unit, and for units that cannot be compared (seconds and months)."""
    name, t = field.name, arr.type
    if pa.types.is_dictionary(t):
        arr, t = arr.dictionary_decode(), t.value_type
    unit, count = _source_unit(t, field, check)
    want, wcount = np.datetime_data(field.dtype)
    stamp = field.dtype.kind == "M"
    stored = pa.types.is_integer(t) and check.unit(field) is None
    if stored:
        given = f"{t} counts of {check.stored[name]} (its layouts.dtype metadata, from to_arrow)"
    else:
        given = f"integers counted in {_UNIT_NAMES[unit]}" if pa.types.is_integer(t) else f"Arrow type {t}"
    wanted = f"field {name!r} ({field.dtype.str}, counts of {wcount}{want})"
    if stored and check.stored[name].kind != field.dtype.kind:
        raise ConversionError(
            f"column {name!r} holds {given}; {wanted} holds "
            f"{'points in time' if stamp else 'durations'}: change the field's type or the data"
        )
    if (
        pa.types.is_time(t)
        or (stamp and pa.types.is_duration(t))
        or (not stamp and (pa.types.is_timestamp(t) or pa.types.is_date(t)))
    ):
        what = "times of day" if pa.types.is_time(t) else "durations" if pa.types.is_duration(t) else "points in time"
        raise ConversionError(
            f"column {name!r} has {given} ({what}); {wanted} holds "
            f"{'points in time' if stamp else 'durations'}: change the field's type or the data"
        )
    (base, size), (wbase, wsize) = _UNIT_SIZES[unit], _UNIT_SIZES[want]
    if base != wbase:
        raise ConversionError(
            f"column {name!r} has {given}; {wanted} counts {'months' if wbase == 'months' else 'fixed units'}, and "
            f"a month or a year is not a whole number of seconds, so no value can be converted exactly: write the "
            f"counts of the field's unit as int64 (what to_arrow writes), or change the field's type"
        )
    factor = (size * count) / (wsize * wcount)
    ints = arr if pa.types.is_integer(t) else arr.view(pa.int32() if t.bit_width == 32 else pa.int64())
    values = np.asarray(pc.fill_null(ints, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    valid = (
        np.ones(len(arr), bool)
        if arr.null_count == 0
        else np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), bool)
    )
    limit = _INT64_MAX // factor.numerator
    big = valid & ((values > limit) | (values < -limit))
    scaled = values * factor.numerator if not big.any() else values
    part = valid & (scaled % factor.denominator != 0) if factor.denominator != 1 else np.zeros(len(arr), bool)
    if big.any() or part.any():
        row = int(np.argmax(big | part))
        why = (
            f"more than {_INT64_MAX} counts of {want} (int64) when scaled by {factor.numerator}"
            if big[row]
            else f"not a whole number of {wcount}{want}"
        )
        raise ConversionError(
            f"column {name!r} row {row // max(field.count, 1)}: {int(values[row])} {unit} ({given}) is {why}, so "
            f"{wanted} cannot hold it exactly: change the field's unit or the data"
        )
    scaled = scaled // factor.denominator
    out = pa.array(scaled, pa.int64(), mask=None if arr.null_count == 0 else ~valid)
    return out if field.arrow_type == pa.int64() else out.view(field.arrow_type)


def _time_counts(arr, field, cast, check):
    """A time column as counts of the unit ``time_unit`` names for an integer field, or
    an integer column as counts of that unit for a datetime field; a ConversionError
    (whatever ``cast``) when no unit was named: a count's unit is never guessed."""
    name, t = field.name, arr.type
    unit = check.unit(field)
    to_ints = field.dtype.kind in "iu"
    if unit is None:
        named = name_unit(name)
        suggest = named or (None if to_ints else np.datetime_data(field.dtype)[0])
        suggest = suggest if suggest in TIME_UNITS else (getattr(t, "unit", None) if to_ints else "ns")
        suggest = suggest if suggest in TIME_UNITS else "s"
        said = " (the unit its name says)" if named else ""
        have = f"{t} ({_value_kind(t)})"
        if to_ints:
            what = (
                f"field {name!r} ({field.dtype.str}) needs {field.arrow_type} (number), and times become "
                f"numbers only as counts of a unit you name, never silently in the column's unit"
            )
        else:
            what = (
                f"field {name!r} ({field.dtype.str}) needs {field.arrow_type} (time), and numbers become times "
                f"only as counts of a unit you name"
            )
        also = " (cast='parse' does not choose one)" if cast == "parse" else ""
        raise _problem(
            f"column {name!r} has Arrow type {have}; {what}{also}: pass time_unit={{{name!r}: "
            f"{suggest!r}}} to count {_UNIT_NAMES[suggest]}{said}, or convert the column first",
            time_unit={name: suggest},
        )
    named = name_unit(name)
    if named is not None and named != unit:
        warnings.warn(
            f"time_unit={{{name!r}: {unit!r}}} gives field {name!r} the unit {unit!r}, but its name "
            f"says {named!r}: the {'counts written' if to_ints else 'integers read'} are "
            f"{_UNIT_NAMES[unit]}",
            UserWarning,
            stacklevel=6,
        )
    if not to_ints:
        ints = arr if arr.type == pa.int64() else _cast(arr, pa.int64(), name, field)
        timed = ints.view(pa.timestamp(unit) if field.dtype.kind == "M" else pa.duration(unit))
        return timed if timed.type == field.arrow_type else _cast(timed, field.arrow_type, name, field)
    if pa.types.is_timestamp(t):
        target = pa.timestamp(unit, t.tz)
    elif pa.types.is_duration(t):
        target = pa.duration(unit)
    elif pa.types.is_date(t):
        target = pa.timestamp(unit)
    elif pa.types.is_time(t):
        target = pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
    else:
        raise ConversionError(
            f"column {name!r} has Arrow type {t}; field {name!r} ({field.dtype.str}) takes "
            f"timestamps, durations, dates or times of day as counts of {_UNIT_NAMES[unit]}"
        )
    try:
        timed = arr if t == target else _cast(arr, target, name, field)
    except ConversionError as err:
        row = _first_changed(arr, target)
        if row is None:
            raise
        raise ConversionError(
            f"column {name!r} row {row // max(field.count, 1)}: {_shown(arr, row)} ({t}) is not a whole number of "
            f"{_UNIT_NAMES[unit]} or is out of their range, the unit time_unit={{{name!r}: {unit!r}}} gives field "
            f"{name!r} ({field.dtype.str}): name a finer unit, or change the data"
        ) from err
    counts = timed.view(pa.int32() if target.bit_width == 32 else pa.int64())
    if counts.type == field.arrow_type:
        return counts
    try:
        return _cast(counts, field.arrow_type, name, field)
    except ConversionError as err:
        row = _first_changed(counts, field.arrow_type)
        if row is None:
            raise
        raise ConversionError(
            f"column {name!r} row {row // max(field.count, 1)}: {_shown(arr, row)} ({t}) is "
            f"{counts[row].as_py()} {_UNIT_NAMES[unit]} (time_unit={{{name!r}: {unit!r}}}), which field {name!r} "
            f"({field.dtype.str}, {field.arrow_type}) cannot hold: name a coarser unit, widen the field, or change "
            f"the data"
        ) from err


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
    if (
        any(test(t) for test in _STRINGISH)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary_view(t)
    ):
        return "text"
    return None


def _cast(arr, target, name, field, cast="strict"):
    """Cast only if no value changes; else a ConversionError naming the column and row.

    With ``cast="strict"`` a column is also never cast to another kind of value (text
    parsed as numbers or times, booleans as integers, numbers as text or times...)."""
    needs = f"field {name!r} ({field.dtype.str}) needs {target}" if field else f"the layout needs {target}"
    have, want = _value_kind(arr.type), _value_kind(target)
    if cast == "strict" and have and want and have != want:
        raise _problem(
            f"column {name!r} has Arrow type {arr.type} ({have}); {needs} ({want}), and {have} values are not "
            f"converted to {want} unless asked: pass cast='parse' to convert them "
            f"(still only when every value comes back unchanged), or convert the column first",
            cast="parse",
        )
    if pa.types.is_integer(arr.type) and pa.types.is_decimal128(target) and 20 + target.scale <= 38:
        # (pyarrow casts an integer only to a decimal wide enough for every integer of its type: through that
        # one, every value is checked against the field's precision instead; attack6: 3 was refused for 9(3)V99)
        limit = 10 ** (target.precision - target.scale)
        if limit < 2**63:
            outside = pc.fill_null(pc.or_(pc.greater_equal(arr, limit), pc.less_equal(arr, -limit)), False)
            if pc.any(outside).as_py():
                row = pc.index(outside, True).as_py()
                raise _does_not_fit(
                    arr, name, needs, field, row, f"more than {target.precision - target.scale} digits before the point"
                )
        arr = arr.cast(pa.decimal128(20 + target.scale, target.scale))
    try:
        out = arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        row = _first_changed(arr, target)
        if row is not None:  # a value out of range: name it
            raise _does_not_fit(arr, name, needs, field, row, str(err)) from err
        raise ConversionError(
            f"column {name!r} has Arrow type {arr.type}; {needs}, and casting would change "
            f"values or is not possible: {err}"
        ) from err
    try:
        back = _decimals_as_floats(out, arr.type) if pa.types.is_floating(arr.type) else None
        back = out.cast(arr.type, safe=False) if back is None else back
        same = pc.fill_null(pc.equal(back, arr), True)
        if pa.types.is_floating(arr.type):
            same = pc.or_(same, pc.and_(pc.is_nan(arr), pc.is_nan(back)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return out  # no comparison kernel (nested, binary): the safe cast is the check
    if pc.all(same).as_py() is False:
        row = pc.index(same, False).as_py()
        raise ConversionError(
            f"column {name!r} row {row}: {_shown(arr, row)} ({arr.type}) becomes "
            f"{_shown(out, row)} as {target}; {needs}: change the field's type or the data"
        )
    return out


def _decimals_as_floats(dec, float_type):
    """The values of decimal128 array ``dec`` as floats of ``float_type``, each the nearest
    float (through float64: the unscaled integer and the power of ten both exact doubles,
    one division); None where that cannot be done exactly here (not decimal128, more than
    18 digits, a negative scale or one above 22) or for float16. pyarrow's own cast is not
    the nearest (73805.04 becomes 73805.04000000001), which made a float column whose values
    a decimal field holds exactly look as if they changed."""
    t = dec.type
    if not pa.types.is_decimal128(t) or t.precision > 18 or not 0 <= t.scale <= 22 or pa.types.is_float16(float_type):
        return None
    n, offset = len(dec), dec.offset
    words = np.frombuffer(dec.buffers()[1], dtype="<i8", count=2 * (offset + n))[2 * offset :: 2]
    valid = np.ones(n, bool) if dec.null_count == 0 else np.asarray(dec.is_valid())
    words = np.where(valid, words, 0)
    if n and np.abs(words).max() >= 2**53:
        return None
    values = (words.astype(np.float64) / 10.0**t.scale).astype(float_type.to_pandas_dtype())
    return pa.array(values, type=float_type, mask=None if dec.null_count == 0 else ~valid)


def _does_not_fit(arr, name, needs, field, row, why):
    """The ConversionError of element ``row`` of column ``name``, a value the field cannot hold."""
    return ConversionError(
        f"column {name!r} has Arrow type {arr.type}; {needs}, and row "
        f"{row // max(getattr(field, 'count', 1), 1)} holds {_shown(arr, row)}, which does not fit it "
        f"({why}): change the field's type or the data"
    )


def _first_changed(arr, target):
    """The first index whose value an unchecked cast of ``arr`` to ``target`` changes
    (out of range, cut), or None when there is none or it cannot be told."""
    try:
        back = arr.cast(target, safe=False).cast(arr.type, safe=False)
        same = pc.fill_null(pc.equal(back, arr), True)
        if pa.types.is_floating(arr.type):
            same = pc.or_(same, pc.and_(pc.is_nan(arr), pc.is_nan(back)))
        if pc.all(same).as_py() is False:
            return pc.index(same, False).as_py()
    except (pa.ArrowException, NotImplementedError):
        pass
    return None


def _shown(arr, row):
    """Value ``row`` of ``arr`` as a message shows it: a time Python cannot hold (a date
    past year 9999, a time of day below a microsecond) as its raw count and unit."""
    t = arr.type
    if pa.types.is_temporal(t):
        unit = "days" if pa.types.is_date32(t) else "ms" if pa.types.is_date64(t) else t.unit
        try:
            count = arr.view(pa.int32() if t.bit_width == 32 else pa.int64())[row].as_py()
        except (pa.ArrowException, ValueError, TypeError):
            count = None
        if count is not None and (pa.types.is_time(t) and unit == "ns" and count % 1000):
            return f"{count} {unit}"  # datetime.time would drop the nanoseconds
        try:
            return repr(arr[row].as_py())
        except (OverflowError, ValueError, TypeError, pa.ArrowException):
            return f"{count} {unit}" if count is not None else "<a value Python cannot show>"
    try:
        return repr(arr[row].as_py())
    except (OverflowError, ValueError, TypeError, pa.ArrowException):
        return "<a value Python cannot show>"
