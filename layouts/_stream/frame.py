"""Framing: the bytes of a source, the byte order, and the boundary scan of a section.

:func:`scan_section` drives the Numba scan (:func:`layouts.kernels.stream.scan`),
growing its index arrays as needed, and turns a scan status into a ConversionError that
names the source, the byte offset, the record type and the fix.
"""

from __future__ import annotations

import functools
import io
import mmap
import os
import stat
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .._errors import ConversionError
from ..kernels import stream as K
from .spec import Section, Stream, _BdwSection

__all__ = ["source_bytes", "detect_order", "scan_section", "Scanned", "pooled"]


def pooled(n: int, dtype=np.uint8) -> np.ndarray:
    """An uninitialised array of ``n`` elements, its first byte 64-byte aligned, in
    memory from pyarrow's default memory pool (mimalloc or jemalloc) rather than NumPy's
    allocator. The pool keeps the pages of freed buffers for the next allocation, where
    the C library gives large ones back to the system: a read after a read writes its
    columns into memory already mapped, not pages the system must fault in and zero
    (for a 100 MB ITCH day, 145 MiB of columns: about 0.02 of its 0.14 CPU seconds).
    The caller writes every byte it exports, as with ``np.empty``; the bytes after the
    array up to its next 64-byte boundary are zeroed (Arrow writers may write a buffer
    up to there, and a pool's memory may hold an earlier table's bytes)."""
    size = n * np.dtype(dtype).itemsize
    raw = np.frombuffer(pa.allocate_buffer(size + 128), np.uint8)
    skip = -raw.ctypes.data % 64
    raw[skip + size : skip + size + (-size % 64)] = 0
    return raw[skip : skip + size].view(dtype)


def source_bytes(src) -> "tuple[np.ndarray, str, object]":
    """(read-only uint8 array, label for messages, owner to keep alive) of a path, a
    bytes-like object, or a binary file object (read from its current position). Always
    read-only, so the kernels see one array type (one compiled signature)."""
    buf, label, owner = _source_bytes(src)
    if buf.flags.writeable:
        buf = buf.view()
        buf.flags.writeable = False
    return buf, label, owner


def _regular(label, st):
    """A ConversionError unless ``st`` is a regular file's: a FIFO, a device or a socket has
    no size to map (it read as an empty stream: its records lost without a word)."""
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):  # (a directory: open() says so)
        raise ConversionError(
            f"{label} is not a regular file (a FIFO, a device or a socket); records are read from "
            f"regular files: save it to a file first (in Python, its bytes or a file object also do)"
        )


def _source_bytes(src):
    if isinstance(src, (str, os.PathLike)):
        label = os.fspath(src)
        try:
            _regular(label, os.stat(label))  # before open: opening a FIFO waits for a writer
            with open(label, "rb") as f:
                st = os.fstat(f.fileno())
                _regular(label, st)
                size = st.st_size
                if size == 0:  # empty, or a /proc file (its size 0, its bytes made as they are read)
                    data = f.read()
                    return np.frombuffer(data, np.uint8), label, data
                try:
                    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):  # not mappable (a pipe, a special file): read it
                    data = f.read()
                    return np.frombuffer(data, np.uint8), label, data
        except OSError as err:
            raise ConversionError(f"cannot read {label}: {err.strerror}") from err
        return np.frombuffer(m, np.uint8), label, m
    if hasattr(src, "read"):
        label = getattr(src, "name", None)
        label = label if isinstance(label, str) else "<file object>"
        if isinstance(src, io.TextIOBase):  # (its read() decodes: an error of the bytes, not of the mode)
            raise ConversionError(f"{label} is open in text mode; open the file in binary mode ('rb')")
        try:  # a device (/dev/zero, a terminal) has no end to read to: refused as its path is
            st = os.fstat(src.fileno())
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            st = None
        if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)):
            raise ConversionError(
                f"{label} is a device, which has no end to read to; records are read from regular files, pipes "
                f"and bytes: save it to a file first"
            )
        data = src.read()
        if not isinstance(data, (bytes, bytearray)):
            raise ConversionError(f"{label}: read() gave {type(data).__name__}; open the file in binary mode ('rb')")
        return np.frombuffer(data, np.uint8), label, data
    try:
        view = memoryview(src)
    except TypeError as err:
        raise ConversionError(
            f"read_stream needs a path, a bytes-like object or a binary file object, got {type(src).__name__}"
        ) from err
    if not view.c_contiguous:  # a strided array or view: its bytes in C order, as bytes(src) gives them (a copy)
        data = view.tobytes()
        return np.frombuffer(data, np.uint8), "<buffer>", data
    return np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view, np.uint8), "<buffer>", view


def detect_order(stream: Stream, buf: np.ndarray, label: str) -> str:
    """The byte order of ``=`` fields: the stream's, or the one its magic number says."""
    b = stream.byteorder
    if b is None:
        return stream.order
    if buf.shape[0] < b.offset + b.size:
        raise ConversionError(
            f"{label}: {buf.shape[0]} bytes, too short for the magic number at byte {b.offset} "
            f"({b.size} bytes) of a {stream.name} stream; is it one?"
        )
    raw = bytes(buf[b.offset : b.offset + b.size])
    for order in ("big", "little"):
        if int.from_bytes(raw, order) in b.magic:
            return order
    want = ", ".join(f"{m:#x}" for m in b.magic)
    raise ConversionError(
        f"{label}: byte {b.offset}: magic number {raw.hex()} is none of {want} (either byte "
        f"order); this is no {stream.name} stream, or it is damaged"
    )


@functools.lru_cache(maxsize=1024)
def record_size(record, order: str) -> int:
    """``record.size(order)``, remembered (a Record is a value; its size is asked for
    each type of each read, and takes a parse of every field's type)."""
    return record.size(order)


@dataclass
class Scanned:
    """One section's index: offsets, lengths and type numbers of its records (-1:
    skipped, ``len(types)``: an unknown tag kept), and the bytes it spans."""

    start: int
    end: int
    offsets: np.ndarray
    lengths: np.ndarray
    types: np.ndarray
    blocks: "np.ndarray | None" = None  # VB: offsets of the block descriptor words
    stride: int = 0  # > 0: the records are ``stride`` bytes each, one after another from ``start``
    longest: "np.ndarray | None" = None  # per type of the section: its longest record (the scan's)
    padded: bool = False  # ``offsets`` start a 64-byte-aligned allocation zeroed to its next 64 bytes
    bounds: "np.ndarray | None" = None  # grouped already (``offsets`` by type, as K.group): lengths, types None
    counted: "K.Counted | None" = None  # grouped, but ``offsets`` not yet filled: K.place_grouped fills them
    frame: "tuple | None" = None  # (with ``counted``) the framing as the walks take it


def section_params(stream: Stream, s: Section, order: str, header: dict, where: str):
    """(length params, tag params, min length) of a section, as the scan takes them."""
    f = s.framing
    prefix = int(f.prefix or 0)
    if f.length is None:
        from .spec import evaluate

        if f.size is None:  # "fixed": each record is its (one) type's fields
            size = prefix + record_size(s.types[0].record, order)
        else:
            size = _checked(lambda: evaluate(f.size, header, f"{where}.framing.size"), where)
        if size <= 0:
            raise ConversionError(f"{where}: framing.size = {f.size!r} is {size}; fixed records need a size >= 1")
        lp = (0, 0, False, 1, size)
        need = 1
    else:
        ln = f.length
        lp = (ln.offset, ln.size, ln.big(order), ln.unit, ln.base())
        need = ln.offset + ln.size
    if s.tag is not None:
        tag = s.tag
        # the scan compares the tag's bits as int64: a value of 2**63 or more (8-byte tags) wraps
        values = np.array([t.tag_value(tag, "") for t in s.types], np.uint64).view(np.int64)
        order_idx = np.argsort(values)
        direct = np.full(1 << (8 * tag.size) if tag.size <= 2 else 0, -1, np.int32)
        if len(direct):  # 1- and 2-byte tags: a table indexed by the value
            direct[values] = np.arange(len(values), dtype=np.int32)
        tp = (prefix + tag.offset, tag.size, tag.order == "big", values[order_idx], order_idx.astype(np.int32), direct)
        need = max(need, prefix + tag.offset + tag.size)
    else:
        tp = (0, 0, False, np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
    type_min = np.array([prefix + record_size(t.record, order) for t in s.types], np.int64)
    return lp, tp, type_min, max(need, prefix if f.length is not None else 1)


def _checked(fn, where):
    try:
        return fn()
    except ValueError as err:
        raise ConversionError(f"{where}: {err}; check the header fields the expression uses") from err


def scan_section(
    stream: Stream,
    s: Section,
    buf: np.ndarray,
    label: str,
    order: str,
    header: dict,
    start: int,
    end: int,
    limit: int,
    where: str,
    stop: "int | None" = None,
    grouped: bool = False,
    defer: bool = False,
) -> Scanned:
    """Index the records of ``buf[start:end]`` (at most ``limit``; -1 none).

    ``grouped``: a tagged section without tails whose records are all exactly their
    types' fields comes back grouped by type (``bounds``: the offsets only, no lengths
    or types), by two walks and no other index; any other comes back as the scan gives it.
    ``defer`` (with ``grouped``), for ITCH's framing (K.deferrable): only the first walk
    (``counted``: the caller's K.place_grouped walks again, converting as it places).

    ``stop`` (a window's end): stop at the last record that ends by ``stop`` (the scan
    resumes from the returned ``end``, a record boundary); a record that crosses it is
    left to the next window unless it is the window's first, which then grows to hold
    it. Records past ``stop`` are checked only when their window comes.
    """
    if s.select is not None:
        t = selected(s, header, label, where)
        sub = Section(s.framing, (s.types[t],), tail=s.tail, unknown=s.unknown)
        got = scan_section(stream, sub, buf, label, order, header, start, end, limit, where, stop)
        got.types = np.broadcast_to(np.int32(t), got.types.shape)
        got.longest = None  # (numbered for the one type's section)
        return got
    lp, tp, type_min, min_len = section_params(stream, s, order, header, where)
    unknown = {"error": 0, "skip": 1, "keep": 2}[s.unknown]
    if isinstance(s, _BdwSection):
        return _scan_blocks(stream, s, buf, label, start, end, limit, where, stop)
    if grouped and stop is None and limit < 0 and s.tag is not None and s.tail != "column":
        (len_off, len_size, len_big, unit, base), (tag_off, tag_size, tag_big) = lp, tp[:3]
        fr = (len_off, len_size, len_big, base, min_len, tag_off, tag_size, tag_big, tp[5], type_min, type_min)
        got = K.scan_grouped(buf, start, end, fr, unit, place=not defer, empty=pooled)
        if isinstance(got, K.Counted):
            return Scanned(start, end, got.offsets, None, None, bounds=got.bounds, counted=got, frame=fr)  # type: ignore[arg-type]
        if got is not None:
            return Scanned(start, end, got[0], None, None, bounds=got[1])  # type: ignore[arg-type]
    soft = end if stop is None else min(max(stop, start + 1), end)
    if lp[1] == 0 and not tp[1] and len(type_min) == 1 and lp[4] >= type_min[0]:
        return _fixed(buf, start, soft, end, limit, lp[4], (lp, tp, type_min, min_len, unknown), s, label, where)
    guess = _guess(buf, start, soft, limit, lp, tp, min_len, unknown, type_min)
    offsets = np.empty(guess, np.int64)
    lengths = np.empty(guess, np.int64)
    types = np.empty(guess, np.int32)
    longest = np.zeros(len(type_min), np.int64)
    pos, count = start, 0
    while True:
        status, pos, count = K.scan(
            buf, pos, soft, count, limit, *lp, min_len, *tp, unknown, type_min, offsets, lengths, types, longest
        )
        if status == K.FULL:  # room for what the bytes left hold at the records' mean size so far
            room = count + max(1024, int((soft - pos) / max((pos - start) / count, 1) * 1.125))
            offsets, lengths, types = (_grown(a, count, room) for a in (offsets, lengths, types))
            continue
        if soft < end and status in (K.SHORT_PREFIX, K.PAST_END):
            if count:  # the window ends inside a record: it starts the next window
                status = K.OK
                break
            soft = min(end, start + 2 * (soft - start))  # a record larger than the window: grow it
            continue
        break
    if status != K.OK:
        raise _scan_error(status, s, buf, label, pos, end, lp, tp, type_min, min_len, where)
    return Scanned(start, pos, offsets[:count], lengths[:count], types[:count], longest=longest)


def _guess(buf, start, soft, limit, lp, tp, min_len, unknown, type_min) -> int:
    """Entries for the index of ``buf[start:soft]``: the records the first 64 KiB hold,
    scaled to the whole range (an eighth more), so the scan seldom fills its arrays and
    never holds many times the room it needs."""
    if limit == 0:
        return 1
    probe = min(soft, start + (1 << 16))
    room = 4096
    o, n, t = np.empty(room, np.int64), np.empty(room, np.int64), np.empty(room, np.int32)
    _, pos, count = K.scan(
        buf, start, probe, 0, -1, *lp, min_len, *tp, unknown, type_min, o, n, t, np.zeros(len(type_min), np.int64)
    )
    if count == 0 or pos >= soft:
        guess = count + 16
    else:
        guess = int((soft - start) / ((pos - start) / count) * 1.125) + 1024
    return min(guess, limit) if limit > 0 else guess


def _grown(a: np.ndarray, count: int, room: int) -> np.ndarray:
    """A new array of ``room`` entries holding the first ``count`` of ``a``."""
    out = np.empty(room, a.dtype)
    out[:count] = a[:count]
    return out


def _fixed(buf, start, soft, end, limit, size, params, s, label, where) -> Scanned:
    """The index of a section of fixed-size records of one type, by arithmetic (no walk):
    the whole records from ``start`` up to ``soft`` (at most ``limit``). A truncated last
    record is reported as the scan reports it; a record that crosses a window's end
    (``soft < end``) is left to the next window, unless it is the window's first, which
    the window then holds."""
    lp, tp, type_min, min_len, unknown = params
    whole = (soft - start) // size
    if soft < end and whole == 0:  # a record larger than the window: the window grows to hold it
        whole = min((end - start) // size, 1)
    if limit >= 0:
        whole = min(whole, limit)
    pos = start + whole * size
    if (soft == end or whole == 0) and pos < end and whole != limit:
        one = (np.empty(1, np.int64), np.empty(1, np.int64), np.empty(1, np.int32), np.zeros(len(type_min), np.int64))
        status, at, _ = K.scan(buf, pos, end, 0, -1, *lp, min_len, *tp, unknown, type_min, *one)
        raise _scan_error(status, s, buf, label, at, end, lp, tp, type_min, min_len, where)
    offsets = padded_int64(whole)  # (it can be the table's _offset column as it is)
    K.arith_threaded(offsets, start, size)
    lengths = np.broadcast_to(np.int64(size), offsets.shape)  # (read-only views of one value)
    types = np.broadcast_to(np.int32(0), offsets.shape)
    return Scanned(start, pos, offsets, lengths, types, stride=size, padded=True)


def padded_int64(n: int) -> np.ndarray:
    """An int64 array of ``n`` at a 64-byte boundary, the bytes after it to the next 64
    zero: laid out as an arena lays out a column buffer (Arrow's alignment, no stale
    bytes for a writer that copies whole 64-byte blocks)."""
    size = -(-n * 8 // 64) * 64
    raw = np.empty(size + 64, np.uint8)
    skip = -raw.ctypes.data % 64
    out = raw[skip : skip + size]
    out[n * 8 :] = 0
    return out[: n * 8].view(np.int64)


def selected(s: Section, header: dict, label: str, where: str) -> int:
    """The index of the type a section's ``select`` expression chooses."""
    from .spec import evaluate

    assert s.select is not None
    value = _checked(lambda: evaluate(s.select, header, f"{where}.select"), where)
    for i, t in enumerate(s.types):
        if t.tag == value:
            return i
    known = ", ".join(f"{t.name}={t.tag!r}" for t in s.types)
    raise ConversionError(
        f"{label}: {where}: select = {s.select!r} is {value}, no type of the section (types: "
        f"{known}); the header is damaged, or the file uses a kind of record the description "
        f"lacks (add a type with tag = {value})"
    )


def _scan_blocks(stream, s, buf, label, start, end, limit, where, stop=None):
    """VB: block descriptor words (a 2-byte big-endian length counting the BDW), each
    followed by RDW records that fill the block exactly; with ``stop``, whole blocks up
    to the first that ends at or past it."""
    parts, blocks, pos = [], [], start
    while pos < end and (limit < 0 or sum(len(p[0]) for p in parts) < limit) and (stop is None or pos < stop):
        if end - pos < 4:
            raise ConversionError(
                f"{label}: byte {pos}: {end - pos} bytes left, too few for a block descriptor "
                f"word (4 bytes); the file is truncated"
            )
        n = int(buf[pos]) << 8 | int(buf[pos + 1])
        if n < 8 or n > end - pos:
            why = "past the end of the data" if n > end - pos else "smaller than a BDW and one RDW (8 bytes)"
            raise ConversionError(
                f"{label}: byte {pos}: block descriptor word says the block is {n} bytes, {why} "
                f"({end - pos} left); the file is damaged or not VB (try the rdw framing)"
            )
        blocks.append(pos)
        sub = Section(s.framing, s.types, s.tag, tail=s.tail, unknown=s.unknown)
        got = scan_section(stream, sub, buf, label, "big", {}, pos + 4, pos + n, -1, where)
        parts.append((got.offsets, got.lengths, got.types))
        pos += n
    cat = [
        np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dt)
        for i, dt in enumerate((np.int64, np.int64, np.int32))
    ]
    return Scanned(start, pos, *cat, blocks=np.array(blocks, np.int64))


def _type_note(s, buf, pos, end, tp, where):
    """What a damaged record's type is, for the framing errors: its tag's type when the
    tag lies inside the data, else what is known."""
    toff, tsize, tbig = tp[0], tp[1], tp[2]
    if not tsize:
        return f"; the record is type {s.types[0].name!r} of {where}" if len(s.types) == 1 else ""
    if pos + toff + tsize > end:
        return "; its tag is past the end of the data"
    raw = bytes(buf[pos + toff : pos + toff + tsize])
    value = int.from_bytes(raw, "big" if tbig else "little")
    t = -1
    if len(tp[5]):
        t = int(tp[5][value])
    else:
        bits = value - (1 << 64) if value >= 1 << 63 else value
        k = int(np.searchsorted(tp[3], bits))
        if k < len(tp[3]) and int(tp[3][k]) == bits:
            t = int(tp[4][k])
    if t < 0:
        return f"; its tag {value} ({raw!r}) is no type of {where}"
    return f"; the record is type {s.types[t].name!r} (tag {value}, {raw!r}) of {where}"


def _scan_error(status, s, buf, label, pos, end, lp, tp, type_min, min_len, where):
    err = _scan_error_of(status, s, buf, label, pos, end, lp, tp, type_min, min_len, where)
    if status in (K.SHORT_PREFIX, K.PAST_END, K.TOO_SMALL):
        return ConversionError(f"{err}{_type_note(s, buf, pos, end, tp, where)}")
    return err


def _scan_error_of(status, s, buf, label, pos, end, lp, tp, type_min, min_len, where):
    left = end - pos
    if status == K.SHORT_RECORD:
        off, size, big, unit, base = lp
        n = base
        if size:
            n = int.from_bytes(bytes(buf[pos + off : pos + off + size]), "big" if big else "little") * unit + base
        t = 0
        if tp[1]:
            value = int.from_bytes(bytes(buf[pos + tp[0] : pos + tp[0] + tp[1]]), "big" if tp[2] else "little")
            bits = value - (1 << 64) if value >= 1 << 63 else value  # as the scan compares it (int64)
            t = int(tp[5][value]) if len(tp[5]) else int(tp[4][np.searchsorted(tp[3], bits)])
        return ConversionError(
            f"{label}: byte {pos}: a {where} type {s.types[t].name!r} record of {n} bytes, shorter than the type's "
            f"{int(type_min[t])} bytes of fields; the stream is damaged, or the type's fields are wrong"
        )
    if status == K.SHORT_PREFIX:
        return ConversionError(
            f"{label}: byte {pos}: the last record is truncated: {left} bytes left, fewer than the {min_len} its "
            f"framing needs ({where}); the file was cut short, or the section's offset/bytes are wrong"
        )
    if status == K.UNKNOWN_TAG:
        toff, tsize, tbig = tp[0], tp[1], tp[2]
        value = int.from_bytes(bytes(buf[pos + toff : pos + toff + tsize]), "big" if tbig else "little")
        shown = f"{value} ({bytes(buf[pos + toff : pos + toff + tsize])!r})"
        known = ", ".join(f"{t.name}={t.tag!r}" for t in s.types)
        return ConversionError(
            f"{label}: byte {pos}: record type tag {shown} at byte {pos + toff} is no type of {where} (types: "
            f'{known}); the stream is damaged, or set unknown = "skip" or "keep" in the section'
        )
    off, size, big, unit, base = lp
    if size == 0:
        return ConversionError(
            f"{label}: byte {pos}: the last record is truncated: {left} bytes left, a record is {base} bytes "
            f"({where}); the file was cut short, or it has bytes after the records (give the section bytes= or "
            f"count=)"
        )
    value = int.from_bytes(bytes(buf[pos + off : pos + off + size]), "big" if big else "little")
    n = value * unit + base
    if status == K.PAST_END:
        return ConversionError(
            f"{label}: byte {pos}: the record's length field (byte {pos + off}) says {value}, a record of {n} bytes, "
            f"past the end of the data ({left} bytes left); the file is truncated or damaged, or the framing's "
            f"length settings (unit, counts_itself, adjust) are wrong"
        )
    return ConversionError(
        f"{label}: byte {pos}: the record's length field (byte {pos + off}) says {value}, a record of {n} bytes, "
        f"less than the {max(min_len, 1)} bytes its framing needs; a zero or too-small length means a damaged "
        f"stream or wrong framing settings (counts_itself, adjust)"
    )
