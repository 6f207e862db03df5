"""read_stream: a framed, multi-type file -> {record type name: SoA}."""

from __future__ import annotations

import functools
import mmap
import os
import re
from typing import Any

import numpy as np
import pyarrow as pa

from .. import _backends as backends
from .._aos import AoS
from .._arena import Arena
from .._errors import ConversionError, LayoutError
from .._faults import forward_error
from .._layout import Layout
from .._plan import ColumnBuffers, Span, forward_ops
from .._soa import SoA, soa_over_arena
from ..kernels import stream as K
from ..kernels._memory import MappedGuard
from ..kernels.plan import DATA, OFFSETS, P2, VALID
from .frame import Scanned, _checked, _regular, detect_order, pooled, record_size, scan_section, source_bytes
from .spec import Record, Section, Stream, builtin, evaluate, field_dtype, load

__all__ = ["read_stream", "StreamTables", "resolve"]

_BINARY_MAX = 2**31 - 1


class StreamTables(dict):
    """What :func:`read_stream` returns: a dict from record type name to :class:`SoA`.

    Every table has ``_offset`` (int64: the record's byte offset in the stream, its
    framing included), then ``_prefix`` where the framing has bytes besides a length
    field (an RDW's), the type's fields, and ``_tail`` (binary: the bytes beyond the
    fields) where the section keeps tails. Reserved entries: ``"_header"`` (one row,
    the file header's fields), ``"_gaps"`` (``_offset``, ``_tail``: bytes no part
    of the description covers, kept so the stream goes back byte for byte),
    ``"_blocks"`` (VB block descriptor words), ``"_unknown"`` (records with an unknown
    tag, with ``unknown = "keep"``: ``_offset`` and the whole record in ``_tail``).

    Attributes: ``stream`` (the description), ``order`` (the byte order found or
    given), ``decimals`` ({type: {field: implied decimal places}}).
    """

    stream: Stream
    order: str
    decimals: "dict[str, dict[str, int]]"

    def decimal(self, type_name: str, field: str) -> pa.Array:
        """An integer column with implied decimals as an exact Arrow ``decimal128``."""
        places = self.decimals.get(type_name, {}).get(field)
        if places is None:
            raise LayoutError(
                f"{type_name}.{field} has no implied decimals; the ones that do: "
                f"{[f'{t}.{f}' for t, d in self.decimals.items() for f in d]}"
            )
        column = self[type_name].to_arrow().column(field).combine_chunks()
        return scaled(column, places)


def scaled(values: pa.Array, places: int) -> pa.Array:
    """Integers as ``decimal128(38, places)`` with the same unscaled values (exact:
    the 16-byte little-endian two's complement Arrow uses, built from the integers)."""
    ints = (
        values.fill_null(0)
        .to_numpy(zero_copy_only=False)
        .astype(np.int64 if pa.types.is_signed_integer(values.type) else np.uint64)
    )
    words = np.zeros((len(ints), 2), np.uint64)
    words[:, 0] = ints.view(np.uint64)
    if ints.dtype == np.int64:
        words[:, 1] = np.where(ints < 0, np.uint64(2**64 - 1), np.uint64(0))
    validity = values.buffers()[0]
    if validity is not None and values.offset:
        validity = pa.array(values.is_valid()).buffers()[1]
    return pa.Array.from_buffers(pa.decimal128(38, places), len(ints), [validity, pa.py_buffer(words)])


def resolve(spec: Any) -> Stream:
    """A Stream from a Stream, a path to a description file, or a built-in name."""
    if isinstance(spec, Stream):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        name = os.fspath(spec)
        if name in ("rdw", "bdw"):
            raise LayoutError(
                f"the {name} built-in needs the record's layout: pass lo.Stream.{name}(dtype) "
                f"(a NumPy structured dtype or a list of (name, type) fields)"
            )
        if os.sep in name or name.endswith(".toml") or os.path.exists(name):
            return load(name)
        return _builtin(name)
    raise LayoutError(
        f"spec must be a Stream, a path to a .toml description or a built-in name, got {type(spec).__name__}"
    )


@functools.lru_cache(maxsize=None)
def _builtin(name: str) -> Stream:
    """A built-in description, parsed once per process (a Stream is a frozen value;
    parsing its TOML costs about 10 ms, as much as reading a small file)."""
    return builtin(name)


def _keep_prefix(s: Section) -> bool:
    f = s.framing
    if not f.prefix:
        return False
    return not (f.length is not None and f.length.offset == 0 and f.length.size == f.prefix)


def read_stream(src: Any, spec: Any, *, device: "str | None" = None, tails: str = "copy") -> StreamTables:
    """Read a framed, multi-type record stream into one table per record type.

    Parameters
    ----------
    src : path, bytes-like object, or binary file object
        A file object is read from its current position; a strided (non-contiguous)
        array or view as ``bytes(src)`` gives it, from a copy.
    spec : Stream, path to a ``.toml`` description, or a built-in name
        Built-ins: ``"pcap"``, ``"itch50"``, ``"las"``, ``"segy"``, ``"dbn"``; ``lo.Stream.rdw(dtype)`` and
        ``lo.Stream.bdw(dtype)`` for IBM V and VB files. See docs/streams.md.
    device : {"cpu", "cuda"}, optional
        Where the tables go (default ``"cpu"``). With ``"cuda"`` the stream goes to the
        GPU once and the GPU transpose reads each type's records there through their
        offsets, in one pass; the scan stays on the CPU, and so do types with tails
        (``_tail``: pcap packets), the header and ``_gaps``, which are converted on the
        CPU and moved to the GPU in one transfer each.
    tails : {"copy", "view"}
        How ``_tail`` columns (the bytes beyond the fields: pcap payloads, ``_gaps``,
        ``_unknown``) hold their bytes. ``"copy"`` (default): a ``binary`` column of its
        own (``large_binary`` past 2 GiB). ``"view"``: an Arrow ``binary_view`` column
        whose values point into ``src`` itself (16 bytes a value, those of at most 12
        bytes inline): no payload byte is copied, and every table keeps ``src`` alive.
        A path is then read into private memory first (one read, no mapping: a file
        truncated later cannot fault); a writable ``src`` (bytearray, NumPy array)
        changed later changes the values. Past 2 GiB (a view's offset is an int32) the
        column has several data buffers over ``src``, overlapping by 1 GiB; a tail of
        more than 1 GiB there makes it the copy. CPU only. See docs/streams.md.

    Returns
    -------
    StreamTables
        A dict from record type name to :class:`SoA`; each has ``_offset``, the
        record's byte offset, so types can be joined and the order restored.
        :func:`write_stream` takes it back, byte for byte.

    Examples
    --------
    >>> import struct, layouts as lo
    >>> data = struct.pack(">H", 3) + b"X\\x00\\x07" + struct.pack(">H", 3) + b"X\\x00\\x09"
    >>> S = lo.Stream
    >>> s = S([S.Section(S.Framing(length=S.Length(0, 2, "big")),
    ...     [S.RecordType("x", S.Record([("kind", "S1"), ("qty", ">u2")]))])])
    >>> t = lo.read_stream(data, s)
    >>> t["x"]["qty"].to_numpy().tolist(), t["x"]["_offset"].to_numpy().tolist()
    ([7, 9], [0, 5])
    """
    stream = resolve(spec)
    on_host = backends.get(device).host
    views = _tails_mode(tails, on_host)
    if not on_host:
        from .._cuda import device as _device

        _device.cuda()  # the memory pool first, and a clear error without a GPU
    buf, label, owner = _private(src) if views else source_bytes(src)
    # a mapped file truncated meanwhile: the gone pages read as zeros (no SIGBUS) and
    # the read is reported as such, whatever else those zeros caused
    mapped = isinstance(owner, mmap.mmap)
    with MappedGuard(buf.ctypes.data if mapped and buf.nbytes else 0, buf.nbytes if mapped else 0) as guard:
        try:
            out = _read(stream, buf, label, None if on_host else _OnDevice(buf), views)
        except ConversionError as err:
            _check_shrunk(guard, label, buf.nbytes, err, owner)
            raise
        _check_shrunk(guard, label, buf.nbytes, None, owner)
    del owner
    return out


def _tails_mode(tails: Any, on_host: bool) -> bool:
    """Whether ``tails`` (read_stream's argument) asks for views, checked."""
    if tails not in ("copy", "view"):
        raise LayoutError(f'tails must be "copy" (a binary column) or "view" (binary_view into src), got {tails!r}')
    if tails == "copy":
        return False
    if not on_host:
        raise LayoutError(
            'tails="view" points the _tail columns into the source in host memory; with device="cuda" '
            'use tails="copy" (the default)'
        )
    if not hasattr(pa, "binary_view"):  # (pyarrow 16, the floor, has it; a guard for older builds)
        raise LayoutError(f'tails="view" needs Arrow binary_view (pyarrow >= 16, this is {pa.__version__})')
    return True


def _private(src) -> "tuple[np.ndarray, str, object]":
    """:func:`source_bytes` for views that outlive the read: a path is read into memory
    of its own (one read), not mapped: a view into a mapping would fault (SIGBUS) if
    the file were truncated later. Other sources are what ``source_bytes`` gives."""
    if not isinstance(src, (str, os.PathLike)):
        return source_bytes(src)
    label = os.fspath(src)
    try:
        _regular(label, os.stat(label))  # before open: opening a FIFO waits for a writer
        with open(label, "rb") as f:
            _regular(label, os.fstat(f.fileno()))
            data = f.read()
    except OSError as err:
        raise ConversionError(f"cannot read {label}: {err.strerror}") from err
    return np.frombuffer(data, np.uint8), label, data


def section_range(s, values: dict, where: str, label: str, size: int, pos: int) -> "tuple[int, int, int]":
    """(start, end, count limit or -1) of a section after ``pos``, checked against the file's
    ``size``: read_stream and the window-by-window reader (files.py) both go through here."""
    start = pos if s.offset is None else _checked(lambda: evaluate(s.offset, values, f"{where}.offset"), where)
    if not 0 <= start <= size:
        raise ConversionError(
            f"{label}: {where}: offset = {s.offset!r} is {start}, outside the file (0..{size} "
            f"bytes); the header is damaged or the description's offset is wrong"
        )
    if start < pos:
        raise ConversionError(
            f"{label}: {where}: offset = {s.offset!r} is {start}, inside the part before it "
            f"(which ends at byte {pos}); sections follow the header and each other in file "
            f"order: the header is damaged or the description's offset is wrong"
        )
    end = size
    if s.bytes is not None:
        n = _checked(lambda: evaluate(s.bytes, values, f"{where}.bytes"), where)
        if n < 0 or start + n > size:
            raise ConversionError(
                f"{label}: {where}: bytes = {s.bytes!r} is {n}, from byte {start} past the "
                f"end of the file ({size} bytes); the header is damaged or the file truncated"
            )
        end = start + n
    limit = -1
    if s.count is not None:
        limit = _checked(lambda: evaluate(s.count, values, f"{where}.count"), where)
        fixed = None
        if s.framing.size is not None:
            fixed = _checked(lambda: evaluate(s.framing.size, values, f"{where}.framing.size"), where)
        if limit < 0:
            raise ConversionError(
                f"{label}: {where}: count = {s.count!r} is {limit}, a negative count; the header is damaged"
            )
        if fixed is not None and limit * fixed > end - start:
            raise ConversionError(
                f"{label}: {where}: count = {s.count!r} is {limit}, more records than the "
                f"{end - start} bytes from byte {start} can hold; the header is damaged"
            )
    return start, end, limit


def _check_shrunk(guard, label, size, err, owner=None):
    """The file shrank while it was read: a page past its new end faulted (``guard``), or
    it is now shorter than the ``size`` bytes mapped (``owner``, the mapping, knows its
    file's size). The bytes past the new end in its last page read as zeros without any
    fault, so the size is what tells, whatever error (or none) those zeros caused."""
    lost = guard.fault()
    now = None
    if isinstance(owner, mmap.mmap):
        try:
            now = owner.size()  # the mapped file's own size (mmap keeps a descriptor of it)
        except (OSError, ValueError):
            now = None
    if lost is None and (now is None or now >= size):
        return
    shown = f", it is {now} bytes now" if now is not None and now < size else ""
    gone = f", and byte {lost} was gone when read" if lost is not None else ""
    raise ConversionError(
        f"{label}: the file shrank while it was read: it was {size} bytes{shown}{gone}; "
        f"read it again once whoever writes it is done"
    ) from err


class _OnDevice:
    """The stream on the GPU, copied there on first use (one transfer per read)."""

    def __init__(self, buf):
        self.buf, self._dev = buf, None

    def bytes(self):
        if self._dev is None:
            from .._cuda import device as _device

            self._dev = _device.to_device(self.buf)
        return self._dev


def read_header(stream: Stream, buf, order: str, label: str) -> "tuple[SoA, dict, int]":
    """The stream's file header as a one-row SoA, its values by name (for the sections'
    expressions) and its size in bytes; a file shorter than the header is an error."""
    hrec, h = _header_record(stream, buf, order, label)
    if buf.shape[0] < h:
        raise ConversionError(
            f"{label}: {buf.shape[0]} bytes, shorter than the {h}-byte header of a {stream.name} "
            f"stream; the file is truncated or of another kind"
        )
    soa, _ = _convert(
        buf, hrec, order, np.zeros(1, np.int64), np.full(1, h, np.int64), 0, False, False, label, "header", stride=h
    )
    values = _header_ints(stream, buf, order, h)
    return soa, header_values(stream, soa, order) if values is None else values, h


def _read(stream: Stream, buf: np.ndarray, label: str, gpu: "_OnDevice | None" = None, views=False) -> StreamTables:
    order = detect_order(stream, buf, label)
    size = buf.shape[0]
    out = StreamTables()
    out.stream, out.order, out.decimals = stream, order, {}
    values: dict = {}
    covered = []
    pos = 0
    if stream.header is not None:
        out["_header"], values, pos = read_header(stream, buf, order, label)
        covered.append((0, pos))
    for i, s in enumerate(stream.sections):
        where = f"{stream.name} section[{i}]"
        s = _checked(lambda: s.resolve(values, where, size), label)  # list lengths from the header
        start, end, limit = section_range(s, values, where, label, size, pos)
        got = scan_section(stream, s, buf, label, order, values, start, end, limit, where, grouped=True, defer=not gpu)
        if limit >= 0 and len(got.offsets) < limit:
            raise ConversionError(
                f"{label}: {where}: count = {s.count!r} is {limit} records, but the data ends "
                f"after {len(got.offsets)} (byte {got.end}); the file is truncated or the "
                f"header damaged"
            )
        if s.bytes is not None and got.end != end:
            raise ConversionError(f"{label}: byte {got.end}: {where} should end at byte {end} (bytes = {s.bytes!r})")
        try:
            _tables(out, stream, s, got, buf, label, order, where, gpu, views)
        except _Changed:  # the second walk found other records than the first: the usual scan, which names what
            got = scan_section(stream, s, buf, label, order, values, start, end, limit, where, grouped=True)
            _tables(out, stream, s, got, buf, label, order, where, gpu, views)
        covered.append((start, got.end))
        pos = got.end
    _gaps(out, buf, covered, size, views)
    if gpu is not None:
        for name, soa in out.items():
            out[name] = soa.to_device("cuda")  # (those converted there already: themselves)
    return out


def header_values(stream: Stream, soa: "SoA | pa.Table", order: str) -> dict:
    """The header's integer fields as Python ints (for expressions); fields past the
    header's size (absent from ``soa``) are 0."""
    table = soa.to_arrow() if isinstance(soa, SoA) else soa
    assert stream.header is not None
    values = {n: 0 for n, t in stream.header.fields if _is_integer(t, order)}
    values.update(
        {
            n: table.column(n)[0].as_py()
            for n in table.column_names
            if n in values and pa.types.is_integer(table.schema.field(n).type)
        }
    )
    return values


@functools.lru_cache(maxsize=256)
def _raw_ints(header: Record, order: str) -> "tuple | None":
    """``(name, byte offset, dtype as the bytes lie)`` of each integer field of a plain
    header (remembered), or None where one is widened (``>u6``) or the record is of
    another kind (a copybook's): :func:`header_values` reads those from the table."""
    if type(header) is not Record:
        return None
    at, out = 0, []
    for name, t in header.fields:
        dt, width, _ = field_dtype(t, order, name)  # (the dtype in the stream's byte order)
        if dt.kind in "iu":
            if dt.itemsize != width:
                return None
            out.append((name, at, dt))
        at += width
    return tuple(out)


def _header_ints(stream: Stream, buf, order: str, size: int) -> "dict | None":
    """:func:`header_values` of the header's first ``size`` bytes, read where they lie (no
    table made for it), or None (see :func:`_raw_ints`); fields past ``size`` are 0."""
    fields = _raw_ints(stream.header, order)
    if fields is None:
        return None
    return {n: int(np.frombuffer(buf, dt, 1, at)[0]) if at + dt.itemsize <= size else 0 for n, at, dt in fields}


@functools.lru_cache(maxsize=256)
def _header_needs(stream: Stream, order: str) -> int:
    """``stream.header_needs(order)``, remembered (it parses the size's expression)."""
    return stream.header_needs(order)


_CUTS: dict = {}  # (stream, order, header size) -> stream.header_record's answer (a function of those)


def _header_cut(stream: Stream, values: dict, order: str) -> "tuple[Record, int]":
    """``stream.header_record(values, order, stream.name)``, remembered by the size the
    values give (the only thing of them it reads); a size it refuses raises every time."""
    assert stream.header_size is not None  # (the caller's: a header without one is not cut)
    try:
        n = evaluate(stream.header_size, values, stream.name)
    except (ValueError, KeyError):
        n = None
    key = (stream, order, n)
    got = _CUTS.get(key) if n is not None else None
    if got is None:
        got = stream.header_record(values, order, stream.name)
        if n is not None and len(_CUTS) < 1024:
            _CUTS[key] = got
    return got


@functools.lru_cache(maxsize=4096)
def _is_integer(t: str, order: str) -> bool:
    """Whether a field of type ``t`` is an integer (remembered: parsing the type string
    for every header field of every read costs as much as reading a small file)."""
    return field_dtype(t, order, "")[0].kind in "iu"


def _header_record(stream: Stream, buf, order, label) -> "tuple[Record, int]":
    """The header's fields present in this file (``header.size``) and their size."""
    assert stream.header is not None
    if stream.header_size is None:
        return stream.header, record_size(stream.header, order)
    need = _header_needs(stream, order)
    if buf.shape[0] < need:
        raise ConversionError(
            f"{label}: {buf.shape[0]} bytes, shorter than the {need} bytes of a {stream.name} "
            f"header that give its size; the file is truncated or of another kind"
        )
    values = _header_ints(stream, buf, order, need)
    if values is None:
        at, first = 0, []
        for name, t in stream.header.fields:
            if at >= need:
                break
            first.append((name, t))
            at += field_dtype(t, order, name)[1]
        soa, _ = _convert(
            buf,
            Record(tuple(first)),
            order,
            np.zeros(1, np.int64),
            np.full(1, need, np.int64),
            0,
            False,
            False,
            label,
            "header",
        )
        values = header_values(stream, soa, order)
    rec, h = _checked(lambda: _header_cut(stream, values, order), label)
    if buf.shape[0] < h:
        raise ConversionError(
            f"{label}: {buf.shape[0]} bytes, shorter than its {h}-byte header (header.size = "
            f"{stream.header_size!r}); the file is truncated or the header damaged"
        )
    return rec, h


def _tables(out, stream, s: Section, got: Scanned, buf, label, order, where, gpu=None, views=False):
    """One table per record type of a scanned section: the records grouped by type (in
    stream order within each), checked against their type's size, and each type
    transposed straight from the stream through its offsets (no dense copy)."""
    keep = _keep_prefix(s)
    ntypes = len(s.types)
    prefix = int(s.framing.prefix or 0)
    own = False  # the index can be the _offset column (see _transpose_strided)
    if s.tag is None:  # every record is of one type (the only one, or select's): grouped already
        g_offsets, g_lengths, own = got.offsets, got.lengths, got.padded
        bounds = np.zeros(ntypes + 3, np.int64)
        bounds[int(got.types[0]) + 2 if len(got.types) else 0 :] = len(got.offsets)
    elif got.bounds is not None:  # grouped by the scan (records all exactly their types' fields)
        g_offsets, g_lengths, bounds = got.offsets, None, got.bounds
    else:
        # no tails, no unknown records kept, and no record longer than its type's fields
        # (the scan stopped at any shorter one): the lengths are known, only offsets grouped
        exact = (
            got.longest is not None
            and s.tail != "column"
            and s.unknown != "keep"
            and all(int(m) <= prefix + record_size(t.record, order) for m, t in zip(got.longest, s.types))
        )
        g_offsets = np.empty_like(got.offsets)
        g_lengths = None if exact else np.empty_like(got.lengths)
        bounds = K.group(got.types, ntypes, got.offsets, got.lengths, g_offsets, g_lengths)
    together = {}
    if got.counted is not None or (
        gpu is None and g_lengths is None and s.tail != "column" and not got.stride and ntypes > 1
    ):
        together = _transpose_types(buf, s, g_offsets, bounds, prefix, keep, order, got)
    for ti, t in enumerate(s.types):
        a, b = bounds[ti + 1], bounds[ti + 2]
        if ti in together:
            out[t.name] = together[ti]
            if t.record.decimals:
                out.decimals[t.name] = dict(t.record.decimals)
            continue
        out[t.name], _ = _convert(
            buf,
            t.record,
            order,
            g_offsets[a:b],
            None if g_lengths is None else g_lengths[a:b],
            prefix,
            keep,
            ("view" if views else "copy") if s.tail == "column" else False,
            label,
            f"{where} type {t.name!r}",
            gpu,
            got.stride,
            own and a == 0 and b == len(g_offsets),
        )
        if t.record.decimals:
            out.decimals[t.name] = dict(t.record.decimals)
    if bounds[ntypes + 2] > bounds[ntypes + 1]:
        a, b = bounds[ntypes + 1], bounds[ntypes + 2]
        assert g_lengths is not None  # (grouped with lengths where unknown records are kept)
        out["_unknown"] = _raw_table(buf, g_offsets[a:b], g_lengths[a:b], views=views)
    if got.blocks is not None:
        out["_blocks"] = _raw_table(buf, got.blocks, np.full(len(got.blocks), 4, np.int64), fixed=4)


class _Changed(Exception):
    """The stream's bytes changed between the scan's two walks (a mapped file written meanwhile)."""


def _transpose_types(buf, s: Section, offsets, bounds, prefix, keep, order, got: Scanned) -> "dict[int, SoA]":
    """The tables of a section's types whose records are all exactly their fields and
    whose plans read in place (:func:`K.aos_to_soa_types`): every type in one threaded
    pass over the stream, window by window, instead of one pass per type (each of which
    read the whole stream from memory again). ``_offset`` is the grouped index itself.
    Returns {type number: SoA}; the other types (none of their records, another plan,
    text that is not plain ASCII) are left to :func:`_convert`, which raises what there
    is to raise."""
    made, items, kinds = [], [], []
    for ti, t in enumerate(s.types):
        a, b = int(bounds[ti + 1]), int(bounds[ti + 2])
        if b <= a:
            continue
        parts = _together_parts(t.record, order, prefix, keep)
        if parts is None:
            continue
        layout, runs, offset_at, nul = parts
        arena = Arena(layout, b - a, frozenset())
        memory = pooled(arena.nbytes)
        ops, offs, owner = _forward_ops(arena, memory.ctypes.data)
        made.append((ti, layout, arena, memory, owner, a, b))
        items.append((a, b, ops, offs, runs, offset_at, nul, True))
        kinds.append(ti)
    if got.counted is not None:  # the offsets are placed as the types are converted, window by window
        done = K.place_grouped(buf, got.counted, got.frame, items, kinds, owners=made)
        if done is None:
            raise _Changed
    elif not items:
        return {}
    else:
        done = K.aos_to_soa_types(buf, offsets, got.start, got.end, items, owners=made)
    tables = {}
    host = backends.host()
    for ok, (ti, layout, arena, memory, _, a, b) in zip(done, made):
        if not ok:
            continue
        columns = host.arena_columns(arena, memory, b - a, {})  # (soa_over_arena's, less the SoA: no enums)
        at = [f.name for f in layout.fields].index("_offset")
        columns[at] = ColumnBuffers(
            columns[at].type, b - a, None, None, pa.py_buffer(offsets[a:b]), 0, columns[at].kind
        )
        tables[ti] = SoA(layout, b - a, columns)
    return tables


@functools.lru_cache(maxsize=256)
def _together_parts(record: Record, order: str, prefix: int, keep: bool) -> "tuple | None":
    """``(layout, runs, offset_at, nul)`` of a record type for :func:`_transpose_types`
    (the runs and the NUL-checked ranges as arrays, read only), or None where its plan
    has no runs or an enum (whose dictionary is made after its kernel)."""
    layout, runs, _, offset_at = record.plan(order, prefix, True, keep)
    if not len(runs) or any(f.kind == "enum" for f in layout.fields):
        return None
    runs = np.array(runs, np.int64).reshape(-1, 3)
    nul = np.array([(layout[name].offset, layout[name].width) for name in record.text], np.int64).reshape(-1, 2)
    runs.setflags(write=False)
    nul.setflags(write=False)
    return layout, runs, offset_at, nul


def _forward_ops(arena: Arena, base: int) -> tuple:
    """``forward_ops(arena, base, {})``, from the plan of ``arena.layout`` worked out once
    (:func:`_ops_template`) with this arena's addresses put in: laid out anew for each
    of a stream's types, a read's plans cost more than the kernel of a 1 MB ITCH day."""
    got = _ops_template(arena.layout)
    if got is None:
        return forward_ops(arena, base, {})
    ops = got[0].copy()
    for i, bufs in enumerate(arena.buffers):
        ops[i, DATA] = base + bufs["data"][0]
        if "validity" in bufs:
            ops[i, VALID] = base + bufs["validity"][0]
        if "offsets" in bufs:
            ops[i, OFFSETS] = base + bufs["offsets"][0]
            ops[i, P2] = arena.offset_width[i]
    return ops, got[1], []


@functools.lru_cache(maxsize=256)
def _ops_template(layout: Layout) -> "tuple | None":
    """``forward_ops`` of ``layout`` with no addresses (those of an arena at 0), or None
    where its ops point to tables (enums, code pages: :func:`_forward_ops` then lays it
    out each time)."""
    ops, offs, keep = forward_ops(Arena(layout, 1, frozenset()), 0, {})
    if keep:
        return None
    ops[:, [DATA, VALID, OFFSETS]] = 0
    return ops, offs  # (neither written: the ops are copied, the offsets only read)


def _check_sizes(offsets, lengths, fixed, tails, label, what):
    """Every record holds its type's fields (and, without tails, nothing more)."""
    if not len(offsets):
        return
    short = np.flatnonzero(lengths < fixed) if lengths.min() < fixed else ()  # (min: no index array made)
    if len(short):
        i = short[0]
        raise ConversionError(
            f"{label}: byte {offsets[i]}: a {what} record of {lengths[i]} bytes, shorter than the type's "
            f"{fixed} bytes of fields; the stream is damaged, or the type's fields are wrong"
        )
    if not tails:
        extra = np.flatnonzero(lengths > fixed) if lengths.max() > fixed else ()
        if len(extra):
            i = extra[0]
            raise ConversionError(
                f"{label}: byte {offsets[i]}: a {what} record of {lengths[i]} bytes, longer than the type's "
                f'{fixed} bytes of fields; declare the rest as fields, or set tail = "column" in the section '
                f"to keep it as the _tail column"
            )


def _convert(
    buf, record: Record, order, offsets, lengths, prefix, keep_prefix, tails, label, what, gpu=None, stride=0, own=False
):
    """The SoA of one record type (or the header), read through ``offsets`` by the fused
    gather + transpose (on the GPU with ``gpu``, for a type without tails); tails (bytes
    beyond the fields) as ``_tail``. With ``stride`` (records of that many bytes one after
    another from ``offsets[0]``) and fields that need no widening, by the strided transpose
    of ``read_records`` instead: no gather. ``lengths`` None (no tails): every record is
    exactly its type's fields, as the scan found. ``own``: ``offsets`` (the whole index of
    fixed-size records, laid out as a column buffer) become the ``_offset`` column.
    ``tails``: False (none), True or ``"copy"`` (a binary ``_tail``), ``"view"`` (binary_view)."""
    layout, runs, zeros, offset_at = record.plan(order, prefix, True, keep_prefix)
    fixed = prefix + record_size(record, order)
    if lengths is not None:  # (None: the scan found every record of the type exactly its fields)
        one = 1 if stride else len(offsets)  # (records of one size: the first stands for all)
        _check_sizes(offsets[:one], lengths[:one], fixed, tails, label, what)  # before any kernel reads
    offsets = np.ascontiguousarray(offsets, np.int64)
    runs = np.array(runs, np.int64).reshape(-1, 3)
    if gpu is not None and not tails:
        return _transpose_on_gpu(gpu, buf, record, order, layout, runs, offset_at, offsets, prefix, label, what), layout
    if not len(offsets) and tails != "view":  # (LAS's ten point formats not in the file: no plan, no kernel)
        return _empty(layout, bool(tails)), layout
    if not len(offsets):
        soa = _empty_soa(layout)
    elif stride and not zeros and len(runs) and (runs[:, 1] - runs[:, 0] == runs[0, 1] - runs[0, 0]).all():
        soa = _transpose_strided(buf, record, order, layout, runs, offset_at, offsets, stride, prefix, label, what, own)
    else:
        soa = _transpose_at(buf, record, order, layout, runs, offset_at, offsets, prefix, label, what)
    if not tails:
        return soa, layout
    n = len(offsets)
    if stride:  # every tail the same size (zero, mostly): no arrays of n copies of it
        starts, sizes = np.broadcast_to(np.int64(fixed), (n,)), np.broadcast_to(np.int64(stride - fixed), (n,))
    else:
        starts, sizes = np.full(n, fixed, np.int64), lengths - fixed
    return _with_tail(soa, layout, buf, offsets, starts, sizes, tails == "view", stride=stride), layout


def _empty(layout: Layout, tail: bool) -> SoA:
    """The table of a type with no records (with a ``_tail`` column: ``tail``): a new
    SoA over the columns of :func:`_empty_parts`, made once per layout (LAS has ten
    point formats with no records in each read, and laying out a table's buffers field
    by field costs more than reading a small file). No rows: nothing in it can change."""
    layout, columns = _empty_parts(layout, tail)
    return SoA(layout, 0, columns)


@functools.lru_cache(maxsize=256)
def _empty_parts(layout: Layout, tail: bool) -> tuple:
    """(layout, columns) of :func:`_empty`: columns over memory of their own, read-only
    (shared by the tables made of them, which own no arena: none is an ``out=``)."""
    soa = _empty_soa(layout)
    soa.parts().memory.flags.writeable = False
    if tail:
        empty = np.zeros(0, np.int64)
        soa = _with_tail(soa, layout, np.zeros(0, np.uint8), empty, empty, empty)
    return soa.layout, soa.parts().columns


def _empty_soa(layout) -> SoA:
    """The table of a type with no records: its buffers zero (a string column's one
    offset 0), as the kernels leave them for no rows."""
    arena = Arena(layout, 0, frozenset())
    memory = arena.allocate()
    memory[:] = 0
    return soa_over_arena(layout, 0, arena, memory, {}, None)


@functools.lru_cache(maxsize=64)
def _arena(layout: Layout, n: int) -> Arena:
    """``Arena(layout, n)`` (remembered: an arena is a description, no memory, and laying
    out the header's is a tenth of reading a small file; the header's n is always 1)."""
    return Arena(layout, n, frozenset())


def _transpose_at(buf, record, order, layout, runs, offset_at, offsets, prefix, label, what) -> SoA:
    """The records at ``offsets`` of one type as an SoA, in one pass (K.aos_to_soa_at:
    blocks of rows gathered in cache, then the usual per-column kernels, threaded)."""
    n = len(offsets)
    assert not any(f.kind == "enum" for f in layout.fields)  # stream fields never are (no dictionary to fix)
    arena = _arena(layout, n)
    memory = pooled(arena.nbytes)
    ops, offs, keep = forward_ops(arena, memory.ctypes.data, {})
    nul = np.array([(layout[name].offset, layout[name].width) for name in record.text], np.int64).reshape(-1, 2)
    fault = K.aos_to_soa_at(
        buf, offsets, layout.itemsize, runs, offset_at, nul, ops, offs, owners=(memory, ops, offs, keep)
    )
    del keep
    if fault is not None:
        _raise_fault(buf, record, order, layout, runs, offset_at, offsets, prefix, label, what, fault)
    return soa_over_arena(layout, n, arena, memory, {}, None)


def _transpose_strided(
    buf, record, order, layout, runs, offset_at, offsets, stride, prefix, label, what, own=False
) -> SoA:
    """:func:`_transpose_at` of fixed-size records one after another (``offsets`` step by
    ``stride`` from ``offsets[0]``) whose fields lie in the stream as in the packed record,
    shifted (``runs`` all move bytes the same distance): the strided transpose of
    ``read_records`` reads them in place, and ``_offset`` is the index itself."""
    n = len(offsets)
    first = int(offsets[0]) if n else 0
    if first + n * stride > buf.shape[0]:  # (the scan made it so; the kernel trusts it)
        raise ConversionError(f"{label}: {n} {what} records of {stride} bytes from byte {first} pass the end")
    shift = int(runs[0, 1] - runs[0, 0])  # packed record byte = stream record byte + shift
    names = [f.name for f in layout.fields]
    at = names.index("_offset")
    arena = _arena(layout, n)
    memory = pooled(arena.nbytes)
    ops, offs, keep = forward_ops(arena, memory.ctypes.data, {})
    offs = offs - shift
    if record.text and n:
        nul = [(layout[name].offset - shift, layout[name].width) for name in record.text]
        row = K.first_nul(buf[first : first + n * stride], stride, *(np.array(c, np.int64) for c in zip(*nul)))
        if row >= 0:
            _raise_fault(
                buf, record, order, layout, runs, offset_at, offsets, prefix, label, what, (row, -1, K.E_TEXT_NUL)
            )
    if not own:
        start = arena.buffers[at]["data"][0]
        memory[start : start + 8 * n].view(np.int64)[:] = offsets
    rest = np.array([j for j in range(len(names)) if j != at], np.int64)
    fault = K.aos_to_soa(buf.ctypes.data + first, stride, n, ops[rest], offs, owners=(buf, memory, offs, keep))
    del keep
    if fault is not None:
        row, op, code = fault
        _raise_fault(
            buf, record, order, layout, runs, offset_at, offsets, prefix, label, what, (row, int(rest[op]), code)
        )
    soa = soa_over_arena(layout, n, arena, memory, {}, None)
    if not own:
        return soa
    # the index is the column: no second 8 bytes a record written (the arena's are left unused)
    columns = list(soa._columns)
    columns[at] = ColumnBuffers(columns[at].type, n, None, None, pa.py_buffer(offsets), 0, columns[at].kind)
    return SoA(layout, n, columns)


def _transpose_on_gpu(gpu, buf, record, order, layout, runs, offset_at, offsets, prefix, label, what) -> SoA:
    """:func:`_transpose_at` on the GPU: the GPU transpose reads the records straight from
    the stream on the device through their offsets, in the same tile pass, text fields
    checked for NULs there too (kernels/cuda/gather.py). Records too large to stage in
    shared memory are gathered into packed records first (:func:`_gathered_on_gpu`)."""
    from .._cuda import device as _device
    from .._cuda.arena import HEAD, device_tables
    from ..kernels.cuda import gather as G
    from ..kernels.plan import E_NUL

    n, itemsize = len(offsets), layout.itemsize
    bmap = G.byte_map(itemsize, runs, offset_at)
    try:  # what the kernels will dereference, checked first
        G.check_index(offsets, buf.shape[0], bmap)
    except ValueError as err:
        raise ConversionError(f"{label}: {what}: {err}; the stream's index is damaged") from err
    if not G.stageable(itemsize):
        return _gathered_on_gpu(gpu, buf, record, order, layout, runs, offset_at, offsets, prefix, label, what, bmap)
    backend = backends.get("cuda")
    arena = _arena(layout, n)
    memory = backend.allocate(arena)
    ops, offs, keep = forward_ops(arena, HEAD, {})
    G.check_strings(ops, offs, bmap)
    nb, kernels = _device.cuda(), _device.kernels()
    nul = np.array([(layout[name].offset, layout[name].width) for name in record.text], np.int64).reshape(-1)
    plan = kernels.Plan(ops, offs, device_tables(ops, keep))
    index = (nb.to_device(offsets), nb.to_device(bmap), nb.to_device(nul))
    stream = _device.words(gpu.bytes(), buf.shape[0])
    fault = kernels.forward_async(stream, itemsize, n, plan, memory, index=index).fault()
    del keep
    if fault is not None:
        row, op, code = fault
        if op == 0 and code == E_NUL:  # the gathered kernel's NUL in a text field
            fault = (row, op, K.E_TEXT_NUL)
        _raise_fault(buf, record, order, layout, runs, offset_at, offsets, prefix, label, what, fault)
    return soa_over_arena(layout, n, arena, memory, {}, None, None, backend)


def _gathered_on_gpu(gpu, buf, record, order, layout, runs, offset_at, offsets, prefix, label, what, bmap) -> SoA:
    """Records too large to stage (kernels/cuda/transpose.py ``tile_shape``): gathered on
    the GPU into packed records (one pass in device memory), then the unstaged transpose;
    text fields checked for NULs on the CPU first (a gather in cache, no columns)."""
    from .._cuda import device as _device
    from ..kernels.cuda.gather import gather_records
    from ..kernels.plan import NCOLS

    n, itemsize = len(offsets), layout.itemsize
    if record.text and n:
        nul = np.array([(layout[name].offset, layout[name].width) for name in record.text], np.int64)
        fault = K.aos_to_soa_at(
            buf, offsets, itemsize, runs, offset_at, nul, np.zeros((0, NCOLS), np.int64), np.zeros(1, np.int64)
        )
        if fault is not None:
            _raise_fault(buf, record, order, layout, runs, offset_at, offsets, prefix, label, what, fault)
    dense = _device.empty(n * itemsize)
    if n:
        nb = _device.cuda()
        gather_records(
            gpu.bytes(), nb.to_device(offsets), itemsize, nb.to_device(bmap), _device.words(dense, n * itemsize)
        )
    try:
        return AoS(dense[: n * itemsize], layout).to_soa(device="cuda")
    except ConversionError as err:
        m = re.search(r"record (\d+)", str(err))
        at = f" byte {int(offsets[int(m.group(1))])}:" if m and int(m.group(1)) < n else ""
        raise ConversionError(
            f"{label}:{at} a {what} record: {err}; in a stream description, drop the field from the "
            f"type's text list to read it as bytes"
        ) from err


def _raise_fault(buf, record, order, layout, runs, offset_at, offsets, prefix, label, what, fault):
    """The error for the first record the fused transpose could not convert: that one
    record gathered again, and described as the dense path describes it."""
    row, op, code = fault
    one = np.zeros(layout.itemsize, np.uint8)
    K.gather(
        buf,
        offsets[row : row + 1],
        runs[:, 0].copy(),
        runs[:, 1].copy(),
        runs[:, 2].copy(),
        one,
        layout.itemsize,
        offset_at,
    )
    if code == K.E_TEXT_NUL:
        _check_text(one.reshape(1, -1), layout, record, offsets[row : row + 1], prefix, order, label, what)
    records = one.view(layout.dtype)
    err = forward_error(layout, records, (0, op, code), first=row)
    raise ConversionError(
        _fault_text(buf, record, layout, runs, records, offsets, row, op, code, prefix, label, what, err)
    ) from err


def _field_in_stream(layout, runs, f) -> int:
    """The byte of field ``f`` (of the dense ``layout``) in its stream record (framing
    included): from the run that copies its bytes (``runs``: stream byte, dense byte,
    length); a widened big-endian field's run starts after its padding. -1: none."""
    end = f.offset + f.dtype.itemsize
    for src, dst, n in runs.tolist():
        if dst < end and dst + n > f.offset:
            return src + (f.offset - dst) if f.offset >= dst else src
    return -1


def _place(off: int, prefix: int) -> str:
    """Where byte ``off`` of a framed record (framing included, as ``_offset`` counts) is."""
    if not prefix:
        return f"offset {off} in the record"
    return f"offset {off - prefix} in the record, {off} from its {prefix}-byte framing's start"


def _fault_text(buf, record, layout, runs, records, offsets, row, op, code, prefix, label, what, err) -> str:
    """The text of a record the fused transpose could not convert, in the stream's
    terms: the field, its type and offset in the record, the file byte, the record type
    and the fix a stream description has (not ``forward_error``'s offsets in the
    gathered row, which starts with ``_offset``, nor its advice for read_records)."""
    from .._mainframe import NULL_FIX, forward_message
    from ..kernels import plan as P

    f = layout.fields[op]
    at = int(offsets[row])
    src = _field_in_stream(layout, runs, f)
    if src < 0:  # (every field has a run; kept as a fallback)
        return f"{label}: byte {at}: a {what} record: {err}"
    kind = dict(record.fields).get(f.name) if record.fields else None
    kind = kind or (f.encoding.short() if f.encoding is not None else f.dtype.str)
    head = (
        f"{label}: byte {at + src}: field {f.name!r} ({kind} at {_place(src, prefix)}) of a {what} record at byte {at}"
    )
    if f.encoding is not None:  # a copybook field: its bytes in hex, and why, at the stream's offsets
        text = forward_message(
            f,
            records,
            (0, op, code),
            f"{label}: field {f.name!r} ({kind}) of a {what} record at byte {at}",
            at + src - f.offset,
            "of the file",
        )
        text = re.sub(
            r"\(offset (\d+) in the record\)",
            lambda m: f"({_place(int(m.group(1)) - f.offset + src, prefix)})",
            text,
            count=1,
        )
        return text.replace(
            NULL_FIX, 'or give the type invalid = "null" in the stream description to make such values nulls'
        )
    if code == P.E_UTF:
        raw = bytes(buf[at + src : at + src + f.dtype.itemsize]) if f.dtype.kind == "S" else None
        shown = repr(raw) if raw is not None else "its bytes"
        return (
            f"{head}: {shown} is not valid UTF-8; the stream is damaged, or read the field as bytes: "
            f"drop it from the type's text list in the stream description"
        )
    where = f"field {f.name!r} ({f.dtype.str} at offset {f.offset}), record {row}"
    text = str(err)
    return head + (text[len(where) :] if text.startswith(where) else f": {text}")


def _check_text(rows, layout, record, offsets, prefix, order, label, what):
    """Text fields hold no NUL byte: a string column would end at it and the bytes after
    it would not go back (C-string mode), so a NUL is an error, not a silent change.
    (The fused transpose finds the row; this names the field and the byte.)"""
    at, starts = prefix, {}
    for name, t in record.fields:
        starts[name] = at
        at += field_dtype(t, order, name)[1]
    fields = [layout[name] for name in record.text]
    i = K.first_nul(
        rows.reshape(-1),
        layout.itemsize,
        np.array([f.offset for f in fields], np.int64),
        np.array([f.width for f in fields], np.int64),
    )
    if i < 0:
        return
    row = rows[i]
    for name, f in zip(record.text, fields):
        if (row[f.offset : f.offset + f.width] == 0).any():
            src = starts[name]
            raise ConversionError(
                f"{label}: byte {int(offsets[i]) + src}: text field {name!r} of a {what} record (at byte "
                f"{int(offsets[i])}) holds a NUL byte; text is kept byte for byte only without NULs: the stream "
                f"is damaged, or read the field as bytes (drop it from the type's text list)"
            )


def _with_tail(soa: SoA, layout: Layout, buf, offsets, starts, sizes, views=False, limit=_BINARY_MAX, stride=0) -> SoA:
    """``soa`` plus a ``_tail`` binary column of ``sizes[i]`` bytes from
    ``offsets[i] + starts[i]`` (binary, or large_binary past 2 GiB); with ``views``, a
    binary_view column into ``buf`` (:func:`_tail_views`; ``limit``: the largest offset
    a view holds, a parameter for the tests), or the copy where views cannot hold a tail.
    ``stride``: the records are that many bytes one after another from ``offsets[0]``,
    ``starts`` and ``sizes`` one value each (:func:`_fixed_tails`)."""
    n = len(offsets)
    widest = int(sizes[:1].max() if sizes.strides == (0,) else sizes.max()) if n else 0
    if views:
        column = _tail_views(buf, offsets, starts, sizes, n, limit)
        if column is not None:
            return SoA(_tail_layout(layout, max(widest, 1)), n, list(soa._columns) + [column])
    if widest == 0:  # no record has a tail (LAS points without extra bytes): no pass over them
        total, data, large = 0, np.empty(1, np.uint8), False
        offs = _zeros(n + 1, np.int32)
    elif stride:  # tails of one size at one place in records one after another (LAS extra bytes)
        total = n * widest
        large = total > _BINARY_MAX
        data, offs = _fixed_tails(buf, int(offsets[0]), n, stride, int(starts[0]), widest, large)
    else:
        ends = np.cumsum(sizes, dtype=np.int64)
        total = int(ends[-1])
        data = np.empty(max(total, 1), np.uint8)
        K.gather_tails(buf, np.ascontiguousarray(offsets), np.ascontiguousarray(starts), ends, data)
        large = total > _BINARY_MAX
        offs = np.empty(n + 1, np.int64 if large else np.int32)
        offs[0] = 0
        offs[1:] = ends
    tail_layout = _tail_layout(layout, max(widest, 1))
    column = ColumnBuffers(
        pa.large_binary() if large else pa.binary(),
        n,
        None,
        pa.py_buffer(offs),
        pa.py_buffer(data[:total] if total else data[:0]),
        0,
        "cstr",  # (the kind of _tail_layout's field: to_aos reads it through its offsets)
    )
    return SoA(tail_layout, n, list(soa._columns) + [column])


def _fixed_tails(buf, first, n, stride, at, width, large) -> "tuple[np.ndarray, np.ndarray]":
    """The ``_tail`` bytes and offsets of ``n`` records of ``stride`` bytes from byte
    ``first`` whose tails are the ``width`` bytes from ``at`` in each: one strided copy of
    ``width``-byte items (NumPy's; the view is checked to lie inside ``buf``), the offsets
    by arithmetic (int64 with ``large``). The general way (:func:`K.gather_tails`, a copy a
    record through arrays of n starts and ends) took longer than the transpose for
    LAS's 4 extra bytes a point."""
    if first < 0 or at < 0 or at + width > stride or first + n * stride > buf.shape[0]:  # (the scan made it so)
        raise ConversionError(f"{n} records of {stride} bytes from byte {first} pass the end of the stream")
    item = np.dtype((np.void, width))
    tails = np.empty(n, item)
    np.copyto(tails, np.ndarray((n,), item, buffer=buf, offset=first + at, strides=(stride,)))
    return tails.view(np.uint8), np.arange(0, n * width + 1, width, dtype=np.int64 if large else np.int32)


_LAZY_ZEROS = 1 << 20  # bytes from which _zeros maps fresh pages


def _zeros(n: int, dtype) -> np.ndarray:
    """``np.zeros(n, dtype)`` that costs no pass over its bytes: past ``_LAZY_ZEROS``,
    fresh anonymous pages (the kernel's zero page until written; a reused heap block
    would be cleared byte by byte). For columns that are all zeros: the ``_tail``
    offsets of records without tails."""
    nbytes = n * np.dtype(dtype).itemsize
    if nbytes < max(_LAZY_ZEROS, 1):
        return np.zeros(n, dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype, n)


def _tail_views(buf, offsets, starts, sizes, n, limit) -> "ColumnBuffers | None":
    """The ``_tail`` column as Arrow ``binary_view`` over ``buf``: 16 bytes of views a
    record, written by one threaded pass (K.tail_views), no tail byte copied. A view's
    offset is an int32 (``limit``): where every tail ends within ``limit`` bytes, ``buf`` is
    the one data buffer; past it, data buffer ``k`` is ``buf[k * step : k * step + limit]``
    (``step = limit // 2``: they overlap, so a tail of at most ``limit - step`` bytes lies
    whole in the one where it starts). None for a longer tail there: the caller copies.
    Every tail is checked to lie inside ``buf`` first."""
    views = np.empty(16 * n, np.uint8)
    more = 0
    if n:
        offsets = np.ascontiguousarray(offsets, np.int64)
        starts, sizes = np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(sizes, np.int64)
        first = offsets + starts  # (checked here, not trusted: the kernel dereferences them)
        ends = first + sizes
        lo, hi = int(first.min()), int(ends.max())
        if lo < 0 or int(sizes.min()) < 0 or hi > buf.shape[0]:
            bad = int(np.flatnonzero((first < 0) | (sizes < 0) | (ends > buf.shape[0]))[0])
            raise ConversionError(
                f"byte {int(first[bad])}: a tail of {int(sizes[bad])} bytes lies outside the "
                f"{buf.shape[0]}-byte stream; the index is damaged"
            )
        step = 2**62
        if hi > limit:
            step = limit // 2
            if int(sizes.max()) > limit - step:
                return None
            more = int(first.max()) // step  # data buffers after the first
        K.tail_views(buf, offsets, starts, sizes, views, np.int64(step))
    if not more:
        data = pa.py_buffer(buf) if buf.shape[0] else pa.py_buffer(b"")
        return ColumnBuffers(pa.binary_view(), n, None, pa.py_buffer(views), data, 0, "cstr")
    parts = [pa.py_buffer(buf[k * step : k * step + limit]) for k in range(more + 1)]
    return _ViewBuffers(n, pa.py_buffer(views), parts)


class _ViewBuffers(ColumnBuffers):
    """A ``binary_view`` column of several data buffers (a source past 2 GiB): ``data``
    is the first, ``more`` the others in buffer-index order. Everything that reads
    columns through offsets takes it as the binary copy ``without_views`` makes, which
    goes through :meth:`to_array`."""

    __slots__ = ("more",)

    def __init__(self, n, views, parts):
        super().__init__(pa.binary_view(), n, None, views, parts[0], 0, "cstr")
        self.more = [Span(b.address, b.size, b) for b in parts[1:]]

    def to_array(self, wrap=Span.arrow):
        bufs = [None, wrap(self.offsets), wrap(self.data)] + [wrap(b) for b in self.more]
        return pa.Array.from_buffers(self.type, self.length, bufs, null_count=0, offset=self.offset)


@functools.lru_cache(maxsize=256)
def _tail_layout(layout: Layout, width: int) -> Layout:
    """``layout`` with ``_tail`` (binary, ``width`` bytes in the dense record) after its
    fields (remembered: a Layout is a value, and building one parses its dtype)."""
    modes = dict(layout.bytes_as)
    modes["_tail"] = "binary"
    # (a copybook type's fields keep their encodings: attack6, they were read as raw void bytes and refused)
    encodings = {f.name: f.encoding for f in layout.fields if f.encoding is not None}
    void = "bytes" if any(f.encoding is None and f.dtype.kind == "V" for f in layout.fields) else "error"
    return Layout.from_dtype(
        _append(layout.dtype, width),
        bytes_as={k: v for k, v in modes.items() if v != "fixed"},
        encodings=encodings,
        void_as=void,
    )


def _append(dtype: np.dtype, width: int) -> np.dtype:
    fields = dict(dtype.fields or {})
    names = list(fields) + ["_tail"]
    formats = [fields[n][0] for n in fields] + [np.dtype(f"S{width}")]
    offsets = [fields[n][1] for n in fields] + [dtype.itemsize]
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": dtype.itemsize + width})


def _raw_table(buf, offsets, lengths, fixed=None, views=False) -> SoA:
    """``_offset`` and the whole bytes of each piece as ``_tail`` (binary_view with
    ``views``), or as ``_prefix`` of ``fixed`` bytes."""
    offsets = np.ascontiguousarray(offsets, np.int64)
    if fixed is not None:
        layout = Layout.from_dtype(
            np.dtype(
                {
                    "names": ["_offset", "_prefix"],
                    "formats": ["<i8", f"S{fixed}"],
                    "offsets": [0, 8],
                    "itemsize": 8 + fixed,
                }
            )
        )
        dense = np.zeros(len(offsets) * layout.itemsize, np.uint8)
        K.gather(
            buf,
            offsets,
            np.zeros(1, np.int64),
            np.full(1, 8, np.int64),
            np.full(1, fixed, np.int64),
            dense,
            layout.itemsize,
            0,
        )
        return AoS(dense.view(layout.dtype), layout).to_soa()
    layout = Layout.from_dtype(np.dtype([("_offset", "<i8")]))
    dense = np.zeros(len(offsets) * 8, np.uint8)
    K.gather(buf, offsets, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), dense, 8, 0)
    soa = AoS(dense.view(layout.dtype), layout).to_soa()
    starts = np.zeros(len(offsets), np.int64)
    return _with_tail(soa, layout, buf, offsets, starts, np.asarray(lengths, np.int64), views)


def _gaps(out, buf, covered, size, views=False):
    """Bytes no header or section covers, as the ``_gaps`` table (when there are any)."""
    covered = sorted(covered)
    gaps, at = [], 0
    for a, b in covered:
        if a > at:
            gaps.append((at, a - at))
        at = max(at, b)
    if at < size:
        gaps.append((at, size - at))
    if gaps:
        g = np.array(gaps, np.int64)
        out["_gaps"] = _raw_table(buf, g[:, 0].copy(), g[:, 1].copy(), views=views)
