"""Signs kept: the sign nibble or zone each packed and zoned value was read with, for a way
back that writes every value's bytes as they were (docs/mainframe.md, "Signs").

The way back writes one sign per value, the field's rule (D below zero, else the field's
positive sign). :func:`sign_counts` counts the values read with another sign (C among F,
A, B, E, a negative zero); :func:`keep_signs` adds a ``_sign.FIELD`` column per packed and
zoned field (uint8: the sign where it is not the rule's, null where it is; a separate sign: D, a negative zero);
:func:`put_signs` writes those signs into the records the way back wrote. The passes are
kernels (:mod:`kernels.signs` on the CPU, :mod:`kernels.cuda.signs` on a GPU).
"""

import numpy as np
import pyarrow as pa

from .._ebcdic import is_ascii
from .._errors import ConversionError, LayoutError

PREFIX = "_sign."
_NAMES = {0xA: "A", 0xB: "B", 0xC: "C", 0xD: "D", 0xE: "E", 0xF: "F"}


def sign_fields(layout):
    """The leaves of ``layout`` whose sign can be kept: packed and zoned (an overpunched
    sign, or a separate ``+``/``-``: its negative zeros)."""
    return [f for f in layout.fields if f.encoding is not None and f.encoding.kind in ("packed", "zoned")]


def _separate(field):
    e = field.encoding
    return e is not None and e.kind == "zoned" and e.sign.endswith("separate")


def _facts(field):
    """``(width, zoned, leading, ascii_, signed, positive)`` as the kernels take them."""
    from ..kernels.signs import SEPARATE

    e = field.encoding
    zoned = e.kind == "zoned"
    positive = e.positive_sign
    return (
        field.width,
        SEPARATE if _separate(field) else int(zoned),
        zoned and e.sign.startswith("leading"),
        zoned and is_ascii(e.codepage),
        bool(e.signed),
        positive,
    )


def _records(records, layout, writable):
    """``(buf, n, on_device)``: the records' bytes as a flat uint8 array (host or device)."""
    if hasattr(records, "array") and hasattr(records, "layout"):  # an AoS
        if records.layout.itemsize != layout.itemsize:
            raise LayoutError(
                f"the records are {records.layout.itemsize} bytes each, the layout's {layout.itemsize}; "
                f"give records of this layout"
            )
        records = records.array
    if hasattr(records, "__cuda_array_interface__") or type(records).__name__ in ("FakeCUDAArray", "DeviceNDArray"):
        from numba import cuda  # device records (the simulator's arrays have no __cuda_array_interface__)

        buf = records if hasattr(records, "copy_to_host") else cuda.as_cuda_array(records)
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise LayoutError(
                f"device records are given as their bytes: a 1-D uint8 device array, not {buf.ndim}-D {buf.dtype}"
            )
        on_device = True
    else:
        if isinstance(records, np.ndarray):
            if writable and not (records.flags.c_contiguous and records.flags.writeable):
                raise LayoutError("put_signs writes into the records: give a writable C-contiguous array")
            buf = np.ascontiguousarray(records).reshape(-1).view(np.uint8)
        else:
            view = memoryview(records)
            if writable and view.readonly:
                raise LayoutError("put_signs writes into the records: give a writable buffer (bytearray, an array)")
            buf = np.frombuffer(view.cast("B"), dtype=np.uint8)
        on_device = False
    if buf.size % layout.itemsize:
        raise LayoutError(f"the records are {buf.size} bytes, not a whole number of {layout.itemsize}-byte records")
    return buf, buf.size // layout.itemsize, on_device


def _kernels(on_device):
    if on_device:
        from ..kernels.cuda import signs
    else:
        from ..kernels import signs
    return signs


def _read(buf, n, on_device, layout, field):
    width, zoned, leading, ascii_, signed, positive = _facts(field)
    offs = np.ascontiguousarray(field.element_offsets(), dtype=np.int64)
    out = np.zeros((n, offs.size), dtype=np.uint8)
    if on_device:
        from numba import cuda

        d_out = cuda.to_device(out)
        _kernels(True).read_signs(
            buf, layout.itemsize, n, cuda.to_device(offs), width, zoned, leading, ascii_, signed, positive, d_out
        )
        return d_out.copy_to_host()
    _kernels(False).read_signs(buf, layout.itemsize, n, offs, width, zoned, leading, ascii_, signed, positive, out)
    return out


def sign_counts(records, layout):
    """``{field: count}``: how many values of each packed and zoned field hold a sign the way
    back would not write (another positive sign than the field's, A, B, E, a negative zero;
    in a field with a separate sign, its negative zeros), for the fields that have any, in
    the Layout's order: :func:`keep_signs` keeps them all. ``records``:
    the records (an AoS, a NumPy array, a bytes-like object, a device array) read with
    ``layout``::

        lo.cobol.sign_counts(records, layout)   # {'AMT': 3}: 3 values come back with another sign
    """
    buf, n, on_device = _records(records, layout, False)
    out = {}
    for f in sign_fields(layout):
        count = int(np.count_nonzero(_read(buf, n, on_device, layout, f)))
        if count:
            out[f.name] = count
    return out


def separate_sign_fields(layout):
    """Names of the zoned leaves with a separate sign: a negative zero (``-`` and every digit
    0) of theirs comes back as ``+0`` unless its sign is kept (``keep_signs``: D in the
    field's ``_sign.`` column)."""
    return {f.name for f in layout.fields if _separate(f)}


def negative_zeros(records, layout):
    """``{field: count}`` of the negative zeros of each separate-sign zoned field that has any
    (the part of :func:`sign_counts` of those fields)."""
    return {name: k for name, k in _negative_zeros(*_records(records, layout, False), layout).items() if k}


def _negative_zeros(buf, n, on_device, layout):
    """``{field: count}``: the negative zeros of every separate-sign zoned field."""
    fields = [f for f in layout.fields if _separate(f)]
    if not fields:
        return {}
    rows = np.asarray(buf.copy_to_host() if on_device else buf, np.uint8)[: n * layout.itemsize]
    rows = rows.reshape(n, layout.itemsize)
    out = {}
    for f in fields:
        e, width = f.encoding, f.width
        minus = 0x2D if is_ascii(e.codepage) else 0x60
        count = 0
        for at in f.element_offsets():
            value = rows[:, at : at + width]
            sign, digits = (
                (value[:, 0], value[:, 1:]) if e.sign.startswith("leading") else (value[:, -1], value[:, :-1])
            )
            count += int(np.count_nonzero((sign == minus) & ~np.any(digits & 0x0F, axis=1)))
        out[f.name] = count
    return out


def _arrow_type(shape):
    t = pa.uint8()
    for size in reversed(shape):
        t = pa.list_(t, size)
    return t


def keep_signs(table, records, layout):
    """``table`` (read from ``records`` with ``layout``) with a ``_sign.FIELD`` column for
    every packed and zoned field: uint8, the sign nibble (zone) of each value whose sign
    the way back would not write (10-15: A-F; a separate-sign field's negative zero: 13,
    D), null where the rule's sign is the value's. :func:`put_signs` puts them back; the columns are the field's shape
    (``fixed_size_list`` for OCCURS). The schema does not depend on the data."""
    buf, n, on_device = _records(records, layout, False)
    if table.num_rows != n:
        raise LayoutError(f"the table has {table.num_rows} rows and the records {n}: give the table read from them")
    for f in sign_fields(layout):
        codes = _read(buf, n, on_device, layout, f).reshape(-1)
        values = pa.array(codes, pa.uint8(), mask=codes == 0)
        for size in reversed(f.shape):
            values = pa.FixedSizeListArray.from_arrays(values, size)
        name = PREFIX + f.name
        if name in table.column_names:
            raise LayoutError(f"the table has a column {name!r} already: drop it, or give the table as read")
        field = pa.field(name, _arrow_type(f.shape), metadata={"layouts.sign_of": f.name})
        table = table.append_column(field, values)
    return table


def _kept(column, n, count):
    """The uint8 ``[n, count]`` of a ``_sign.`` column, 0 where null."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    while pa.types.is_fixed_size_list(array.type):
        array = array.flatten()  # (a null list: no signs kept, every element the rule's)
    if not pa.types.is_integer(array.type) or len(array) != n * count:
        raise LayoutError(f"expected uint8 sign codes, {count} per row; give the column keep_signs made")
    values = array.fill_null(0).to_numpy(zero_copy_only=False)
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    outside = values[valid & ((values < 0) | (values > 0xF))]
    if outside.size:
        raise ConversionError(f"sign codes are 10-15 (A-F), or null; found {int(outside[0])}")
    zeros = np.flatnonzero(valid & (values == 0))
    if zeros.size:  # (the kernels read 0 as null: the field's own sign)
        row, k = divmod(int(zeros[0]), count)
        where = f"row {row}" + (f", element {k}" if count > 1 else "")
        raise ConversionError(
            f"{where}: sign 0 is no sign (valid: A, C, E, F positive; B, D negative); null writes the field's own"
        )
    return np.ascontiguousarray(values.astype(np.uint8).reshape(n, count))


def put_signs(records, table, layout):
    """The signs of ``table``'s ``_sign.FIELD`` columns (:func:`keep_signs`) written into
    ``records`` (writable, ``layout``'s records, as the way back wrote them from ``table``:
    ``SoA.from_arrow(table, layout, extra="drop").to_aos()``). A null keeps the rule's
    sign. A kept sign that is not a valid sign of the field, or not the value's sign
    (a negative sign on a positive value; a negative sign on zero is kept: negative
    zero), is a ``ConversionError`` naming the column, the row and the sign, and
    ``records`` are then not all written: drop them. Returns ``records``."""
    buf, n, on_device = _records(records, layout, True)
    if table.num_rows != n:
        raise LayoutError(f"the table has {table.num_rows} rows and the records {n}: give the records written from it")
    by_name = {f.name: f for f in sign_fields(layout)}
    for name in table.column_names:
        if not name.startswith(PREFIX):
            continue
        if table.column_names.count(name) > 1:
            raise LayoutError(f"the table has {table.column_names.count(name)} columns {name!r}; keep one")
        field = by_name.get(name[len(PREFIX) :])
        if field is None:
            have = ", ".join(by_name) or "none"
            raise LayoutError(
                f"column {name!r}: the layout has no packed or zoned field "
                f"{name[len(PREFIX) :]!r} (those whose signs are kept: {have}); drop the column, or give its layout"
            )
        width, zoned, leading, ascii_, signed, _ = _facts(field)
        offs = np.ascontiguousarray(field.element_offsets(), dtype=np.int64)
        try:
            kept = _kept(table.column(name), n, offs.size)
        except (LayoutError, ConversionError) as err:
            raise type(err)(f"column {name!r}: {err}") from None
        if on_device:
            from numba import cuda

            first = _kernels(True).write_signs(
                buf, layout.itemsize, n, cuda.to_device(offs), width, zoned, leading, ascii_, signed,
                cuda.to_device(kept),
            )  # fmt: skip
        else:
            first = _kernels(False).write_signs(
                buf, layout.itemsize, n, offs, width, zoned, leading, ascii_, signed, kept
            )
        if first >= 0:
            row, k = divmod(int(first), offs.size)
            raise ConversionError(_misfit(name, field, row, k, kept[row, k], signed, ascii_, zoned == 2))
    return records


def _misfit(name, field, row, k, code, signed, ascii_, separate=False):
    where = f"row {row}" + (f", element {k}" if field.shape else "")
    sign = _NAMES.get(int(code), f"{int(code):X}")
    if separate:
        why = (
            "is not D on a zero: a separate sign (+ or -) keeps only the - of a negative zero (D), the way back "
            "writes every other sign itself"
        )
        if not signed:
            why = "is kept in an unsigned field"
    elif int(code) < 0xA:
        why = "is no sign (valid: A, C, E, F positive; B, D negative)"
    elif ascii_ and int(code) not in (0xC, 0xD, 0xF):
        why = "has no ASCII overpunch (only C, D and F have one)"
    elif int(code) in (0xB, 0xD) and not signed:
        why = "is negative, in an unsigned field"
    elif int(code) in (0xB, 0xD):
        why = "is negative, but the value is positive"
    else:
        why = "is positive, but the value is negative"
    return (
        f"column {name!r}, {where}: sign {sign} {why}; fix the sign (null writes the field's own) "
        f"or the value of {field.name!r}"
    )
