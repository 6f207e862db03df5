"""cuDF frames over a device SoA's memory, and SoA from cuDF frames.

:func:`to_cudf` wraps each leaf column's device buffers without copying them:
numbers, timestamps and durations go in through ``__cuda_array_interface__`` with the
validity bitmap as a ``"<t1"`` (bit) mask, which cuDF takes as its null mask; strings
become a pylibcudf string column over the arena's offsets and bytes. Two things cuDF
stores differently are converted (copied) and said so: Arrow's bit-packed booleans
(cuDF booleans are one byte) and ``date32`` days (cuDF has no day-resolution dates;
they become ``datetime64[s]``). Sub-array leaves become one column per element
(``pos.0``, ``pos.1``...). C enums need ``enum_as="int"``. Imported only when used;
``pip install 'layouts-arrow[cudf]'``.
"""

import numpy as np
import pyarrow as pa

from .._errors import LayoutError

__all__ = ["to_cudf", "from_cudf"]


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
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3, "stream": None}
        if mask is not None:
            self.__cuda_array_interface__["mask"] = mask


def to_cudf(soa):
    """A ``cudf.DataFrame`` whose columns are the device SoA's buffers (see module doc)."""
    from . import device as _device

    cudf = _cudf()
    base = _device.pointer(soa._memory)
    out = {}
    for f, c in zip(soa.layout.fields, soa._columns):
        if c.dictionary is not None:
            raise LayoutError(f"column {f.name!r} is a C enum (Arrow dictionary); cuDF takes it as integers: "
                              f"build the layout with Layout.from_c(..., enum_as='int')")
        per = max(f.count, 1)
        for k in range(per):
            name = f.name if per == 1 else f"{f.name}.{k}"
            out[name] = _series(cudf, soa, f, c, base, k, per)
    return cudf.DataFrame(out)


def _mask(soa, c, base, k, per):
    if c.validity is None or per != 1:
        return None  # sub-array elements' nulls are not bit-aligned per element column
    return _DeviceView(soa, base + c.validity.address, (c.length,), "<t1")


def _series(cudf, soa, f, c, base, k, per):
    t, n = c.type, c.length // per
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if per != 1:
            raise LayoutError(f"column {f.name!r}: sub-arrays of strings are not supported by to_cudf")
        return _strings(cudf, soa, c, base)
    if t == pa.bool_():
        import cupy

        bits = cupy.asarray(_DeviceView(soa, base + c.data.address, ((c.length + 7) // 8,), "|u1"))
        flags = cupy.unpackbits(bits, bitorder="little")[: c.length].astype(bool)[k::per]
        return cudf.Series(flags, nan_as_null=False)
    if pa.types.is_date32(t):
        days = cudf.Series(_DeviceView(soa, base + c.data.address + 4 * k, (n,), "<i4", (4 * per,),
                                       _mask(soa, c, base, k, per)), nan_as_null=False)
        return (days.astype("int64") * 86400).astype("datetime64[s]")
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        typestr = f"<{'M' if pa.types.is_timestamp(t) else 'm'}8[{t.unit}]"
    elif pa.types.is_fixed_size_binary(t):
        raise LayoutError(f"column {f.name!r} is fixed-size bytes, which cuDF lacks: build the layout with "
                          f"bytes_as='binary' or 'string'")
    else:
        typestr = np.dtype(t.to_pandas_dtype()).str
    width = t.bit_width // 8
    view = _DeviceView(soa, base + c.data.address + (c.offset + k) * width, (n,), typestr,
                       None if per == 1 else (width * per,), _mask(soa, c, base, k, per))
    return cudf.Series(view, nan_as_null=False)


def _strings(cudf, soa, c, base):
    import pylibcudf as plc

    large = pa.types.is_large_string(c.type) or pa.types.is_large_binary(c.type)
    offsets_type = plc.DataType(plc.TypeId.INT64 if large else plc.TypeId.INT32)
    width = 8 if large else 4
    offsets = plc.Column(offsets_type, c.length + 1,
                         plc.gpumemoryview(_DeviceView(soa, base + c.offsets.address, (c.length + 1,), f"<i{width}")),
                         None, 0, 0, [])
    chars = plc.gpumemoryview(_DeviceView(soa, base + c.data.address, (max(c.data.size, 1),), "|u1"))
    mask = None if c.validity is None else plc.gpumemoryview(
        _DeviceView(soa, base + c.validity.address, ((c.length + 7) // 8,), "|u1"))
    nulls = 0 if c.validity is None else c.length - int(
        np.unpackbits(_validity_host(soa, c), bitorder="little")[: c.length].sum())
    column = plc.Column(plc.DataType(plc.TypeId.STRING), c.length, chars, mask, nulls, 0, [offsets])
    return cudf.Series.from_pylibcudf(column)


def _validity_host(soa, c):
    from . import device as _device

    return _device.to_host(soa._memory[c.validity.address :], (c.length + 7) // 8)


def from_cudf(cls, df, layout, fill, truncate):
    """An SoA on the GPU from a ``cudf.DataFrame``, bound for ``layout``.

    The frame goes through Arrow on the host (``df.to_arrow()``), is checked and cast
    by :meth:`SoA.from_arrow`'s rules, and lands in one device arena (two copies);
    a path that stays on the device is not built yet.
    """
    _cudf()
    return cls.from_arrow(df.to_arrow(), layout, fill=fill, truncate=truncate).to_device("cuda")
