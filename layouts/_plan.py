"""Copy plans: how a Layout's leaves map onto column buffers, in the form kernels read.

:func:`forward_ops` and :func:`reverse_ops` turn a Layout plus buffer addresses (an
:class:`layouts._arena.Arena`'s, or Arrow buffers') into the int64 op table of
:mod:`kernels.plan`.
"""

import functools
import math
import mmap
import os
import threading
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from ._ebcdic import byte_of, decode_table, encode_table, is_ascii, max_utf8
from ._errors import ConversionError, LayoutError
from .kernels import plan as P

ALIGN = 64
KIND_CODES = {
    "copy": P.K_COPY,
    "bytes": P.K_BYTES,
    "bool": P.K_BOOL,
    "scale": P.K_SCALE,
    "civil": P.K_CIVIL,
    "cstr": P.K_CSTR,
    "utf32": P.K_UTF32,
    "bits": P.K_BITS,
    "enum": P.K_ENUM,
    "text": P.K_TEXT,
    "packed": P.K_PACKED,
    "zoned": P.K_ZONED,
    "binary": P.K_BINARY,
    "hfloat": P.K_HFLOAT,
}
_VAR = ("cstr", "utf32", "text")
_I32_MAX = 2**31 - 1


def arrow_width(field):
    """Bytes of one Arrow value of a fixed-width leaf (0 for bit-packed or var-length)."""
    if field.kind in ("bool",) + _VAR:
        return 0
    if field.kind == "bytes" or field.kind == "copy":
        return field.width
    if field.kind == "enum":
        return 4  # int32 dictionary indices
    if field.arrow_type == pa.bool_():
        return 0  # a bit-field read as a bit-packed boolean
    return field.arrow_type.bit_width // 8


def has_time_nulls(field):
    """Leaves that always get a validity bitmap: every datetime64/timedelta64 leaf (NaT
    becomes null), and mainframe numbers read with ``invalid="null"`` (text has no invalid bytes)."""
    return field.dtype.kind in "mM" or (
        field.encoding is not None and field.encoding.invalid == "null" and field.kind != "text"
    )


def var_bytes(field):
    """Most bytes one value of a var-length leaf takes in Arrow: its width, or for EBCDIC
    text the width times the most UTF-8 bytes one character of its code page takes."""
    if field.kind == "text":
        return field.width * max_utf8(field.encoding.codepage)
    return field.width


def native_dtype(field):
    """The leaf's NumPy type in native byte order (what Arrow holds for ``copy`` leaves)."""
    return field.dtype.newbyteorder("=") if field.dtype.byteorder not in "|=" else field.dtype


def null_bits(field, value, what):
    """Raw native bits of ``value`` in the leaf's type, and the null mode it asks for.

    ``what`` names the argument (``nulls`` or ``fill``) for the error message.
    """
    where = f"{what}[{field.name!r}]"
    if field.enum:
        number = _enum_value(field, value, where)
        return P.N_BITS, number - (1 << 64) if number >= 1 << 63 else number  # int64 bits, as _bits
    if field.kind == "bits" and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        lo, hi = field.bit_range()
        if not lo <= value <= hi:
            raise ConversionError(
                f"{where}={value!r} does not fit the {field.bits[1]}-bit field {field.name!r} ({lo}..{hi})"
            )
    if field.kind != "copy" and field.kind != "bits":
        raise ConversionError(
            f"{where}: field {field.name!r} ({field.dtype.str} at offset {field.offset}) is "
            f"converted as {field.kind!r}; {what} values apply to numeric and datetime fields only"
        )
    dt = native_dtype(field) if field.kind == "copy" else np.dtype(field.arrow_type.to_pandas_dtype())
    if dt.kind == "f" and isinstance(value, (float, np.floating)) and math.isnan(value):
        return P.N_NAN, _bits(np.array(value, dtype=dt))
    try:
        arr = np.array(value, dtype=dt)
        same = (
            arr == np.array(value) if dt.kind not in "mM" else (arr == value) | (np.isnat(arr) & (str(value) == "NaT"))
        )
    except (OverflowError, ValueError, TypeError) as err:
        raise ConversionError(f"{where}={value!r} does not fit field {field.name!r} of type {dt}: {err}") from err
    if not bool(same):
        raise ConversionError(
            f"{where}={value!r} is not exactly representable as {dt} (field {field.name!r} at "
            f"offset {field.offset}); give a value of that type"
        )
    if field.kind == "bits":  # the kernels read a bit-field's value sign-extended to int64, not its raw bits
        number = int(arr)
        return P.N_BITS, number - (1 << 64) if number >= 1 << 63 else number
    return P.N_BITS, _bits(arr)


def _bits(arr):
    """The raw bits of a one-value array as the kernels compare and store them: the
    unsigned value for 1 to 4 bytes, the signed int64 for 8 (op tables are int64)."""
    bits = int(arr.reshape(1).view(f"u{arr.dtype.itemsize}")[0])
    return bits - (1 << 64) if bits >= 1 << 63 else bits


def _enum_value(field, value, where):
    """The integer a C enum field stores for an enumerator name or a number."""
    names = {name: v for v, name in field.enum}
    if isinstance(value, str) and value in names:
        return names[value]
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConversionError(
            f"{where}={value!r} is neither an enumerator of field {field.name!r} ({', '.join(names)}) nor an integer"
        ) from None
    info = np.iinfo(field.dtype)
    if not info.min <= number <= info.max:
        raise ConversionError(f"{where}={value!r} does not fit field {field.name!r} ({field.dtype.str})")
    return number


def _enum_lookup(field, dense_limit=1 << 16):
    """``(table, first value, dense)`` for AoS -> SoA of an enum: the index of every value
    from the smallest to the largest enumerator where that range is small, else the
    ascending values for a binary search."""
    values = np.array([v for v, _ in field.enum], dtype=np.int64)
    lo, hi = int(values[0]), int(values[-1])
    if hi - lo < dense_limit:
        table = np.full(hi - lo + 1, -1, dtype=np.int64)
        table[values - lo] = np.arange(len(values))
        return table, lo, True
    return values, 0, False


def enum_table(field, dictionary):
    """int64 value of each entry of an enum column's dictionary (names or numbers)."""
    where = f"column {field.name!r}"
    return np.array(
        [_enum_value(field, v, f"{where}: dictionary entry") for v in dictionary.to_pylist()], dtype=np.int64
    )


_claims_lock = threading.Lock()
_claims: "dict[int, tuple[str, list[tuple], list[tuple]]]" = {}  # per conversion running: thread, writes, reads


@contextmanager
def claimed(call, writes=(), reads=()):
    """Hold the memory a conversion (``call``, e.g. ``"AoS.to_soa"``) writes and reads
    while it runs: ``writes`` and ``reads`` are ``(space, first, end, what)`` byte
    ranges (``space`` ``"cpu"`` or ``"cuda"``, ``what`` naming the buffer for a
    message).

    A range written is owned by one conversion at a time; a range read may be read by
    any number at once, but not while one writes it. A conversion that would write
    memory another one (in another thread) is reading or writing, or read memory another
    is writing, is refused with a LayoutError before it touches anything, rather than
    mixing its records with the other's. Ranges are compared as addresses, so two
    different NumPy views (or an AoS and a view) of the same memory are one buffer;
    a ``numpy.memmap`` also claims its file's bytes (:func:`file_span`), so two maps
    of one file are one buffer too.
    A write is checked against every range held, a read against the writes held only
    (one or none per conversion), so many columns read at once cost no more than linear.
    """
    writes = [w for w in writes if w[2] > w[1]]
    reads = [r for r in reads if r[2] > r[1]]
    thread = threading.current_thread().name
    key = object()
    with _claims_lock:
        for other, held_w, held_r in _claims.values():
            for new, writing, held, held_writes in _pairs(writes, reads, held_w, held_r):
                for old in held:
                    if old[0] == new[0] and old[1] < new[2] and new[1] < old[2]:
                        raise LayoutError(_conflict(call, new, writing, old, held_writes, other))
        _claims[id(key)] = (thread, writes, reads)
    try:
        yield
    finally:
        with _claims_lock:
            del _claims[id(key)]


def byte_range(obj):
    """``(first, end)`` addresses of the memory of a NumPy array, a pyarrow Buffer or a host :class:`Span`."""
    if isinstance(obj, (pa.Buffer, Span)):
        return obj.address, obj.address + obj.size
    return getattr(np.lib, "array_utils", np).byte_bounds(np.asarray(obj))  # (NumPy 1.26: np.byte_bounds)


def file_span(array, what):
    """The claim range (for :func:`claimed`) of the file bytes under a ``numpy.memmap``
    (or a view of one), as a list of none or one: ``("file <device>:<inode>", first,
    end, what)``, ``first``/``end`` bytes of the file. Two maps of one file (say
    ``np.memmap(path, mode="r+")`` written by one thread and ``read_records(path)``
    converted by another) are at different addresses but share pages: their address
    ranges do not meet, their file ranges do. The file is the one at the map's
    ``filename`` now (``os.stat``): a map whose file was renamed away after it was made
    is not matched with a map of its new name."""
    mm = getattr(array, "_mmap", None) if isinstance(array, np.memmap) else None
    name = getattr(array, "filename", None)
    if mm is None or name is None or array.size == 0:
        return []
    try:
        mapped_at = np.frombuffer(mm, np.uint8).ctypes.data
        st = os.stat(name)
    except (ValueError, OSError):  # closed, or the file is gone: nothing else can map it by that name
        return []
    lo, hi = getattr(np.lib, "array_utils", np).byte_bounds(np.asarray(array))
    first = array.offset - array.offset % mmap.ALLOCATIONGRANULARITY + (lo - mapped_at)
    return [(f"file {st.st_dev}:{st.st_ino}", first, first + (hi - lo), what)]


def _pairs(writes, reads, held_w, held_r):
    """``(range of this call, whether it is written, ranges held by another, whether
    those are written)`` to compare: writes against everything held, reads against the
    writes held."""
    for w in writes:
        yield w, True, held_w, True
        yield w, True, held_r, False
    if held_w:
        for r in reads:
            yield r, False, held_w, True


def _conflict(call, new, writing, old, old_writes, thread):
    """The message for a conversion refused because another (in ``thread``) holds ``old``,
    which overlaps the range ``new`` this call would write (``writing``) or read."""
    clash = (
        f"{call}: {new[3]} is {'being written' if old_writes else 'being read'} right now by another "
        f"conversion (thread {thread!r}, {'writing' if old_writes else 'reading'} {old[3]})"
    )
    if writing:
        why = (
            "two conversions writing one buffer at once would mix their records in it"
            if old_writes
            else "writing it now would change records that conversion has not read yet"
        )
        fix = (
            "give each thread its own out= (one SoA or one array per thread, or out=None for a new one), "
            "or wait for the other call to return"
        )
    else:
        why = "reading it now would mix old records with new ones"
        fix = "wait for that call to return before converting this memory, or convert a copy of it"
    return f"{clash}: {why}. A buffer is owned by one conversion at a time: {fix}"


def _offsets_table(layout):
    starts, tables = [], []
    pos = 0
    for f in layout.fields:
        starts.append(pos)
        offs = f.element_offsets()
        tables.append(offs)
        pos += len(offs)
    return starts, (np.concatenate(tables) if tables else np.zeros(0, np.int64))


def _base_row(field, starts, i):
    row = np.zeros(P.NCOLS, dtype=np.int64)
    row[P.KIND] = KIND_CODES[field.kind]
    row[P.WIDTH] = field.width
    row[P.SWAP] = int(field.swapped)
    row[P.COUNT] = field.count
    row[P.OFFS] = starts[i]
    row[P.P1] = field.factor if field.kind in ("scale", "civil") else field.width
    if field.kind in ("scale", "civil"):
        row[P.P2] = field.arrow_type.bit_width // 8
    if field.dtype.kind in "mM" and field.kind == "copy":
        row[P.NULLS], row[P.SENT] = P.N_BITS, P.NAT
    if field.kind == "bits":
        shift, nbits, signed, _ = field.bits
        row[P.P1], row[P.P2], row[P.P3] = shift, nbits, arrow_width(field)
        row[P.FLAGS] |= P.F_SIGNED if signed else 0
    if field.enum:
        row[P.P3] = 4
        row[P.FLAGS] |= P.F_SIGNED if field.dtype.kind == "i" else 0
    if field.encoding is not None:
        _mainframe_row(row, field)
    return row


def _mainframe_row(row, field):
    """The parameters of a mainframe op (see kernels.mainframe, "plan codes")."""
    enc = field.encoding
    row[P.FLAGS] |= (P.F_SIGNED if enc.signed else 0) | (P.F_NULL_INVALID if enc.invalid == "null" else 0)
    row[P.FLAGS] |= P.F_ASCII if is_ascii(enc.codepage) else 0
    if field.kind == "text":
        row[P.P1] = var_bytes(field)
        row[P.FLAGS] |= {"none": 0, "right": P.F_TRIM_RIGHT, "both": P.F_TRIM_RIGHT | P.F_TRIM_LEFT}[enc.trim]
        return
    row[P.P1] = enc.digits
    row[P.P2] = arrow_width(field)
    row[P.P3] = max(-enc.scale, 0)  # PIC 9PP: the value is the digits times 10**P3
    if enc.kind in ("packed", "zoned") and enc.positive:
        row[P.TABLE] = int(enc.positive, 16)  # the positive sign nibble written back
    if enc.kind == "zoned":
        row[P.FLAGS] |= (P.F_LEADING if enc.sign.startswith("leading") else 0) | (
            P.F_SEPARATE if enc.sign.endswith("separate") else 0
        )
        row[P.SENT] = byte_of(enc.codepage, "+") | byte_of(enc.codepage, "-") << 8
    if enc.kind == "binary" and (enc.trunc == "bin" or enc.digits == 0):
        row[P.FLAGS] |= P.F_TRUNC_BIN


@functools.lru_cache(maxsize=None)
def _text_pairs(codepage):
    """uint16[65536]: two EBCDIC bytes' characters at once, when each is one UTF-8 byte
    (index: the first byte plus 256 times the second; 0x80 in a byte whose character takes
    more): the CPU text loop's table (P3 of a text op), held here for the process."""
    table = decode_table(codepage)
    return _pair_table(np.where(table >> 24 == 1, table & 0xFF, 0x80).astype(np.uint16))


def _pair_table(single):
    """uint16[65536] of the byte table ``single`` (uint16[256]) two bytes at a time."""
    pairs = np.ascontiguousarray((single[None, :] | (single[:, None] << 8)).reshape(-1))
    pairs.setflags(write=False)
    return pairs


@functools.lru_cache(maxsize=None)
def _text_pairs_back(codepage):
    """uint16[65536]: the code page's bytes of two ASCII characters at once (index: the
    first plus 256 times the second), the way back's table (P3 of a text op); None if an
    ASCII character has no byte in the code page (the kernel then goes character by character)."""
    ascii = encode_table(codepage)[:128]
    if (ascii < 0).any():
        return None
    single = np.zeros(256, np.uint16)
    single[:128] = ascii & 0xFF
    return _pair_table(single)


def forward_ops(arena, base, sentinels):
    """Op table for AoS -> SoA into an arena at address ``base``.

    ``sentinels`` maps leaf names to values that become nulls. Returns ``(ops, offs,
    keep)``: ``keep`` holds the lookup tables the ops point to; keep it until the pass
    is done.
    """
    layout = arena.layout
    starts, offs = _offsets_table(layout)
    ops = np.zeros((len(layout.fields), P.NCOLS), dtype=np.int64)
    keep = []
    for i, f in enumerate(layout.fields):
        row = _base_row(f, starts, i)
        if f.kind == "enum":
            table, row[P.P1], dense = _enum_lookup(f)
            keep.append(table)
            row[P.TABLE], row[P.P2] = table.ctypes.data, len(table)
            row[P.FLAGS] |= P.F_DENSE if dense else 0
        if f.kind == "text":
            table = decode_table(f.encoding.codepage)
            keep.append(table)
            row[P.TABLE] = table.ctypes.data
            row[P.P3] = _text_pairs(f.encoding.codepage).ctypes.data  # (the CPU's; CUDA reads TABLE)
        bufs = arena.buffers[i]
        row[P.DATA] = base + bufs["data"][0]
        if "validity" in bufs:
            row[P.VALID] = base + bufs["validity"][0]
        if "offsets" in bufs:
            row[P.OFFSETS] = base + bufs["offsets"][0]
            row[P.P2] = arena.offset_width[i]
            if f.arrow_type == pa.string() and f.kind == "cstr":
                row[P.FLAGS] |= P.F_UTF8
        if f.name in sentinels:
            row[P.NULLS], row[P.SENT] = null_bits(f, sentinels[f.name], "nulls")
        ops[i] = row
    return ops, offs, keep


def reverse_ops(layout, columns, fills, truncate):
    """Op table for SoA -> AoS from per-leaf column buffers.

    ``columns`` holds, per leaf, a :class:`ColumnBuffers`; ``fills`` maps leaf names
    to the value written where the column is null. Returns ``(ops, offs, keep)`` as
    :func:`forward_ops` does.
    """
    starts, offs = _offsets_table(layout)
    ops = np.zeros((len(layout.fields), P.NCOLS), dtype=np.int64)
    columns = without_views(columns)  # (binary columns made of views: theirs are the addresses below)
    keep: list = []  # the enum and text tables, in op order (device_tables reads them so), then the columns
    for i, (f, col) in enumerate(zip(layout.fields, columns)):
        if col is None:  # a column with a problem of its own (SoA.from_arrow): its row left out of the run
            continue
        if (col.offsets is not None) != (col.kind in _VAR):  # (the kernel would read the one as the other)
            raise LayoutError(
                f"field {f.name!r}: its column is {col.type} read as kind {col.kind!r}, which "
                f"{'has no' if col.offsets is None else 'does not read'} value offsets; this is a bug in layouts"
            )
        row = _base_row(f, starts, i)
        row[P.KIND] = KIND_CODES[col.kind]
        if col.kind == "enum":
            table = enum_table(f, col.dictionary)
            keep.append(table)
            row[P.TABLE], row[P.P2] = table.ctypes.data, len(table)
        if col.kind == "text":
            table = encode_table(f.encoding.codepage)
            keep.append(table)
            row[P.TABLE] = table.ctypes.data
            pairs = _text_pairs_back(f.encoding.codepage)  # (the CPU's; CUDA reads TABLE)
            row[P.P3] = 0 if pairs is None else pairs.ctypes.data
        row[P.DATA] = col.data.address if col.data is not None else 0
        row[P.VALID] = col.validity.address if col.validity is not None else 0
        row[P.ELEM0] = col.offset
        if col.offsets is not None:
            row[P.OFFSETS] = col.offsets.address
            row[P.P2] = 8 if pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type) else 4
        if f.name in fills:
            row[P.NULLS], row[P.SENT] = null_bits(f, fills[f.name], "fill")
        if truncate:
            row[P.FLAGS] |= P.F_TRUNCATE
        ops[i] = row
    keep.append(columns)
    return ops, offs, keep


def is_view(arrow_type) -> bool:
    """Whether a column is Arrow ``binary_view`` (``read_stream(tails="view")``'s tails)."""
    return pa.types.is_binary_view(arrow_type) if hasattr(pa.types, "is_binary_view") else False


def without_views(columns):
    """``columns`` with each host ``binary_view`` column as a binary one over a copy of its
    values (``large_binary`` past 2 GiB): the kernels, pickling and the GPU read variable-
    width values through offsets, not 16-byte views. The same tuple when there are none."""
    if not any(c is not None and is_view(c.type) for c in columns):
        return columns
    out = []
    for c in columns:
        if c is not None and is_view(c.type):
            arr = c.to_array()
            lengths = np.frombuffer(arr.buffers()[1], "<i4").reshape(-1, 4)[arr.offset : arr.offset + len(arr), 0]
            total = int(lengths.astype(np.int64).clip(0).sum())  # (a view's first 4 bytes: its length)
            arr = arr.cast(pa.large_binary() if total > 2**31 - 1 else pa.binary())
            validity, offsets, data = arr.buffers()
            c = ColumnBuffers(arr.type, len(arr), validity, offsets, data, arr.offset, c.kind, c.dictionary)
        out.append(c)
    return tuple(out)


class Span:
    """Where one column buffer lies: ``size`` bytes at ``address``, the address a copy
    plan takes as it is. On the host that is the buffer's address (``owner``, a pyarrow
    Buffer or the arena, keeps the bytes alive); in a device arena it is the buffer's
    offset from the arena's first byte (the kernels add the arena's address)."""

    __slots__ = ("address", "size", "owner", "_arrow")

    def __init__(self, address, size, owner=None):
        self.address, self.size, self.owner = address, size, owner
        self._arrow = (
            owner if isinstance(owner, pa.Buffer) and owner.address == address and owner.size == size else None
        )

    def arrow(self):
        """The bytes as a pyarrow Buffer, no copy (host spans only); made once."""
        if self._arrow is None:
            self._arrow = pa.foreign_buffer(self.address, self.size, base=self.owner)
        return self._arrow

    def __repr__(self):
        return f"Span({self.address:#x}, {self.size})"


def _span(buffer):
    """A buffer as a :class:`Span` (a pyarrow Buffer becomes one that keeps it alive)."""
    if buffer is None or isinstance(buffer, Span):
        return buffer
    return Span(buffer.address, buffer.size, buffer)


class ColumnBuffers:
    """The buffers of one leaf column (element level, before fixed_size_list), each a
    :class:`Span` on either backend; pyarrow Buffers given are held as Spans over them."""

    __slots__ = ("type", "length", "validity", "offsets", "data", "offset", "kind", "dictionary")

    def __init__(self, type, length, validity, offsets, data, offset=0, kind="copy", dictionary=None):
        self.type, self.length, self.offset, self.kind = type, length, offset, kind
        self.validity, self.offsets, self.data = _span(validity), _span(offsets), _span(data)
        self.dictionary = dictionary  # enum columns: the entries the int32 indices point to

    def used(self):
        """The bytes of this host column's buffers that its rows use, so a slice of a
        large batch gives only its own: ``(first, validity, ends, data)`` with ``first``
        the element its validity byte starts at (``offset`` rounded down to a multiple
        of 8), ``validity`` and ``data`` uint8 views, ``ends`` the typed string offsets
        of elements ``first...`` and one more (None for a buffer the column lacks)."""
        first, end = self.offset - self.offset % 8, self.offset + self.length
        validity = ends = data = None
        if self.validity is not None:
            validity = np.frombuffer(self.validity.arrow(), np.uint8)[first // 8 : -(-end // 8)]
        if self.offsets is not None:
            large = pa.types.is_large_binary(self.type) or pa.types.is_large_string(self.type)
            ends = np.frombuffer(self.offsets.arrow(), dtype="<i8" if large else "<i4")[first : end + 1]
            data = np.frombuffer(self.data.arrow(), np.uint8)[int(ends[0]) : int(ends[-1])]
        elif self.data is not None:
            bits = _element_bits(self.type)
            raw = np.frombuffer(self.data.arrow(), np.uint8)
            data = raw[first // 8 : -(-end // 8)] if bits == 1 else raw[first * bits // 8 : end * bits // 8]
        return first, validity, ends, data

    def to_array(self, wrap=Span.arrow):
        """The column as a pyarrow Array over its bytes, no copy (host columns only);
        ``wrap(span)`` makes each pyarrow Buffer (an export's holds its token)."""
        validity, offsets, data = (None if b is None else wrap(b) for b in (self.validity, self.offsets, self.data))
        if self.dictionary is not None:
            return pa.DictionaryArray.from_buffers(
                self.type, self.length, [validity, data], self.dictionary, null_count=-1, offset=self.offset
            )
        bufs = [validity, data] if offsets is None else [validity, offsets, data]
        return pa.Array.from_buffers(self.type, self.length, bufs, null_count=-1, offset=self.offset)


def _element_bits(t):
    """Bits of one element in the data buffer of a fixed-width Arrow leaf type."""
    if pa.types.is_boolean(t):
        return 1
    if pa.types.is_dictionary(t):
        return t.index_type.bit_width
    if pa.types.is_fixed_size_binary(t):
        return 8 * t.byte_width
    return t.bit_width
