"""cuDF frames over a device SoA's memory, and SoA from cuDF frames, on the device.

:func:`to_cudf` wraps each leaf column's device buffers without copying them:
numbers, timestamps and durations go in through ``__cuda_array_interface__`` with the
validity bitmap as a ``"<t1"`` (bit) mask, which cuDF takes as its null mask; strings
become a pylibcudf string column over the arena's offsets and bytes; C enums become
categoricals over the arena's int32 codes (``cudf.Series.from_categorical`` with the
dictionary as categories). Some things cuDF stores differently are converted on the
device (a copy) and said so: Arrow's bit-packed booleans (cuDF booleans are one byte),
``date32`` days (cuDF has no day-resolution dates; they become ``datetime64[s]``), a
validity bitmap that does not start at bit 0 or belongs to a sub-array element, and an
enum's codes where it has nulls (cuDF marks them with code -1). Sub-array leaves become
one column per element (``pos.0``, ``pos.1``...). Fixed-size bytes have no cuDF type.

:func:`from_cudf` takes each column's device buffers and copies them, device to device,
into one arena (the SoA's kernels read their columns from one allocation); nothing goes
through host memory. Columns it cannot take on the device go through Arrow on the
host one column at a time, and only those (see :func:`from_cudf`).

The small kernels used here (bits <-> bytes, enum codes under nulls, string offsets)
are :mod:`kernels.cuda`'s, compiled lazily with Numba CUDA. Imported only when used;
``pip install 'layouts-arrow[cudf]'``.
"""

import ctypes

import numpy as np
import pyarrow as pa

from .._errors import ConversionError, LayoutError

__all__ = ["to_cudf", "from_cudf"]

_FILLED = ("copy", "bits", "enum")  # kinds whose kernels write a fill value under a null (as _arrow_in)
_DEVICE_TYPES = (2, 3, 13)  # ARROW_DEVICE_CUDA, CUDA_HOST (pinned), CUDA_MANAGED: readable by the device
# A prototype of its own: c_device declares PyCapsule_GetPointer with other argument types.
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


def _cudf():
    try:
        import cudf
    except ImportError as err:
        raise ImportError("SoA.to_cudf/from_cudf need cuDF: pip install 'layouts-arrow[cudf]'") from err
    return cudf


class _DeviceView:
    """An object whose ``__cuda_array_interface__`` describes part of an arena; it
    keeps the SoA (and so the arena) alive for as long as cuDF holds it."""

    def __init__(self, owner, ptr, shape, typestr, strides=None, mask=None):
        self.owner = owner
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (ptr, False),
            "strides": strides,
            "version": 3,
            "stream": None,
        }
        if mask is not None:
            self.__cuda_array_interface__["mask"] = mask


# ----------------------------------------------------------------------------- kernels
def _kernels():
    """:mod:`kernels.cuda`, whose cuDF bridge kernels (bits <-> bytes, enum codes, string
    offsets) this module launches; the memory pool is installed first."""
    from . import device as _device

    return _device.kernels()


def _bytes(nbytes):
    """A new uint8 device array of exactly ``nbytes`` (from the pool)."""
    from . import device as _device

    return _device.empty(nbytes)[:nbytes]


# ----------------------------------------------------------------------------- to_cudf
class _Memory:
    """A device SoA's arena and the SoA that owns it: what the frame's views keep alive."""

    def __init__(self, memory, owner):
        self.memory, self.owner = memory, owner


def to_cudf(layout, memory, columns, owner):
    """A ``cudf.DataFrame`` whose columns are a device SoA's buffers (``columns``, Span
    offsets into ``memory``; ``owner``, the SoA, is kept alive by the frame); see the
    module doc."""
    from . import device as _device

    cudf = _cudf()
    soa = _Memory(memory, owner)
    base = _device.pointer(memory)
    out = {}
    for f, c in zip(layout.fields, columns):
        per = max(f.count, 1)
        for k in range(per):
            name = f.name if per == 1 else f"{f.name}.{k}"
            out[name] = _series(cudf, soa, f, c, base, k, per)
    return cudf.DataFrame(out)


def _span(soa, buf):
    """The uint8 device slice of the arena that a Span covers."""
    return soa.memory[buf.address : buf.address + buf.size]


def _mask(soa, c, base, k, per):
    """The column's validity as a cuDF ``"<t1"`` mask: the arena's bitmap where it starts
    at bit 0 of the element column, else a realigned copy (sub-array elements, offsets)."""
    from . import device as _device

    if c.validity is None:
        return None
    n, start = c.length // per, c.offset + k
    if per == 1 and start == 0:
        return _DeviceView(soa, base + c.validity.address, (n,), "<t1")
    bits = _bytes(max((n + 7) // 8, 1))
    _kernels().bits_to_bits(_span(soa, c.validity), start, per, n, bits)
    return _DeviceView(bits, _device.pointer(bits), (n,), "<t1")


def _series(cudf, soa, f, c, base, k, per):
    from . import device as _device

    t, n = c.type, c.length // per
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if per != 1:
            raise LayoutError(f"column {f.name!r}: sub-arrays of strings are not supported by to_cudf")
        return _strings(cudf, soa, c, base)
    if c.dictionary is not None:
        return _categorical(cudf, soa, f, c, base, per)
    if t == pa.bool_():
        flags = _bytes(max(n, 1))
        _kernels().bits_to_bytes(_span(soa, c.data), c.offset + k, per, n, flags)
        return cudf.Series(
            _DeviceView(flags, _device.pointer(flags), (n,), "|b1", None, _mask(soa, c, base, k, per)),
            nan_as_null=False,
        )
    if pa.types.is_date32(t):
        days = cudf.Series(
            _DeviceView(
                soa, base + c.data.address + 4 * (c.offset + k), (n,), "<i4", (4 * per,), _mask(soa, c, base, k, per)
            ),
            nan_as_null=False,
        )
        return (days.astype("int64") * 86400).astype("datetime64[s]")
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        typestr = f"<{'M' if pa.types.is_timestamp(t) else 'm'}8[{t.unit}]"
    elif pa.types.is_fixed_size_binary(t):
        raise LayoutError(
            f"column {f.name!r} is fixed-size bytes, which cuDF lacks: build the layout with "
            f"bytes_as='binary' or 'string'"
        )
    else:
        typestr = np.dtype(t.to_pandas_dtype()).str
    width = t.bit_width // 8
    view = _DeviceView(
        soa,
        base + c.data.address + (c.offset + k) * width,
        (n,),
        typestr,
        None if per == 1 else (width * per,),
        _mask(soa, c, base, k, per),
    )
    return cudf.Series(view, nan_as_null=False)


def _categorical(cudf, soa, f, c, base, per):
    """An enum column as a cuDF categorical: the int32 codes on the device (with -1 under
    nulls, a copy, where there are any), the dictionary's names as categories."""
    import pandas as pd

    from . import device as _device

    if per != 1:
        raise LayoutError(
            f"column {f.name!r}: sub-arrays of C enums are not supported by to_cudf; build the "
            f"layout with Layout.from_c(..., enum_as='int')"
        )
    n = c.length
    codes = _DeviceView(soa, base + c.data.address + 4 * c.offset, (n,), "<i4")
    if c.validity is not None:
        out = _bytes(max(4 * n, 4)).view(np.int32)
        _kernels().codes_with_nulls(
            soa.memory[c.data.address + 4 * c.offset : c.data.address + 4 * (c.offset + n)].view(np.int32),
            _span(soa, c.validity),
            c.offset,
            n,
            out,
        )
        codes = _DeviceView(out, _device.pointer(out), (n,), "<i4")
    categories = pd.Categorical.from_codes([], categories=c.dictionary.to_pylist())
    return cudf.Series.from_categorical(categories, codes=codes)


def _strings(cudf, soa, c, base):
    """A pylibcudf string column over the arena's offsets, bytes and validity, no copy;
    the column's offset (a slice packed for the device) becomes the column's offset."""
    import pylibcudf as plc

    large = pa.types.is_large_string(c.type) or pa.types.is_large_binary(c.type)
    offsets_type = plc.DataType(plc.TypeId.INT64 if large else plc.TypeId.INT32)
    width, end = (8 if large else 4), c.offset + c.length
    offsets = plc.Column(
        offsets_type,
        end + 1,
        plc.gpumemoryview(_DeviceView(soa, base + c.offsets.address, (end + 1,), f"<i{width}")),
        None,
        0,
        0,
        [],
    )
    chars = plc.gpumemoryview(_DeviceView(soa, base + c.data.address, (max(c.data.size, 1),), "|u1"))
    mask = (
        None
        if c.validity is None
        else plc.gpumemoryview(_DeviceView(soa, base + c.validity.address, ((end + 7) // 8,), "|u1"))
    )
    nulls = (
        0
        if c.validity is None
        else c.length - int(np.unpackbits(_validity_host(soa, c), bitorder="little")[c.offset : end].sum())
    )
    column = plc.Column(plc.DataType(plc.TypeId.STRING), c.length, chars, mask, nulls, c.offset, [offsets])
    return cudf.Series.from_pylibcudf(column)


def _validity_host(soa, c):
    from . import device as _device

    return _device.to_host(soa.memory[c.validity.address :], (c.offset + c.length + 7) // 8)


# --------------------------------------------------------------------------- from_cudf
def from_cudf(cls, df, layout, fill, truncate, backend):
    """An SoA on the GPU from a ``cudf.DataFrame``, bound for ``layout``, by the rules of
    :meth:`SoA.from_arrow` (``cast="strict"``).

    Each leaf is found by its name (``pos.0``, ``pos.1``... for the elements of a
    sub-array, as :func:`to_cudf` names them). Where the column's cuDF type is the
    leaf's Arrow type its buffers are taken on the device and copied, device to device,
    into one new arena (the kernels read every column of an SoA from one allocation):
    numbers, timestamps and durations of the same unit, C enums as their integers
    (through ``__cuda_array_interface__``, validity from its ``mask``), booleans (packed
    into Arrow's bits on the device) and strings (offsets and bytes through
    ``Series.to_pylibcudf()`` and the Arrow C Device Data Interface; offsets are
    checked on the device, and the bytes are those the last offset says). A column
    of another kind of value (text for a number field, numbers for a datetime
    field...) or of a type no leaf takes (lists, structs, intervals) is a
    ConversionError naming it, its cuDF type, the field's and the fix, before anything
    is copied.

    These go through Arrow on the host, one column at a time and only they
    (``Series.to_arrow()``, checked and cast as :meth:`SoA.from_arrow` does, then
    copied to the arena with the other host columns in one transfer): a column whose
    cuDF type differs from the leaf's but converts without changing a value (``int64``
    for an ``int32`` field, another time unit), ``date32`` fields (cuDF has no days),
    categoricals and strings for C enums (names become the dictionary), decimals,
    strings where cuDF has no device export (``to_pylibcudf`` or
    ``__arrow_c_device_array__`` missing) or for ``U<n>`` fields as binary, nulls in a
    sub-array element or in a string column, a fill for a boolean, string or scaled
    time column (pyarrow's ``fill_null`` writes it), and nested columns named by the
    top-level field (a struct or list column).
    """
    from .._arrow_in import _descend, check_column
    from . import device as _device
    from .arena import HEAD, Span, packing

    _cudf()
    nb = _device.cuda()
    unknown = set(fill) - set(layout.names)
    if unknown:
        raise LayoutError(f"fill names {sorted(unknown)}, which are not leaf fields; leaves are {layout.names}")
    names = list(df.columns)
    n = len(df)
    fields = list(layout.fields)
    host, device, fills = {}, {}, {}
    at = 0
    for top in layout._arrow_fields():
        group = list(range(at, at + _leaf_count(top.type)))
        at += len(group)
        flat = {i: _flat(df, names, fields[i]) for i in group}
        if all(v is not None for v in flat.values()):
            for i in group:
                taken = _take(fields[i], flat[i], n, fill, fills)
                if taken is None:
                    host[i] = _host_leaf(fields[i], flat[i], fill, fills)
                else:
                    device[i] = taken
        elif top.name in names:
            arr = _to_arrow(df[top.name])
            check_column(arr, top.name)
            columns: list = []
            _descend(arr, top.type, top.name, iter(fields[i] for i in group), columns, fill, fills, "strict")
            host.update(zip(group, columns))
        else:
            wanted = [
                fields[i].name if fields[i].count <= 1 else f"{fields[i].name}.0..{fields[i].count - 1}" for i in group
            ]
            raise ConversionError(
                f"the cuDF frame has no column {top.name!r} (nor {wanted}); it has {names}; the layout needs "
                f"{[f.name for f in layout._arrow_fields()]}"
            )

    order = sorted(host)
    copies, end, packed = packing([host[i] for i in order])
    columns, host_end, placed = dict(zip(order, packed)), end, {}
    for i in sorted(device):
        spans = {}
        for name, (size, _) in device[i].buffers.items():
            spans[name] = Span(end, size)
            end += -(-size // 64) * 64
        placed[i] = spans
    memory = _device.empty(end)
    if copies:  # the host columns: packed here, then one transfer
        staging = np.zeros(host_end - HEAD, dtype=np.uint8)
        for raw, pos in copies:
            staging[pos - HEAD : pos - HEAD + raw.size] = raw
        memory[HEAD:host_end].copy_to_device(staging)
    if end > host_end:  # every byte of the arena is defined: the padding after each buffer too
        nb.cudadrv.driver.device_memset(memory[host_end:end], 0, end - host_end)
    for i, taken in device.items():
        for name, (size, write) in taken.buffers.items():
            span = placed[i][name]
            write(memory[span.address : span.address + size])
        columns[i] = taken.column(placed[i])
    nb.synchronize()  # device-to-device copies are asynchronous: the frame's buffers must outlive them
    for taken in device.values():
        taken.done()
    return cls(
        layout,
        n,
        [columns[i] for i in range(len(fields))],
        fills=fills,
        truncate=truncate,
        memory=memory,
        backend=backend,
    )


class _Taken:
    """One leaf taken on the device: its buffers (name -> (bytes, writer of those bytes
    into the arena)) and how to describe it once placed."""

    def __init__(self, arrow_type, length, kind, buffers, offset=0, keep=()):
        self.type, self.length, self.kind, self.buffers, self.offset = arrow_type, length, kind, buffers, offset
        self.keep = list(keep)  # capsules and views whose memory the writers read

    def column(self, spans):
        from .._plan import ColumnBuffers

        return ColumnBuffers(
            self.type,
            self.length,
            spans.get("validity"),
            spans.get("offsets"),
            spans.get("data"),
            self.offset,
            self.kind,
        )

    def done(self):
        self.keep.clear()


def _leaf_count(arrow_type):
    if pa.types.is_struct(arrow_type):
        return sum(_leaf_count(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_fixed_size_list(arrow_type):
        return _leaf_count(arrow_type.value_type)
    return 1


def _flat(df, names, field):
    """The frame's columns for a leaf: ``[df[name]]``, or one per sub-array element; None if missing."""
    per = max(field.count, 1)
    wanted = [field.name] if per == 1 else [f"{field.name}.{k}" for k in range(per)]
    if not all(w in names for w in wanted):
        return None
    return [df[w] for w in wanted]


def _to_arrow(series):
    arr = series.to_arrow()
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _host_leaf(field, series, fill, fills):
    """One leaf through host Arrow, checked and cast by ``SoA.from_arrow``'s rules."""
    from .._arrow_in import _leaf, check_column

    arrays = []
    for k, s in enumerate(series):
        arr = _to_arrow(s)
        check_column(arr, field.name if len(series) == 1 else f"{field.name}.{k}")
        arrays.append(arr)
    arr = arrays[0]
    if len(arrays) > 1:  # element k of row r goes to r * per + k
        per, n = len(arrays), len(arrays[0])
        order = (np.arange(per)[None, :] * n + np.arange(n)[:, None]).reshape(-1)
        arr = pa.concat_arrays([a.cast(arrays[0].type) if a.type != arrays[0].type else a for a in arrays]).take(order)
    return _leaf(arr, field, fill, fills, "strict")


def _value_kind(dtype):
    """What a cuDF column of ``dtype`` holds: number, boolean, time, text, category, or
    None (lists, structs, intervals: nothing a leaf takes)."""
    if isinstance(dtype, np.dtype):
        return {
            "i": "number",
            "u": "number",
            "f": "number",
            "b": "boolean",
            "M": "time",
            "m": "time",
            "O": "text",
            "U": "text",
            "S": "text",
        }.get(dtype.kind)
    name = str(dtype).lower()
    if name in ("str", "string", "object") or name.startswith("string"):
        return "text"
    if name == "category":
        return "category"
    if name.startswith("decimal"):
        return "number"
    if name.startswith("datetime64") or name.startswith("timedelta64"):
        return "time"
    return None


def _wanted(field):
    """The kind of value a leaf takes (``enum`` takes numbers, names or categories)."""
    if field.kind in ("bytes", "cstr", "utf32", "text"):
        return "text"
    if field.enum:
        return "enum"
    t = field.arrow_type
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_temporal(t):
        return "time"
    return "number"


def _numpy_dtype(arrow_type):
    """The cuDF (NumPy) dtype whose buffer is this Arrow type's, or None (date32, bool...)."""
    t = arrow_type
    if pa.types.is_timestamp(t) and t.tz is None:
        return np.dtype(f"M8[{t.unit}]")
    if pa.types.is_duration(t):
        return np.dtype(f"m8[{t.unit}]")
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return np.dtype(t.to_pandas_dtype())
    return None


def _suggest(field):
    """A cuDF dtype to convert a column to for this leaf, for error messages."""
    if field.kind in ("bytes", "cstr", "utf32", "text"):
        return "str"
    if pa.types.is_boolean(field.arrow_type):
        return "bool"
    dt = _numpy_dtype(field.arrow_type)
    if dt is not None:
        return str(dt)
    if pa.types.is_date32(field.arrow_type):
        return "datetime64[s]"
    return str(field.dtype.newbyteorder("="))


def _interface(series):
    """The series' ``__cuda_array_interface__``, or None where cuDF has none for its type
    (cuDF raises NotImplementedError or TypeError there, not AttributeError)."""
    try:
        return series.__cuda_array_interface__
    except (AttributeError, NotImplementedError, TypeError):
        return None


def _take(field, series, n, fill, fills):
    """The leaf's buffers on the device (a :class:`_Taken`), or None for the host path;
    ConversionError where the column's kind of value is not the field's."""
    from .._plan import native_dtype

    name, per = field.name, len(series)
    dtypes = [s.dtype for s in series]
    have, want = _value_kind(dtypes[0]), _wanted(field)
    for s in series:
        if len(s) != n:
            raise ConversionError(f"column {name!r} has {len(s)} rows; the frame has {n}")
    label = name if per == 1 else f"{name}.0"
    if have is None:
        raise ConversionError(
            f"column {label!r} is {dtypes[0]} in cuDF; field {name!r} ({field.dtype.str}) needs "
            f"{field.arrow_type} ({want}), which a cuDF {dtypes[0]} column cannot give: convert the column first, "
            f"e.g. df[{label!r}] = df[{label!r}].astype({_suggest(field)!r})"
        )
    if any(d != dtypes[0] for d in dtypes):
        return None
    if want == "enum":
        if have in ("text", "category") or (have == "number" and dtypes[0] != native_dtype(field)):
            return None  # names become the dictionary, other integers are cast: on the host
        if have != "number":
            raise ConversionError(
                f"column {label!r} has cuDF dtype {dtypes[0]} ({have}); C enum field {name!r} ({field.dtype.str}) "
                f"takes enumerator names (str or category) or integers: convert the column first, e.g. "
                f"df[{label!r}] = df[{label!r}].astype({str(native_dtype(field))!r})"
            )
        kind, arrow_type = "copy", pa.from_numpy_dtype(native_dtype(field))
    elif have == "category":
        return None  # a dictionary's values are checked and cast on the host
    elif have != want:
        raise ConversionError(
            f"column {label!r} has cuDF dtype {dtypes[0]} ({have}); field {name!r} ({field.dtype.str}) needs "
            f"{field.arrow_type} ({want}), and {have} values are not converted to {want} by from_cudf: convert "
            f"the column first, e.g. df[{label!r}] = df[{label!r}].astype({_suggest(field)!r})"
        )
    else:
        kind, arrow_type = field.kind, field.arrow_type
    nulls = sum(int(s.null_count) for s in series)
    if want == "text":  # nulls in strings: filled or reported by the host path
        return None if per != 1 or nulls else _strings_taken(field, series[0], n)
    if nulls:
        if per != 1 or (name in fill and kind not in _FILLED):
            return None  # element columns' nulls are interleaved, and fill_null runs, on the host
    refuse_nulls = bool(nulls) and name not in fill and field.dtype.kind not in "mM"
    if want == "boolean":
        taken = _bools_taken(field, series, n, kind, arrow_type, refuse_nulls)
    else:
        expected = _numpy_dtype(arrow_type)
        if expected is None or not isinstance(dtypes[0], np.dtype) or dtypes[0] != expected:
            return None  # another width or unit, date32, decimals: cast (checked) on the host
        taken = _values_taken(field, series, n, kind, arrow_type, expected, refuse_nulls)
    if taken is not None and name in fill and kind in _FILLED:
        fills[name] = fill[name]
    return taken


def _source(series, name, n, itemsize):
    """``(values, mask)``: uint8 device arrays over a series' data and validity bitmap
    (None without nulls), no copy."""
    from . import device as _device

    cai = _interface(series)
    if cai is None:
        return None, None
    values = _device.from_interface(cai, owner=series)
    if values.shape[0] != n * itemsize:
        raise ConversionError(
            f"column {name!r}: its __cuda_array_interface__ describes {values.shape[0]} bytes; {n} rows of "
            f"{itemsize} bytes are {n * itemsize}"
        )
    mask = cai.get("mask")
    if mask is None:
        return values, None
    m = getattr(mask, "__cuda_array_interface__", mask)
    if str(m["typestr"]).endswith("t1"):  # cuDF: one bit per row, Arrow's layout
        bits = _device.from_interface({**m, "shape": ((n + 7) // 8,), "typestr": "|u1", "strides": None}, owner=mask)
        return values, bits
    flags = _device.from_interface(m, owner=mask)  # one byte per row (NumPy's convention)
    bits = _bytes(max((n + 7) // 8, 1))
    _kernels().bytes_to_bits(flags, n, bits)
    return values, bits[: (n + 7) // 8]


def _no_nulls(field, series, bits, n):
    """The error for nulls in a leaf that cannot hold one (reads the bitmap to name the row)."""
    from . import device as _device

    valid = np.unpackbits(_device.to_host(bits, (n + 7) // 8), bitorder="little")[:n]
    raise ConversionError(
        f"column {field.name!r} has {int(series.null_count)} nulls (first at row {int(np.argmin(valid))}), but field "
        f"{field.name!r} ({field.dtype.str} at offset {field.offset}) cannot hold a null; pass "
        f"fill={{{field.name!r}: value}} to write a value in their place"
    )


def _copier(src):
    def write(dst):
        if dst.shape[0]:
            dst.copy_to_device(src)

    return write


def _validity(bits, n):
    size = (n + 7) // 8
    return size, _copier(bits[:size])


def _values_taken(field, series, n, kind, arrow_type, dtype, refuse_nulls):
    itemsize, per = dtype.itemsize, len(series)
    sources = [_source(s, field.name, n, itemsize) for s in series]
    if any(values is None for values, _ in sources):
        return None
    buffers = {}
    if per == 1:
        values, bits = sources[0]
        if refuse_nulls and bits is not None:
            _no_nulls(field, series[0], bits, n)
        if bits is not None:
            buffers["validity"] = _validity(bits, n)
        buffers["data"] = (n * itemsize, _copier(values))
    else:

        def interleave(dst):
            if n == 0:
                return
            typed = dst.view(dtype)
            for k, (values, _) in enumerate(sources):
                typed[k::per] = values.view(dtype)

        buffers["data"] = (n * per * itemsize, interleave)
    return _Taken(arrow_type, n * per, kind, buffers, keep=[series, sources])


def _bools_taken(field, series, n, kind, arrow_type, refuse_nulls):
    per = len(series)
    sources = [_source(s, field.name, n, 1) for s in series]
    if any(values is None for values, _ in sources):
        return None
    count = n * per
    buffers = {}
    if per == 1:
        flags, bits = sources[0]
        if refuse_nulls and bits is not None:
            _no_nulls(field, series[0], bits, n)
        if bits is not None:
            buffers["validity"] = _validity(bits, n)
    else:
        flags = _bytes(max(count, 1))
        for k, (values, _) in enumerate(sources):
            if n:
                flags[k::per] = values
    packed = (count + 7) // 8

    def pack(dst):
        _kernels().bytes_to_bits(flags, count, dst)

    buffers["data"] = (packed, pack)
    return _Taken(arrow_type, count, kind, buffers, keep=[series, sources, flags])


def _strings_taken(field, series, n):
    """A string leaf's offsets and bytes from the column's Arrow C Device Data Interface
    export (``series.to_pylibcudf()[0].__arrow_c_device_array__()``), or None for the
    host path where that is missing or not a CUDA string/binary array."""
    from . import device as _device
    from .c_device import ArrowDeviceArray

    to_plc = getattr(series, "to_pylibcudf", None)
    if to_plc is None:
        return None
    column = to_plc()
    column = column[0] if isinstance(column, tuple) else column
    export = getattr(column, "__arrow_c_device_array__", None)
    if export is None:
        return None
    schema_capsule, array_capsule = export()
    arrow_type = pa.DataType._import_from_c_capsule(schema_capsule)
    if not (
        pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
    ):
        return None
    device_array = ArrowDeviceArray.from_address(_capsule_pointer(array_capsule, b"arrow_device_array"))
    arr = device_array.array
    if device_array.device_type not in _DEVICE_TYPES or arr.n_buffers != 3 or arr.length != n:
        return None
    if device_array.sync_event:
        _device.cuda().synchronize()  # the producer's event: everything queued before it is done
    width = 8 if pa.types.is_large_string(arrow_type) or pa.types.is_large_binary(arrow_type) else 4
    kind = "utf32" if field.kind == "utf32" else "cstr"
    if kind == "utf32" and not (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)):
        return None  # bytes for a U<n> field: decoded (checked) on the host
    if n == 0:  # Arrow lets an empty array leave its buffers out
        zero = np.zeros(width, np.uint8)
        return _Taken(
            arrow_type,
            0,
            kind,
            {"offsets": (width, lambda dst: dst.copy_to_device(zero)), "data": (0, lambda dst: None)},
            keep=[array_capsule],
        )
    first, chars_ptr = int(arr.offset), arr.buffers[2] or 0
    offsets = _device.from_interface(
        {
            "shape": (n + 1,),
            "typestr": f"<i{width}",
            "version": 3,
            "data": ((arr.buffers[1] or 0) + first * width, False),
        },
        owner=array_capsule,
    )
    lo = int(_device.to_host(offsets[:width], width).view(f"<i{width}")[0])  # two values, to size the bytes
    hi = int(_device.to_host(offsets[n * width :], width).view(f"<i{width}")[0])
    if lo < 0 or hi < lo or (hi > lo and not chars_ptr):
        raise ConversionError(
            f"column {field.name!r} (cuDF strings, {n} rows): its offsets run from {lo} to {hi}; the column is damaged"
        )
    chars = _device.from_interface(
        {"shape": (hi - lo,), "typestr": "|u1", "version": 3, "data": (chars_ptr + lo, False)}, owner=array_capsule
    )

    def write_offsets(dst):
        dst.copy_to_device(offsets)
        typed = dst.view(f"<i{width}")
        row = _kernels().offsets_check(typed, n, lo, hi)
        if row is not None:
            raise ConversionError(
                f"column {field.name!r} (cuDF strings) row {row}: its offsets go down or leave the column's "
                f"{hi - lo} bytes; the column is damaged"
            )
        if lo:
            _kernels().offsets_rebase(typed, n + 1, lo)

    buffers = {"offsets": ((n + 1) * width, write_offsets), "data": (hi - lo, _copier(chars))}
    return _Taken(arrow_type, n, kind, buffers, keep=[series, column, schema_capsule, array_capsule, offsets, chars])
