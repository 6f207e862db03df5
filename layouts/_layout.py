"""Layout: an immutable description of one record type, and its Arrow view."""

import functools
import math
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from ._cinfo import CInfo
from ._ebcdic import check_codepage
from ._errors import LayoutError

__all__ = ["Layout", "Field", "CInfo", "Encoding"]

_NATIVE = "<" if sys.byteorder == "little" else ">"
_BYTES_MODES = ("fixed", "binary", "string")
_VOID_MODES = ("error", "bytes", "skip")

# datetime64/timedelta64 units: Arrow unit they map to, and the factor to it.
_EXACT_UNITS = {"s": ("s", 1), "ms": ("ms", 1), "us": ("us", 1), "ns": ("ns", 1)}
_SECONDS = {"m": 60, "h": 3600, "D": 86400, "W": 604800}


_KINDS = ("text", "packed", "zoned", "binary", "hfloat")
_SIGNS = ("trailing", "leading", "trailing separate", "leading separate")
MAX_DIGITS = 38  # decimal128


@dataclass(frozen=True)
class Encoding:
    """How a mainframe field's bytes encode its value (a :class:`Field`'s ``encoding``).

    Give one per leaf to :meth:`Layout.from_dtype` (``encodings={"AMOUNT": Encoding(
    "packed", digits=9, scale=2, signed=True)}``); the leaf is a ``V<n>`` or ``S<n>``
    field of the byte width the encoding needs. See ``docs/mainframe.md``, "Field kinds".

    Attributes
    ----------
    kind : {"text", "packed", "zoned", "binary", "hfloat"}
        EBCDIC text (PIC X/A), packed decimal (COMP-3), zoned decimal (DISPLAY numeric),
        big-endian binary (COMP, COMP-4, COMP-5, BINARY), IBM hexadecimal float
        (COMP-1: 4 bytes, COMP-2: 8 bytes).
    digits : int
        Decimal digits of the PICTURE (``P`` positions excluded), 1 to 38 for packed and
        zoned; for binary, the PICTURE's digits (0: the byte width's whole range).
    scale : int
        Digits after the implied decimal point. ``P`` scaling: ``scale > digits``
        (``PIC VPP9``: digits 1, scale 3) or ``scale < 0`` (``PIC 9PP``: digits 1, scale -2).
    signed : bool
        ``PIC S...``.
    sign : {"trailing", "leading", "trailing separate", "leading separate"}
        Zoned decimals: where the sign is (overpunched in a digit, or a separate ``+``/``-``).
    codepage : str
        EBCDIC code page of text (and of zoned ``+``/``-`` bytes): one of
        ``layouts._ebcdic.CODEPAGES``.
    as_integer : bool
        An ``int64`` column instead of ``decimal128`` (only for ``scale <= 0``).
    invalid : {"error", "null"}
        Invalid bytes (bad digit or sign nibbles, zone digits outside 0-9, low-values or
        spaces in a numeric field, a value beyond the PICTURE or the Arrow type): a
        ConversionError naming the field, record, byte offset and bytes (default), or a
        null (the column gets a validity bitmap; its ``null_count`` is the count).
    trim : {"none", "right", "both"}
        Text: keep every character (default: the round trip is exact), or drop trailing
        (``"right"``) or leading and trailing (``"both"``) EBCDIC spaces (0x40).
    positive : {"", "C", "F"}
        Packed and zoned: the sign nibble (zone) the way back writes for positive values:
        ``""`` (default) C in a signed field, F in an unsigned one; ``"F"`` for files whose
        signed fields hold F (or ``"C"`` for unsigned ones holding C), so that they too
        come back byte for byte.
    trunc : {"std", "bin"}
        Binary: ``"std"`` (COBOL ``TRUNC(STD)``): a value with more digits than the
        PICTURE is invalid; ``"bin"`` (``TRUNC(BIN)``, COMP-5): the byte width's whole
        range is valid, and the decimal precision is the width's.
    conditions : tuple
        The item's 88 levels, ``(("ACTIVE", ("'A'",)), ...)`` (a copybook gives them): no
        part of the bytes' meaning (not in ``to_json``, nor in the kernels' cache keys), but
        written to files as the Arrow field's ``cobol.88`` metadata, JSON ``{"ACTIVE":
        ["'A'"]}``, so two Encodings (and Layouts) that differ only in them are not equal,
        and hash apart.
    """

    kind: str
    digits: int = 0
    scale: int = 0
    signed: bool = False
    sign: str = "trailing"
    codepage: str = "cp037"
    as_integer: bool = False
    invalid: str = "error"
    trim: str = "none"
    trunc: str = "std"
    positive: str = ""
    conditions: tuple = field(default=(), repr=False)

    @property
    def positive_sign(self) -> int:
        """Packed and zoned: the sign nibble (zone) the way back writes for positive values."""
        return int(self.positive, 16) if self.positive else (0xC if self.signed else 0xF)

    def __post_init__(self) -> None:
        bad = self._problem()
        if bad:
            raise LayoutError(f"{self!r}: {bad}")

    def _problem(self):
        """What is wrong with this encoding, or None."""
        if self.kind not in _KINDS:
            return f"kind must be one of {_KINDS}, got {self.kind!r}"
        for name in ("digits", "scale"):
            if not isinstance(getattr(self, name), int) or isinstance(getattr(self, name), bool):
                return f"{name} must be an int, got {getattr(self, name)!r}"
        if self.invalid not in ("error", "null"):
            return f"invalid must be 'error' or 'null', got {self.invalid!r}"
        if self.trim not in ("none", "right", "both"):
            return f"trim must be 'none', 'right' or 'both', got {self.trim!r}"
        if self.sign not in _SIGNS:
            return f"sign must be one of {_SIGNS}, got {self.sign!r}"
        if "separate" in self.sign and not self.signed:
            return f"sign={self.sign!r} needs signed=True (SIGN SEPARATE applies to PIC S fields)"
        if self.positive not in ("", "C", "F") or (self.positive and self.kind not in ("packed", "zoned")):
            return f"positive must be '', 'C' or 'F' (packed and zoned fields only), got {self.positive!r}"
        if self.trunc not in ("std", "bin"):
            return f"trunc must be 'std' or 'bin', got {self.trunc!r}"
        check_codepage(self.codepage, f"Encoding({self.kind!r})")
        if self.kind in ("packed", "zoned") and not 1 <= self.digits <= MAX_DIGITS:
            return f"a {self.kind} decimal has 1 to {MAX_DIGITS} digits, got digits={self.digits}"
        if self.kind == "binary" and not 0 <= self.digits <= 20:
            return f"a binary field has 0 to 20 digits (0: the width's whole range), got digits={self.digits}"
        if self.kind in ("packed", "zoned", "binary") and self.precision() > MAX_DIGITS:
            return (
                f"digits={self.digits} with scale={self.scale} needs {self.precision()} digits of precision; "
                f"decimal128 holds {MAX_DIGITS}"
            )
        if self.as_integer and (self.kind not in ("packed", "zoned", "binary") or self.scale > 0):
            return "as_integer applies to packed, zoned and binary fields with scale <= 0 only"
        return None

    def precision(self, width=0):
        """Decimal precision of the Arrow value (see docs/mainframe.md): the PICTURE's
        digits, plus the ``P`` positions of ``9PP`` (scale < 0), at least the scale
        (``VPP9``), the byte width's digits for binary with ``trunc="bin"`` or digits 0."""
        digits = self.digits
        if self.kind == "binary" and (self.trunc == "bin" or digits == 0) and width:
            digits = len(str(2 ** (8 * width) - 1)) if not self.signed else len(str(2 ** (8 * width - 1)))
        return max(digits - min(self.scale, 0), self.scale, 1)

    def width(self):
        """Bytes the field needs, or None where several widths fit (text; binary 1-8)."""
        if self.kind == "packed":
            return self.digits // 2 + 1
        if self.kind == "zoned":
            return self.digits + ("separate" in self.sign)
        return None

    def arrow_type(self, width):
        """The Arrow type of one value, for a field of ``width`` bytes."""
        if self.kind == "text":
            return pa.string()
        if self.kind == "hfloat":
            return pa.float32() if width == 4 else pa.float64()
        if self.as_integer:
            return pa.int64()
        return pa.decimal128(self.precision(width), max(self.scale, 0))

    def short(self):
        """A few words for ``print(layout)``: ``packed S9(7)V99``, ``text cp037``."""
        if self.kind == "text":
            return f"text {self.codepage}" + (f" trim={self.trim}" if self.trim != "none" else "")
        if self.kind == "hfloat":
            return "hfloat"
        s = "S" if self.signed else ""
        pic = f"{s}9({self.digits})"
        if self.scale > self.digits:
            pic = f"{s}V{'P' * (self.scale - self.digits)}9({self.digits})"
        elif self.scale > 0:
            whole = self.digits - self.scale
            pic = f"{s}9({whole})V9({self.scale})" if whole else f"{s}V9({self.scale})"
        if self.scale < 0:
            pic += f"P({-self.scale})"
        extra = f" {self.sign}" if self.kind == "zoned" and (self.signed and self.sign != "trailing") else ""
        extra += " trunc=bin" if self.kind == "binary" and self.trunc == "bin" else ""
        extra += " invalid=null" if self.invalid == "null" else ""
        return f"{self.kind} {pic}{extra}"

    def to_json(self):
        """The encoding as JSON text (kept in the Arrow field metadata, ``layouts.encoding``)."""
        import json

        return json.dumps({k: getattr(self, k) for k in self.__dataclass_fields__ if k != "conditions"}, sort_keys=True)

    def conditions_json(self):
        """The 88 levels as JSON text, ``{"ACTIVE": ["'A'"]}`` (the ``cobol.88`` metadata)."""
        import json

        return json.dumps({name: list(values) for name, values in self.conditions})

    @classmethod
    def from_json(cls, text):
        """The Encoding of :meth:`to_json`'s text (a field's ``layouts.encoding`` metadata);
        damaged text is a LayoutError saying what is wrong, never a JSON or Python error."""
        import json

        try:
            data = json.loads(text)
        except (TypeError, ValueError) as err:
            raise LayoutError(f"Encoding.from_json: {str(text)[:80]!r} is not JSON ({err})") from None
        if not isinstance(data, dict):
            raise LayoutError(f"Encoding.from_json: {str(text)[:80]!r} is not a JSON object of the encoding's fields")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise LayoutError(
                f"Encoding.from_json: unknown key(s) {unknown}; an encoding has {', '.join(cls.__dataclass_fields__)}"
            )
        if "kind" not in data:
            raise LayoutError(f"Encoding.from_json: {str(text)[:80]!r} has no 'kind'")
        return cls(**data)


@dataclass(frozen=True)
class Field:
    """One leaf field of a record: where its bytes are and what they become in Arrow.

    Attributes
    ----------
    path : tuple of str
        Names from the top of the record down to the leaf; complex fields end in
        ``"re"``/``"im"``.
    offset : int
        Byte offset of the leaf's first element within the record.
    width : int
        Bytes of one element.
    dtype : numpy.dtype
        The element as stored in the record, byte order included.
    arrow_type : pyarrow.DataType
        The Arrow type of one element (sub-arrays wrap it in ``fixed_size_list``).
    byteorder : str
        ``"little"``, ``"big"`` or ``"|"`` where byte order does not apply.
    shape : tuple of int
        Sub-array shape, enclosing sub-arrays included (``()`` for a scalar).
    strides : tuple of int
        Byte step of each ``shape`` dimension within the record.
    kind : str
        How the pass converts it: ``copy``, ``bytes``, ``bool``, ``scale``, ``civil``,
        ``cstr``, ``utf32``, ``bits`` (a C bit-field) or ``enum`` (a C enum as a
        dictionary).
    factor : int
        Scale factor (``scale``: Arrow value = record value * factor; ``civil``: months
        per record unit).
    bits : tuple
        For ``bits``: ``(shift, nbits, signed, first_bit)``. The bit-field is read as
        the ``width``-byte word at ``offset`` (``dtype``, byte order included), shifted
        right by ``shift`` and cut to ``nbits``; ``first_bit`` is where it starts in
        memory, counted from the word's first byte.
    enum : tuple
        For C enums: ``((value, name), ...)`` in ascending value order.
    ctype : str
        The C declaration of the field (layouts from C only).
    encoding : Encoding or None
        For the mainframe kinds (``text``, ``packed``, ``zoned``, ``binary``, ``hfloat``):
        how the bytes encode the value.
    """

    path: tuple
    offset: int
    width: int
    dtype: np.dtype
    arrow_type: pa.DataType
    byteorder: str
    shape: tuple = ()
    strides: tuple = ()
    kind: str = "copy"
    factor: int = 1
    bits: tuple = ()
    enum: tuple = ()
    ctype: str = ""
    encoding: "Encoding | None" = None

    @property
    def name(self) -> str:
        """The dotted path, ``"quote.px"``."""
        return ".".join(self.path)

    @property
    def count(self) -> int:
        """Elements of this leaf in one record."""
        return math.prod(self.shape)

    @property
    def swapped(self) -> bool:
        """True if the record stores the leaf in non-native byte order."""
        return self.byteorder not in ("|", sys.byteorder)

    def element_offsets(self) -> np.ndarray:
        """Byte offset within the record of every element, in row-major order."""
        return _grid(self.offset, self.shape, self.strides)

    def bit_range(self):
        """``(lowest, highest)`` value a bit-field holds."""
        _, nbits, signed, _ = self.bits
        return (-(2 ** (nbits - 1)), 2 ** (nbits - 1) - 1) if signed else (0, 2**nbits - 1)

    def bit_spans(self):
        """``(first bit, end bit)`` within the record of every element's storage."""
        starts = 8 * self.element_offsets() + (self.bits[3] if self.bits else 0)
        ends = starts + (self.bits[1] if self.bits else 8 * self.width)
        return list(zip(starts.tolist(), ends.tolist()))

    def _runs(self):
        """``(starts, ends, firsts)``: the bit range within the record of every run of
        adjacent elements (the innermost sub-array dimensions whose elements follow one
        another make one run), and the row-major index of each run's first element."""
        if self.bits:
            first, nbits = self.bits[3], self.bits[1]
            starts = 8 * self.element_offsets() + first
            return starts, starts + nbits, np.arange(len(starts), dtype=np.int64)
        shape, strides, size, per = list(self.shape), list(self.strides), self.width, 1
        while shape and strides[-1] == size:
            per *= shape[-1]
            size *= shape.pop()
            strides.pop()
        starts = 8 * _grid(self.offset, shape, strides)
        return starts, starts + 8 * size, np.arange(len(starts), dtype=np.int64) * per


class _Node(NamedTuple):
    """The tree of the record, for Arrow nesting: a struct or a leaf, maybe in sub-arrays."""

    name: str
    shape: tuple
    children: tuple  # of _Node; empty for a leaf
    leaf: int  # index into Layout.fields, -1 for a struct


@dataclass(frozen=True, init=False)
class Layout:
    """An immutable, hashable description of one record type.

    Build it with :meth:`from_dtype` or, from C declarations, :meth:`from_c`. ``layout.dtype`` is the record (AoS) view,
    ``layout.schema`` the Arrow (SoA) view, ``layout.fields`` the leaf fields, and
    ``print(layout)`` shows offsets, sizes, types and padding holes.

    Mappings
    --------
    - integers, floats (float16 included), bool (bit-packed in Arrow): the same type.
    - ``S<n>``: ``fixed_size_binary(n)``, the exact bytes (``bytes_as="fixed"``), or
      ``binary``/``string`` cut at the first NUL like a C string (``"binary"``,
      ``"string"``; the bytes after the NUL are not kept). ``U<n>``: ``string``
      (trailing NULs dropped, as NumPy does).
    - ``datetime64``: ``timestamp`` for s/ms/us/ns, ``timestamp[s]`` for minutes and hours,
      ``date32`` for days, weeks, months and years; ``timedelta64``: ``duration``, in
      seconds for minutes to weeks. Multiples (``M8[10s]``) are scaled. Units Arrow cannot
      hold exactly (ps, fs, as; timedelta months and years) stay ``int64`` counts, with the
      NumPy type in the field's metadata (``layouts.dtype``). ``NaT`` is null.
    - complex: ``struct<re, im>`` of the float type of each half.
    - sub-arrays: nested ``fixed_size_list``; nested records: ``struct`` (or, with
      ``flatten=True``, top-level columns named ``"outer.inner"``).
    - unnamed ``V<n>`` fields (NumPy names them ``f0``, ``f1``...) are padding;
      named ones need ``void_as="bytes"`` (``fixed_size_binary``) or ``"skip"``.

    Examples
    --------
    >>> import numpy as np, layouts as lo
    >>> L = lo.Layout.from_dtype(np.dtype([("ts", "<i8"), ("px", ">f8")]))
    >>> [f.name for f in L.fields], L.itemsize
    (['ts', 'px'], 16)
    """

    dtype: np.dtype
    bytes_as: tuple  # normalised to ((leaf name, mode), ...) for every S<n> leaf
    flatten: bool
    void_as: str
    c: CInfo | None  # set by Layout.from_c
    encodings: tuple  # ((leaf name, Encoding), ...) sorted by name
    fields: tuple = field(compare=False, repr=False)
    _tree: tuple = field(compare=False, repr=False)
    # the 88 levels of a copybook's items that are no leaf column (the 01 record, groups,
    # FILLERs; set by from_copybook), as the JSON text of the schema's ``cobol.88.groups``
    # metadata; "" for none. Part of equality, as files carry them (as Encoding.conditions).
    cobol_groups: str = field(default="", repr=False)
    # "ibm" or "ieee": how a copybook's COMP-1/COMP-2 items are stored (from_copybook's
    # floating_point), kept in the schema's ``cobol.floating_point`` metadata so that data
    # read one way is not written back the other way without a word; "" for none
    cobol_floats: str = field(default="", repr=False, compare=False)

    def __init__(
        self,
        dtype: "np.typing.DTypeLike",
        *,
        bytes_as: "str | dict[str, str]" = "fixed",
        flatten: bool = False,
        void_as: str = "error",
        encodings: "dict[str, Encoding] | None" = None,
    ) -> None:
        self._build(dtype, bytes_as, flatten, void_as, None, encodings)

    @classmethod
    def _assemble(cls, dtype, bytes_as, flatten, void_as, c, encodings=None):
        """A Layout with C facts (``c``): what :meth:`from_c` and :meth:`replace` build."""
        layout = cls.__new__(cls)
        layout._build(dtype, bytes_as, flatten, void_as, c, encodings)
        return layout

    def _build(self, dtype, bytes_as, flatten, void_as, c, encodings=None):
        encodings = _checked_encodings(encodings)
        for name, value in (
            ("dtype", dtype),
            ("bytes_as", bytes_as),
            ("flatten", flatten),
            ("void_as", void_as),
            ("c", c),
            ("encodings", encodings),
        ):
            object.__setattr__(self, name, value)
        try:
            dtype = np.dtype(self.dtype)
        except TypeError as err:
            raise LayoutError(f"cannot make a NumPy dtype of {self.dtype!r}: {err}") from err
        if dtype.names is None:
            raise LayoutError(
                f"Layout.from_dtype needs a structured dtype with named fields, got {dtype}"
                f"{_one_field_hint(dtype, self.bytes_as, self.flatten, self.void_as)}"
            )
        if self.void_as not in _VOID_MODES:
            raise LayoutError(f"void_as must be one of {_VOID_MODES}, got {self.void_as!r}")
        if not isinstance(self.flatten, bool):
            raise LayoutError(f"flatten must be True or False, got {self.flatten!r}")
        spec = dict(self.bytes_as) if isinstance(self.bytes_as, tuple) else self.bytes_as
        builder = _Builder(spec, self.void_as, self.c, dict(encodings))
        tree = builder.walk(dtype, 0, (), (), ())
        builder.check_unused_modes()
        builder.check_unused_encodings()
        _check_has_data(dtype, builder.fields)
        modes = tuple(
            (f.name, builder.bytes_mode(f.name)) for f in builder.fields if f.dtype.kind == "S" and f.encoding is None
        )
        for name, value in (("dtype", dtype), ("bytes_as", modes), ("fields", tuple(builder.fields)), ("_tree", tree)):
            object.__setattr__(self, name, value)

    @classmethod
    def from_dtype(
        cls,
        dtype: "np.typing.DTypeLike",
        *,
        bytes_as: "str | dict[str, str]" = "fixed",
        flatten: bool = False,
        void_as: str = "error",
        encodings: "dict[str, Encoding] | None" = None,
    ) -> "Layout":
        """Describe the records of a NumPy structured dtype.

        Parameters
        ----------
        dtype : numpy.dtype or anything ``numpy.dtype`` accepts
            A structured dtype (with named fields).
        bytes_as : {"fixed", "binary", "string"} or dict
            Arrow type of ``S<n>`` fields; a dict maps leaf names to modes (others fixed).
        flatten : bool
            Nested records become top-level ``"a.b"`` columns instead of ``struct``.
        void_as : {"error", "bytes", "skip"}
            What named ``V<n>`` fields become.
        encodings : dict, optional
            Mainframe fields: leaf name (dotted) -> :class:`Encoding`. Each named leaf is a
            ``V<n>`` or ``S<n>`` field of the width the encoding needs (every element of a
            sub-array); it becomes a field of the encoding's kind: ``string`` (text),
            ``decimal128``/``int64`` (packed, zoned, binary), ``float32``/``float64``
            (hfloat). See ``docs/mainframe.md``.
        """
        return cls(dtype, bytes_as=bytes_as, flatten=flatten, void_as=void_as, encodings=encodings)

    @classmethod
    def from_c(
        cls,
        source: "str | os.PathLike[str]",
        name: "str | None" = None,
        *,
        byteorder: str = "native",
        pack: "int | None" = None,
        unions: "dict[str, str | list[str]] | None" = None,
        pointers: str = "error",
        enum_as: str = "dictionary",
        bytes_as: "str | dict[str, str]" = "fixed",
        flatten: bool = False,
        include_dirs: "tuple[str, ...] | list[str]" = (),
        defines: "dict[str, str] | None" = None,
        preprocessor: "bool | str" = "auto",
        compiler: "bool | str | os.PathLike[str] | None" = "auto",
    ) -> "Layout":
        """A Layout of a C struct or union, laid out as this machine's C compiler does.

        Where a C compiler is installed, it is asked: the declarations are compiled with
        debug information (``-g -fno-eliminate-unused-debug-types``, your ``-I``/``-D``,
        a time limit) and every offset, size, alignment, bit-field position, enumerator
        and typedef is read back from the object's DWARF, so whatever the compiler
        accepts (``_Alignas``, ``sizeof`` in array sizes, ``#include <stdio.h>``,
        ``_Float16``, ``__int128``, zero-length arrays, packed and ``#pragma pack``
        bit-fields, ``mode``, ``vector_size``, ``scalar_storage_order``...) is laid out
        exactly as it lays it out. Without one, pycparser parses the declarations and
        cffi's layout engine places the fields; both paths give the same Layout for
        everything the second supports. See ``docs/c-declarations.md``.

        Parameters
        ----------
        source : str or os.PathLike
            C declarations as text, or the path of a header or source file.
        name : str, optional
            ``"struct tick"``, ``"tick"`` (a struct, union or typedef name) or
            ``"union u"``. Optional when the source defines exactly one struct or union.
        byteorder : {"native", "little", "big"}
            Byte order the records were written in. Sizes and offsets stay this machine's
            ABI; every multi-byte field (bit-field words included, with big-endian bit
            numbering for ``"big"``) is swapped during the conversion. With GCC a foreign
            order is GCC's own layout for it (``-fsso-struct=big-endian``).
        pack : int, optional
            Maximum alignment of every member, as ``#pragma pack(n)`` around the whole
            source (``pack=1``: no padding anywhere). ``#pragma pack`` and
            ``__attribute__((packed))`` in the source are honoured either way. With the
            compiler this is ``-fpack-struct=n`` (which GCC lays out like the pragma, except
            that an unnamed ``:0`` bit-field does not align the next one).
        unions : dict, optional
            Which members of a union become columns: ``{"u": "f"}`` or ``{"u": ["f", "i"]}``,
            keyed by the union's field path, or for an anonymous union by the path of one of
            its members. By default every member becomes a column over the same bytes;
            writing records back then needs exactly one member per union.
        pointers : {"error", "int"}
            Pointer fields are addresses in another process: an error, or an unsigned
            integer column of the pointer's width.
        enum_as : {"dictionary", "int"}
            Enum fields as Arrow dictionaries of enumerator names (values with no
            enumerator appear as their number), or as plain integers.
        bytes_as, flatten
            As in :meth:`Layout.from_dtype` (``char name[n]`` is an ``S<n>`` field).
        include_dirs, defines
            ``-I`` directories and ``-D`` macros for the compiler or the C preprocessor.
        preprocessor : "auto", True, False or str
            ``"auto"`` runs ``cpp`` when one is found and otherwise the built-in subset;
            True requires it; False never runs it (and so uses the built-in path, as
            ``compiler=None``); a string names the program. Used by the built-in path
            only: the compiler preprocesses on its own.
        compiler : "auto", None, False, True, str or os.PathLike
            Who lays the record out. ``"auto"`` (default): ``$CC`` when set, else
            ``gcc``, ``cc`` or ``clang`` on PATH, else the built-in pycparser/cffi path.
            None or False: always the built-in path. True: a compiler is required (an
            error without one). A name or path (``"clang"``, ``"/opt/gcc-14/bin/gcc"``):
            that compiler, optionally with target/ABI options for records written on
            another machine (``"clang --target=armv7-linux-gnueabihf -ffreestanding"``,
            ``"arm-linux-gnueabihf-gcc"``); ``$CC`` may carry options too. It runs for 30 s
            at most; a source that is not text (a data file given by mistake) is refused
            before anything runs.

        Mappings
        --------
        Integers, floats and ``_Bool`` as in :meth:`from_dtype` (plain ``char`` is
        this platform's ``int8``/``uint8``); ``char name[n]``: ``S<n>``; arrays:
        sub-arrays; structs: nested records (anonymous members are lifted into their
        parent, as in C). A bit-field is its own column of its declared type (``int
        a:3`` is ``int32``, signed; ``_Bool b:1`` is ``bool``), read with shift and
        mask in the pass, and written back with a range check. An enum is a
        ``dictionary<int32, string>`` of enumerator names, in value order.

        Both paths also map ``__int128`` to ``fixed_size_binary(16)`` (the value's bytes as
        stored, with a note in ``layout.c.notes``), ``_Float16`` to ``float16``,
        ``_Complex`` to ``struct<re, im>``, and skip GNU zero-length arrays (with a note,
        shown by ``layouts inspect``). With the compiler, vectors (``vector_size``) are
        sub-arrays, ``mode`` gives the integer of that size, and ``scalar_storage_order``
        fields keep their own byte order. ``long double`` and ``_Float128`` are errors (no
        Arrow type holds them).

        Limits of the built-in path, each an error saying so rather than a guess: packed
        bit-fields that straddle the storage unit of the field before them, packed records
        that mix bit-fields with ``aligned`` members or have a ``:0`` bit-field, and
        bit-fields under ``#pragma pack(n)`` with n > 1 (cffi's engine does not place
        those as GCC does); ``mode``/``vector_size``/``scalar_storage_order`` attributes;
        ``sizeof`` of an expression. On both: bit-fields that span more than 8 bytes.
        ``__attribute__((aligned))`` written after one of several declarators in one
        declaration applies to that declarator only.

        Examples
        --------
        >>> import layouts as lo
        >>> L = lo.Layout.from_c("struct s { char c; unsigned a:3, b:5; double d; };")
        >>> [(f.name, f.offset, str(f.arrow_type)) for f in L.fields]
        [('c', 0, 'int8'), ('a', 1, 'uint32'), ('b', 1, 'uint32'), ('d', 8, 'double')]
        """
        from ._cdecl import from_c

        dtype, info = from_c(
            source,
            name,
            byteorder=byteorder,
            pack=pack,
            unions=unions,
            pointers=pointers,
            enum_as=enum_as,
            include_dirs=include_dirs,
            defines=defines,
            preprocessor=preprocessor,
            compiler=compiler,
        )
        return cls._assemble(dtype, bytes_as, flatten, "error", info)

    @classmethod
    def from_dwarf(
        cls,
        path: "str | os.PathLike[str]",
        name: "str | None" = None,
        *,
        byteorder: "str | None" = None,
        unions: "dict[str, str | list[str]] | None" = None,
        pointers: str = "error",
        enum_as: str = "dictionary",
        bytes_as: "str | dict[str, str]" = "fixed",
        flatten: bool = False,
    ) -> "Layout":
        """A Layout of a struct or union read from the DWARF debug information of an ELF
        object, executable or shared library built with ``-g`` (the way ``pahole`` reads
        them): the record types of the very program that wrote the files.

        Parameters
        ----------
        path : str or os.PathLike
            ``prog.o``, ``prog`` or ``lib.so``, built with ``-g`` and not stripped.
        name : str, optional
            ``"struct tick"``, ``"tick"`` or a typedef name; optional when the file's own
            (non-system) sources define exactly one struct or union.
        byteorder : {"native", "little", "big"}, optional
            Default: the byte order of the ELF file's target.
        unions, pointers, enum_as, bytes_as, flatten
            As in :meth:`from_c`.

        The record's alignment is taken from ``DW_AT_alignment`` where the source wrote
        one, else from its members (1 when its offsets show it is packed).

        Examples
        --------
        >>> import layouts as lo
        >>> L = lo.Layout.from_dwarf("tick.o", "struct tick")  # doctest: +SKIP
        """
        from ._cdecl import from_dwarf

        dtype, info = from_dwarf(path, name, byteorder=byteorder, unions=unions, pointers=pointers, enum_as=enum_as)
        return cls._assemble(dtype, bytes_as, flatten, "error", info)

    def replace(self, **changes: Any) -> "Layout":
        """A new Layout with other options: ``bytes_as``, ``flatten``, ``void_as``, and
        ``enum_as`` for layouts from C."""
        opts = {
            "bytes_as": dict(self.bytes_as),
            "flatten": self.flatten,
            "void_as": self.void_as,
            "encodings": dict(self.encodings),
        }
        c = self.c
        if "enum_as" in changes and c is not None:
            c = replace(c, enum_as=changes.pop("enum_as"))
        unknown = set(changes) - set(opts)
        if unknown:
            raise TypeError(
                f"Layout.replace() takes bytes_as, flatten, void_as, enum_as, encodings; got {sorted(unknown)}"
            )
        opts.update(changes)
        layout = Layout._assemble(self.dtype, opts["bytes_as"], opts["flatten"], opts["void_as"], c, opts["encodings"])
        return layout._with_groups(self.cobol_groups, self.cobol_floats)

    def _with_groups(self, rows_json: str, floats: str = "") -> "Layout":
        """This Layout with ``cobol_groups`` and ``cobol_floats`` set (what ``from_copybook`` calls)."""
        if rows_json:
            object.__setattr__(self, "cobol_groups", rows_json)
        if floats:
            object.__setattr__(self, "cobol_floats", floats)
        return self

    # ------------------------------------------------------------------ views
    @property
    def itemsize(self) -> int:
        """Bytes per record."""
        return self.dtype.itemsize

    @property
    def alignment(self) -> int:
        """Alignment of the record: the C compiler's for layouts from C, else NumPy's."""
        return self.c.alignment if self.c is not None else self.dtype.alignment

    @property
    def names(self) -> "list[str]":
        """Dotted names of the leaf fields, in record order."""
        return [f.name for f in self.fields]

    def __getitem__(self, name: str) -> Field:
        i = self._positions.get(name)
        if i is None:
            raise KeyError(f"no leaf field {name!r} in this layout; leaves are {self.names}")
        return self.fields[i]

    @functools.cached_property
    def _positions(self):
        """Leaf name -> its position in :attr:`fields` (the first, where names repeat)."""
        positions = {}
        for i, f in enumerate(self.fields):
            positions.setdefault(f.name, i)
        return positions

    @property
    def holes(self) -> "tuple[tuple[int, int], ...]":
        """``(offset, size)`` of every run of record bytes no field covers (padding).

        Computed once per Layout: ``to_aos`` asks on every call."""
        return self._coverage[0]

    @property
    def aliases(self) -> "tuple[tuple[str, str], ...]":
        """Pairs of leaf names whose bits overlap (union members), in record order: by
        the later leaf, then its first element that overlaps, then the earlier leaf."""
        return self._coverage[1]

    @functools.cached_property
    def _coverage(self):
        """``(holes, aliases)``, from one sort of the runs of bits the leaves cover: the
        cost grows with the runs (n log n), not with the bytes of the record."""
        runs = _Runs(self.fields)
        starts, ends = runs.starts // 8, -(-runs.ends // 8)  # bytes that hold any of the bits
        gap_from = np.concatenate(([0], np.maximum.accumulate(ends)))  # sorted by start, so a gap
        gap_to = np.concatenate((starts, [self.itemsize]))  # opens where a run starts past all before
        holes = tuple((int(gap_from[k]), int(gap_to[k] - gap_from[k])) for k in np.flatnonzero(gap_to > gap_from))
        names = self.names
        aliases = tuple(dict.fromkeys((names[j], names[i]) for j, i in runs.overlaps()))
        return holes, aliases

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the SoA view."""
        return self._schema(self._arrow_fields())

    def _schema(self, fields) -> pa.Schema:
        """The schema of these top-level fields, with the copybook's group 88 levels."""
        schema = pa.schema(fields)
        if self.cobol_groups:
            from ._cobol.metadata import with_groups

            schema = with_groups(schema, self.cobol_groups)
        if self.cobol_floats:
            schema = schema.with_metadata(
                {**(schema.metadata or {}), b"cobol.floating_point": self.cobol_floats.encode()}
            )
        return schema

    def __arrow_c_schema__(self) -> object:
        return self.schema.__arrow_c_schema__()

    def _arrow_fields(self, leaf_types=None):
        """Top-level Arrow fields; ``leaf_types`` overrides leaves' element types by index."""
        types = leaf_types or [f.arrow_type for f in self.fields]
        if self.flatten:
            return [self._leaf_field(f.name, f, types[i], f.shape) for i, f in enumerate(self.fields)]
        return [self._node_field(node, types) for node in self._tree]

    def _leaf_field(self, name, leaf, arrow_type, shape):
        meta = None
        if leaf.dtype.kind in "mM" and leaf.arrow_type == pa.int64():
            meta = {"layouts.dtype": str(leaf.dtype)}
        if leaf.encoding is not None:  # kept through Parquet/IPC: the column says how to write it back
            meta = {"layouts.encoding": leaf.encoding.to_json()}
            if leaf.encoding.conditions:  # a copybook's 88 levels
                meta["cobol.88"] = leaf.encoding.conditions_json()
        return pa.field(name, _wrap(arrow_type, shape), metadata=meta)

    def _node_field(self, node, types):
        if node.leaf >= 0:
            return self._leaf_field(node.name, self.fields[node.leaf], types[node.leaf], node.shape)
        struct = pa.struct([self._node_field(c, types) for c in node.children])
        return pa.field(node.name, _wrap(struct, node.shape))

    def describe(self) -> "dict[str, Any]":
        """The record as data: size, alignment, every leaf and padding hole, in offset order.

        Leaves are dicts with ``name``, ``offset``, ``size`` (bytes of all its elements),
        ``bit_offset``/``bit_size`` (bit-fields: first bit within the byte at ``offset``,
        and bits), ``ctype`` (layouts from C), ``numpy`` and ``arrow``; holes are
        ``{"name": None, "offset", "size"}``. ``layouts inspect --json`` prints this.
        """
        rows = []
        for f in self.fields:
            row = {
                "name": f.name,
                "offset": int(f.offset),
                "size": f.width * f.count,
                "bit_offset": None,
                "bit_size": None,
                "ctype": f.ctype or None,
                "numpy": f.dtype.str
                + (f" {f.shape}" if f.shape else "")
                + (f" {f.encoding.short()}" if f.encoding is not None else ""),
                "arrow": str(_wrap(f.arrow_type, f.shape)),
                "encoding": f.encoding.short() if f.encoding is not None else None,
            }
            if f.bits:
                first, nbits = f.bits[3], f.bits[1]
                row.update(
                    offset=int(f.offset) + first // 8,
                    bit_offset=first % 8,
                    bit_size=nbits,
                    size=-(-(first % 8 + nbits) // 8),
                    numpy=f"{f.dtype.str} bits",
                )
            rows.append(row)
        rows += [{"name": None, "offset": off, "size": size} for off, size in self.holes]
        rows.sort(key=lambda r: (r["offset"], r.get("bit_offset") or 0, r["name"] is None))
        pad = sum(size for _, size in self.holes)
        return {
            "name": self.c.name if self.c else None,
            "size": self.itemsize,
            "alignment": self.alignment,
            "fields": rows,
            "padding_bytes": pad,
            "padding_share": pad / self.itemsize if self.itemsize else 0.0,
        }

    def __str__(self) -> str:
        d = self.describe()
        with_c = self.c is not None
        head = ("offset", "size", "field") + (("C type",) if with_c else ()) + ("numpy", "arrow")
        cells = [head]
        for r in d["fields"]:
            if r["name"] is None:
                cells.append((str(r["offset"]), str(r["size"]), "(padding)") + (("",) if with_c else ()) + ("", ""))
                continue
            off, size = str(r["offset"]), str(r["size"])
            if r["bit_size"] is not None:
                off, size = f"{r['offset']}:{r['bit_offset']}", f"{r['bit_size']} bits"
            cells.append((off, size, r["name"]) + ((r["ctype"] or "",) if with_c else ()) + (r["numpy"], r["arrow"]))
        widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
        title = f"{d['name']}: " if d["name"] else "Layout: "
        lines = [
            f"{title}{self.itemsize} bytes per record, alignment {self.alignment}, "
            f"{len(self.fields)} leaf fields, {d['padding_bytes']} padding bytes "
            f"({100 * d['padding_share']:.1f}%)"
        ]
        for row in cells:
            parts = [f"{row[0]:>{widths[0]}}", f"{row[1]:>{widths[1]}}"]
            parts += [f"{c:<{w}}" for c, w in zip(row[2:-1], widths[2:-1])] + [row[-1]]
            lines.append(("  " + "  ".join(parts)).rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        if self.c is not None:
            return f"Layout.from_c({self.c.name!r} from {self.c.source}, {self.itemsize} bytes)"
        if self.encodings:
            kinds = ", ".join(f"{name}: {enc.short()}" for name, enc in self.encodings)
            return f"Layout({self.dtype!r}, flatten={self.flatten}, encodings={{{kinds}}})"
        return f"Layout({self.dtype!r}, flatten={self.flatten})"

    @classmethod
    def from_copybook(
        cls,
        src: "str | os.PathLike[str]",
        *,
        record: "str | None" = None,
        codepage: str = "cp037",
        invalid: str = "error",
        trim: str = "none",
        as_integer: bool = False,
        trunc: str = "std",
        floating_point: str = "ibm",
        redefines: "dict[str, str | list[str]] | None" = None,
        names: str = "cobol",
        flatten: bool = False,
        source_format: str = "auto",
        record_start_offset: int = 0,
        record_end_offset: int = 0,
        fillers: str = "skip",
    ) -> "Layout":
        """A Layout of a record described by a COBOL copybook (see ``docs/mainframe.md``).

        Groups become structs (or ``"A.B"`` columns with ``flatten=True``), ``OCCURS``
        sub-arrays (``DEPENDING ON``: at the maximum count), ``REDEFINES`` alternatives
        columns over the same bytes, ``FILLER`` padding; PIC X/A and edited pictures are
        EBCDIC text, DISPLAY numbers zoned decimals, COMP-3 packed decimals, COMP/COMP-4/
        COMP-5/BINARY big-endian binary, COMP-1/COMP-2 IBM floats. Anything else is a
        LayoutError naming the copybook line.

        Parameters
        ----------
        src : str or os.PathLike
            Copybook text, or the path of a copybook file.
        record : str, optional
            The 01 record (or any group) to lay out; needed when there are several.
        codepage : str
            EBCDIC code page of text and zoned signs (``"cp037"``, ``"cp1047"``...).
        invalid : {"error", "null"}
            Numbers whose bytes are not valid: a ConversionError, or nulls.
        trim : {"none", "right", "both"}
            Text: keep every character (exact round trip) or drop EBCDIC spaces.
        as_integer : bool
            Numbers with no decimal places as ``int64`` instead of ``decimal128``.
        trunc : {"std", "bin"}
            COMP/COMP-4/BINARY values beyond the PICTURE's digits: invalid (``TRUNC(STD)``)
            or valid up to the bytes' range (``TRUNC(BIN)``; COMP-5 always is).
        floating_point : {"ibm", "ieee"}
            COMP-1/COMP-2 bytes: IBM hexadecimal floats, or IEEE 754 big-endian.
        redefines : dict, optional
            Which alternatives of a REDEFINES set become columns: ``{"A": "B"}`` or
            ``{"A": ["A", "B"]}``, keyed by any item of the set. By default all of them.
        names : {"cobol", "underscore"}
            Column names as written (``COMPANY-ID``) or with ``_`` for ``-`` (as Cobrix).
        flatten : bool
            As in :meth:`from_dtype`.
        source_format : {"auto", "fixed", "free"}
            Fixed columns (1-6 and 73-80 ignored, column 7 the indicator) or free text.
        record_start_offset, record_end_offset : int
            Bytes before and after the copybook's record in each record of the file
            (skipped: padding of the Layout).
        fillers : {"skip", "keep"}
            FILLER items: padding (written back as zeros), or ``FILLER-1``,
            ``FILLER-2``... columns of their raw bytes (the way back is exact).

        Examples
        --------
        >>> import layouts as lo
        >>> L = lo.Layout.from_copybook('''
        ...        01  ACCOUNT.
        ...            05  ID        PIC S9(4) COMP.
        ...            05  BALANCE   PIC S9(7)V99 COMP-3.
        ...            05  NAME      PIC X(10).
        ... ''')
        >>> [(f.name, f.offset, str(f.arrow_type)) for f in L.fields]
        [('ID', 0, 'decimal128(4, 0)'), ('BALANCE', 2, 'decimal128(9, 2)'), ('NAME', 7, 'string')]
        """
        from ._cobol import layout_from_copybook

        return layout_from_copybook(
            cls.from_dtype,
            Encoding,
            src,
            record=record,
            codepage=codepage,
            invalid=invalid,
            trim=trim,
            as_integer=as_integer,
            trunc=trunc,
            floating_point=floating_point,
            redefines=redefines,
            names=names,
            flatten=flatten,
            source_format=source_format,
            record_start_offset=record_start_offset,
            record_end_offset=record_end_offset,
            fillers=fillers,
        )


def _binary_width(digits):
    """Bytes COBOL gives a binary field of ``digits`` digits: 2 (1-4), 4 (5-9), 8 (10-18)."""
    return 2 if digits <= 4 else 4 if digits <= 9 else 8


def _checked_encodings(encodings):
    """``encodings`` as a sorted tuple of ``(name, Encoding)``, or a LayoutError."""
    if encodings is None:
        return ()
    items = encodings.items() if isinstance(encodings, dict) else encodings
    try:
        pairs = sorted((str(k), v) for k, v in items)
    except (TypeError, ValueError) as err:
        raise LayoutError(f"encodings must be a dict of leaf name -> Encoding, got {encodings!r}") from err
    for name, enc in pairs:
        if not isinstance(enc, Encoding):
            raise LayoutError(f"encodings[{name!r}] must be a layouts.Encoding, got {type(enc).__name__} {enc!r}")
    return tuple(pairs)


def _check_has_data(dtype, fields):
    """A LayoutError for record types that hold no bytes, or only padding: records of 0
    bytes cannot be counted in a buffer or file, and Arrow columns need a field."""
    if dtype.itemsize == 0:
        raise LayoutError(
            f"the record type {dtype} has 0 bytes per record, so records of it cannot be counted in a "
            f"buffer or file; give it at least one field with data (a (0,) sub-array holds none)"
        )
    if not fields:
        raise LayoutError(
            f"the record type {dtype} ({dtype.itemsize} bytes) has no fields to convert, only padding "
            f"(unnamed or skipped void bytes); name the bytes as a field, e.g. np.dtype([('raw', "
            f"'V{dtype.itemsize}')]) with void_as='bytes'"
        )


def _grid(offset, shape, strides):
    """Byte offsets of the elements of a sub-array at ``offset``, in row-major order."""
    offs = np.array([offset], dtype=np.int64)
    for n, step in zip(shape, strides):
        offs = (offs[:, None] + np.arange(n, dtype=np.int64) * step).ravel()
    return offs


class _Runs:
    """The bits every leaf covers, as runs of adjacent elements (see ``Field._runs``),
    empty ones left out: ``starts`` and ``ends`` sorted by start, and ``order``, the
    position of each in ``leaf`` and ``first`` (its first element), which are in leaf order."""

    def __init__(self, fields):
        plain = [(i, f.offset, f.width) for i, f in enumerate(fields) if not f.shape and not f.bits]  # one run each
        leaf, offsets, widths = np.array(plain, np.int64).reshape(-1, 3).T
        parts = [(8 * offsets, 8 * (offsets + widths), np.zeros_like(leaf), leaf)]
        for i, f in enumerate(fields):
            if f.shape or f.bits:
                starts, ends, firsts = f._runs()
                parts.append((starts, ends, firsts, np.full(len(starts), i, np.int64)))
        starts, ends, self.first, self.leaf = (np.concatenate(col) for col in zip(*parts))
        self.elem_bits = np.array([f.bits[1] if f.bits else 8 * f.width for f in fields], np.int64)
        order = np.flatnonzero(ends > starts)
        self.order = order[np.argsort(starts[order], kind="stable")]
        self.starts, self.ends = starts[self.order], ends[self.order]

    def overlaps(self):
        """``(earlier leaf, later leaf)`` of every two leaves whose bits overlap, ordered
        by the later leaf, then its first element that overlaps, then the earlier leaf."""
        # Sorted by start, run p overlaps exactly the runs after it up to the first that
        # starts at or past its end.
        after = np.searchsorted(self.starts, self.ends, side="left") - np.arange(len(self.starts)) - 1
        if not after.any():
            return []
        p = np.repeat(np.arange(len(after)), after)
        q = p + 1 + np.arange(len(p)) - np.repeat(np.cumsum(after) - after, after)
        at_p, at_q = self.order[p], self.order[q]
        later = np.where(self.leaf[at_p] > self.leaf[at_q], at_p, at_q)
        i, j = self.leaf[later], np.minimum(self.leaf[at_p], self.leaf[at_q])
        start_later = np.where(later == at_p, self.starts[p], self.starts[q])
        elem = self.first[later] + (np.maximum(self.starts[p], self.starts[q]) - start_later) // self.elem_bits[i]
        keep = np.lexsort((j, elem, i))
        keep = keep[i[keep] != j[keep]]
        _, first = np.unique(i[keep] * len(self.elem_bits) + j[keep], return_index=True)
        keep = keep[np.sort(first)]  # each pair where it first overlaps
        return list(zip(j[keep].tolist(), i[keep].tolist()))


def _wrap(arrow_type, shape):
    for n in reversed(shape):
        arrow_type = pa.list_(arrow_type, n)
    return arrow_type


def _strides(shape, itemsize):
    steps, step = [], itemsize
    for n in reversed(shape):
        steps.append(step)
        step *= n
    return tuple(reversed(steps))


class _Builder:
    """Walks a structured dtype once, collecting leaves and the Arrow tree."""

    def __init__(self, bytes_as, void_as, c=None, encodings=None):
        if isinstance(bytes_as, str):
            self.default, self.modes = bytes_as, {}
        elif isinstance(bytes_as, dict):
            self.default, self.modes = "fixed", dict(bytes_as)
        else:
            raise LayoutError(f"bytes_as must be a str or a dict, got {type(bytes_as).__name__}")
        for mode in [self.default, *self.modes.values()]:
            if mode not in _BYTES_MODES:
                raise LayoutError(f"bytes_as modes are {_BYTES_MODES}, got {mode!r}")
        self.void_as = void_as
        self.c_types = dict(c.ctypes) if c else {}
        self.c_bits = {row[0]: row[1:] for row in c.bits} if c else {}
        self.c_enums = dict(c.enums) if c else {}
        self.enum_as = c.enum_as if c else "int"
        self.fields = []
        self.used = set()
        self.encodings = encodings or {}
        self.encoded = set()

    def check_unused_encodings(self):
        unknown = sorted(set(self.encodings) - self.encoded)
        if unknown:
            leaves = [f.name for f in self.fields]
            raise LayoutError(
                f"encodings names {unknown}, which are not leaf fields of the record (its leaves: {leaves}); "
                f"name V<n>/S<n> leaves by their dotted path, e.g. 'group.field'"
            )

    def bytes_mode(self, name):
        self.used.add(name)
        return self.modes.get(name, self.default)

    def check_unused_modes(self):
        unknown = set(self.modes) - self.used
        if unknown:
            raise LayoutError(f"bytes_as names {sorted(unknown)}, which are not S<n> fields of the record")

    def walk(self, dtype, base, path, shape, strides):
        nodes = []
        for index, name in enumerate(dtype.names):
            fdt, foff = dtype.fields[name][:2]
            elem, own = fdt.subdtype if fdt.subdtype else (fdt, ())
            sub = (
                base + foff,
                path + (name,),
                shape + tuple(own),
                strides + _strides(own, elem.itemsize),
            )
            if ".".join(sub[1]) in self.encodings:
                nodes.append(_Node(name, tuple(own), (), self.encoded_leaf(elem, *sub)))
            elif elem.names is not None:
                nodes.append(_Node(name, tuple(own), self.walk(elem, *sub), -1))
            elif elem.kind == "c":
                nodes.append(_Node(name, tuple(own), self.complex_parts(elem, *sub), -1))
            elif elem.kind == "V" and ".".join(sub[1]) in self.c_bits:
                nodes.append(_Node(name, tuple(own), (), self.leaf(elem, *sub)))  # a 3/5/6/7-byte bit-field word
            elif elem.kind == "V" and name == f"f{index}":
                continue  # NumPy's name for an unnamed field: padding
            elif elem.kind == "V" and self.void_as == "skip":
                continue
            else:
                nodes.append(_Node(name, tuple(own), (), self.leaf(elem, *sub)))
        return tuple(nodes)

    def complex_parts(self, elem, offset, path, shape, strides):
        if elem.itemsize > 16:
            raise LayoutError(
                f"field {'.'.join(path)!r} at offset {offset} is {elem}: Arrow has no float "
                f"type for its halves; convert it to complex128 first"
            )
        half = np.dtype(f"{elem.byteorder}f{elem.itemsize // 2}")
        return tuple(
            _Node(part, (), (), self.leaf(half, offset + i * half.itemsize, path + (part,), shape, strides))
            for i, part in enumerate(("re", "im"))
        )

    def encoded_leaf(self, elem, offset, path, shape, strides):
        """A mainframe field: a V<n>/S<n> leaf with an Encoding (see Encoding)."""
        name = ".".join(path)
        enc = self.encodings[name]
        self.encoded.add(name)
        fix = f"give {name!r} the dtype V{{n}} of the bytes the encoding needs"
        if elem.names is not None or elem.kind not in "VS":
            what = "a nested record" if elem.names is not None else f"dtype {elem.str}"
            raise LayoutError(
                f"encodings[{name!r}]: field {name!r} at offset {offset} is {what}, not a leaf of raw bytes "
                f"(V<n> or S<n>); an encoding applies to a leaf: {fix.replace('{n}', '<n>')}"
            )
        width, need = elem.itemsize, enc.width()
        if enc.kind == "binary":
            ok, expected = 1 <= width <= 8, "1 to 8"
        elif enc.kind == "hfloat":
            ok, expected = width in (4, 8), "4 (COMP-1) or 8 (COMP-2)"
        elif enc.kind == "text":
            ok, expected = width >= 1, "at least 1"
        else:
            ok, expected = width == need, str(need)
        if not ok:
            what = f"{enc.digits} digits" if enc.kind in ("packed", "zoned") else enc.kind
            raise LayoutError(
                f"encodings[{name!r}]: field {name!r} at offset {offset} is {width} bytes wide, and a "
                f"{enc.kind} field of {what} needs {expected} bytes; "
                + (fix.replace("{n}", str(need)) if need else "give the field one of those widths")
            )
        if enc.kind == "binary" and enc.trunc == "std" and enc.digits and len(str(2 ** (8 * width) - 1)) < enc.digits:
            raise LayoutError(
                f"encodings[{name!r}]: {enc.digits} digits do not fit a {width}-byte binary field; COBOL uses "
                f"{_binary_width(enc.digits)} bytes for them"
            )
        self.fields.append(
            Field(path, offset, width, elem, enc.arrow_type(width), "|", shape, strides, enc.kind, 1, (), (), "", enc)
        )
        return len(self.fields) - 1

    def leaf(self, elem, offset, path, shape, strides):
        name = ".".join(path)
        bits, enum = (), tuple(self.c_enums.get(name, ()))
        if name in self.c_bits:
            shift, nbits, signed, first, value, order = self.c_bits[name]
            kind, factor, bits = "bits", 1, (shift, nbits, signed, first)
            arrow = _leaf_mapping(np.dtype(value), name, offset, self)[1]
        elif enum and self.enum_as == "dictionary":
            kind, arrow, factor = "enum", pa.dictionary(pa.int32(), pa.string()), 1
        else:
            kind, arrow, factor = _leaf_mapping(elem, name, offset, self)
        if not bits:  # a bit-field word's byte order comes from the C layout
            order = (
                "|"
                if elem.byteorder == "|" or elem.itemsize == 1 or kind in ("bytes", "cstr", "bool")
                else ("little" if elem.byteorder.replace("=", _NATIVE) == "<" else "big")
            )
        self.fields.append(
            Field(
                path,
                offset,
                elem.itemsize,
                elem,
                arrow,
                order,
                shape,
                strides,
                kind,
                factor,
                bits,
                enum,
                self.c_types.get(name, ""),
            )
        )
        return len(self.fields) - 1


def _leaf_mapping(elem, name, offset, builder):
    """(kind, Arrow type, factor) of one scalar element, or a LayoutError naming it."""
    k, w = elem.kind, elem.itemsize

    def unsupported(why, fix):
        return LayoutError(f"field {name!r} at offset {offset} has dtype {elem.str}: {why}; {fix}")

    if k in "iu":
        return (
            "copy",
            (pa.int8, pa.int16, pa.int32, pa.int64)[w.bit_length() - 1]()
            if k == "i"
            else (pa.uint8, pa.uint16, pa.uint32, pa.uint64)[w.bit_length() - 1](),
            1,
        )
    if k == "f":
        if w not in (2, 4, 8):
            raise unsupported(f"Arrow has no {8 * w}-bit float", "convert it to float64 first")
        return "copy", {2: pa.float16, 4: pa.float32, 8: pa.float64}[w](), 1
    if k == "b":
        return "bool", pa.bool_(), 1
    if k in "mM":
        return _time_mapping(elem, unsupported)
    if k == "S":
        if w == 0:
            raise unsupported("a zero-length string holds nothing", "drop the field")
        mode = builder.bytes_mode(name)
        if mode == "fixed":
            return "bytes", pa.binary(w), 1
        return "cstr", pa.binary() if mode == "binary" else pa.string(), 1
    if k == "U":
        if w == 0:
            raise unsupported("a zero-length string holds nothing", "drop the field")
        return "utf32", pa.string(), 1
    if k == "V":
        if builder.void_as == "bytes":
            return "bytes", pa.binary(w), 1
        raise unsupported(
            "raw void bytes have no Arrow mapping",
            "pass void_as='bytes' (fixed_size_binary) or void_as='skip' (treat as padding)",
        )
    raise unsupported("Python objects are pointers, not record data", "store the values in a fixed-size type")


def _one_field_hint(dtype, bytes_as, flatten, void_as):
    """The end of the message for a dtype that is not a record: how to describe it as a
    record of one field, checked to work (with ``from_dtype``'s other options), or why
    no record can hold it."""
    base, shape = dtype.subdtype if dtype.subdtype is not None else (dtype, ())

    def spelled(elem):
        return f"np.dtype([('value', {elem.str!r}{', ' + repr(shape) if shape else ''})])"

    def works(elem, **options):
        mine = {
            "bytes_as": bytes_as if isinstance(bytes_as, str) else "fixed",
            "flatten": flatten,
            "void_as": void_as,
            **options,
        }
        try:
            Layout(np.dtype([("value", elem, shape) if shape else ("value", elem)]), **mine)
        except (LayoutError, TypeError, ValueError) as err:
            return str(err).split(": ", 1)[-1]
        return None

    if base.itemsize == 0:
        return ", which holds no bytes: there is nothing for a record field to hold"
    why = works(base)
    if why is None:
        return f"; wrap it as a one-field record: Layout.from_dtype({spelled(base)})"
    if base.kind == "O":
        return (
            ": Python objects are pointers to values kept elsewhere, not bytes a record holds, so no "
            "layout describes them; store the values in a fixed-size type first (e.g. "
            "np.asarray(values, dtype='U16') for text, 'i8' or 'f8' for numbers), then describe that: "
            f"Layout.from_dtype({spelled(np.dtype('<U16'))})"
        )
    if base.kind == "V" and works(base, void_as="bytes") is None:
        return (
            f" (raw bytes); wrap it as a one-field record kept as Arrow fixed_size_binary: "
            f"Layout.from_dtype({spelled(base)}, void_as='bytes')"
        )
    repaired = None
    if base.kind in "mM" and np.datetime_data(base)[0] == "generic":
        repaired = np.dtype(f"{base.byteorder.replace('|', '=')}{base.kind}8[s]")
    elif base.kind in "fc" and base.itemsize > (8 if base.kind == "f" else 16):
        repaired = np.dtype(f"{base.byteorder.replace('|', '=')}{base.kind}{8 if base.kind == 'f' else 16}")
    if repaired is not None and works(repaired) is None:
        return (
            f", which a record field cannot hold as it is ({why}); as {repaired} it can: "
            f"Layout.from_dtype({spelled(repaired)})"
        )
    return f", which a record field cannot hold either: {why}"


def _time_mapping(elem, unsupported):
    unit, count = np.datetime_data(elem)
    if unit == "generic":
        raise unsupported("a datetime without a unit holds only NaT", "give it a unit, e.g. M8[s]")
    stamp = elem.kind == "M"
    if unit in _EXACT_UNITS:
        arrow = pa.timestamp(unit) if stamp else pa.duration(unit)
        return ("copy" if count == 1 else "scale"), arrow, count
    if unit in _SECONDS and (stamp and unit in "mh" or not stamp):
        return "scale", pa.timestamp("s") if stamp else pa.duration("s"), _SECONDS[unit] * count
    if stamp and unit in "DW":
        return "scale", pa.date32(), (7 if unit == "W" else 1) * count
    if stamp and unit in "MY":
        return "civil", pa.date32(), (12 if unit == "Y" else 1) * count
    # ps, fs, as; timedelta months and years: no exact Arrow unit, keep the counts.
    return "copy", pa.int64(), 1
