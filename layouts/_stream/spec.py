"""The record-stream description: :class:`Stream` and its parts, and its TOML loader.

A description says where the records of a file are and how to cut them apart; the
walk itself is :mod:`.frame`'s. Every part is a frozen dataclass (hashable, a value),
checked when built: a mistake is a LayoutError naming the key and the fix.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any, Mapping

import numpy as np

from .._errors import LayoutError
from .._layout import Layout

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "Stream",
    "Record",
    "Section",
    "Framing",
    "Length",
    "Tag",
    "RecordType",
    "ByteOrder",
    "load",
    "builtin_names",
    "RESERVED",
]

RESERVED = ("_offset", "_tail", "_prefix", "_header", "_gaps")
_PRESETS = ("rdw", "bdw", "fixed")
_UNITS = {"bytes": 1, "words": 2}
_FIELD_TYPE = re.compile(r"^([<>=|]?)([iufSb?])(\d*)$")
# a list field: '>f4[samples_per_trace]', '<u4[5]' (not a datetime's unit: '>M8[ns]')
_LIST_TYPE = re.compile(r"^(?![<>=|]?[Mm]8\[)([^\[\]]*)\[(.*)\]$")
_CALLS = ("max", "min")


def _err(where, msg):
    return LayoutError(f"{where}: {msg}")


# --------------------------------------------------------------------------- expressions
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)
INT64_MAX = 2**63 - 1


_MAX_DEPTH = 200  # levels of an expression's tree (a sum of 100 terms nests 100)


def check_expr(text: "str | int", where: str, names: "tuple[str, ...]") -> "str | int":
    """``text`` if it is an integer or an expression over ``names`` with + - * // and
    parentheses only; else a LayoutError naming ``where``."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise _err(where, f"expected an integer or an expression (a string), got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise _err(where, f"{text} is negative; offsets, counts and sizes are >= 0")
        return text
    try:
        tree = ast.parse(text, mode="eval")
    except RecursionError:
        raise _err(where, f"{text[:40]!r}... nests too deep to parse; at most {_MAX_DEPTH} levels") from None
    except SyntaxError as err:
        raise _err(
            where,
            f'{text!r} is not an expression ({err.msg}); write e.g. "offset_to_points" or "header_size + 4 * count"',
        ) from err
    depth = 0
    stack: "list[tuple[ast.AST, int]]" = [(tree, 1)]
    while stack:  # (evaluate recurses: its depth is bounded here, not by Python's stack)
        item, d = stack.pop()
        depth = max(depth, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(item))
    if depth > _MAX_DEPTH:
        raise _err(
            where,
            f"{text[:40]!r}... nests {depth} levels of operations; at most {_MAX_DEPTH}: write it shorter "
            f"(a header field, or n * k for a sum of n equal terms)",
        )
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in _CALLS and len(node.args) < 2:
                fn = node.func.id
                raise _err(where, f"{text!r} calls {fn}() with fewer than 2 arguments; write {fn}(a, b, ...)")
            if not (
                isinstance(node.func, ast.Name) and node.func.id in _CALLS and len(node.args) >= 2 and not node.keywords
            ):
                fn = node.func.id if isinstance(node.func, ast.Name) else "?"
                raise _err(
                    where, f"{text!r} uses Call {fn}(); the only functions are max(a, b, ...) and min(a, b, ...)"
                )
            calls.add(id(node.func))
            continue
        if id(node) in calls:
            continue
        if (
            isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load))
            or isinstance(node, _OPS)
            or isinstance(node, ast.USub)
        ):
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int:
            continue
        if isinstance(node, ast.Name):
            if node.id not in names:
                known = ", ".join(names) or "none"
                raise _err(
                    where,
                    f"{text!r} names {node.id!r}, which is no integer field of the header (integer "
                    f"header fields: {known})",
                )
            continue
        raise _err(
            where,
            f"{text!r} uses {type(node).__name__}; expressions have header field names, integers, "
            f"+ - * //, max(), min() and parentheses only",
        )
    return text


def evaluate(text: "str | int", values: Mapping[str, int], where: str) -> int:
    """The value of a checked expression, with checked arithmetic: a result or an
    intermediate value outside int64, or a // by zero, raises ValueError naming it."""
    if isinstance(text, int):
        return text

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            v = node.value
        elif isinstance(node, ast.Name):
            v = int(values[node.id])
        elif isinstance(node, ast.UnaryOp):
            v = -ev(node.operand)
        elif isinstance(node, ast.Call):
            args = [ev(a) for a in node.args]
            v = max(args) if node.func.id == "max" else min(args)
        else:
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                v = a + b
            elif isinstance(node.op, ast.Sub):
                v = a - b
            elif isinstance(node.op, ast.Mult):
                v = a * b
            else:
                if b == 0:
                    raise ValueError(f"{where} = {text!r} divides by zero")
                v = a // b
        if not -INT64_MAX - 1 <= v <= INT64_MAX:
            raise ValueError(f"{where} = {text!r} overflows int64 ({v})")
        return v

    return ev(_parsed(text))


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> ast.Expression:
    """``ast.parse(text, mode="eval")``, remembered (a read evaluates the same few
    expressions each time; parsing one costs more than its value). Only read, never changed."""
    return ast.parse(text, mode="eval")


# --------------------------------------------------------------------------- field types
def field_dtype(spec: str, order: str, where: str) -> "tuple[np.dtype, int, str]":
    """(NumPy dtype of the column, bytes in the stream, byte order) of a field type.

    Types are NumPy's (``>u4``, ``<f8``, ``S8``, ``u1``) with ``=`` meaning the
    stream's byte order (fixed, or detected from a magic number: ``order``), plus
    unsigned integers of 3, 5, 6 and 7 bytes (``>u6``: an ITCH timestamp), widened
    to the next NumPy integer in the table. ``>f4[12]`` is a list of 12 (a fixed-size
    list column); a list whose length is an expression (``>f4[samples_per_trace]``)
    has a type only once :meth:`Record.resolve` has put the header's value in."""
    lm = _LIST_TYPE.match(spec) if isinstance(spec, str) else None
    if lm is not None:
        base, count = lm.group(1), lm.group(2).strip()
        dt, width, o = list_item(spec, base, order, where)
        if not count.isdigit():
            raise _err(
                where,
                f"{spec!r}: a list's length {count!r} is an expression; it has a type only once the "
                f"header is read (Record.resolve)",
            )
        n = int(count)
        if n < 1:
            raise _err(where, f"{spec!r}: a list needs at least 1 element")
        if width * n > _FIELD_MAX:
            raise _err(where, f"{spec!r}: a list of more than {_FIELD_MAX} bytes (2**31 - 1, NumPy's largest field)")
        return np.dtype((dt, (n,))), width * n, o
    m = _FIELD_TYPE.match(spec) if isinstance(spec, str) else None
    if m is None:
        raise _err(
            where,
            f"field type {spec!r} is not one of: a NumPy type like '>u4', '<f8', 'S8', 'u1', "
            f"'=i2' ('=' is the stream's byte order), or an odd-width unsigned '>u6'",
        )
    o, kind, size = m.group(1), m.group(2), int(m.group(3) or 1)
    if o == "=":
        o = ">" if order == "big" else "<"
    if kind in "S":
        if m.group(3) and size == 0:  # (NumPy's S0 is a string of no bytes: it holds nothing)
            raise _err(where, f"{spec!r}: a string of 0 bytes holds nothing; give its width, 'S1' or more")
        if size > _FIELD_MAX:
            raise _err(where, f"{spec!r}: a field of more than {_FIELD_MAX} bytes (2**31 - 1, NumPy's largest)")
        return np.dtype(f"S{size}"), size, "|"
    if kind in "b?":
        return np.dtype("?"), 1, "|"
    if kind == "u" and size in (3, 5, 6, 7):
        if o not in "<>" or o == "":
            raise _err(where, f"{spec!r}: an odd-width integer needs a byte order, '>u{size}' or '<u{size}'")
        wide = 4 if size == 3 else 8
        return np.dtype(f"{o}u{wide}"), size, o
    if size not in (1, 2, 4, 8) or (kind == "f" and size == 1):
        raise _err(
            where,
            f"{spec!r}: no {kind}{size}; integers are 1, 2, 4, 8 bytes (unsigned also 3, 5, 6, 7), floats 2, 4, 8",
        )
    if size > 1 and o in ("", "|"):
        raise _err(
            where,
            f"{spec!r}: a {size}-byte number needs a byte order: '>{kind}{size}', '<{kind}{size}' or '={kind}{size}'",
        )
    return np.dtype(f"{o if size > 1 else '|'}{kind}{size}"), size, o if size > 1 else "|"


def list_item(spec: str, base: str, order: str, where: str) -> "tuple[np.dtype, int, str]":
    """The item type of list type ``spec`` (``base[...]``): a number of 1, 2, 4 or 8 bytes."""
    dt, width, o = field_dtype(base, order, where)
    if dt.kind not in "iuf" or dt.itemsize != width:
        raise _err(where, f"{spec!r}: a list holds numbers of 1, 2, 4 or 8 bytes ('>f4[n]', '<u4[5]'), not {base!r}")
    return dt, width, o


# --------------------------------------------------------------------------- parts
@dataclass(frozen=True)
class Record:
    """A fixed record: named fields in order, packed (a file header, or a record type's
    fixed part). ``fields`` is ``((name, type), ...)`` (see :func:`field_dtype`);
    ``text`` names ``S<n>`` fields shown as strings (trailing spaces kept, so they go
    back byte for byte); ``decimals`` gives integer fields' implied decimal places."""

    fields: tuple
    text: tuple = ()
    decimals: Any = ()  # ((field, places), ...) or a dict

    def __post_init__(self):
        object.__setattr__(
            self, "fields", tuple(tuple(f) if isinstance(f, (list, tuple)) else (f,) for f in self.fields)
        )
        object.__setattr__(self, "text", tuple(self.text))
        d = self.decimals.items() if isinstance(self.decimals, Mapping) else self.decimals
        object.__setattr__(self, "decimals", tuple(tuple(x) if isinstance(x, (list, tuple)) else (x, None) for x in d))

    def check(self, where: str, order: str, names: "tuple[str, ...]" = ()) -> None:
        """Check the fields; ``names``: the header fields list lengths may use."""
        if not self.fields:
            raise _err(where, 'a record needs at least one field: fields = [["name", ">u4"], ...]')
        seen = set()
        for f in self.fields:
            if len(f) != 2 or not isinstance(f[0], str) or not isinstance(f[1], str):
                raise _err(where, f'field {f!r} is not a [name, type] pair like ["price", ">u4"]')
            if f[0] in seen:
                raise _err(where, f"field {f[0]!r} appears twice; names must be unique")
            if f[0] in RESERVED or not f[0]:
                raise _err(where, f"field name {f[0]!r} is reserved ({', '.join(RESERVED)}); rename it")
            seen.add(f[0])
            lm = _LIST_TYPE.match(f[1])
            if lm is not None and not lm.group(2).strip().isdigit():
                check_expr(lm.group(2).strip(), f"{where}.fields.{f[0]}: list length", names)
                list_item(f[1], lm.group(1), order, f"{where}.fields.{f[0]}")
            else:
                field_dtype(f[1], order, f"{where}.fields.{f[0]}")
        kinds = {n: t for n, t in self.fields}
        for n in self.text:
            if not isinstance(n, str) or n not in kinds or not kinds[n].lstrip("|").startswith("S"):
                raise _err(where, f"text names {n!r}, which is no S<n> field of this record")
        for n, places in self.decimals:
            if not isinstance(n, str) or n not in kinds or kinds[n].lstrip("<>=|")[0] not in "iu":
                raise _err(where, f"decimals names {n!r}, which is no integer field of this record")
            if type(places) is not int or not 0 <= places <= 38:
                raise _err(where, f"decimals.{n} = {places!r}; expected an integer 0..38")

    def size(self, order: str) -> int:
        return sum(field_dtype(t, order, "")[1] for _, t in self.fields)

    def min_size(self, order: str) -> int:
        """The size with every list whose length is an expression taken as empty."""
        return sum(0 if _open_list(t) else field_dtype(t, order, "")[1] for _, t in self.fields)

    @functools.cached_property
    def _opens(self) -> bool:
        """Whether a field is an :func:`_open_list` (remembered: a read resolves every type
        of every section, and matching each type string costs as much as reading a small
        file)."""
        return any(_open_list(t) for _, t in self.fields)

    def resolve(self, values: Mapping[str, int], where: str, limit: int) -> "Record":
        """This record with every list length that is an expression replaced by its
        value (``values``: the header's integer fields); ValueError when a length is
        below 1 or the record would exceed ``limit`` bytes."""
        if not self._opens:
            return self
        lengths = []
        for name, t in self.fields:
            if _open_list(t):
                lm = _LIST_TYPE.match(t)
                assert lm is not None
                expr = lm.group(2).strip()
                n = evaluate(expr, values, f"{where}.fields.{name}: list length")
                if n < 1:
                    raise ValueError(
                        f"{where}.fields.{name}: the list length {expr!r} is {n}; a list needs at least 1 element"
                    )
                if n > limit:
                    raise ValueError(
                        f"{where}.fields.{name}: the list length {expr!r} is {n}, more elements than "
                        f"the {limit} bytes of the data can hold"
                    )
                lengths.append((lm.group(1), n))
        key = tuple(lengths)
        got = self._resolved.get(key)  # (a record is a value: the same lengths, the same record)
        if got is None:
            fields, at = [], iter(lengths)
            for name, t in self.fields:
                if _open_list(t):
                    base, n = next(at)
                    t = f"{base}[{n}]"
                fields.append((name, t))
            got = dataclasses.replace(self, fields=tuple(fields))
            if len(self._resolved) < 64:
                self._resolved[key] = got
        return got

    @functools.cached_property
    def _resolved(self) -> dict:
        """The records :meth:`resolve` made, by their list lengths (SEG-Y: one a file's
        sample count): rebuilding one (its fields checked again, its plan made again)
        costs more than reading a small file."""
        return {}

    def plan(self, order: str, prefix: int, with_offset: bool, keep_prefix: bool = False):
        """See :func:`_plan` (cached: a Record is a value)."""
        return _plan(self, order, prefix, with_offset, keep_prefix)


def _open_list(t: str) -> bool:
    """Whether ``t`` is a list type whose length is an expression."""
    lm = _LIST_TYPE.match(t)
    return lm is not None and not lm.group(2).strip().isdigit()


def _head_columns(prefix: int, with_offset: bool, keep_prefix: bool):
    """``(names, formats, offsets, runs, size)`` of the dense record's first columns:
    ``_offset``, then ``_prefix`` (the framing bytes, with ``keep_prefix``)."""
    names: list = []
    formats: list = []
    offsets: list = []
    runs: list = []
    at = 0
    if with_offset:
        names.append("_offset")
        formats.append("<i8")
        offsets.append(0)
        at = 8
    if keep_prefix and prefix:
        names.append("_prefix")
        formats.append(f"S{prefix}")
        offsets.append(at)
        runs.append((0, at, prefix))
        at += prefix
    return names, formats, offsets, runs, at


@functools.lru_cache(maxsize=512)
def _plan(self: Record, order: str, prefix: int, with_offset: bool, keep_prefix: bool):
    """(Layout, runs, zero ranges, byte offset of ``_offset`` or -1): how the
    stream bytes (a record starting ``prefix`` bytes into its frame) map to a
    packed dense record: ``_offset`` first, then ``_prefix`` (the framing bytes,
    with ``keep_prefix``), then the fields."""
    names, formats, offsets, runs, at = _head_columns(prefix, with_offset, keep_prefix)
    zeros: list = []
    src = prefix
    for name, t in self.fields:
        dt, width, o = field_dtype(t, order, name)
        names.append(name)
        formats.append(dt)
        offsets.append(at)
        pad = dt.itemsize - width
        if pad and o == ">":
            zeros.append((at, pad))
            runs.append((src, at + pad, width))
        else:
            if pad:
                zeros.append((at + width, pad))
            runs.append((src, at, width))
        at += dt.itemsize
        src += width
    merged: list = []  # runs that continue each other in both records become one copy
    for r in runs:
        if merged and merged[-1][0] + merged[-1][2] == r[0] and merged[-1][1] + merged[-1][2] == r[1]:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + r[2])
        else:
            merged.append(r)
    runs = merged
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": at})
    bytes_as = {n: "string" for n in self.text}
    return (Layout.from_dtype(dtype, bytes_as=bytes_as or "fixed"), tuple(runs), tuple(zeros), 0 if with_offset else -1)


@dataclass(frozen=True)
class Length:
    """A length field: ``size`` bytes at ``offset`` in the record (its frame), byte
    order ``order``, counted in ``unit`` bytes (1 "bytes", 2 "words"). The record is
    ``value * unit + adjust`` bytes, plus ``offset + size`` when the value does not
    count itself (the bytes up to the end of the field)."""

    offset: int = 0
    size: int = 2
    order: str = "big"
    unit: int = 1
    counts_itself: bool = False
    adjust: int = 0

    def big(self, order: str) -> bool:
        """Whether the field is big-endian in a stream of byte order ``order``."""
        return (order if self.order == "=" else self.order) == "big"

    def base(self) -> int:
        return self.adjust + (0 if self.counts_itself else self.offset + self.size)


@dataclass(frozen=True)
class Tag:
    """The type tag: ``size`` bytes at ``offset`` in the record (after the framing
    prefix), an unsigned integer in byte order ``order``."""

    offset: int = 0
    size: int = 1
    order: str = "big"


@dataclass(frozen=True)
class RecordType:
    """One record type: its name, its tag value (an integer, or a string of the tag's
    size in bytes), and its fixed part."""

    name: str
    record: Record
    tag: "int | str | None" = None

    def tag_value(self, tag: Tag, where: str) -> int:
        t = self.tag
        if isinstance(t, str):
            # a copybook type: its code page's bytes ("A" is 0xC1 in cp037), as its text is
            encode = getattr(self.record, "tag_bytes", None)
            try:
                raw = encode(t, where) if encode is not None else t.encode("latin-1")
            except UnicodeEncodeError as err:
                raise _err(
                    where, f"tag {t!r} is not one byte per character (latin-1); give its value as an integer"
                ) from err
            if len(raw) != tag.size:
                raise _err(where, f"tag {t!r} has {len(raw)} bytes; the tag field has {tag.size}")
            return int.from_bytes(raw, "big" if tag.order == "big" else "little")
        if type(t) is not int or not 0 <= t < 1 << (8 * tag.size):
            raise _err(
                where, f"tag {t!r} is not an integer 0..{(1 << 8 * tag.size) - 1} or a {tag.size}-character string"
            )
        return t


@dataclass(frozen=True)
class Framing:
    """How records are cut: ``size`` (an expression) for fixed-size records, or a
    ``length`` field; ``prefix`` bytes of framing come before each record's fields
    (kept as the ``_prefix`` column when they hold more than the length field). The
    default prefix is the length field when it starts the record (ITCH's 2 bytes),
    else none (pcap's length is a field of the record header). With neither ``size``
    nor ``length`` (``framing = "fixed"``), each record is exactly its type's fields
    (one type, or the one the header selects)."""

    size: "int | str | None" = None
    length: "Length | None" = None
    prefix: "int | None" = None  # default: the length field's size when it starts the record, else 0

    def __post_init__(self):
        if self.prefix is None:
            ln = self.length
            object.__setattr__(self, "prefix", ln.size if ln is not None and ln.offset == 0 else 0)


@dataclass(frozen=True)
class Section:
    """Records of one framing. ``offset`` (default: where the previous part ended),
    ``count`` and ``bytes`` (default: to the end of the file, or ``count`` records) are
    expressions over header fields. ``types``: the record types (one without a tag).
    ``tail``: what bytes of a record beyond its type's fields are: ``"column"`` (the
    ``_tail`` binary column) or ``"error"``. ``unknown``: a tag with no type is an
    ``"error"``, or ``"skip"``ped, or kept (``"keep"``, as the ``_unknown`` table).
    ``select``: an expression over header fields whose value is the (integer) tag of the
    one type every record of the section has (a LAS point format), instead of a tag in
    each record."""

    framing: Framing
    types: tuple
    tag: "Tag | None" = None
    offset: "int | str | None" = None
    count: "int | str | None" = None
    bytes: "int | str | None" = None
    tail: str = "error"
    unknown: str = "error"
    select: "int | str | None" = None

    def __post_init__(self):
        object.__setattr__(self, "types", tuple(self.types))

    def resolve(self, values: Mapping[str, int], where: str, limit: int) -> "Section":
        """This section with its types' list lengths taken from the header (``values``)."""
        records = [t.record.resolve(values, f"{where}.types.{t.name}", limit) for t in self.types]
        if all(r is t.record for r, t in zip(records, self.types)):
            return self
        types = tuple(t if r is t.record else dataclasses.replace(t, record=r) for r, t in zip(records, self.types))
        return dataclasses.replace(self, types=types)


@dataclass(frozen=True)
class ByteOrder:
    """The stream's byte order from a magic number: ``size`` bytes at ``offset``, read
    big-endian, in ``magic`` means big; read little-endian in ``magic``, little."""

    offset: int = 0
    size: int = 4
    magic: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "magic", tuple(self.magic))


@dataclass(frozen=True)
class Stream:
    """A record stream: an optional header, then sections of framed records.

    Build it in Python or load it with :func:`load` from a TOML file (see
    docs/streams.md). ``order`` is the byte order of ``=`` fields: ``"big"``,
    ``"little"``, or found in the file (``byteorder``). ``header_size``: the header's
    size in a file, an expression over its fields (fields past it are absent).

    Examples
    --------
    >>> import layouts as lo
    >>> S = lo.Stream
    >>> s = S(sections=[S.Section(S.Framing(length=S.Length(0, 2, "big")),
    ...     [S.RecordType("msg", S.Record([("kind", "S1"), ("qty", ">u4")]))])])
    >>> s.sections[0].framing.length.size
    2
    """

    sections: tuple
    header: "Record | None" = None
    order: str = "big"
    byteorder: "ByteOrder | None" = None
    name: str = "<stream>"
    header_size: "int | str | None" = None

    def __post_init__(self):
        object.__setattr__(self, "sections", tuple(self.sections))
        self.check()

    def header_record(self, values: Mapping[str, int], order: str, where: str) -> "tuple[Record, int]":
        """(the header's fields that lie inside its ``header_size``, that size): with
        ``header_size`` (an expression over header fields, e.g. LAS's ``header_size``),
        fields past it are absent (newer versions' fields in an older file). ValueError
        when the size cuts a field or ends before the fields it is computed from."""
        rec = self.header
        assert rec is not None
        full = rec.size(order)
        if self.header_size is None:
            return rec, full
        n = evaluate(self.header_size, values, f"{where}: header.size")
        need = self.header_needs(order)
        if n < need:
            raise ValueError(
                f"{where}: header.size = {self.header_size!r} is {n}, less than the {need} bytes "
                f"holding the fields it is computed from"
            )
        at, keep = 0, []
        for name, t in rec.fields:
            w = field_dtype(t, order, name)[1]
            if at + w <= n:
                keep.append((name, t))
            elif at < n:
                raise ValueError(
                    f"{where}: header.size = {self.header_size!r} is {n}, which cuts field {name!r} "
                    f"(bytes {at}..{at + w})"
                )
            at += w
        if len(keep) == len(rec.fields):
            return rec, full
        kept = {k for k, _ in keep}
        return Record(
            tuple(keep), tuple(x for x in rec.text if x in kept), tuple(d for d in rec.decimals if d[0] in kept)
        ), sum(field_dtype(t, order, k)[1] for k, t in keep)

    def header_needs(self, order: str) -> int:
        """The bytes of the header up to the last field ``header_size`` names."""
        assert self.header is not None
        used = {n.id for n in ast.walk(ast.parse(str(self.header_size), mode="eval")) if isinstance(n, ast.Name)}
        at = end = 0
        for name, t in self.header.fields:
            at += field_dtype(t, order, name)[1]
            if name in used:
                end = at
        return end

    def orders(self) -> "tuple[str, ...]":
        return ("big", "little") if self.byteorder is not None else (self.order,)

    def check(self) -> None:
        w = self.name
        if self.order not in ("big", "little"):
            raise _err(f"{w}: order", f'{self.order!r}; expected "big" or "little"')
        if self.byteorder is not None:
            b = self.byteorder
            if not (_nat(b.offset) and b.size in (1, 2, 4, 8) and b.magic and all(_nat(m) for m in b.magic)):
                raise _err(f"{w}: byteorder", "needs offset >= 0, size 1/2/4/8 and magic = [numbers...]")
        header_names: tuple = ()
        for order in self.orders():
            if self.header is not None:
                self.header.check(f"{w}: header", order)
                header_names = tuple(
                    n
                    for n, t in self.header.fields  # integer fields only
                    if field_dtype(t, order, n)[0].kind in "iu"
                )
        if self.header_size is not None:
            if self.header is None:
                raise _err(f"{w}: header.size", "there is no header: give [header] fields, or drop size")
            check_expr(self.header_size, f"{w}: header.size", header_names)
        if not self.sections:
            raise _err(w, "a stream needs at least one section: [[section]] with its framing and types")
        names = set()
        keeps = None  # the section that keeps unknown records
        for i, s in enumerate(self.sections):
            sw = f"{w}: section[{i}]"
            if not isinstance(s, Section):
                raise _err(sw, f"expected a Section, got {type(s).__name__}")
            if s.unknown == "keep":
                if keeps is not None:
                    raise _err(
                        f"{sw}.unknown",
                        f'"keep" in section[{keeps}] and section[{i}]; the one _unknown table cannot say '
                        f"which section a record came from: keep unknown records in one section, and "
                        f'set unknown = "skip" or "error" in the others',
                    )
                keeps = i
            for key in ("offset", "count", "bytes", "select"):
                v = getattr(s, key)
                if v is not None:
                    check_expr(v, f"{sw}.{key}", header_names)
            if s.tail not in ("column", "error"):
                raise _err(f"{sw}.tail", f'{s.tail!r}; expected "column" or "error"')
            if s.unknown not in ("error", "skip", "keep"):
                raise _err(f"{sw}.unknown", f'{s.unknown!r}; expected "error", "skip" or "keep"')
            f = s.framing
            if not _nat(f.prefix):
                raise _err(f"{sw}.framing.prefix", f"{f.prefix!r}; expected an integer >= 0 (at most 2**40)")
            if f.size is not None and f.length is not None:
                raise _err(f"{sw}.framing", "give either size (fixed-size records) or length (a length field)")
            if f.size is None and f.length is None and len(s.types) > 1 and s.select is None:
                raise _err(
                    f"{sw}.framing",
                    f'"fixed" (each record its type\'s fields) needs one record type or '
                    f'select = "<header field>" choosing one; this section has '
                    f"{len(s.types)} types: give size, length, or select",
                )
            if s.select is not None and s.tag is not None:
                raise _err(
                    f"{sw}.select",
                    "a section's type comes from a tag in each record or from the header (select), not both; drop one",
                )
            if f.size is not None:
                check_expr(f.size, f"{sw}.framing.size", header_names)
            elif f.length is not None:
                ln = f.length
                if type(ln.offset) is int and ln.offset > _PART_MAX:
                    raise _err(
                        f"{sw}.framing.length.offset", f"{ln.offset!r}; expected an integer >= 0 (at most 2**40)"
                    )
                if not (_nat(ln.offset) and ln.size in range(1, 9) and ln.order in ("big", "little", "=")):
                    raise _err(
                        f"{sw}.framing.length",
                        'needs offset >= 0, size 1..8 and order "big", "little" or "=" (the stream\'s)',
                    )
                prefix = int(f.prefix or 0)  # (set by Framing, checked above)
                if ln.offset < prefix < ln.offset + ln.size:
                    raise _err(
                        f"{sw}.framing.length",
                        f"bytes {ln.offset}..{ln.offset + ln.size} straddle the end of the framing prefix "
                        f"({f.prefix} bytes); set prefix = {ln.offset} or {ln.offset + ln.size}",
                    )
                if type(ln.unit) is not int or not 1 <= ln.unit <= _PART_MAX:
                    raise _err(
                        f"{sw}.framing.length.unit", f'{ln.unit!r}; expected "bytes", "words" or an integer 1..2**40'
                    )
                if type(ln.adjust) is not int or abs(ln.adjust) > _PART_MAX:
                    raise _err(
                        f"{sw}.framing.length.adjust", f"{ln.adjust!r}; expected an integer of at most 2**40 either way"
                    )
            if not s.types:
                raise _err(sw, "a section needs at least one record type: [section.types.NAME]")
            if s.tag is None and s.select is None and len(s.types) > 1:
                raise _err(
                    sw,
                    f"{len(s.types)} record types but no tag to tell them apart: add tag = "
                    f"{{ offset = ..., size = ... }}",
                )
            if s.tag is not None and not (
                _nat(s.tag.offset) and s.tag.size in range(1, 9) and s.tag.order in ("big", "little")
            ):
                raise _err(f"{sw}.tag", 'needs offset >= 0, size 1..8 and order "big" or "little"')
            tags: dict = {}
            for t in s.types:
                tw = f"{sw}.types.{getattr(t, 'name', '?')}"
                if not isinstance(t, RecordType) or not isinstance(t.name, str) or not t.name:
                    raise _err(tw, "expected a RecordType with a name")
                if t.name in names or t.name in RESERVED or t.name in ("_unknown", "_blocks"):
                    raise _err(tw, f"the name {t.name!r} is taken (by another type or reserved); rename it")
                names.add(t.name)
                for order in self.orders():
                    t.record.check(tw, order, header_names)
                framed = f.length
                if framed is not None and framed.offset + framed.size > int(f.prefix or 0):
                    ln = framed
                    fields_end = int(f.prefix or 0) + t.record.min_size(self.orders()[0])
                    if ln.offset + ln.size > fields_end:
                        # in a type's tail: its bytes and the computed length would disagree
                        raise _err(
                            f"{sw}.framing.length",
                            f"the length field (bytes {ln.offset}..{ln.offset + ln.size}) lies beyond type "
                            f"{t.name!r}'s fields (bytes {int(f.prefix or 0)}..{fields_end}); make it a field of every "
                            f"type, or part of the prefix",
                        )
                if s.select is not None:
                    if type(t.tag) is not int or t.tag < 0:
                        raise _err(
                            tw,
                            f"the section selects its type by the header's {s.select!r}: give this type "
                            f"the value that selects it, tag = <integer >= 0> (got {t.tag!r})",
                        )
                    if t.tag in tags:
                        raise _err(tw, f"tag {t.tag!r} is also {tags[t.tag]!r}'s; each type needs its own")
                    tags[t.tag] = t.name
                if s.tag is not None:
                    if t.tag is None:
                        raise _err(tw, 'the section has a tag: give this type its value, tag = "A" or a number')
                    v = t.tag_value(s.tag, tw)
                    if v in tags:
                        raise _err(tw, f"tag {t.tag!r} is also {tags[v]!r}'s; each type needs its own")
                    tags[v] = t.name
                    if s.tag.offset + s.tag.size > t.record.min_size(self.orders()[0]):
                        raise _err(
                            f"{sw}.tag",
                            f"the tag (bytes {s.tag.offset}..{s.tag.offset + s.tag.size}) lies "
                            f"beyond type {t.name!r}'s fields; make the tag a field of every type",
                        )


def _nat(v):
    return type(v) is int and 0 <= v <= _PART_MAX


# the largest field NumPy can hold, and the largest offset, size or adjustment a
# description may give (a record's framing beyond 1 TiB is a mistake; it also keeps the
# scan's int64 arithmetic far from overflow)
_FIELD_MAX = 2**31 - 1
_PART_MAX = 2**40


# --------------------------------------------------------------------------- TOML
_STREAM_KEYS = {"name", "order", "byteorder", "header", "section", "version", "about"}
_SECTION_KEYS = {"offset", "count", "bytes", "framing", "tag", "types", "tail", "unknown", "select"}
_RECORD_KEYS = {"fields", "text", "decimals", "tag", "about"}
# a record type laid out by a COBOL copybook (layouts/_stream/copybook.py)
_COPYBOOK_KEYS = ("copybook", "record", "codepage", "invalid", "trim", "trunc", "as_integer", "floating_point")


def _keys(table, allowed, where):
    if not isinstance(table, dict):
        raise _err(where, f"expected a table, got {type(table).__name__}")
    extra = sorted(set(table) - set(allowed))
    if extra:
        raise _err(where, f"unknown key {extra[0]!r}; the keys here are {', '.join(sorted(allowed))}")


def _record(table, where, with_tag=False, header=False, base_dir=None) -> "tuple[Record, Any]":
    allowed = _RECORD_KEYS if with_tag else _RECORD_KEYS - {"tag"}
    if with_tag and isinstance(table, dict) and any(k in table for k in _COPYBOOK_KEYS):
        from .copybook import copybook_record  # a record type laid out by a COBOL copybook

        _keys(table, allowed | set(_COPYBOOK_KEYS), where)
        if "copybook" not in table:
            key = next(k for k in _COPYBOOK_KEYS if k in table)
            raise _err(f"{where}.{key}", 'applies to a record type laid out by a copybook: add copybook = "x.cob"')
        return copybook_record(table, where, base_dir), table.get("tag")
    _keys(table, allowed | {"size"} if header else allowed, where)
    if "fields" not in table:
        raise _err(where, 'missing fields = [["name", ">u4"], ...]')
    fields = table["fields"]
    if not isinstance(fields, list):
        raise _err(f"{where}.fields", "expected a list of [name, type] pairs")
    text = table.get("text", [])
    if not isinstance(text, list):
        raise _err(f"{where}.text", "expected a list of field names")
    decimals = table.get("decimals", {})
    if not isinstance(decimals, dict):
        raise _err(f"{where}.decimals", "expected a table: decimals = { price = 4 }")
    return Record(tuple(tuple(f) if isinstance(f, list) else f for f in fields), tuple(text), decimals), table.get(
        "tag"
    )


def _framing(value, where) -> Framing:
    if isinstance(value, str):
        if value not in _PRESETS:
            raise _err(where, f"{value!r} is no preset; presets are {', '.join(_PRESETS)}, or write a table")
        return Framing() if value == "fixed" else preset(value)
    _keys(value, {"size", "length", "prefix"}, where)
    length = None
    if "length" in value:
        ln = dict(value["length"]) if isinstance(value["length"], dict) else value["length"]
        _keys(ln, {"offset", "size", "order", "unit", "counts_itself", "adjust"}, f"{where}.length")
        unit = ln.get("unit", "bytes")
        if isinstance(unit, str):
            if unit not in _UNITS:
                raise _err(f"{where}.length.unit", f'{unit!r}; expected "bytes", "words" (2 bytes) or an integer')
            unit = _UNITS[unit]
        cs = ln.get("counts_itself", False)
        if not isinstance(cs, bool):
            raise _err(f"{where}.length.counts_itself", f"{cs!r}; expected true or false")
        length = Length(ln.get("offset", 0), ln.get("size", 2), ln.get("order", "big"), unit, cs, ln.get("adjust", 0))
    return Framing(value.get("size"), length, value.get("prefix"))


def preset(name: str) -> Framing:
    """Framing presets: ``rdw`` (IBM V records: a 4-byte record descriptor word, a
    2-byte big-endian length that counts the RDW, 2 more bytes kept as ``_prefix``).
    ``bdw`` is handled by :mod:`.frame` (blocks of RDW records)."""
    if name in ("rdw", "bdw"):
        return Framing(length=Length(0, 2, "big", 1, True, 0), prefix=4)
    raise LayoutError(f"no framing preset {name!r}; presets are {', '.join(_PRESETS)}")


def from_dict(
    doc: Mapping[str, Any], name: str, layouts: "Mapping[str, Any] | None" = None, base_dir: "str | None" = None
) -> Stream:
    """A :class:`Stream` from a parsed TOML document (see docs/streams.md); ``base_dir``:
    where a record type's ``copybook`` path starts (the description file's directory)."""
    _keys(doc, _STREAM_KEYS, name)
    header = None
    if "header" in doc:
        header, _ = _record(doc["header"], f"{name}: header", header=True)
    bo = None
    if "byteorder" in doc:
        b = doc["byteorder"]
        _keys(b, {"offset", "size", "magic"}, f"{name}: byteorder")
        magic = b.get("magic", [])
        if not isinstance(magic, list):
            raise _err(f"{name}: byteorder.magic", f"{magic!r}; expected a list of numbers, magic = [0xa1b2c3d4]")
        bo = ByteOrder(b.get("offset", 0), b.get("size", 4), tuple(magic))
    sections = doc.get("section")
    if not isinstance(sections, list) or not sections:
        raise _err(name, "missing [[section]]: a stream needs at least one section of records")
    out = []
    for i, s in enumerate(sections):
        sw = f"{name}: section[{i}]"
        _keys(s, _SECTION_KEYS, sw)
        if "framing" not in s:
            raise _err(sw, 'missing framing: framing = { size = 24 }, { length = {...} }, "rdw", "bdw" or "fixed"')
        framing = _framing(s["framing"], f"{sw}.framing")
        tag = None
        if "tag" in s:
            _keys(s["tag"], {"offset", "size", "order"}, f"{sw}.tag")
            tag = Tag(s["tag"].get("offset", 0), s["tag"].get("size", 1), s["tag"].get("order", "big"))
        types = []
        tt = s.get("types", {})
        if not isinstance(tt, dict) or not tt:
            raise _err(sw, "missing [section.types.NAME] tables: each record type with its fields")
        for tname, t in tt.items():
            rec, tv = _record(t, f"{sw}.types.{tname}", with_tag=True, base_dir=base_dir)
            types.append(RecordType(tname, rec, tv))
        bdw = s["framing"] == "bdw"
        out.append(
            _BdwSection(
                framing,
                tuple(types),
                tag,
                s.get("offset"),
                s.get("count"),
                s.get("bytes"),
                s.get("tail", "error"),
                s.get("unknown", "error"),
                s.get("select"),
            )
            if bdw
            else Section(
                framing,
                tuple(types),
                tag,
                s.get("offset"),
                s.get("count"),
                s.get("bytes"),
                s.get("tail", "error"),
                s.get("unknown", "error"),
                s.get("select"),
            )
        )
    hsize = doc["header"].get("size") if isinstance(doc.get("header"), dict) else None
    return Stream(tuple(out), header, doc.get("order", "big"), bo, doc.get("name", name), hsize)


@dataclass(frozen=True)
class _BdwSection(Section):
    """A section of IBM VB blocks: a 4-byte block descriptor word (BDW, a 2-byte
    big-endian length counting itself, 2 bytes kept), then RDW records filling it."""


def BdwSection(types, **kw) -> Section:
    """A section of IBM VB (blocked variable) records: BDW blocks of RDW records."""
    return _BdwSection(preset("bdw"), tuple(types), **kw)


def load(path: "str | os.PathLike[str]") -> Stream:
    """Read and check a stream description file (TOML)."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            doc = tomllib.load(f)
    except OSError as err:
        raise LayoutError(f"cannot read the stream description {name}: {err.strerror}") from err
    except tomllib.TOMLDecodeError as err:
        raise LayoutError(f"{name}: not valid TOML ({err}); see docs/streams.md for the format") from err
    return from_dict(doc, os.path.basename(name), base_dir=os.path.dirname(os.path.abspath(name)))


def builtin_names() -> "list[str]":
    return sorted(
        p.name[:-5] for p in resources.files(__package__).joinpath("builtin").iterdir() if p.name.endswith(".toml")
    )


def builtin(name: str) -> Stream:
    res = resources.files(__package__).joinpath("builtin").joinpath(f"{name}.toml")
    if not res.is_file():
        raise LayoutError(
            f"no built-in stream {name!r}; built-ins are {', '.join(builtin_names())}, or pass a "
            f"path to a .toml description or a Stream"
        )
    try:
        doc = tomllib.loads(res.read_text("utf-8"))
    except tomllib.TOMLDecodeError as err:  # pragma: no cover - the built-ins are tested
        raise LayoutError(f"built-in stream {name}: not valid TOML ({err})") from err
    return from_dict(doc, name)


def record_from(fields: Any, where: str = "record") -> Record:
    """A :class:`Record` from a NumPy structured dtype (flat, packed: no holes) or a
    list of ``(name, type)`` pairs."""
    if isinstance(fields, Record):
        return fields
    if isinstance(fields, Layout):
        fields = fields.dtype
    if isinstance(fields, (list, tuple)) and all(
        isinstance(f, (list, tuple)) and len(f) == 2 and isinstance(f[1], str) for f in fields
    ):
        return Record(tuple((f[0], f[1]) for f in fields))
    try:
        dt = np.dtype(fields)
    except TypeError as err:
        raise _err(where, f"expected a NumPy structured dtype or [(name, type), ...], got {fields!r}") from err
    if dt.names is None:
        raise _err(where, f"{dt} has no named fields; give a structured dtype")
    out, at = [], 0
    for n in dt.names:
        f, off = dt.fields[n][0], dt.fields[n][1]
        if off != at or f.subdtype is not None or f.names is not None:
            raise _err(
                f"{where}.{n}",
                f"field at offset {off} (expected {at}) or a sub-array/nested record: a stream "
                f"record is a flat, packed list of fields; list them as (name, type) pairs",
            )
        t = (
            f"S{f.itemsize}"
            if f.kind == "S"
            else ("?" if f.kind == "b" else ("|" if f.itemsize == 1 else f.str[0]) + f.kind + str(f.itemsize))
        )
        out.append((n, t.replace("|", "")))
        at += f.itemsize
    if at != dt.itemsize:
        raise _err(where, f"{dt.itemsize - at} bytes of padding at the end; a stream record is packed")
    return Record(tuple(out))


def _rdw(cls, record: Any, *, name: str = "record", tail: str = "error") -> Stream:
    """IBM V (variable) records: each a 4-byte RDW (2-byte big-endian length counting
    the RDW, 2 bytes kept as ``_prefix``) and ``record``'s fields (a dtype or pairs)."""
    return cls((Section(preset("rdw"), (RecordType(name, record_from(record)),), tail=tail),), name="rdw")


def _bdw(cls, record: Any, *, name: str = "record", tail: str = "error") -> Stream:
    """IBM VB (variable blocked): blocks with a 4-byte BDW, each holding RDW records."""
    return cls((BdwSection((RecordType(name, record_from(record)),), tail=tail),), name="bdw")


Stream.rdw = classmethod(_rdw)  # type: ignore[attr-defined]
Stream.bdw = classmethod(_bdw)  # type: ignore[attr-defined]
Stream.load = staticmethod(load)  # type: ignore[attr-defined]
Stream.builtin = staticmethod(builtin)  # type: ignore[attr-defined]
for _part in (Section, Framing, Length, Tag, RecordType, Record, ByteOrder):
    setattr(Stream, _part.__name__, _part)
Stream.BdwSection = staticmethod(BdwSection)  # type: ignore[attr-defined]
