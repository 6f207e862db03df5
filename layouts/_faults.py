"""Turn a kernel fault ``(row, op, code)`` into an error that names the field and the fix."""

import mmap
import weakref
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from ._errors import ConversionError
from .kernels import plan as P
from .kernels._memory import MappedGuard


def _record_value(array, field, row):
    """The leaf's value(s) in one record of a structured array, read with NumPy; a
    ``U<n>`` value that holds no valid code points is shown as its UTF-32 code units
    (NumPy cannot make a str of it). Never fails: an error message is being built."""
    raw = np.frombuffer(array[row : row + 1].tobytes(), dtype=np.uint8)

    def one(o):
        cell = raw[o : o + field.width]
        if field.dtype.kind == "U":
            units = cell.view(field.dtype.byteorder.replace("|", "=") + "u4")
            if ((units > 0x10FFFF) | ((units >= 0xD800) & (units <= 0xDFFF))).any():
                return "UTF-32 code units " + " ".join(f"{int(u):#x}" for u in units)
        return cell.view(field.dtype)[0]

    try:
        vals = [one(o) for o in field.element_offsets()]
    except Exception:  # noqa: BLE001 - the message must still be built
        vals = [bytes(raw[o : o + field.width]) for o in field.element_offsets()]
    return vals[0] if len(vals) == 1 else vals


_I64_MAX, _I32_MIN, _I32_MAX = 2**63 - 1, -(2**31), 2**31 - 1


def time_range(field):
    """``(first, last)``: the counts of a datetime64/timedelta64 leaf that its Arrow type
    holds, as the forward kernels check them (``v * factor`` fits int64; a date32 also
    fits int32 days; months and years become the first day of their month)."""
    f = field.factor
    if field.kind == "civil":  # months (or years) -> date32 days of the month's first day
        last_day, first_day = np.datetime64(_I32_MAX, "D"), np.datetime64(_I32_MIN, "D")
        hi = int(last_day.astype("M8[M]").astype(np.int64))
        lo = int(first_day.astype("M8[M]").astype(np.int64))
        if np.datetime64(lo, "M").astype("M8[D]") < first_day:
            lo += 1
        return -(-lo // f), hi // f
    lim = _I64_MAX // f
    if field.arrow_type == pa.date32():
        return max(-lim, -(-_I32_MIN // f)), min(lim, _I32_MAX // f)
    return -lim, lim


def _time_out_of_range(array, field, row):
    """Why a datetime64/timedelta64 value does not fit its Arrow type: the raw count and
    its unit (NumPy would show a wrapped date for it), and the counts that do fit."""
    raw = np.frombuffer(array[row : row + 1].tobytes(), dtype=np.uint8)
    counts = [
        int(raw[o : o + 8].view(field.dtype.byteorder.replace("|", "=") + "i8")[0]) for o in field.element_offsets()
    ]
    lo, hi = time_range(field)
    bad = [k for k, v in enumerate(counts) if v != -(2**63) and not lo <= v <= hi]
    k = bad[0] if bad else 0
    unit, step = np.datetime_data(field.dtype)
    step_unit = f"{step}{unit}" if step != 1 else unit
    stamp = field.dtype.kind == "M"
    what = f"counts of {step_unit} {'since 1970-01-01' if stamp else ''}".rstrip()
    element = f"element {k} of {len(counts)}, " if len(counts) > 1 else ""
    span = f"{lo} to {hi}"
    if stamp:
        span += f" ({np.datetime64(lo, step_unit)} to {np.datetime64(hi, step_unit)})"
    fix = "fix the value (a missing time is NaT)"
    if (
        field.arrow_type == pa.date32()
        and abs(counts[k]) * field.factor * (31 if field.kind == "civil" else 1) <= _I64_MAX // 86400
    ):
        fix += f", or store the field as {field.dtype.kind}8[s] (Arrow timestamp[s] holds it)"
    return (
        f"{element}value {counts[k]} ({what}) does not fit Arrow {field.arrow_type}, which holds a "
        f"{field.dtype.str} field's counts from {span} only; {fix}"
    )


def forward_error(layout, array, fault, first=0, source=None, offset=0):
    """The ConversionError for a fault while converting records to columns.

    ``array`` holds the records converted; they are records ``first...`` of ``source``
    (a file name), whose records start at byte ``offset``. The error keeps ``fault``
    (``(row, op, code)``, row counted in ``array``) and ``records`` (``array``)."""
    row, op, code = fault
    f = layout.fields[op]
    where = f"field {f.name!r} ({f.dtype.str} at offset {f.offset}), record {first + row}"
    if source is not None:
        where = f"{source}: {where} (byte {offset + (first + row) * layout.itemsize} of the file)"
    if f.encoding is not None:  # a mainframe field: its bytes, in hex, and why
        from ._mainframe import forward_message

        start = (offset if source is not None else 0) + (first + row) * layout.itemsize
        err = ConversionError(
            forward_message(f, array, fault, where, start, "of the file" if source is not None else "of the records")
        )
        err.fault, err.records = fault, array
        return err
    value = _record_value(array, f, row)
    if code == P.E_RANGE and f.dtype.kind in "mM":
        msg = f"{where}: {_time_out_of_range(array, f, row)}"
    elif code == P.E_RANGE:  # pragma: no cover - only time fields are range-checked going to Arrow
        msg = f"{where}: value {value!r} does not fit Arrow {f.arrow_type}; fix the value"
    elif code == P.E_UTF and f.kind == "cstr":
        msg = (
            f"{where}: {value!r} is not valid UTF-8; map the field to bytes with "
            f"bytes_as={{{f.name!r}: 'binary'}} (or 'fixed')"
        )
    elif code == P.E_UTF:
        msg = f"{where}: {value!r} holds a value that is not a Unicode code point; fix the record"
    elif code == P.E_INVALID and f.dtype.base.kind == "b":
        msg = f"{where}: {_bool_bytes(array, f, row)}"
    else:  # pragma: no cover - the forward kernels raise only the codes above
        msg = f"{where}: conversion failed (code {code})"
    err = ConversionError(msg)
    err.fault, err.records = fault, array
    return err


def _bool_bytes(array, f, row):
    """Why a boolean field's bytes cannot go to Arrow: a byte other than 0 and 1."""
    try:
        buf, base = memoryview(array).cast("B"), row * array.dtype.itemsize
        values = [buf[base + int(o)] for o in np.asarray(f.element_offsets()).reshape(-1)]
        k = next(k for k, v in enumerate(values) if v > 1)
        shown = f"byte {values[k]:02X}" + (f" (element {k})" if len(values) > 1 else "")
    except (TypeError, ValueError, StopIteration):
        shown = "a byte"
    return (
        f"{shown}: a boolean is byte 00 or 01, and a bit holds only those (another byte would come back "
        f"as 01); read the field as an integer (dtype 'u1') to keep its bytes, or fix the record"
    )


def _arrow_value(column, row, count):
    """The column's value(s) for one record, as Python objects or, where Python cannot
    hold them (datetimes out of range, strings that are not UTF-8), as the raw integers
    or bytes Arrow stores. Never fails: an error message is being built."""
    part = column.slice(row * count, count)
    try:
        values = part.to_pylist()
    except (OverflowError, ValueError):
        try:
            if pa.types.is_string(part.type) or pa.types.is_large_string(part.type):
                raw = pa.large_binary() if pa.types.is_large_string(part.type) else pa.binary()
            else:
                raw = pa.int64() if part.type.bit_width == 64 else pa.int32()
            values = part.view(raw).to_pylist()
        except Exception:  # noqa: BLE001 - the message must still be built
            values = ["<unreadable>"] * count
    return values if count > 1 else values[0]


def reverse_error(layout, columns, fault):
    """The ConversionError for a fault while writing columns back into records."""
    row, op, code = fault
    f = layout.fields[op]
    value = _arrow_value(columns[op].to_array(), row, f.count)
    where = f"column {f.name!r}, row {row}"
    target = f"field {f.name!r} ({f.dtype.str} at offset {f.offset})"
    if f.encoding is not None:
        from ._mainframe import reverse_message

        return ConversionError(reverse_message(f, value, code, where))
    if code == P.E_NULL:
        msg = (
            f"{where} is null and {target} cannot hold a null; pass fill={{{f.name!r}: value}} "
            f"to write a value in its place"
        )
    elif code == P.E_TOO_LONG:
        msg = (
            f"{where}: {value!r} is longer than {target}; pass truncate=True to cut it to "
            f"{f.width if f.kind != 'utf32' else f.width // 4} {'bytes' if f.kind != 'utf32' else 'characters'}"
        )
    elif code == P.E_NUL:
        msg = (
            f"{where}: {value!r} holds a NUL byte, and {target} is a C string (bytes_as='binary' or "
            f"'string'), which ends at its first NUL: the bytes after it would be lost. "
            + (
                "A record stream's _tail: write the stream back with layouts.write_stream, which keeps every byte"
                if f.name == "_tail"
                else "Remove the NUL, or bind the field with bytes_as='fixed' to keep its raw bytes"
            )
        )
    elif code == P.E_INEXACT:
        msg = (
            f"{where}: {value!r} is not a whole number of the unit of {target}; "
            f"use a finer datetime64 unit for the field"
        )
    elif code == P.E_RANGE and f.kind == "bits":
        lo, hi = f.bit_range()
        msg = (
            f"{where}: {value!r} does not fit the {f.bits[1]}-bit field {f.name!r} ({lo}..{hi}) at "
            f"byte {f.offset}; fix the value, or widen the bit-field in the C declaration"
        )
    elif code == P.E_RANGE and f.kind == "enum":
        msg = f"{where}: dictionary index of {value!r} is outside the column's dictionary"
    elif code == P.E_RANGE:
        msg = f"{where}: {value!r} does not fit {target}"
    else:
        msg = f"{where}: {value!r} is not valid UTF-8 and cannot be written to {target}"
    err = ConversionError(msg)
    if code == P.E_NULL:
        err.fix = {"fill": {f.name: "value"}}  # (the keyword arguments that fix it: layouts._errors.Problems)
    elif code == P.E_TOO_LONG:
        err.fix = {"truncate": True}
    return err


# ------------------------------------------------------------ mapped files that shrink

_LOST: "weakref.WeakKeyDictionary[mmap.mmap, int]" = weakref.WeakKeyDictionary()  # mapping -> first byte lost


def shrunk_error(name, size, base, itemsize, first, doing, fix):
    """The ConversionError for a memory-mapped file of records that another process
    truncated: ``name`` is now ``size`` bytes, its records start at byte ``base``, and
    record ``first`` (counted from there) is the first one gone."""
    return ConversionError(
        f"{name} shrank while it was being {doing}: it is now {size:,} bytes, so record {first:,} (byte "
        f"{base + first * itemsize:,} of the file) and the ones after it are gone; another program truncated or "
        f"rewrote the file: {fix}"
    )


@contextmanager
def guarded_reads(records, itemsize, *, base=None, doing="read", fix=None):
    """Guard the reads of ``records`` in the block when it is memory-mapped from a file
    (a ``numpy.memmap`` or a view of one; anything else passes through unguarded).

    Another process may truncate the file. Its size is checked before and after the
    block, and the reads are guarded (:class:`layouts.kernels._memory.MappedGuard`): a
    page that is gone reads as zeros instead of killing the process with SIGBUS, and the
    block then raises a ConversionError naming the file and the first record that is
    missing (:func:`shrunk_error`). A mapping that lost a page keeps that page of zeros,
    so every later guarded read of it fails the same way. ``base`` is the byte of the
    file where record 0 starts (default: the map's ``offset``, the header given to
    ``numpy.memmap``)."""
    mm = getattr(records, "_mmap", None) if isinstance(records, np.memmap) else None
    if mm is None or records.size == 0:
        yield
        return
    try:
        mapped_at = np.frombuffer(mm, np.uint8).ctypes.data
    except ValueError:  # closed
        yield
        return
    if records.ndim == 1 and records.strides[0] > 0:  # records: the common case, without byte_bounds' cost
        lo = records.ctypes.data
        hi = lo + (records.shape[0] - 1) * records.strides[0] + records.itemsize
    else:
        lo, hi = getattr(np.lib, "array_utils", np).byte_bounds(np.asarray(records))
    start = records.offset - records.offset % mmap.ALLOCATIONGRANULARITY + (lo - mapped_at)  # byte of the file at lo
    base = records.offset if base is None else base
    name = records.filename or "the mapped file"
    fix = fix or "read it again (layouts.read_records) once it is complete"

    def check(lost=None):
        try:
            size = mm.size()  # the mapped file's own size (mmap keeps a descriptor of it)
        except (OSError, ValueError):
            return
        if lost is not None:
            _LOST[mm] = min(lost, _LOST.get(mm, lost))
        lost = _LOST.get(mm)
        end = start + (hi - lo)
        if size < end or (lost is not None and lost < end):
            gone = min(size, lost if lost is not None and lost < end else size)
            raise shrunk_error(name, size, base, itemsize, max(gone - base, 0) // itemsize, doing, fix)

    check()
    guard = MappedGuard(lo, hi - lo)
    try:
        yield
    except Exception:  # a value error made of zeros read in place of lost pages: the truncation is the error
        fault = guard.fault()
        guard.close()
        check(start + fault if fault is not None else None)
        raise
    finally:
        fault = guard.fault()
        guard.close()
    check(start + fault if fault is not None else None)
